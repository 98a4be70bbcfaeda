//! Logging: structured `tracing` events to stderr, filtered by `RUST_LOG` (default `info`).
//! Per-event narration is at `trace`; one `info` line ends each stream (and each other request
//! answered with a success); client mistakes are `debug`, upstream faults `warn`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once; later calls are no-ops.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, never in files or log collectors.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

pub mod metrics;
