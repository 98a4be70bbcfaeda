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
//! committer tasks (one per turn, bounded by the turns running).
//!
//! Protocols: HTTP/1.1, and HTTP/2 with prior knowledge (h2c) on the same port; with
//! `tls_cert`/`tls_key`, HTTPS instead, HTTP/2 or HTTP/1.1 by ALPN. Each accepted connection is
//! served by its own task (`connection`: TLS handshake under a deadline, then HTTP).

mod accept;
mod admission;
pub mod admin;
mod connection;
mod front;
pub mod refusal;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
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
use crate::http::relay::Relay;
use crate::http::request_body::{read_body, BodyBudget};
use crate::http::request_id::RequestId;
use crate::http::response::{event_stream, Refusal, ResponseBody};
use crate::session::{MemoryStore, Principal, Settling, Store, Timed, DEFAULT_STORE_TIMEOUT};
use crate::telemetry::metrics::Metrics;
use accept::{AcceptBackoff, ConnectionSlots};
use admission::Streams;
use connection::Connections;

/// Shared state of the server: read-only but for the session store.
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

/// The gateway and the front of each route (by route path), which answer requests.
struct Router {
    gateway: Arc<Gateway>,
    fronts: HashMap<String, front::Front>,
}

/// State the data plane shares with the admin listener.
#[derive(Debug, Clone)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    /// True while new requests are accepted (false before start-up and while draining).
    pub ready: Arc<AtomicBool>,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            metrics: Metrics::new(),
            ready: Arc::new(AtomicBool::new(false)),
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
    router: Arc<Router>,
    listener: TcpListener,
    shared: Shared,
    drain_tx: tokio::sync::watch::Sender<bool>,
}

impl Server {
    /// Builds the gateway for `config` and marks it ready; connections queue on `listener`
    /// until [`Server::run`].
    pub fn new(config: Config, listener: TcpListener, shared: Shared) -> Server {
        let (drain_tx, draining) = tokio::sync::watch::channel(false);
        let store: Arc<dyn Store> = Arc::new(Timed::new(
            MemoryStore::new(config.sessions),
            DEFAULT_STORE_TIMEOUT,
        ));
        let settling = Arc::new(Settling::default());
        let relay = Relay::new(
            &config.routes,
            config.mappings.clone(),
            Arc::clone(&shared.metrics),
            draining,
            config.trusted_proxies.clone(),
        );
        let streams = Streams::new(
            config.admission.max_streams,
            &config.routes,
            &shared.metrics,
        );
        let budget = BodyBudget::new(config.admission.max_buffered_request_bytes, &shared.metrics);
        let gateway = Arc::new(Gateway {
            relay,
            streams,
            budget,
            aap_client: AapClient::new(Arc::clone(&store), Arc::clone(&settling)),
            store,
            config,
            metrics: Arc::clone(&shared.metrics),
            settling,
        });
        let router = Arc::new(Router {
            fronts: front::fronts(&gateway),
            gateway,
        });
        shared.ready.store(true, Ordering::SeqCst);
        Server {
            router,
            listener,
            shared,
            drain_tx,
        }
    }

