//! AG-UI over SSE: the lenient reader (`read`), the request reader (`request`) and the strict
//! 1.0 writer (`write`). `specs/agui.md`, `specs/dialects.md`.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

mod args;
pub(crate) mod chunks;
mod fast;
pub(crate) mod fix;
mod options;
mod read;
pub(crate) mod request;
mod strip;
mod thinking;
mod write;

pub use fix::Timestamps;
pub use options::ReaderOptions;
pub use read::AguiReader;
pub use request::{read_request, read_request_lenient, write_request, RequestProfile};
pub use write::{AguiWriter, ProtocolVersion, UnknownFields};

/// A route's AG-UI options: the reader's repairs (also used by the HAI reader, which reads the
/// events HAI shares with AG-UI through it), the writer's handling of unknown fields, and the
/// shape of the request an AG-UI upstream receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AguiOptions {
    pub reader: ReaderOptions,
    pub unknown_fields: UnknownFields,
    /// The version the writer emits and declares.
    pub protocol_version: ProtocolVersion,
    pub request_profile: RequestProfile,
}
