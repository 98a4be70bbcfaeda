//! Prometheus metrics (`STYLE.md` §7, `streaming.md` §11), served by the admin listener.
//!
//! A stream is recorded once, when it ends (or is dropped: `cancelled`), from the counters its
//! pipeline kept; nothing here runs per event. Labels come from bounded sets only: the configured
//! route path, gateway error codes, fix-up rules, drop kinds, outcomes. Thread and run ids never
//! become labels.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::event::Note;
use crate::pipeline::StreamStats;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    route: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    route: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    route: String,
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabels {
    rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: String,
}

type DurationFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 10 ms … ~5.5 min: agent runs are long.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}

/// Every metric the gateway exports, under the `dialect_proxy_` prefix.
pub struct Metrics {
    registry: Registry,
    streams_active: Family<RouteLabels, Gauge>,
    streams: Family<OutcomeLabels, Counter>,
    run_errors: Family<CodeLabels, Counter>,
    refused: Family<CodeLabels, Counter>,
    events: Family<DirectionLabels, Counter>,
    fixups: Family<RuleLabels, Counter>,
    drops: Family<KindLabels, Counter>,
    heartbeats: Family<RouteLabels, Counter>,
    stream_duration: DurationFamily,
    store_errors: Family<StoreLabels, Counter>,
    admission: AdmissionMetrics,
    lifecycle: LifecycleMetrics,
}

/// What admission control counts: requests holding a stream permit, refusals by the limit
/// reached, buffered request bytes, open connections, and what the accept loop went through.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// Reloads and drains.
#[derive(Default)]
struct LifecycleMetrics {
    config_reloads: Family<ResultLabels, Counter>,
    draining: Gauge,
}

impl LifecycleMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "config_reloads",
            "Configuration reloads (SIGHUP or a changed file), by result: ok (applied) or error (rejected, the running configuration stays)",
            self.config_reloads.clone(),
        );
        registry.register(
            "draining",
            "1 once a drain has started (SIGTERM or POST /drain): not ready, not accepting",
            self.draining.clone(),
        );
    }
}

#[derive(Default)]
struct AdmissionMetrics {
    streams_admitted: Family<RouteLabels, Gauge>,
    overloaded: Family<LimitLabels, Counter>,
    request_body_bytes: Gauge,
    connections_open: Gauge,
    header_timeouts: Counter,
    accept_errors: Counter,
}

impl AdmissionMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "streams_admitted",
            "Requests holding a stream permit now (max_streams), by route",
            self.streams_admitted.clone(),
        );
        registry.register(
            "requests_overloaded",
            "Requests refused with 503 OVERLOADED, by the limit reached",
            self.overloaded.clone(),
        );
        registry.register_with_unit(
            "request_body_buffered",
            "Request body bytes reserved now (max_buffered_request_bytes)",
            Unit::Bytes,
            self.request_body_bytes.clone(),
        );
        registry.register(
            "connections_open",
            "Client connections open now (max_connections)",
            self.connections_open.clone(),
        );
        registry.register(
            "request_header_timeouts",
            "Connections closed for sending no request head within request_header_timeout",
            self.header_timeouts.clone(),
        );
        registry.register(
            "accept_errors",
            "Failed accepts on the listener (descriptor exhaustion among them)",
            self.accept_errors.clone(),
        );
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream's terminal event reached the client.
    Completed,
    /// The gateway ended the run with an error code.
    Failed,
    /// The client went away first.
    Cancelled,
}

