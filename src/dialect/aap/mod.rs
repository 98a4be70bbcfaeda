//! AAP v3 (`specs/aap.md`): the wire types both sides share (`types`), the message conversions
//! (`history`) and the writer that turns a canonical run into an AAP turn (`write`). The REST
//! face that serves sessions and turns lives in `crate::aap`; the session store in
//! `crate::session`.
//!
//! AAP has no message ids, no run ids and no argument streaming: what AAP cannot carry is
//! recovered from the run's transcript (`translate::transcript`), which is also what the
//! session keeps.
//!
//! Must not import `proxy`, `aap`, `session` or hyper.

pub mod fingerprint;
pub mod history;
pub mod read;
pub mod transcript;
pub mod types;
mod write;

pub use write::{
    call_view, is_synthetic, AapWriter, Pending, PendingKind, TurnOptions, TurnStop,
    INTERRUPT_CALL_PREFIX, TURN_START_FRAME,
};

/// What a secret option's value reads as (`aap.md` §6.4); sent back, it means "unchanged".
pub const REDACTED: &str = "***";

/// The protocol version the gateway speaks (`GET /meta` → `version`).
pub const PROTOCOL_VERSION: u32 = 3;
