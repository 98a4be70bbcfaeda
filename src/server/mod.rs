//! The server: it owns the gateway — routing, the gateway's state, the faces, and the one
//! place where refusals become HTTP responses ([`refusal`]). Below it, `http` is the leaf
//! layer every face uses; beside it, `adapters` holds the faces that keep state (AAP).
//!
//! One connection: a slot under `max_connections` is taken before it is accepted, and its
//! first request head must arrive within `request_header_timeout` of the accept, else it is
//! closed (`connection`).
//!
//! One request, phase by phase:
//! 0. **Id and span**: the request's id (`x-request-id`, the client's or a new UUID:
//!    `http::request_id`), echoed on whatever response it gets, and its `request` span, which
//!    continues the client's trace (`telemetry::trace`); the span's fields (id, route,
//!    principal, thread and run) are on every log line of the request, and one line ends it
//!    (`log_end`, or the stream's own).
//! 1. **Route**: longest path prefix (404 otherwise), then the route's [`front`]: CORS
//!    (preflights answered there), then authentication (401, or the request's `Principal`),
//!    then **admission**: a permit under the global and the route's `max_streams`, held by the
//!    response body until it ends (503 `OVERLOADED` with `Retry-After` otherwise;
//!    `admission`). Preflights and 401s take no permit, and a 503 goes back through CORS. An AAP client's route goes on to the AAP face (`adapters::aap_server`);
//!    any other takes only `POST` (405 otherwise).
//! 2. **Read the body**, bounded by `max_request_bytes` (413, at once when `Content-Length`
//!    declares more) and by the gateway's `max_buffered_request_bytes` (503 `OVERLOADED`),
//!    and parse it with the client dialect's request reader (400 naming the field).
//! 3. **Upstream request**: an AAP upstream goes to the AAP client (`adapters::aap_client`);
//!    any other gets the canonical input in its dialect, end-to-end headers forwarded
//!    (hop-by-hop not; cookies, forwarding headers and a route's allowlist as
//!    `http::headers` says), `Accept-Encoding: identity`. Connect timeout and response header
//!    timeout apply here; a failure is answered before any body byte: 502
//!    (`UPSTREAM_UNAVAILABLE`, `UPSTREAM_HTTP_<status>`) or 504 (`UPSTREAM_HEADERS_TIMEOUT`),
//!    with a sentence safe for any client; the upstream's URL, status and body excerpt go to the
//!    log only.
//! 4. **Stream**: 200 with the SSE headers and a `TranslatingBody`; from here on every problem
//!    is a terminal event in the client's dialect (idle timeout, truncation, malformed or
//!    oversized events).
//!
//! Cancellation: hyper drops the service future when the client goes away (or, on HTTP/2,
//! resets the stream) while the upstream is connecting or has not answered yet, and drops the
//! body when it goes away mid-stream; either drop closes the upstream connection. Nothing is
//! spawned per request beyond what hyper's HTTP/2 server spawns per stream, and the AAP faces'
//! write-back tasks (one per turn, spawned when the turn ends and done once it is stored).
//!
//! Protocols: HTTP/1.1, and HTTP/2 with prior knowledge (h2c) on the same port; with
//! `tls_cert`/`tls_key`, HTTPS instead, HTTP/2 or HTTP/1.1 by ALPN. Each accepted connection is
//! served by its own task (`connection`: TLS handshake under a deadline, then HTTP).

mod accept;
mod admission;
pub mod admin;
mod connection;
mod drain;
mod front;
mod h1;
pub mod lifecycle;
pub mod refusal;
mod reload;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tracing::Instrument;

