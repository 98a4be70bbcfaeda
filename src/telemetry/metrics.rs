//! Prometheus metrics (`STYLE.md` §7, `streaming.md` §11), served by the admin listener.
//!
//! A stream is recorded once, when it ends (or is dropped: `cancelled`), from the counters its
//! pipeline kept; per stream, only its first event adds an observation (time to first event).
//! Labels come from bounded sets only: the configured route path, gateway error codes, fix-up
//! rules, drop kinds, outcomes, store operations and the reasons of [`reasons`]. Thread and run
//! ids never become labels.
//!
//! Everything is under the `dialect_proxy_` prefix but the standard process metrics
//! ([`super::process`], Linux only). Gauges of what the session store holds are read from it at
//! scrape time ([`Metrics::watch_store`]); every store operation is observed through
//! [`StoreObserver`] (the store's `Timed` wrapper), so any store backend is measured alike.
//!
//! Refusals are counted in two views of the same events: `requests_refused_total{route,code}` is
//! what clients got (every HTTP error before a stream), `admission_rejections_total{reason}`
//! is which limit of the gateway said no (each of those is also in `requests_refused_total`
//! under its code, or a terminal event when the limit was met after the stream began).
//! Connections closed before any request are `connections_refused_total{reason}`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use tokio::time::Instant;

pub use super::reasons::{ConnectionRefusal, Rejection};
use crate::event::Note;
use crate::pipeline::StreamStats;
use crate::session::{Store, StoreError, StoreObserver};

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
struct OpLabels {
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 10 ms … ~5.5 min: agent runs are long.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s: a first event or an upstream's headers, from instant to a slow model.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn store_histogram() -> Histogram {
    // 0.1 ms … ~6.5 s: a memory store answers in microseconds, a networked one in
    // milliseconds, and no operation outlives the store timeout (5 s).
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// The commit the binary was built from (`build.rs`; `unknown` when built without it).
const COMMIT: &str = match option_env!("DIALECT_PROXY_BUILD_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

tokio::task_local! {
    /// When the request being handled reached the gateway (its head was read).
    static ARRIVAL: Instant;
}

/// Runs `request` (the handling of one request, whose head was read at `at`) so that a stream
/// it starts measures its time to first event from `at`.
pub fn arrived<F: Future>(at: Instant, request: F) -> impl Future<Output = F::Output> {
    ARRIVAL.scope(at, request)
}

/// Every metric the gateway exports. See the module docs.
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
    stream_duration: HistogramFamily<RouteLabels>,
    first_event: HistogramFamily<RouteLabels>,
    upstream_headers: HistogramFamily<RouteLabels>,
    store: StoreMetrics,
    admission: AdmissionMetrics,
    lifecycle: LifecycleMetrics,
    /// Each route's stream series ([`Metrics::route_streams`]).
    routes: Mutex<HashMap<String, Arc<RouteStreams>>>,
}

/// What admission control counts: requests holding a stream permit, what was refused and why,
/// buffered request bytes, open connections, and connections closed before a request.
#[derive(Default)]
struct AdmissionMetrics {
    streams_admitted: Family<RouteLabels, Gauge>,
    rejections: Family<ReasonLabels, Counter>,
    request_body_bytes: Gauge,
    connections_open: Gauge,
    header_timeouts: Counter,
    connections_refused: Family<ReasonLabels, Counter>,
}

impl AdmissionMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "streams_admitted",
            "Requests holding a stream permit now (max_streams), by route",
            self.streams_admitted.clone(),
        );
        registry.register(
            "admission_rejections",
            "Requests a limit of the gateway refused, by reason: max_streams and route_max_streams \
             (503 OVERLOADED, stream caps), max_buffered_request_bytes (503 OVERLOADED, bytes of \
             bodies being read), request_too_large (413, max_request_bytes or larger than the whole \
             body budget), unauthenticated (401), session_limit (max_sessions), \
             principal_session_limit (max_sessions_per_principal), principal_session_storage_full \
             (max_bytes_per_principal), session_storage_full (max_total_bytes). Each is also in \
             requests_refused_total under its code",
            self.rejections.clone(),
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
            "Connections closed by request_header_timeout: no first request head in time, or idle \
             that long between requests",
            self.header_timeouts.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections that ended before any request, by reason: header_timeout (no first \
             request head within request_header_timeout), tls_handshake (failed TLS handshake), \
             accept_error (a failed accept on the listener, descriptor exhaustion among them)",
            self.connections_refused.clone(),
        );
    }
}

