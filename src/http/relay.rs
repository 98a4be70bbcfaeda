//! [`Relay`]: the narrow handle every face gets of the gateway — what it takes to send a run
//! to a route's upstream and relay the answer through a pipeline: the pooled upstream
//! clients, the route's codec options and outbound credentials, the drain signal and the
//! stream metrics. Faces never
//! see the gateway's routing or its other state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::header;
use http_body_util::BodyExt;
use prometheus_client::metrics::histogram::Histogram;
use tracing::Span;

use super::body::{RunOwner, Source, StreamLimits, StreamParts, TranslatingBody, UpstreamBody};
use super::clock;
use super::drain_deadline::DrainDeadline;
use super::headers::{self, ForwardPolicy, Proto};
use super::request_id::{RequestId, X_REQUEST_ID};
use super::upstream::{refuse_untranslatable, UpstreamClient};
use super::ClientAddr;
use crate::auth::outbound::{Credentials, Outbound};
use crate::config::{Route, TrustedProxies, Upstream};
use crate::dialect::{write_request, CodecOptions, Reader, Writer};
use crate::error::{ErrorCode, Failure};
use crate::event::{RunAgentInput, RunIds, Tool};
use crate::mapping::Mappings;
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::sse::Framing;
use crate::telemetry::metrics::Metrics;
use crate::tls::ClientFiles;

/// What a pooled client is built for: a connect timeout, and the TLS files of an `https://`
/// upstream (`None` for plain `http://`).
type ClientKey = (Duration, Option<ClientFiles>);

/// See the module docs. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    /// One pooled client per distinct connect timeout and TLS settings, so each route's
    /// timeout and trust hold; routes that agree on both share connections.
    clients: Arc<HashMap<ClientKey, UpstreamClient>>,
    /// Each route's histogram of upstream response header times, by route path.
    headers_seconds: Arc<HashMap<String, Histogram>>,
    /// What each route's upstream requests carry as `Authorization`.
    credentials: Arc<Credentials>,
    mappings: Mappings,
    /// Reached at the drain deadline; open streams then end with `GATEWAY_SHUTDOWN`.
    drain_deadline: DrainDeadline,
    metrics: Arc<Metrics>,
    /// Peers whose forwarding headers are believed.
    trusted_proxies: Arc<TrustedProxies>,
}

impl Relay {
    pub fn new(
        routes: &[Route],
        mappings: Mappings,
        metrics: Arc<Metrics>,
        drain_deadline: DrainDeadline,
        trusted_proxies: TrustedProxies,
    ) -> Relay {
        let mut clients = HashMap::new();
        let mut headers_seconds = HashMap::new();
        for route in routes {
            clients.entry(client_key(route)).or_insert_with(|| {
                UpstreamClient::new(route.limits.connect_timeout, route.tls.as_ref())
            });
            headers_seconds
                .entry(route.path.clone())
                .or_insert_with(|| metrics.upstream_headers(&route.path));
        }
        Relay {
            clients: Arc::new(clients),
            headers_seconds: Arc::new(headers_seconds),
            credentials: Arc::new(Credentials::new(routes)),
            mappings,
            drain_deadline,
            metrics,
            trusted_proxies: Arc::new(trusted_proxies),
        }
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The pooled client for `route`'s connect timeout and TLS settings, observing the
    /// route's upstream response header times.
    pub fn client(&self, route: &Route) -> UpstreamClient {
        let client = self
            .clients
            .get(&client_key(route))
            .cloned()
            .unwrap_or_else(|| {
                UpstreamClient::new(route.limits.connect_timeout, route.tls.as_ref())
            });
        let histogram = match self.headers_seconds.get(route.path.as_str()) {
            Some(histogram) => histogram.clone(),
            None => self.metrics.upstream_headers(&route.path),
        };
        client.observed(histogram)
    }

    /// The `Authorization` rules of `route`'s upstream requests (`auth::outbound`).
    pub fn outbound(&self, route: &Route) -> Outbound {
        self.credentials.outbound(route)
    }

    /// The readers' and writers' options on `route`, for a run that declares `tools` (none
    /// while its request is still being read).
    pub fn codecs(&self, route: &Route, tools: &[Tool]) -> CodecOptions {
        CodecOptions {
            mappings: self.mappings.clone(),
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            agui: crate::dialect::agui::AguiOptions {
                reader: route.reader,
                unknown_fields: route.unknown_fields,
                request_profile: route.request_profile,
                protocol_version: route.protocol_version,
            },
            hai: route.hai.clone(),
            aap: Default::default(),
        }
    }

    /// The pipeline's own options for a run of `input` on `route`.
    pub fn pipeline_options(
        &self,
        route: &Route,
        input: &RunAgentInput,
        framing: Framing,
    ) -> PipelineOptions {
        PipelineOptions {
            ids: RunIds {
                thread_id: input.thread_id.clone(),
                run_id: input.run_id.clone(),
            },
            max_event_bytes: route.limits.max_event_bytes,
            framing,
            keep_upstream_run_ids: route.keep_upstream_run_ids,
            clock: clock::WALL,
        }
    }

    /// The route's pipeline for `input`: its upstream dialect's reader, its client dialect's
    /// writer.
    pub fn pipeline(
        &self,
        route: &Route,
        input: &RunAgentInput,
        framing: Framing,
    ) -> Result<Pipeline, Failure> {
        crate::dialect::check_pair(route.upstream_dialect, route.client)
            .map_err(|e| Failure::new(ErrorCode::NotImplemented, e.to_string()))?;
        let codecs = self.codecs(route, &input.tools);
        let options = self.pipeline_options(route, input, framing);
        let reader = route
            .upstream_dialect
            .reader(&options.ids, framing, &codecs);
        let writer = route.client.writer(&codecs);
        Ok(Pipeline::from_parts(reader, writer, options))
    }

    /// The headers `route`'s upstream gets for the client request `client`
    /// ([`headers::upstream_request_headers`]): its peer ([`ClientAddr`]) trusted or not, its
    /// scheme ([`Proto`], plain HTTP unless the listener says otherwise), the route's
    /// forwarding settings; and the request's [`RequestId`] as `x-request-id`.
    pub fn upstream_headers(
        &self,
        route: &Route,
        client: &http::request::Parts,
    ) -> http::HeaderMap {
        let peer = client.extensions.get::<ClientAddr>().map(|a| a.0);
        let host = client
            .headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| client.uri.authority().map(|a| a.as_str()));
        let policy = ForwardPolicy {
            peer,
            trusted_peer: peer.is_some_and(|p| self.trusted_proxies.contains(p.ip())),
            proto: client
                .extensions
                .get::<Proto>()
                .copied()
                .unwrap_or_default(),
            host,
            route: &route.forwarding,
        };
        let mut headers = headers::upstream_request_headers(&client.headers, &policy);
        // The request's own id, never the client's copy as it came (it may have been refused).
        headers.remove(X_REQUEST_ID);
        if let Some(id) = client.extensions.get::<RequestId>() {
            id.set_on(&mut headers);
        }
        // The gateway's own credential stays here unless the route forwards it.
        self.outbound(route).strip_client_credential(&mut headers);
        headers
    }