use crate::adapters::aap_client::AapClient;
use crate::adapters::aap_server;
use crate::config::{Config, Route};
use crate::dialect::{input_for_upstream, read_request, Dialect};
use crate::error::{ErrorCode, Failure, Fault};
use crate::http::body::Source;
use crate::http::client_body::ClientBody;
use crate::http::drain_deadline::DrainDeadline;
use crate::http::relay::Relay;
use crate::http::request_body::{read_body, BodyBudget};
use crate::http::request_id::RequestId;
use crate::http::response::{event_stream, Refusal, ResponseBody};
use crate::session::{Principal, Settling, Store};
use crate::telemetry::metrics::Metrics;
use accept::{AcceptBackoff, ConnectionSlots};
use admission::Streams;
use connection::Connections;
use drain::Drain;
pub use lifecycle::{Control, Phase};
pub use reload::Reloader;

/// After the drain deadline, how long the terminal events of the streams still open may take to
/// be written before the process lets go of them: the process exits within `drain_timeout` and
/// this.
const DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// Shared state of the server, built from one configuration: read-only but for the session
/// store. A reload builds a new one for new requests; open requests keep theirs.
struct Gateway {
    config: Config,
    relay: Relay,
    /// Sessions of the AAP faces, thread records of the AAP clients.
    store: Arc<dyn Store>,
    /// The AAP client's state: thread records, what AAP agents said of themselves.
    aap_client: AapClient,
    /// Runs whose store marks are still being ended (AAP turns and thread runs).
    settling: Arc<Settling>,
    metrics: Arc<Metrics>,
    /// The caps on requests answered at once (`max_streams`).
    streams: Streams,
    /// The bytes of request bodies being read at once (`max_buffered_request_bytes`).
    budget: BodyBudget,
}

/// What outlives a configuration: the store and what counts across all requests.
struct Lasting {
    store: Arc<dyn Store>,
    settling: Arc<Settling>,
    metrics: Arc<Metrics>,
    budget: BodyBudget,
    /// The global `max_streams` count, without route caps: what the first configuration's
    /// caps are built from.
    streams: Streams,
    /// Reached at the drain deadline (`Relay`).
    deadline: DrainDeadline,
}

impl Gateway {
    /// The gateway of `config`; its stream caps carry over from `previous` (see
    /// [`Streams::for_routes`]).
    fn build(config: Config, lasting: &Lasting, previous: &Streams) -> Arc<Gateway> {
        let relay = Relay::new(
            &config.routes,
            config.mappings.clone(),
            Arc::clone(&lasting.metrics),
            lasting.deadline.clone(),
            config.trusted_proxies.clone(),
        );
        Arc::new(Gateway {
            relay,
            streams: previous.for_routes(&config.routes),
            budget: lasting.budget.clone(),
            aap_client: AapClient::new(Arc::clone(&lasting.store), Arc::clone(&lasting.settling)),
            store: Arc::clone(&lasting.store),
            config,
            metrics: Arc::clone(&lasting.metrics),
            settling: Arc::clone(&lasting.settling),
        })
    }
}

/// The gateway and the front of each route (by route path), which answer requests.
struct Router {
    gateway: Arc<Gateway>,
    fronts: HashMap<String, front::Front>,
}

impl Router {
    fn build(gateway: Arc<Gateway>) -> Router {
        Router {
            fronts: front::fronts(&gateway),
            gateway,
        }
    }
}

/// The routers new requests are answered by: swapped whole by a reload.
type Routers = Arc<ArcSwap<Router>>;

/// State the data plane shares with the admin listener.
#[derive(Debug, Clone)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    /// Serving, draining, drained: `/ready`, `POST /drain`.
    pub control: Control,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            metrics: Metrics::new(),
            control: Control::new(),
        }
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new()
    }
}

/// A gateway built from its configuration, ready to accept on its listener.
///
/// Building and running are two steps so that readiness (`/ready`) is true before the process
/// announces its address: whoever reads the announcement finds the gateway ready.
pub struct Server {
    routers: Routers,
    reloader: Reloader,
    listener: TcpListener,
    shared: Shared,
    deadline: DrainDeadline,
}