/// What the session store counts: operations and their latency, failures, and what it holds.
struct StoreMetrics {
    errors: Family<OpLabels, Counter>,
    faults: Family<OpLabels, Counter>,
    operations: HistogramFamily<OpLabels>,
    /// The store whose counts the gauges read (none before a gateway is built).
    watched: Arc<Mutex<Option<Weak<dyn Store>>>>,
}

impl StoreMetrics {
    fn new(registry: &mut Registry) -> StoreMetrics {
        let store = StoreMetrics {
            errors: Family::default(),
            faults: Family::default(),
            operations: Family::new_with_constructor(store_histogram),
            watched: Arc::new(Mutex::new(None)),
        };
        registry.register(
            "session_store_errors",
            "Session store operations that failed after the client was answered (commits of turns and thread records), by operation",
            store.errors.clone(),
        );
        registry.register(
            "session_store_faults",
            "Session store operations that timed out or found the store unavailable, by operation \
             (refusals such as a full store are admission_rejections_total)",
            store.faults.clone(),
        );
        registry.register_with_unit(
            "store_operation",
            "Duration of session store operations, by operation (timeouts included)",
            Unit::Seconds,
            store.operations.clone(),
        );
        registry.register_collector(Box::new(StoreGauges(Arc::clone(&store.watched))));
        store
    }
}

/// The gauges of what the watched store holds, read at scrape time.
#[derive(Debug)]
struct StoreGauges(Arc<Mutex<Option<Weak<dyn Store>>>>);

