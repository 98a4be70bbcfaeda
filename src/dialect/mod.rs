//! One module per wire format, each with a reader (wire → canonical) and a writer
//! (canonical → wire); three readers and three writers give every client × upstream pair
//! without pairwise translators (DESIGN.md principle 1).
//!
//! Must not import `proxy`, `aap`, `session` or hyper.

pub mod aap;
pub mod agui;
pub mod confirm;
pub mod hai;

use std::fmt;
use std::str::FromStr;

use crate::error::Failure;
use crate::event::RunAgentInput;
use crate::mapping::Mappings;

/// Reads a client's request body in `dialect` into the canonical run input. `new_id` supplies
/// ids a dialect may leave out (HAI's thread and run ids).
pub fn read_request(
    dialect: Dialect,
    body: &[u8],
    mappings: &Mappings,
    hai: &hai::HaiOptions,
    new_id: &mut dyn FnMut() -> String,
) -> Result<RunAgentInput, Failure> {
    match dialect {
        Dialect::Hai => hai::read_request(body, mappings, hai.history_content, new_id),
        Dialect::AgUi | Dialect::Aap => agui::read_request(body, &mappings.agui),
    }
}

/// The body an upstream speaking `dialect` receives for `input`.
pub fn write_request(
    dialect: Dialect,
    input: &RunAgentInput,
    profile: agui::RequestProfile,
) -> Vec<u8> {
    match dialect {
        Dialect::Hai => hai::write_request(input),
        Dialect::AgUi | Dialect::Aap => agui::write_request(input, profile),
    }
}

/// Shapes a client's canonical input for an upstream of another dialect: top-level extras only
/// travel to an upstream of the client's own dialect (`translation.md` §3.1), and a client
/// without interrupts answers them through confirm calls, which become `resume` (§6, C1).
pub fn input_for_upstream(client: Dialect, upstream: Dialect, input: &mut RunAgentInput) {
    if client != upstream {
        input.extra.clear();
    }
    if client == Dialect::Hai && upstream == Dialect::AgUi {
        confirm::answers_to_resume(input);
    }
}

/// A wire protocol the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    AgUi,
    Hai,
    Aap,
}

impl Dialect {
    pub const fn as_str(self) -> &'static str {
        match self {
            Dialect::AgUi => "ag-ui",
            Dialect::Hai => "hai",
            Dialect::Aap => "aap",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown dialect name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dialect {0:?} (expected ag-ui, hai or aap)")]
pub struct UnknownDialect(pub String);

impl FromStr for Dialect {
    type Err = UnknownDialect;

    fn from_str(s: &str) -> Result<Dialect, UnknownDialect> {
        match s.to_ascii_lowercase().as_str() {
            "ag-ui" | "agui" => Ok(Dialect::AgUi),
            "hai" => Ok(Dialect::Hai),
            "aap" => Ok(Dialect::Aap),
            _ => Err(UnknownDialect(s.to_string())),
        }
    }
}