impl Server {
    /// Builds the gateway for `config`, with the session store opened for it
    /// ([`crate::session::open`]), and marks it ready; connections queue on `listener` until
    /// [`Server::run`].
    pub fn new(
        config: Config,
        listener: TcpListener,
        shared: Shared,
        store: Arc<dyn Store>,
    ) -> Server {
        let deadline = DrainDeadline::new();
        shared.metrics.watch_store(&store);
        let lasting = Lasting {
            streams: Streams::new(config.admission.max_streams, &[], &shared.metrics),
            budget: BodyBudget::new(config.admission.max_buffered_request_bytes, &shared.metrics),
            settling: Arc::new(Settling::new(config.store.timeout)),
            store,
            metrics: Arc::clone(&shared.metrics),
            deadline: deadline.clone(),
        };
        let router = Router::build(Gateway::build(config, &lasting, &lasting.streams));
        let routers: Routers = Arc::new(ArcSwap::from_pointee(router));
        let reloader = Reloader::new(
            Arc::clone(&routers),
            lasting,
            &routers.load().gateway.config,
        );
        shared.control.serving();
        Server {
            routers,
            reloader,
            listener,
            shared,
            deadline,
        }
    }

    /// The handle that applies a new configuration to this server (SIGHUP).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Serves until a drain starts (`shutdown` resolves, or `POST /drain`), then drains (see
    /// [`lifecycle`]) and returns once drained and `shutdown` has resolved.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let Server {
            routers,
            reloader: _,
            listener,
            shared,
            deadline,
        } = self;
        let control = shared.control.clone();
        let (stall_timeout, admission, tls) = {
            let router = routers.load();
            let config = &router.gateway.config;
            (config.stall_timeout, config.admission, config.tls.clone())
        };
        let drain = Drain::new();
        // HTTP/2 (with prior knowledge, h2c, or by ALPN) is hyper's; HTTP/1.1 is the gateway's
        // own (`h1`), which bounds request heads by `max_request_head_bytes` and the heads
        // after a connection's first by `request_header_timeout`.
        let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new());
        let connections = Connections::new(
            Arc::clone(&routers),
            h2,
            &admission,
            tls.as_ref(),
            stall_timeout,
            Arc::clone(&shared.metrics),
        );
        let slots =
            ConnectionSlots::new(admission.max_connections, shared.metrics.connections_open());
        let mut backoff = AcceptBackoff::default();
        tokio::pin!(shutdown);
        let signalled = {
            // A signal (true) or `POST /drain` (false): either ends the accept loop.
            let stop = async {
                tokio::select! {
                    () = &mut shutdown => true,
                    () = control.draining() => false,
                }
            };
            tokio::pin!(stop);
            'serve: loop {
                // A slot first: at max_connections, new clients wait in the listen backlog.
                let slot = tokio::select! {
                    slot = slots.take() => slot,
                    signalled = &mut stop => break 'serve signalled,
                };
                let (stream, peer) = loop {
                    let accepted = tokio::select! {
                        accepted = listener.accept() => accepted,
                        signalled = &mut stop => break 'serve signalled,
                    };
                    match accepted {
                        Ok(pair) => {
                            backoff.succeeded();
                            break pair;
                        }
                        Err(error) => {
                            // Per-connection failures and descriptor exhaustion must not stop
                            // the server, nor make it spin on a listener that stays readable.
                            shared.metrics.accept_error();
                            let wait = backoff.failed(&error);
                            tokio::select! {
                                () = tokio::time::sleep(wait) => {}
                                signalled = &mut stop => break 'serve signalled,
                            }
                        }
                    }
                };
                connections.spawn(stream, peer, drain.watcher(), slot.accepted());
            }
        };
        control.drain();
        shared.metrics.set_draining(true);
        // Closed now, not at return: connections arriving during the drain are refused by the
        // kernel instead of queueing where nothing will accept them.
        drop(listener);
        drop(slots);
        let drain_timeout = routers.load().gateway.config.drain_timeout;
        tracing::info!(
            drain_timeout_s = drain_timeout.as_secs_f64(),
            started_by = if signalled { "signal" } else { "POST /drain" },
            "draining: listener closed, open requests run on until drain_timeout"
        );
        let drained = drain.shutdown();
        tokio::pin!(drained);
        if tokio::time::timeout(drain_timeout, &mut drained)
            .await
            .is_err()
        {
            tracing::warn!(
                "drain deadline reached; ending the remaining streams with GATEWAY_SHUTDOWN"
            );
            // Streams write their terminal event, requests still waiting for upstream headers
            // are answered 503; the connections then close, which resolves `drained`. The grace
            // only bounds a client that stopped reading.
            deadline.reach();
            if tokio::time::timeout(DEADLINE_GRACE, drained).await.is_err() {
                tracing::warn!("connections still open after the drain grace are dropped");
            }
        }
        control.finished();
        tracing::info!("drained");
        if !signalled {
            // Drained ahead of the signal (by `POST /drain`): the process lives on, serving
            // nothing, until it is told to stop.
            shutdown.await;
        }
        Ok(())
    }
}