impl Outcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// What one stream reports when it ends.
#[derive(Debug, Clone, Copy)]
pub struct StreamEnd<'a> {
    pub outcome: Outcome,
    /// The gateway error code that ended the run, if any (metric label form).
    pub code: Option<&'static str>,
    pub stats: StreamStats,
    pub notes: &'a [(Note, u64)],
    pub heartbeats: u64,
    pub duration: Duration,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("dialect_proxy");
        let streams_active = Family::<RouteLabels, Gauge>::default();
        let streams = Family::<OutcomeLabels, Counter>::default();
        let run_errors = Family::<CodeLabels, Counter>::default();
        let refused = Family::<CodeLabels, Counter>::default();
        let events = Family::<DirectionLabels, Counter>::default();
        let fixups = Family::<RuleLabels, Counter>::default();
        let drops = Family::<KindLabels, Counter>::default();
        let heartbeats = Family::<RouteLabels, Counter>::default();
        let stream_duration: DurationFamily = Family::new_with_constructor(duration_histogram);
        registry.register("streams_active", "Streams open now", streams_active.clone());
        registry.register("streams", "Streams ended, by outcome", streams.clone());
        registry.register(
            "run_errors",
            "Runs the gateway ended with an error code, by code",
            run_errors.clone(),
        );
        registry.register(
            "requests_refused",
            "Requests answered with an HTTP error before any stream, by code",
            refused.clone(),
        );
        registry.register(
            "events",
            "Events read from upstreams (in) and written to clients (out)",
            events.clone(),
        );
        registry.register(
            "dialect_fixups",
            "Dialect and sequence repairs applied, by rule",
            fixups.clone(),
        );
        registry.register(
            "lossy_drops",
            "Upstream input dropped, by kind",
            drops.clone(),
        );
        registry.register(
            "heartbeats",
            "Heartbeat comments written",
            heartbeats.clone(),
        );
        registry.register_with_unit(
            "stream_duration",
            "Duration of streams",
            Unit::Seconds,
            stream_duration.clone(),
        );
        let store_errors = Family::<StoreLabels, Counter>::default();
        registry.register(
            "session_store_errors",
            "Session store operations that failed after the client was answered (commits of turns and thread records), by operation",
            store_errors.clone(),
        );
        let admission = AdmissionMetrics::default();
        admission.register(&mut registry);
        let lifecycle = LifecycleMetrics::default();
        lifecycle.register(&mut registry);
        Arc::new(Metrics {
            lifecycle,
            registry,
            streams_active,
            streams,
            run_errors,
            refused,
            events,
            fixups,
            drops,
            heartbeats,
            stream_duration,
            store_errors,
            admission,
        })
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// A store operation that failed where no client could be told (`op`: a bounded name,
    /// `commit_turn`, `end_turn`, `save_thread`, `end_thread`).
    pub fn store_error(&self, op: &'static str) {
        self.store_errors
            .get_or_create(&StoreLabels { op: op.into() })
            .inc();
    }

    /// A request refused before the stream.
    pub fn refused(&self, route: &str, code: &'static str) {
        self.refused
            .get_or_create(&CodeLabels {
                route: route.into(),
                code: code.into(),
            })
            .inc();
    }

    /// The gauge of requests holding a stream permit on `route`; the permit's holder
    /// increments it and decrements it when let go.
    pub fn streams_admitted(&self, route: &str) -> Gauge {
        self.admission
            .streams_admitted
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .clone()
    }

    /// A request refused with `OVERLOADED`; `limit` names the limit reached (`max_streams`,
    /// `routes.limits.max_streams`, `max_buffered_request_bytes`).
    pub fn overloaded(&self, limit: &'static str) {
        self.admission
            .overloaded
            .get_or_create(&LimitLabels {
                limit: limit.into(),
            })
            .inc();
    }

    /// The gauge of request body bytes reserved in the budget.
    pub fn request_body_bytes(&self) -> Gauge {
        self.admission.request_body_bytes.clone()
    }

    /// The gauge of open client connections.
    pub fn connections_open(&self) -> Gauge {
        self.admission.connections_open.clone()
    }

    /// A connection closed by `request_header_timeout`.
    pub fn header_timeout(&self) {
        self.admission.header_timeouts.inc();
    }

    /// A failed accept on the listener.
    pub fn accept_error(&self) {
        self.admission.accept_errors.inc();
    }

    /// A configuration reload, applied (`ok`) or rejected.
    pub fn config_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.lifecycle
            .config_reloads
            .get_or_create(&ResultLabels {
                result: result.into(),
            })
            .inc();
    }

    /// Whether the gateway is draining (or drained).
    pub fn set_draining(&self, on: bool) {
        self.lifecycle.draining.set(i64::from(on));
    }

    /// Starts recording a stream; the guard records `cancelled` if dropped unfinished.
    pub fn stream_started(self: &Arc<Self>, route: &str) -> StreamRecord {
        let labels = RouteLabels {
            route: route.into(),
        };
        self.streams_active.get_or_create(&labels).inc();
        StreamRecord {
            metrics: Arc::clone(self),
            route: route.into(),
            finished: false,
        }
    }
}

