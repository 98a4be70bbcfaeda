//! The HTTP face: a hyper 1 server that routes each request, reads the run input, starts the
//! upstream, and answers with a [`TranslatingBody`].
//!
//! One request, phase by phase:
//! 1. **Route**: longest path prefix (404 otherwise); only `POST` (405 otherwise).
//! 2. **Read the body**, bounded by `max_request_bytes` (413), and parse it with the client
//!    dialect's request reader (400 naming the field).
//! 3. **Upstream request**: the canonical input in the upstream dialect, end-to-end headers
//!    forwarded (hop-by-hop not), `Accept-Encoding: identity`. Connect timeout and response
//!    header timeout apply here; a failure is answered before any body byte: 502
//!    (`UPSTREAM_UNAVAILABLE`, `UPSTREAM_HTTP_<status>` with an excerpt of the upstream body) or
//!    504 (`UPSTREAM_HEADERS_TIMEOUT`).
//! 4. **Stream**: 200 with the SSE headers and a [`TranslatingBody`]; from here on every problem
//!    is a terminal event in the client's dialect (idle timeout, truncation, malformed or
//!    oversized events).
//!
//! Cancellation: hyper drops the service future when the client goes away (or, on HTTP/2,
//! resets the stream) while the upstream is connecting or has not answered yet, and drops the
//! body when it goes away mid-stream; either drop closes the upstream connection. Nothing is
//! spawned per request beyond what hyper's HTTP/2 server spawns per stream.
//!
//! Protocols: HTTP/1.1, and HTTP/2 with prior knowledge (h2c) on the same port.

pub mod admin;

pub use crate::http::body::{
    Continuation, DrainSignal, Next, OpenFuture, StreamTimers, TranslatingBody, UpstreamBody,
};
use crate::http::headers;
use crate::http::stall::StallGuard;
pub(crate) use crate::http::upstream::{read_json, UpstreamClient};

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::config::{Config, Route, Upstream};
use crate::dialect::Dialect;
use crate::dialect::{read_request, write_request};
use crate::error::{ErrorCode, Failure};
use crate::event::RunIds;
use crate::pipeline::{Pipeline, PipelineSpec};
use crate::session::{MemoryStore, Store};
use crate::sse::Framing;
use crate::telemetry::metrics::Metrics;

/// How long a client may take to send its (small) request body.
const REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The media type of AG-UI protobuf streams, which the gateway does not translate.
const AGUI_PROTO: &str = "application/vnd.ag-ui.event+proto";

/// Any response the gateway sends.
pub type ResponseBody = Either<TranslatingBody, Full<Bytes>>;

/// Shared state of the server: read-only but for the session store.
pub(crate) struct Gateway {
    config: Config,
    /// Sessions of the AAP faces.
    store: Arc<dyn Store>,
    /// One pooled client per distinct connect timeout, so each route's timeout holds.
    clients: HashMap<Duration, UpstreamClient>,
    /// Flips to true at the drain deadline; open streams then end with `GATEWAY_SHUTDOWN`.
    draining: tokio::sync::watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    /// What AAP upstreams said of themselves (`GET /meta`), per base URL.
    aap_directory: Arc<crate::adapters::aap_client::Directory>,
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
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shared: Shared,
    drain_tx: tokio::sync::watch::Sender<bool>,
}

impl Server {
    /// Builds the gateway for `config` and marks it ready; connections queue on `listener`
    /// until [`Server::run`].
    pub fn new(config: Config, listener: TcpListener, shared: Shared) -> Server {
        let clients = config
            .routes
            .iter()
            .map(|r| {
                (
                    r.limits.connect_timeout,
                    UpstreamClient::new(r.limits.connect_timeout),
                )
            })
            .collect();
        let (drain_tx, draining) = tokio::sync::watch::channel(false);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(config.sessions));
        let gateway = Arc::new(Gateway {
            clients,
            store,
            config,
            draining,
            metrics: Arc::clone(&shared.metrics),
            aap_directory: Arc::default(),
        });
        shared.ready.store(true, Ordering::SeqCst);
        Server {
            gateway,
            listener,
            shared,
            drain_tx,
        }
    }

    /// Serves until `shutdown` resolves, then stops accepting and lets open connections finish
    /// for up to the configured drain timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let Server {
            gateway,
            listener,
            shared,
            drain_tx,
        } = self;
        let drain_timeout = gateway.config.drain_timeout;
        let stall_timeout = gateway.config.stall_timeout;
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        // HTTP/1.1, and HTTP/2 with prior knowledge (h2c) for meshes and clients that multiplex.
        let mut protocols = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        protocols.http1().timer(TokioTimer::new());
        protocols.http2().timer(TokioTimer::new());
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(error) => {
                        // Per-connection failures (reset before accept, fd pressure) must not stop
                        // the server; back off briefly so a persistent one cannot spin.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            let gateway = Arc::clone(&gateway);
            let service = service_fn(move |request| {
                let gateway = Arc::clone(&gateway);
                async move { Ok::<_, Infallible>(gateway.handle(request).await) }
            });
            let connection = protocols
                .serve_connection(
                    TokioIo::new(StallGuard::new(stream, stall_timeout)),
                    service,
                )
                .into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(
                async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                }
                .instrument(tracing::debug_span!("conn", client.addr = %peer)),
            );
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

