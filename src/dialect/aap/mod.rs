//! AAP v3 (`specs/aap.md`) as a wire codec: the wire types both sides share (`types`), the
//! message conversions (`history`), the reader of an AAP agent's turns (`read`, with the
//! `fingerprint`s of what the agent has seen), and the writer that turns a canonical run into
//! an AAP client's turn (`write`, over the run's `transcript`). Sessions, turns and thread
//! records are the adapters' (`crate::adapters::aap_server`, `crate::adapters::aap_client`),
//! which build pipelines with these types and read their results.
//!
//! AAP has no message ids, no run ids and no argument streaming: what AAP cannot carry is
//! recovered from the run's transcript, which is also what the AAP face's session keeps.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

pub mod ext;
pub mod fingerprint;
pub mod history;
pub mod read;
pub mod transcript;
pub mod types;
mod whole;
mod write;

pub use read::AapReader;
pub use write::{
    call_view, is_synthetic, AapWriter, Pending, PendingKind, TurnOptions, TurnStop,
    INTERRUPT_CALL_PREFIX, TURN_START_FRAME,
};

/// A route's AAP options: how an AAP agent's turns are read, and how a run is written as an
/// AAP client's turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AapOptions {
    pub read: read::ReadOptions,
    pub turn: TurnOptions,
}

impl Default for AapOptions {
    fn default() -> Self {
        AapOptions {
            read: read::ReadOptions::default(),
            turn: TurnOptions {
                confirm_tool: crate::dialect::confirm::DEFAULT_TOOL.into(),
                ..TurnOptions::default()
            },
        }
    }
}

/// What one run may add to a transcript when nothing smaller is configured.
pub const DEFAULT_TURN_BUDGET: usize = 64 << 20;

/// What a secret option's value reads as (`aap.md` §6.4); sent back, it means "unchanged".
pub const REDACTED: &str = "***";

/// The protocol version the gateway speaks (`GET /meta` → `version`).
pub const PROTOCOL_VERSION: u32 = 3;

/// The canonical `CUSTOM` name of a boundary between two upstream runs folded into one turn
/// (`dialect::Runs::Folded`).
pub const RUN_BOUNDARY: &str = "aap.run";