/// The per-stream guard: keeps `streams_active` right whatever happens to the body.
#[derive(Debug)]
pub struct StreamRecord {
    metrics: Arc<Metrics>,
    route: String,
    finished: bool,
}

impl StreamRecord {
    /// Records the end of the stream (once; later calls do nothing).
    pub fn finish(&mut self, end: StreamEnd<'_>) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let m = &self.metrics;
        let route = self.route.clone();
        m.streams_active
            .get_or_create(&RouteLabels {
                route: route.clone(),
            })
            .dec();
        m.streams
            .get_or_create(&OutcomeLabels {
                route: route.clone(),
                outcome: end.outcome.as_str().into(),
            })
            .inc();
        if let Some(code) = end.code {
            m.run_errors
                .get_or_create(&CodeLabels {
                    route: route.clone(),
                    code: code.into(),
                })
                .inc();
        }
        for (direction, n) in [("in", end.stats.events_in), ("out", end.stats.events_out)] {
            m.events
                .get_or_create(&DirectionLabels {
                    route: route.clone(),
                    direction: direction.into(),
                })
                .inc_by(n);
        }
        for (note, n) in end.notes {
            match note {
                Note::Fixup(rule) => m
                    .fixups
                    .get_or_create(&RuleLabels {
                        rule: rule.as_str().into(),
                    })
                    .inc_by(*n),
                Note::Dropped(kind) => m
                    .drops
                    .get_or_create(&KindLabels {
                        kind: kind.as_str().into(),
                    })
                    .inc_by(*n),
            };
        }
        if end.heartbeats > 0 {
            m.heartbeats
                .get_or_create(&RouteLabels {
                    route: route.clone(),
                })
                .inc_by(end.heartbeats);
        }
        m.stream_duration
            .get_or_create(&RouteLabels { route })
            .observe(end.duration.as_secs_f64());
    }
}

impl Drop for StreamRecord {
    fn drop(&mut self) {
        if !self.finished {
            self.finish(StreamEnd {
                outcome: Outcome::Cancelled,
                code: None,
                stats: StreamStats::default(),
                notes: &[],
                heartbeats: 0,
                duration: Duration::ZERO,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Rule;

    #[test]
    fn a_finished_and_a_dropped_stream_are_counted() {
        let m = Metrics::new();
        let mut record = m.stream_started("/agent");
        assert!(m
            .encode()
            .contains("dialect_proxy_streams_active{route=\"/agent\"} 1"));
        record.finish(StreamEnd {
            outcome: Outcome::Failed,
            code: Some("UPSTREAM_IDLE_TIMEOUT"),
            stats: StreamStats {
                events_in: 3,
                events_out: 5,
                fixups: 1,
                dropped: 0,
            },
            notes: &[(Note::Fixup(Rule::SnakeCaseKeys), 2)],
            heartbeats: 4,
            duration: Duration::from_millis(1500),
        });
        drop(record);
        drop(m.stream_started("/agent"));
        m.refused("/agent", "UPSTREAM_UNAVAILABLE");
        let text = m.encode();
        for line in [
            "dialect_proxy_streams_active{route=\"/agent\"} 0",
            "dialect_proxy_streams_total{route=\"/agent\",outcome=\"failed\"} 1",
            "dialect_proxy_streams_total{route=\"/agent\",outcome=\"cancelled\"} 1",
            "dialect_proxy_run_errors_total{route=\"/agent\",code=\"UPSTREAM_IDLE_TIMEOUT\"} 1",
            "dialect_proxy_events_total{route=\"/agent\",direction=\"out\"} 5",
            "dialect_proxy_dialect_fixups_total{rule=\"snake_case_keys\"} 2",
            "dialect_proxy_heartbeats_total{route=\"/agent\"} 4",
            "dialect_proxy_requests_refused_total{route=\"/agent\",code=\"UPSTREAM_UNAVAILABLE\"} 1",
            "dialect_proxy_stream_duration_seconds_count{route=\"/agent\"} 2",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
