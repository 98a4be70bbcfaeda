//! Telemetry: logs ([`logs`]: text or JSON on stderr, every field value escaped; [`json`]: the
//! JSON lines), traces ([`trace`]: W3C trace context, OTLP export) and the Prometheus metrics
//! ([`metrics`]: streams, refusals, latencies, the session store, the build; [`process`]: the
//! standard process metrics, on Linux). [`init`] installs logs and traces for the process and
//! returns the [`Telemetry`] guard that flushes the traces at exit.
//!
//! Per-event narration is at `trace`; one `info` line ends each request: `stream ended` for a
//! stream, `request answered` for any other success, `request refused` (with its `code` and
//! `status`) for a refusal; faults of an upstream are `warn`.

#[cfg(test)]
pub(crate) mod captured;
mod export;
pub mod json;
pub mod logs;
pub mod metrics;
#[cfg(target_os = "linux")]
pub mod process;
pub mod reasons;
pub mod trace;

use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use logs::LogFormat;

/// How long the exit may wait for the last spans to reach the collector.
pub const FLUSH_BOUND: Duration = Duration::from_millis(300);

/// The process's telemetry, as [`init`] installed it: [`Telemetry::shutdown`] (or dropping it)
/// sends the spans still queued, within [`FLUSH_BOUND`].
#[must_use = "dropping the guard ends the trace export"]
pub struct Telemetry {
    traces: Option<trace::Pipeline>,
}

/// Installs the process's logs (in `format`) and, when the environment names an OTLP
/// endpoint, the trace export. Once per process: a later call installs nothing and returns a
/// guard with nothing to flush.
pub fn init(format: LogFormat) -> Telemetry {
    let (traces, failed) = match trace::Pipeline::from_env() {
        Ok(traces) => (traces, None),
        Err(error) => (None, Some(error)),
    };
    let filter = logs::filter();
    // Two subscriber types rather than an optional layer: without export, nothing of the
    // trace layer is in the way of any event, and `RUST_LOG` filters the whole subscriber.
    let installed = match &traces {
        Some(traces) => tracing_subscriber::registry()
            .with(logs::layer(format, filter))
            .with(traces.layer())
            .try_init()
            .is_ok(),
        None => tracing_subscriber::registry()
            .with(logs::sole_layer(format, filter))
            .try_init()
            .is_ok(),
    };
    if let Some(error) = failed {
        tracing::warn!(%error, "traces are not exported");
    }
    let traces = match traces {
        Some(unused) if !installed => {
            // Another subscriber owns the process: nothing reaches this pipeline.
            unused.shutdown(Duration::ZERO);
            None
        }
        traces => traces,
    };
    if let Some(traces) = &traces {
        traces.enable();
        tracing::info!("traces exported over OTLP/HTTP");
    }
    Telemetry { traces }
}

impl Telemetry {
    /// Sends the spans still queued, waiting at most [`FLUSH_BOUND`], and ends the export.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(traces) = self.traces.take() {
            traces.shutdown(FLUSH_BOUND);
        }
    }
}