impl Router {
    /// One request, from its id to the line that ends it (a stream's end is logged by its
    /// body): the request span, its `x-request-id` echoed on the response whatever it is.
    async fn handle(&self, mut request: Request<ClientBody>) -> Response<ResponseBody> {
        let request_id = RequestId::from_client(request.headers());
        let path = request.uri().path().to_owned();
        // The route is known before the span opens, so its fields are written with the span
        // rather than recorded into it one by one (each record formats the span's fields
        // again).
        let route = self.gateway.config.route(&path);
        let span = tracing::info_span!(
            "request",
            otel.kind = "server",
            request_id = %request_id,
            route = route.map(|r| tracing::field::display(&r.path)),
            client_dialect = route.map(|r| tracing::field::display(&r.client)),
            upstream_dialect = route.map(|r| tracing::field::display(&r.upstream_dialect)),
            method = %request.method(),
            path = %path,
            principal = tracing::field::Empty,
            thread_id = tracing::field::Empty,
            run_id = tracing::field::Empty,
        );
        crate::telemetry::trace::continue_from(&span, request.headers());
        request.extensions_mut().insert(request_id.clone());
        let mut response = self
            .route(request, &path, route)
            .instrument(span.clone())
            .await;
        request_id.set_on(response.headers_mut());
        span.in_scope(|| log_end(&response));
        response
    }

    /// The request's route and its front, which answer it (404 without a route).
    async fn route(
        &self,
        request: Request<ClientBody>,
        path: &str,
        route: Option<&Route>,
    ) -> Response<ResponseBody> {
        let Some(route) = route else {
            self.gateway
                .metrics
                .refused("", ErrorCode::NotFound.label());
            let failure = Failure::new(ErrorCode::NotFound, format!("no route for {path}"));
            return refusal::refused(Dialect::AgUi, failure.into());
        };
        let Some(front) = self.fronts.get(&route.path) else {
            // Every route has its front from the start: this is a bug.
            tracing::error!(route = %route.path, "no front for the route");
            let failure = Failure::new(ErrorCode::NotFound, format!("no route for {path}"));
            return refusal::refused(route.client, failure.into());
        };
        match front.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// The line that ends a request answered without a stream (a stream logs its own end):
/// `request answered` for a success, `request refused` at `info` for a refusal of the client's
/// request (with its code and status; an overloaded gateway's too), `warn` for a fault of the
/// upstream or the gateway.
fn log_end(response: &Response<ResponseBody>) {
    let status = response.status();
    let streamed = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"text/event-stream"));
    if status.is_success() || status.is_redirection() {
        if !streamed {
            tracing::info!(
                outcome = "answered",
                status = status.as_u16(),
                "request answered"
            );
        }
        return;
    }
    let status = status.as_u16();
    let Some(failure) = response.extensions().get::<Failure>() else {
        tracing::info!(outcome = "refused", status, "request refused");
        return;
    };
    let (code, message) = (&failure.code, &failure.message);
    match failure.code.fault() {
        Fault::Client => {
            tracing::info!(outcome = "refused", %code, status, detail = %message, "request refused")
        }
        Fault::Gateway if failure.code == ErrorCode::Overloaded => {
            tracing::info!(outcome = "refused", %code, status, detail = %message, "request refused")
        }
        Fault::Upstream => {
            tracing::warn!(outcome = "failed", %code, status, detail = %message, "upstream refused before the stream")
        }
        Fault::Gateway => {
            tracing::warn!(outcome = "failed", %code, status, detail = %message, "request failed before the stream")
        }
    }
}

