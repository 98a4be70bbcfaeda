//! Traces: W3C trace context (`traceparent`, `tracestate`) continued from the client into a
//! span per request, a child span per upstream call, exported over OTLP/HTTP (protobuf).
//!
//! Export is on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is
//! set (and `OTEL_SDK_DISABLED` is not `true`); the SDK reads the other standard variables
//! itself (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`,
//! `OTEL_RESOURCE_ATTRIBUTES`, …). The service is named by `OTEL_SERVICE_NAME`, else
//! [`DEFAULT_SERVICE_NAME`].
//!
//! The gateway's `info` spans become OpenTelemetry spans (a `request` span, an AAP face's
//! `turn`, an `upstream` call), with the gateway's events logged inside them at `info` and
//! above; whatever `RUST_LOG` says, and nothing of other crates. The request span's parent is the client's `traceparent`
//! ([`continue_from`]); an upstream call carries its own span's context ([`inject`]) in place
//! of the client's. With export off, neither touches anything: the client's `traceparent` then
//! reaches the upstream as any end-to-end header does.
//!
//! Spans leave in batches from the SDK's own thread (`export`), through a bounded queue that
//! drops spans rather than wait: a slow or absent collector never holds a request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Key, KeyValue};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tokio::runtime::Runtime;
use tracing::{Level, Span, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::export::{self, ExportClient, ExportError};

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` gives one.
pub const DEFAULT_SERVICE_NAME: &str = "dialect-proxy";

/// The W3C trace context headers.
const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// True once the export pipeline is installed.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (and trace context is propagated by the gateway).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Why the export pipeline could not be built (the gateway then runs without it).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Client(#[from] ExportError),
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The export pipeline: the SDK's tracer provider and the runtime its requests run on.
pub(super) struct Pipeline {
    provider: SdkTracerProvider,
    runtime: Option<Runtime>,
}

impl Pipeline {
    /// The pipeline the environment asks for, if any.
    pub(super) fn from_env() -> Result<Option<Pipeline>, TraceError> {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        let disabled =
            std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if disabled
            || !(set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT"))
        {
            return Ok(None);
        }
        let runtime = export::runtime()?;
        let client = ExportClient::new(runtime.handle().clone())?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(client)
            .build()?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build();
        Ok(Some(Pipeline {
            provider,
            runtime: Some(runtime),
        }))
    }

    /// The layer that turns the gateway's `info` spans (and the events inside them) into
    /// OpenTelemetry spans. A target filter, so each callsite's interest is decided once: the
    /// per-event `trace` narration costs nothing here. The SDK's own events stay out, so
    /// exporting never feeds itself.
    pub(super) fn layer<S>(&self) -> impl Layer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let tracer = self.provider.tracer(DEFAULT_SERVICE_NAME);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_filter(Targets::new().with_target(env!("CARGO_CRATE_NAME"), Level::INFO))
    }

    /// Marks trace context as the gateway's to propagate: called once the layer is installed.
    pub(super) fn enable(&self) {
        ENABLED.store(true, Ordering::Relaxed);
    }

    /// Sends what is queued, waiting at most `bound`; what is left then is dropped.
    pub(super) fn shutdown(mut self, bound: Duration) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(error) = self.provider.shutdown_with_timeout(bound) {
            tracing::warn!(%error, "spans not exported at exit");
        }
        if let Some(runtime) = self.runtime.take() {
            // Never blocks: an export still in flight is abandoned.
            runtime.shutdown_background();
        }
    }
}

/// The detected resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), named
/// [`DEFAULT_SERVICE_NAME`] when it names no service, with the gateway's version.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    let builder = if named {
        Resource::builder()
    } else {
        Resource::builder().with_service_name(DEFAULT_SERVICE_NAME)
    };
    builder
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Makes the client's trace (its `traceparent` and `tracestate` in `headers`) the parent of
/// `span`, a request span just created; a request without one starts a trace. Nothing when
/// export is off.
pub fn continue_from(span: &Span, headers: &HeaderMap) {
    if !enabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    // Fails only when the span is not an OpenTelemetry span (filtered out): nothing to do.
    let _ = span.set_parent(parent);
}

/// Replaces the trace context in `headers`, an upstream request's, with `span`'s, the
/// upstream call's. Nothing when export is off (the client's headers then pass as they came).
pub fn inject(span: &Span, headers: &mut HeaderMap) {
    if !enabled() {
        return;
    }
    for name in TRACE_HEADERS {
        headers.remove(name);
    }
    TraceContextPropagator::new().inject_context(&span.context(), &mut HeaderInjector(headers));
}