    /// Sends the run to the route's upstream with `request_headers` ([`Relay::upstream_headers`])
    /// and waits for its response headers: the body and its framing, or a failure before the
    /// stream (connect, status, compression, protobuf).
    pub async fn open(
        &self,
        route: &Route,
        request_headers: http::HeaderMap,
        input: &RunAgentInput,
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
        let mut request_headers = request_headers;
        self.outbound(route).apply(&mut request_headers).await;
        let body = write_request(
            route.upstream_dialect,
            input,
            &self.codecs(route, &input.tools),
        );
        let client = self.client(route);
        let posted = client.post(uri, request_headers, body, route.limits.headers_timeout);
        // A request still waiting for its upstream's headers at the drain deadline is answered
        // rather than cut with its connection.
        let response = tokio::select! {
            response = posted => response?,
            () = self.drain_deadline.signal() => {
                return Err(Failure::new(
                    ErrorCode::GatewayShutdown,
                    "the gateway is shutting down; retry on another instance",
                ));
            }
        };
        tracing::debug!(status = %response.status(), "upstream answered");
        refuse_untranslatable(response.headers())?;
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let framing = Framing::from_content_type(content_type);
        let body = response.into_body().boxed_unsync();
        Ok((body, framing))
    }

    /// The body that streams `source` through `pipeline` under the route's timers, the drain
    /// signal and the stream metrics; `owner` is told of hand-overs and of the end.
    pub fn body<R, W, O>(
        &self,
        route: &Route,
        source: Source,
        pipeline: Pipeline<R, W>,
        owner: O,
        span: Span,
    ) -> TranslatingBody<R, W, O>
    where
        R: Reader,
        W: Writer,
        O: RunOwner<R, W>,
    {
        let timers = StreamLimits {
            idle_timeout: route.limits.idle_timeout,
            heartbeat_interval: route.limits.heartbeat_interval,
            max_duration: route.limits.max_stream_duration,
            max_bytes: route.limits.max_stream_bytes,
        };
        let drain = self.drain_deadline.signal();
        let parts = StreamParts {
            timers,
            drain,
            span,
            record: self.metrics.stream_started(&route.path),
        };
        TranslatingBody::new(source, pipeline, owner, parts)
    }
}

fn client_key(route: &Route) -> ClientKey {
    (
        route.limits.connect_timeout,
        route.tls.as_ref().map(|tls| tls.files.clone()),
    )
}
