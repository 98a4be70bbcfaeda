//! Telemetry: logs ([`logs`]: text or JSON on stderr, every field value escaped) and the
//! Prometheus metrics of finished streams ([`metrics`]). Per-event narration is at `trace`; one
//! `info` line ends each stream (and each other request answered with a success); client
//! mistakes are `debug`, upstream faults `warn`.

pub mod logs;
pub mod metrics;

pub use logs::{init, LogFormat};
