//! One module per wire format, each with a reader (wire → canonical) and a writer
//! (canonical → wire); three readers and three writers give every client × upstream pair
//! without pairwise translators (DESIGN.md principle 1).
//!
//! Must not import `proxy`, `aap`, `session` or hyper.

pub mod agui;

use std::fmt;
use std::str::FromStr;

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