impl Gateway {
    async fn handle(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        let path = request.uri().path().to_owned();
        let Some(route) = self.config.route(&path) else {
            self.metrics.refused("", ErrorCode::NotFound.label());
            return error_response(&Failure::new(
                ErrorCode::NotFound,
                format!("no route for {path}"),
            ));
        };
        let span = tracing::info_span!(
            "request",
            route = %route.path,
            client_dialect = %route.client,
            upstream_dialect = %route.upstream_dialect,
            method = %request.method(),
            path = %path,
            thread_id = tracing::field::Empty,
            run_id = tracing::field::Empty,
        );
        let result = if route.client == Dialect::Aap {
            crate::adapters::aap_server::handle(self, route, request)
                .instrument(span.clone())
                .await
        } else {
            self.stream(route, request, span.clone())
                .instrument(span.clone())
                .await
        };
        match result {
            Ok(response) => response,
            Err(failure) => {
                let _entered = span.enter();
                match failure.code.fault() {
                    crate::error::Fault::Client => {
                        tracing::debug!(code = %failure.code, message = %failure.message, "request refused")
                    }
                    _ => {
                        tracing::warn!(code = %failure.code, message = %failure.message, "upstream refused before the stream")
                    }
                }
                self.metrics.refused(&route.path, failure.code.label());
                if route.client == Dialect::Aap {
                    crate::adapters::aap_server::error_response(&failure)
                } else {
                    error_response(&failure)
                }
            }
        }
    }

    async fn stream(
        &self,
        route: &Route,
        request: Request<Incoming>,
        span: tracing::Span,
    ) -> Result<Response<ResponseBody>, Failure> {
        if request.method() != Method::POST {
            return Err(Failure::new(
                ErrorCode::MethodNotAllowed,
                format!(
                    "{} is not allowed here; POST a RunAgentInput",
                    request.method()
                ),
            ));
        }
        let (parts, body) = request.into_parts();
        let body = read_body(body, route.limits.max_request_bytes).await?;
        let mut new_id = || uuid::Uuid::new_v4().to_string();
        let mut input = read_request(
            route.client,
            &body,
            &self.config.mappings,
            &route.hai,
            &mut new_id,
        )?;
        crate::dialect::input_for_upstream(route.client, route.upstream_dialect, &mut input);
        span.record("thread_id", input.thread_id.as_str());
        span.record("run_id", input.run_id.as_str());
        if route.upstream_dialect == Dialect::Aap {
            return crate::adapters::aap_client::run(self, route, &parts.headers, input, span)
                .await;
        }
        let (upstream, framing) = self.open_upstream(route, &parts.headers, &input).await?;
        let spec = self.pipeline_spec(route, &input, framing);
        let pipeline = Pipeline::new(spec)
            .map_err(|e| Failure::new(ErrorCode::NotImplemented, e.to_string()))?;
        let body = self.translating_body(route, upstream, pipeline, span);
        let mut response = Response::new(Either::Left(body));
        headers::sse_response_headers(response.headers_mut());
        Ok(response)
    }
}

impl Gateway {
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn aap_directory(&self) -> &Arc<crate::adapters::aap_client::Directory> {
        &self.aap_directory
    }

    /// The pooled client for `route`'s connect timeout.
    pub(crate) fn client(&self, route: &Route) -> UpstreamClient {
        self.clients
            .get(&route.limits.connect_timeout)
            .cloned()
            .unwrap_or_else(|| UpstreamClient::new(route.limits.connect_timeout))
    }