impl Gateway {
    /// A request past its route's front: authenticated, its `Principal` in its extensions;
    /// the current span is the request's.
    async fn answer(&self, route: &Route, request: Request<ClientBody>) -> Response<ResponseBody> {
        let span = tracing::Span::current();
        // Which face serves the client: a new dialect must choose here (no wildcard arm).
        let result = match route.client {
            Dialect::Aap => {
                let face = aap_server::Face::of(
                    &self.config.routes,
                    route,
                    &self.store,
                    &self.settling,
                    &self.budget,
                    &self.aap_client,
                );
                // Boxed: an AAP exchange's future is nearly 12 KiB, three times an AG-UI or HAI
                // run's, and inline it would make every request's future that large (16 KiB,
                // out of the allocator's small classes, and copied whole when the route's
                // service boxes it). The box comes first so that the future is built in it
                // rather than built on the stack and copied there.
                let slot = Box::new_uninit();
                Box::into_pin(Box::write(
                    slot,
                    aap_server::handle(&face, &self.relay, request),
                ))
                .await
            }
            Dialect::AgUi | Dialect::Hai => self.stream(route, request, span.clone()).await,
        };
        match result {
            Ok(response) => response,
            Err(refused) => {
                // Logged with the request's last line (`log_end`).
                self.metrics
                    .refused(&route.path, refused.failure.code.label());
                refusal::refused(route.client, refused)
            }
        }
    }

    /// An AG-UI or HAI client's run.
    async fn stream(
        &self,
        route: &Route,
        request: Request<ClientBody>,
        span: tracing::Span,
    ) -> Result<Response<ResponseBody>, Refusal> {
        if request.method() != Method::POST {
            return Err(Refusal {
                failure: Failure::new(
                    ErrorCode::MethodNotAllowed,
                    format!(
                        "{} is not allowed here; POST a RunAgentInput",
                        request.method()
                    ),
                ),
                allow: Some("POST"),
            });
        }
        let (parts, body) = request.into_parts();
        let body = read_body(body, route.limits.max_request_bytes, &self.budget).await?;
        let mut new_id = || uuid::Uuid::new_v4().to_string();
        let codecs = self.relay.codecs(route, &[]);
        let mut input = read_request(route.client, &body, &codecs, &mut new_id)?;
        // Parsed: its bytes go back to the budget before the upstream is called.
        drop(body);
        input_for_upstream(route.client, route.upstream_dialect, &mut input);
        span.record("thread_id", input.thread_id.as_str());
        span.record("run_id", input.run_id.as_str());
        let headers = self.relay.upstream_headers(route, &parts);
        // Which side drives the upstream: a new dialect must choose here (no wildcard arm).
        match route.upstream_dialect {
            Dialect::Aap => {
                let principal = parts
                    .extensions
                    .get::<Principal>()
                    .cloned()
                    .unwrap_or_else(Principal::anonymous);
                return Ok(self.aap_client.run(
                    &self.relay,
                    route,
                    headers,
                    &principal,
                    input,
                    span,
                )?);
            }
            Dialect::AgUi | Dialect::Hai => {}
        }
        let (upstream, framing) = self.relay.open(route, headers, &input).await?;
        let pipeline = self.relay.pipeline(route, &input, framing)?;
        let body = self
            .relay
            .body(route, Source::Body(upstream), pipeline, (), span);
        Ok(event_stream(body))
    }
}