impl Collector for StoreGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let watched = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(store) = watched.as_ref().and_then(Weak::upgrade) else {
            return Ok(());
        };
        let counts = store.counts();
        for (name, help, value) in [
            (
                "sessions",
                "Sessions the AAP faces hold now (idle ones not yet expired included)",
                counts.sessions,
            ),
            (
                "thread_records",
                "Thread records the AAP clients hold now (idle ones not yet expired included)",
                counts.thread_records,
            ),
        ] {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// What the process's life counts: configuration reloads, and whether it is draining.
#[derive(Default)]
struct LifecycleMetrics {
    config_reloads: Family<ResultLabels, Counter>,
    draining: Gauge,
}

impl LifecycleMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "config_reloads",
            "Configuration reloads, by result (ok: the new configuration serves; error: it was \
             refused and the previous one still serves)",
            self.config_reloads.clone(),
        );
        registry.register(
            "draining",
            "1 while the gateway drains (no new requests; open streams finishing), else 0",
            self.draining.clone(),
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
        let mut root = Registry::default();
        #[cfg(target_os = "linux")]
        root.register_collector(Box::new(super::process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("dialect_proxy");
        let streams_active = Family::<RouteLabels, Gauge>::default();
        let streams = Family::<OutcomeLabels, Counter>::default();
        let run_errors = Family::<CodeLabels, Counter>::default();
        let refused = Family::<CodeLabels, Counter>::default();
        let events = Family::<DirectionLabels, Counter>::default();
        let fixups = Family::<RuleLabels, Counter>::default();
        let drops = Family::<KindLabels, Counter>::default();
        let heartbeats = Family::<RouteLabels, Counter>::default();
        let stream_duration: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(duration_histogram);
        let first_event: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(latency_histogram);
        let upstream_headers: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register("streams_active", "Streams open now", streams_active.clone());
        registry.register("streams", "Streams ended, by outcome", streams.clone());
        registry.register(
            "run_errors",
            "Runs the gateway ended with an error code, by code",
            run_errors.clone(),
        );
        registry.register(
            "requests_refused",
            "Requests answered with an HTTP error before any stream, by route and code",
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
        registry.register_with_unit(
            "time_to_first_event",
            "From a request's arrival (its head read) to the first event of its stream written to \
             the client (AG-UI and HAI runs, AAP turns), by route",
            Unit::Seconds,
            first_event.clone(),
        );
        registry.register_with_unit(
            "upstream_headers",
            "From an upstream request sent (connecting included) to its response headers \
             received, whatever their status, by route",
            Unit::Seconds,
            upstream_headers.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: COMMIT,
            })
            .set(1);
        registry.register(
            "build_info",
            "Always 1; the labels say which build runs (version, and the commit it was built from \
             or \"unknown\")",
            build,
        );
        let store = StoreMetrics::new(registry);
        let admission = AdmissionMetrics::default();
        admission.register(registry);
        let lifecycle = LifecycleMetrics::default();
        lifecycle.register(registry);
        Arc::new(Metrics {
            registry: root,
            streams_active,
            streams,
            run_errors,
            refused,
            events,
            fixups,
            drops,
            heartbeats,
            stream_duration,
            first_event,
            upstream_headers,
            store,
            admission,
            lifecycle,
            routes: Mutex::default(),
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
        self.store.errors.get_or_create(&OpLabels { op }).inc();
    }

    /// The store the `sessions` and `thread_records` gauges read from now on (held weakly: the
    /// gauges disappear with it).
    pub fn watch_store(&self, store: &Arc<dyn Store>) {
        *self
            .store
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::downgrade(store));
    }

    /// These metrics as the observer of a store's operations (`session::Timed::observed`).
    pub fn store_observer(self: &Arc<Self>) -> Arc<dyn StoreObserver> {
        Arc::clone(self) as Arc<dyn StoreObserver>
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

    /// A request a limit of the gateway refused.
    pub fn rejected(&self, reason: Rejection) {
        self.admission
            .rejections
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
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

    /// The histogram of `route`'s upstream response header times; the upstream client
    /// observes it.
    pub fn upstream_headers(&self, route: &str) -> Histogram {
        self.upstream_headers
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .clone()
    }

    /// The gauge of request body bytes reserved in the budget.
    pub fn request_body_bytes(&self) -> Gauge {
        self.admission.request_body_bytes.clone()
    }

    /// The gauge of open client connections.
    pub fn connections_open(&self) -> Gauge {
        self.admission.connections_open.clone()
    }

    /// A connection closed by `request_header_timeout` (first head or idle keep-alive).
    pub fn header_timeout(&self) {
        self.admission.header_timeouts.inc();
    }

    /// A connection that ended before any request.
    pub fn connection_refused(&self, reason: ConnectionRefusal) {
        self.admission
            .connections_refused
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// A failed accept on the listener.
    pub fn accept_error(&self) {
        self.connection_refused(ConnectionRefusal::AcceptError);
    }

    /// A configuration reload ended: `ok` when the new configuration serves.
    pub fn config_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.lifecycle
            .config_reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The gateway starts (`true`) or stops draining.
    pub fn set_draining(&self, on: bool) {
        self.lifecycle.draining.set(i64::from(on));
    }

    /// Starts recording a stream; the guard records `cancelled` if dropped unfinished. Called
    /// while its request is handled ([`arrived`]), the stream's time to first event counts
    /// from the request's arrival; otherwise from now.
    pub fn stream_started(self: &Arc<Self>, route: &str) -> StreamRecord {
        let series = self.route_streams(route);
        series.active.inc();
        StreamRecord {
            metrics: Arc::clone(self),
            series,
            arrived: ARRIVAL
                .try_with(|at| *at)
                .unwrap_or_else(|_| Instant::now()),
            first_event: false,
            finished: false,
        }
    }

    /// `route`'s stream series, looked up (and their label sets hashed) once per route rather
    /// than once per series and stream: a stream's end updates them right after its last
    /// events were written, where seven family lookups cost more than the events' own work.
    fn route_streams(&self, route: &str) -> Arc<RouteStreams> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(series) = routes.get(route) {
            return Arc::clone(series);
        }
        let labels = RouteLabels {
            route: route.into(),
        };
        let series = Arc::new(RouteStreams {
            route: route.into(),
            active: self.streams_active.get_or_create(&labels).clone(),
            first_event: OnceLock::new(),
            outcomes: Default::default(),
            events: Default::default(),
            heartbeats: OnceLock::new(),
            duration: OnceLock::new(),
        });
        // Bounded: route paths come from the configuration.
        routes.insert(route.into(), Arc::clone(&series));
        series
    }
}

/// One route's handles on the stream series it labels. A series appears in the exposition
/// when first used, as the families' own lookups would make it appear.
struct RouteStreams {
    route: String,
    active: Gauge,
    first_event: OnceLock<Histogram>,
    /// By [`Outcome`], in declaration order.
    outcomes: [OnceLock<Counter>; 3],
    /// In, then out.
    events: [OnceLock<Counter>; 2],
    heartbeats: OnceLock<Counter>,
    duration: OnceLock<Histogram>,
}

impl RouteStreams {
    fn labels(&self) -> RouteLabels {
        RouteLabels {
            route: self.route.clone(),
        }
    }
}

impl StoreObserver for Metrics {
    fn observe(&self, op: &'static str, took: Duration, error: Option<&StoreError>) {
        self.store
            .operations
            .get_or_create(&OpLabels { op })
            .observe(took.as_secs_f64());
        // Exhaustive: a new store error must choose its place here.
        let rejection = match error {
            None | Some(StoreError::NotFound | StoreError::Busy) => return,
            Some(StoreError::Timeout(_) | StoreError::Unavailable(_)) => {
                self.store.faults.get_or_create(&OpLabels { op }).inc();
                return;
            }
            Some(StoreError::Full(_)) => Rejection::SessionLimit,
            Some(StoreError::PrincipalFull(_)) => Rejection::PrincipalSessionLimit,
            Some(StoreError::PrincipalOutOfSpace { .. }) => Rejection::PrincipalSessionStorageFull,
            Some(StoreError::OutOfSpace { .. }) => Rejection::SessionStorageFull,
        };
        self.rejected(rejection);
    }
}

/// The per-stream guard: keeps `streams_active` right whatever happens to the body.
pub struct StreamRecord {
    metrics: Arc<Metrics>,
    series: Arc<RouteStreams>,
    /// When the stream's request arrived.
    arrived: Instant,
    /// The first event has been recorded.
    first_event: bool,
    finished: bool,
}

impl std::fmt::Debug for StreamRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRecord")
            .field("route", &self.series.route)
            .field("first_event", &self.first_event)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl StreamRecord {
    /// The stream's first event goes to the client now: records its time to first event (once;
    /// later calls do nothing).
    pub fn first_event(&mut self) {
        if std::mem::replace(&mut self.first_event, true) {
            return;
        }
        let (m, s) = (&self.metrics, &self.series);
        s.first_event
            .get_or_init(|| m.first_event.get_or_create(&s.labels()).clone())
            .observe(self.arrived.elapsed().as_secs_f64());
    }

    /// Records the end of the stream (once; later calls do nothing).
    pub fn finish(&mut self, end: StreamEnd<'_>) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let (m, s) = (&self.metrics, &self.series);
        s.active.dec();
        let outcome = end.outcome;
        s.outcomes[outcome as usize]
            .get_or_init(|| {
                let labels = OutcomeLabels {
                    route: s.route.clone(),
                    outcome: outcome.as_str().into(),
                };
                m.streams.get_or_create(&labels).clone()
            })
            .inc();
        if let Some(code) = end.code {
            m.run_errors
                .get_or_create(&CodeLabels {
                    route: s.route.clone(),
                    code: code.into(),
                })
                .inc();
        }
        let counts = [end.stats.events_in, end.stats.events_out];
        for ((slot, direction), n) in s.events.iter().zip(["in", "out"]).zip(counts) {
            slot.get_or_init(|| {
                let labels = DirectionLabels {
                    route: s.route.clone(),
                    direction: direction.into(),
                };
                m.events.get_or_create(&labels).clone()
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
            s.heartbeats
                .get_or_init(|| m.heartbeats.get_or_create(&s.labels()).clone())
                .inc_by(end.heartbeats);
        }
        s.duration
            .get_or_init(|| m.stream_duration.get_or_create(&s.labels()).clone())
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

    /// Each route keeps its own series, shared by its streams; a series appears once a stream
    /// used it, not before.
    #[test]
    fn routes_keep_their_own_series_which_appear_when_used() {
        let m = Metrics::new();
        let end = |outcome| StreamEnd {
            outcome,
            code: None,
            stats: StreamStats {
                events_in: 2,
                events_out: 3,
                ..StreamStats::default()
            },
            notes: &[],
            heartbeats: 0,
            duration: Duration::from_millis(10),
        };
        let mut a = m.stream_started("/a");
        let mut b = m.stream_started("/b");
        let mut a2 = m.stream_started("/a");
        a.finish(end(Outcome::Completed));
        a2.finish(end(Outcome::Completed));
        b.finish(end(Outcome::Failed));
        let text = m.encode();
        let expected = [
            ("dialect_proxy_streams_active{route=\"/a\"}", Some(0.0)),
            ("dialect_proxy_streams_active{route=\"/b\"}", Some(0.0)),
            (
                "dialect_proxy_streams_total{route=\"/a\",outcome=\"completed\"}",
                Some(2.0),
            ),
            (
                "dialect_proxy_streams_total{route=\"/b\",outcome=\"failed\"}",
                Some(1.0),
            ),
            (
                "dialect_proxy_streams_total{route=\"/a\",outcome=\"failed\"}",
                None,
            ),
            (
                "dialect_proxy_streams_total{route=\"/b\",outcome=\"completed\"}",
                None,
            ),
            (
                "dialect_proxy_events_total{route=\"/a\",direction=\"out\"}",
                Some(6.0),
            ),
            (
                "dialect_proxy_events_total{route=\"/b\",direction=\"in\"}",
                Some(2.0),
            ),
            (
                "dialect_proxy_stream_duration_seconds_count{route=\"/a\"}",
                Some(2.0),
            ),
        ];
        for (series, value_there) in expected {
            assert_eq!(value(&text, series), value_there, "{series} in\n{text}");
        }
        assert!(!text.contains("dialect_proxy_heartbeats_total{"), "{text}");
    }

    /// The value of one series (`name{labels}`, as exposed), if present.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_event_is_timed_from_the_arrival_once() {
        let m = Metrics::new();
        let arrival = Instant::now();
        let mut record = arrived(arrival, async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            m.stream_started("/agent")
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        record.first_event();
        tokio::time::sleep(Duration::from_secs(10)).await;
        record.first_event();
        let text = m.encode();
        let series = "dialect_proxy_time_to_first_event_seconds";
        assert_eq!(
            value(&text, &format!("{series}_count{{route=\"/agent\"}}")),
            Some(1.0)
        );
        assert_eq!(
            value(&text, &format!("{series}_sum{{route=\"/agent\"}}")),
            Some(0.5),
            "{text}"
        );
    }

    #[test]
    fn store_operations_refusals_and_faults_have_their_own_series() {
        let m = Metrics::new();
        let observer = m.store_observer();
        observer.observe("create", Duration::from_millis(2), None);
        observer.observe(
            "create",
            Duration::from_millis(1),
            Some(&StoreError::Full(3)),
        );
        observer.observe("get", Duration::from_millis(1), Some(&StoreError::NotFound));
        observer.observe(
            "begin_turn",
            Duration::from_secs(5),
            Some(&StoreError::Timeout(Duration::from_secs(5))),
        );
        m.rejected(Rejection::Unauthenticated);
        m.connection_refused(ConnectionRefusal::TlsHandshake);
        m.accept_error();
        let text = m.encode();
        for (series, expected) in [
            (
                "dialect_proxy_store_operation_seconds_count{op=\"create\"}",
                2.0,
            ),
            (
                "dialect_proxy_store_operation_seconds_count{op=\"get\"}",
                1.0,
            ),
            (
                "dialect_proxy_store_operation_seconds_sum{op=\"begin_turn\"}",
                5.0,
            ),
            (
                "dialect_proxy_session_store_faults_total{op=\"begin_turn\"}",
                1.0,
            ),
            (
                "dialect_proxy_admission_rejections_total{reason=\"session_limit\"}",
                1.0,
            ),
            (
                "dialect_proxy_admission_rejections_total{reason=\"unauthenticated\"}",
                1.0,
            ),
            (
                "dialect_proxy_connections_refused_total{reason=\"tls_handshake\"}",
                1.0,
            ),
            (
                "dialect_proxy_connections_refused_total{reason=\"accept_error\"}",
                1.0,
            ),
        ] {
            assert_eq!(value(&text, series), Some(expected), "{series} in\n{text}");
        }
        assert!(
            !text.contains("session_store_faults_total{op=\"get\"}"),
            "{text}"
        );
        assert!(
            !text.contains("session_store_faults_total{op=\"create\"}"),
            "{text}"
        );
    }

    #[test]
    fn the_watched_store_is_counted_while_it_lives() {
        let m = Metrics::new();
        assert!(!m.encode().contains("dialect_proxy_sessions "));
        let store: Arc<dyn Store> = Arc::new(crate::session::MemoryStore::new(
            crate::session::SessionLimits::default(),
        ));
        m.watch_store(&store);
        let text = m.encode();
        assert_eq!(value(&text, "dialect_proxy_sessions"), Some(0.0), "{text}");
        assert_eq!(value(&text, "dialect_proxy_thread_records"), Some(0.0));
        drop(store);
        assert!(!m.encode().contains("dialect_proxy_sessions "));
    }

    #[test]
    fn build_reloads_and_draining_are_exposed() {
        let m = Metrics::new();
        m.config_reload(true);
        m.config_reload(false);
        m.config_reload(true);
        m.set_draining(true);
        let text = m.encode();
        let build = format!(
            "dialect_proxy_build_info{{version=\"{}\",commit=\"{COMMIT}\"}}",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(value(&text, &build), Some(1.0), "{text}");
        assert!(!COMMIT.is_empty());
        assert_eq!(
            value(&text, "dialect_proxy_config_reloads_total{result=\"ok\"}"),
            Some(2.0)
        );
        assert_eq!(
            value(
                &text,
                "dialect_proxy_config_reloads_total{result=\"error\"}"
            ),
            Some(1.0)
        );
        assert_eq!(value(&text, "dialect_proxy_draining"), Some(1.0));
        m.set_draining(false);
        assert_eq!(value(&m.encode(), "dialect_proxy_draining"), Some(0.0));
    }
}