    /// Sends the run to the route's upstream and waits for its response headers: the body and
    /// its framing, or a failure before the stream (connect, status, compression, protobuf).
    pub(crate) async fn open_upstream(
        &self,
        route: &Route,
        client_headers: &http::HeaderMap,
        input: &crate::event::RunAgentInput,
    ) -> Result<(UpstreamBody, Framing), Failure> {
        let uri = match &route.upstream {
            Upstream::BuiltinDemo => {
                let body = crate::demo::demo_response(input, crate::demo::DEFAULT_PACE)
                    .map_err(|never| match never {})
                    .boxed_unsync();
                return Ok((body, Framing::Sse));
            }
            Upstream::Url(uri) => uri,
        };
        let headers = headers::upstream_request_headers(client_headers);
        let response = self
            .client(route)
            .post(
                uri,
                headers,
                write_request(route.upstream_dialect, input, route.request_profile),
                route.limits.headers_timeout,
            )
            .await?;
        tracing::debug!(status = %response.status(), "upstream answered");
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if let Some(encoding) = response
            .headers()
            .get(header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .filter(|e| !e.eq_ignore_ascii_case("identity"))
        {
            return Err(Failure::new(
                ErrorCode::UpstreamMalformed,
                format!("the upstream compressed its stream ({encoding}) although the gateway asked for identity; turn compression off for event streams"),
            ));
        }
        if content_type.starts_with(AGUI_PROTO) {
            return Err(Failure::new(
                ErrorCode::UpstreamMalformed,
                format!("the upstream answered {AGUI_PROTO} although the gateway asked for text/event-stream; protobuf streams are not translated"),
            ));
        }
        let framing = Framing::from_content_type(content_type);
        let body = response
            .into_body()
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            .boxed_unsync();
        Ok((body, framing))
    }

    /// The pipeline of one run on `route`.
    pub(crate) fn pipeline_spec(
        &self,
        route: &Route,
        input: &crate::event::RunAgentInput,
        framing: Framing,
    ) -> PipelineSpec {
        let ids = RunIds {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
        };
        let mut spec = PipelineSpec::new(route.upstream_dialect, route.client, ids);
        spec.mappings = self.config.mappings.clone();
        spec.max_event_bytes = route.limits.max_event_bytes;
        spec.clock = crate::http::clock::WALL;
        spec.framing = framing;
        spec.keep_upstream_run_ids = route.keep_upstream_run_ids;
        spec.unknown_fields = route.unknown_fields;
        spec.reader = route.reader;
        spec.hai = route.hai.clone();
        spec.tools = input.tools.iter().map(|t| t.name.clone()).collect();
        spec
    }

    /// The body that streams `upstream` through `pipeline` under the route's timers, the drain
    /// signal and the stream metrics.
    pub(crate) fn translating_body(
        &self,
        route: &Route,
        upstream: UpstreamBody,
        pipeline: Pipeline,
        span: tracing::Span,
    ) -> TranslatingBody {
        let (timers, drain, record) = self.stream_parts(route);
        TranslatingBody::new(upstream, pipeline, timers, drain, span, record)
    }

    /// A body whose upstream requests are made by `open` and then `continuation`.
    pub(crate) fn deferred_body(
        &self,
        route: &Route,
        open: OpenFuture,
        continuation: Box<dyn Continuation>,
        pipeline: Pipeline,
        span: tracing::Span,
    ) -> TranslatingBody {
        let (timers, drain, record) = self.stream_parts(route);
        TranslatingBody::deferred(open, continuation, pipeline, timers, drain, span, record)
    }

    /// The timers, drain signal and metrics record of a stream on `route`.
    fn stream_parts(
        &self,
        route: &Route,
    ) -> (
        StreamTimers,
        DrainSignal,
        crate::telemetry::metrics::StreamRecord,
    ) {
        let timers = StreamTimers {
            idle_timeout: route.limits.idle_timeout,
            heartbeat_interval: route.limits.heartbeat_interval,
        };
        let mut draining = self.draining.clone();
        let drain: DrainSignal = Box::pin(async move {
            // Resolves once the flag is true; a dropped sender means no drain ever comes.
            if draining.wait_for(|d| *d).await.is_err() {
                std::future::pending::<()>().await;
            }
        });
        let record = self.metrics.stream_started(&route.path);
        (timers, drain, record)
    }
}

/// The headers a request to an upstream carries: the client's end-to-end headers, JSON in,
/// an event stream (or JSON) out, no compression.
pub(crate) fn upstream_headers(client_headers: &http::HeaderMap) -> http::HeaderMap {
    headers::upstream_request_headers(client_headers)
}

/// The headers of an event-stream response (`streaming.md` §4).
pub(crate) fn sse_headers(headers: &mut http::HeaderMap) {
    headers::sse_response_headers(headers);
}

/// Reads a request body whole, bounded by `limit` bytes and [`REQUEST_BODY_TIMEOUT`].
pub(crate) async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, Failure> {
    let read = tokio::time::timeout(REQUEST_BODY_TIMEOUT, Limited::new(body, limit).collect());
    let body = read
        .await
        .map_err(|_| {
            Failure::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    REQUEST_BODY_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Failure::new(
                    ErrorCode::PayloadTooLarge,
                    format!("the request body exceeds {limit} bytes (max_request_bytes)"),
                )
            } else {
                Failure::new(
                    ErrorCode::InvalidRequest,
                    format!("could not read the request body: {e}"),
                )
            }
        })?;
    Ok(body.to_bytes())
}

/// An error before the stream: status from the code, body `{"error":{"code","message"}}`.
fn error_response(failure: &Failure) -> Response<ResponseBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(
        failure.to_json_body(),
    ))));
    *response.status_mut() = failure.code.http_status();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}
