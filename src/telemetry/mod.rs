//! Telemetry: logs ([`logs`]: text or JSON on stderr, every field value escaped) and the
//! Prometheus metrics ([`metrics`]: streams, refusals, latencies, the session store, the build;
//! [`process`]: the standard process metrics, on Linux). Per-event narration is at `trace`; one
//! `info` line ends each stream (and each other request answered with a success); client
//! mistakes are `debug`, upstream faults `warn`.

pub mod logs;
pub mod metrics;
#[cfg(target_os = "linux")]
pub mod process;
pub mod reasons;

pub use logs::{init, LogFormat};