    /// Serves until `shutdown` resolves, then stops accepting and lets open connections finish
    /// for up to the configured drain timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let Server {
            router,
            listener,
            shared,
            drain_tx,
        } = self;
        let drain_timeout = router.gateway.config.drain_timeout;
        let stall_timeout = router.gateway.config.stall_timeout;
        let admission = router.gateway.config.admission;
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        // HTTP/1.1, and HTTP/2 with prior knowledge (h2c) for meshes and clients that multiplex;
        // under TLS, either by ALPN.
        let mut protocols = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        // The later request heads of a keep-alive connection; the first is `until_first_head`'s.
        protocols
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(admission.request_header_timeout);
        protocols.http2().timer(TokioTimer::new());
        let tls = router.gateway.config.tls.clone();
        let connections = Connections::new(
            router,
            protocols,
            tls.as_ref(),
            stall_timeout,
            admission.request_header_timeout,
            Arc::clone(&shared.metrics),
        );
        let slots =
            ConnectionSlots::new(admission.max_connections, shared.metrics.connections_open());
        let mut backoff = AcceptBackoff::default();
        tokio::pin!(shutdown);
        'serve: loop {
            // A slot first: at max_connections, new clients wait in the listen backlog.
            let slot = tokio::select! {
                slot = slots.take() => slot,
                () = &mut shutdown => break 'serve,
            };
            let (stream, peer) = loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = &mut shutdown => break 'serve,
                };
                match accepted {
                    Ok(pair) => {
                        backoff.succeeded();
                        break pair;
                    }
                    Err(error) => {
                        // Per-connection failures and descriptor exhaustion must not stop the
                        // server, nor make it spin on a listener that stays readable.
                        shared.metrics.accept_error();
                        let wait = backoff.failed(&error);
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = &mut shutdown => break 'serve,
                        }
                    }
                }
            };
            connections.spawn(stream, peer, graceful.watcher(), slot.accepted());
        }
        shared.ready.store(false, Ordering::SeqCst);
        tracing::info!(
            drain_timeout_s = drain_timeout.as_secs_f64(),
            "shutting down: draining open streams"
        );
        let drained = graceful.shutdown();
        tokio::pin!(drained);
        if tokio::time::timeout(drain_timeout, &mut drained)
            .await
            .is_err()
        {
            tracing::warn!(
                "drain deadline reached; ending the remaining streams with GATEWAY_SHUTDOWN"
            );
            let _ = drain_tx.send(true);
            // The terminal events are written at once; the connections then close, which resolves
            // `drained`. The bound only guards against a client that stopped reading.
            let _ = tokio::time::timeout(Duration::from_secs(10), drained).await;
        }
        Ok(())
    }
}

impl Router {
    /// One request, from its id to the line that ends it (a stream's end is logged by its
    /// body): the request span, its `x-request-id` echoed on the response whatever it is.
    async fn handle(&self, mut request: Request<Incoming>) -> Response<ResponseBody> {
        let request_id = RequestId::from_client(request.headers());
        let path = request.uri().path().to_owned();
        let span = tracing::info_span!(
            "request",
            otel.kind = "server",
            request_id = %request_id,
            route = tracing::field::Empty,
            client_dialect = tracing::field::Empty,
            upstream_dialect = tracing::field::Empty,
            method = %request.method(),
            path = %path,
            principal = tracing::field::Empty,
            thread_id = tracing::field::Empty,
            run_id = tracing::field::Empty,
        );
        crate::telemetry::trace::continue_from(&span, request.headers());
        request.extensions_mut().insert(request_id.clone());
        let mut response = self
            .route(request, &path, &span)
            .instrument(span.clone())
            .await;
        request_id.set_on(response.headers_mut());
        span.in_scope(|| log_end(&response));
        response
    }

    /// The request's route and its front, which answer it (404 without a route).
    async fn route(
        &self,
        request: Request<Incoming>,
        path: &str,
        span: &tracing::Span,
    ) -> Response<ResponseBody> {
        let Some(route) = self.gateway.config.route(path) else {
            self.gateway
                .metrics
                .refused("", ErrorCode::NotFound.label());
            let failure = Failure::new(ErrorCode::NotFound, format!("no route for {path}"));
            return refusal::refused(Dialect::AgUi, failure.into());
        };
        span.record("route", tracing::field::display(&route.path));
        span.record("client_dialect", tracing::field::display(&route.client));
        span.record(
            "upstream_dialect",
            tracing::field::display(&route.upstream_dialect),
        );
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
    async fn answer(&self, route: &Route, request: Request<Incoming>) -> Response<ResponseBody> {
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
                );
                aap_server::handle(&face, &self.relay, request).await
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
        request: Request<Incoming>,
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
