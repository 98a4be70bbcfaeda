//! The upstream side of a request: a pooled client with connect and response-header timeouts,
//! and the mapping of every way the upstream can fail before its body into an [`ErrorCode`]
//! (`streaming.md` §6, `translation.md` §7).
//!
//! Upstreams are spoken to in HTTP/1.1, `https://` ones through rustls with the route's client
//! configuration (`crate::tls::client`), offering `http/1.1` by ALPN. One request per
//! connection at a time keeps cancellation simple: dropping a request closes its upstream
//! connection, on TLS as in plaintext. The connections and their pool are [`link`]'s, the
//! HTTP/1.1 on them [`wire`]'s: a response body reads its own connection, so what one socket
//! read brought is one frame. A TLS failure (an untrusted or expired certificate, a
//! hostname it does not cover, a refused client certificate) is a 502 `UPSTREAM_UNAVAILABLE`
//! whose message says only that; the certificate problem and the host go to the log.
//!
//! What the upstream said and where it lives stay inside: a failure's message is a sentence
//! that is safe for any client (the code and what happened, in general terms), while the
//! upstream's URL, status, an excerpt of its error body, and connection errors (addresses, TLS)
//! are logged here, where the failure is decided, as fields of one `warn` event.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use prometheus_client::metrics::histogram::Histogram;
use tokio::time::Instant;
use tracing::{Instrument, Span};

use crate::error::{ErrorCode, Failure};
use crate::telemetry::trace;
use crate::tls::client::https_connector;
use crate::tls::{tls_cause, ClientTls};

pub mod link;
pub mod wire;

use link::{Link, Pool};
use wire::WireError;

/// How much of a refusing upstream's body is quoted in the log.
const EXCERPT_BYTES: usize = 512;

/// The client-facing message of a TLS failure: the details are for the log only.
const TLS_FAILED: &str =
    "a trusted TLS connection to the upstream could not be established; the gateway log has the details";

/// The media type of AG-UI protobuf streams, which the gateway does not translate.
const AGUI_PROTO: &str = "application/vnd.ag-ui.event+proto";

/// Refuses an upstream answer that cannot be an event stream or a JSON answer the gateway
/// reads, as `UPSTREAM_MALFORMED` with words for the client (what the upstream sent goes to the
/// log only): a compressed body (the gateway asked for identity), an AG-UI protobuf stream, or
/// an HTML page (a login or error page, a web app on the wrong port: read as SSE it would hold
/// no event and end as truncated). For every upstream dialect, AAP agents' turns included.
pub fn refuse_untranslatable(headers: &HeaderMap) -> Result<(), Failure> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let (content_type, encoding) = (
        text(http::header::CONTENT_TYPE),
        text(http::header::CONTENT_ENCODING),
    );
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let why = if !encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity") {
        "the upstream compressed its event stream, which the gateway does not translate"
    } else if essence.eq_ignore_ascii_case(AGUI_PROTO) {
        "the upstream answered an AG-UI protobuf stream; protobuf streams are not translated"
    } else if essence.eq_ignore_ascii_case("text/html")
        || essence.eq_ignore_ascii_case("application/xhtml+xml")
    {
        "the upstream answered a web page, not an event stream"
    } else {
        return Ok(());
    };
    tracing::warn!(
        content_type = %content_type,
        content_encoding = %encoding,
        "{why}; check the route's upstream (and that it does not compress event streams)"
    );
    Err(Failure::new(ErrorCode::UpstreamMalformed, why))
}

/// A pooled upstream client, for one connect timeout and one TLS configuration.
#[derive(Clone, Debug)]
pub struct UpstreamClient {
    pool: Pool,
    /// Where the time from sending a request to its response headers goes (per route).
    headers_seconds: Option<Histogram>,
}

impl UpstreamClient {
    /// A client for `http://` upstreams, and for `https://` ones when `tls` is given (without
    /// it, an `https://` request fails verification: nothing is trusted).
    pub fn new(connect_timeout: Duration, tls: Option<&ClientTls>) -> UpstreamClient {
        UpstreamClient {
            pool: Pool::new(https_connector(connect_timeout, tls)),
            headers_seconds: None,
        }
    }

    /// The same pooled client, observing into `histogram` how long each request waited for
    /// its response headers (connecting included; failures and timeouts are not observed).
    pub fn observed(mut self, histogram: Histogram) -> UpstreamClient {
        self.headers_seconds = Some(histogram);
        self
    }

    /// POSTs `body` and waits for response headers. Dropping the returned future cancels the
    /// request in every phase (connecting, waiting for headers).
    pub async fn post(
        &self,
        uri: &Uri,
        headers: HeaderMap,
        body: Vec<u8>,
        headers_timeout: Duration,
    ) -> Result<Response<CallBody>, Failure> {
        self.send(Method::POST, uri, headers, body, headers_timeout)
            .await
    }

    /// Sends a request and waits for response headers; a non-2xx status is a failure, logged
    /// with the start of the upstream's body.
    ///
    /// The call is an `upstream` span, a child of the current (request) span, open until the
    /// response body ends or is dropped ([`CallBody`]); with trace export on, the request
    /// carries that span's trace context (`telemetry::trace`).
    pub async fn send(
        &self,
        method: Method,
        uri: &Uri,
        mut headers: HeaderMap,
        body: Vec<u8>,
        headers_timeout: Duration,
    ) -> Result<Response<CallBody>, Failure> {
        let span = tracing::info_span!(
            "upstream",
            otel.kind = "client",
            http.request.method = %method,
            url.full = %uri,
            http.response.status_code = tracing::field::Empty,
        );
        trace::inject(&span, &mut headers);
        self.exchange(method, uri, headers, body, headers_timeout)
            .instrument(span.clone())
            .await
            .map(|(response, link)| response.map(|()| CallBody { link, span }))
    }

    async fn exchange(
        &self,
        method: Method,
        uri: &Uri,
        headers: HeaderMap,
        body: Vec<u8>,
        headers_timeout: Duration,
    ) -> Result<(Response<()>, Link), Failure> {
        let mut request = Request::builder()
            .method(method)
            .uri(uri.clone())
            .body(Bytes::from(body))
            .map_err(|error| {
                tracing::error!(upstream.url = %uri, %error, "could not build the upstream request");
                Failure::new(
                    ErrorCode::UpstreamUnavailable,
                    "the gateway could not build the upstream request",
                )
            })?;
        *request.headers_mut() = headers;
        let sent = Instant::now();
        let response =
            match tokio::time::timeout(headers_timeout, self.pool.send(uri, request)).await {
                Err(_) => {
                    let secs = headers_timeout.as_secs_f64();
                    tracing::warn!(
                        upstream.url = %uri,
                        headers_timeout_s = secs,
                        "the upstream sent no response headers in time"
                    );
                    return Err(Failure::new(
                        ErrorCode::UpstreamHeadersTimeout,
                        format!("the upstream sent no response headers within {secs} s"),
                    ));
                }
                Ok(Err(error)) => {
                    if let Some(tls) = tls_cause(&error) {
                        tracing::warn!(
                            upstream.host = uri.host().unwrap_or_default(),
                            upstream.port = uri.port_u16(),
                            tls.error = %tls,
                            "TLS with the upstream failed"
                        );
                        return Err(Failure::new(ErrorCode::UpstreamUnavailable, TLS_FAILED));
                    }
                    let cause = std::error::Error::source(&error)
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    tracing::warn!(
                        upstream.url = %uri,
                        %error,
                        cause = %cause,
                        "the upstream could not be reached"
                    );
                    return Err(Failure::new(
                        ErrorCode::UpstreamUnavailable,
                        "the upstream could not be reached",
                    ));
                }
                Ok(Ok(sent)) => sent,
            };
        let (response, link) = response;
        if let Some(histogram) = &self.headers_seconds {
            histogram.observe(sent.elapsed().as_secs_f64());
        }
        tracing::Span::current().record("http.response.status_code", response.status().as_u16());
        if response.status().is_success() {
            return Ok((response, link));
        }
        let status = response.status().as_u16();
        let body = CallBody {
            link,
            span: Span::none(),
        };
        let excerpt = excerpt(body).await;
        tracing::warn!(
            upstream.url = %uri,
            upstream.status = status,
            upstream.excerpt = %excerpt,
            "the upstream refused the request"
        );
        Err(Failure::new(
            ErrorCode::UpstreamHttp(status),
            format!("the upstream refused the request (HTTP {status})"),
        ))
    }
}

/// An upstream response body; it reads its connection ([`link`]) and holds its call's span
/// open until it ends (or is dropped).
#[derive(Debug)]
pub struct CallBody {
    link: Link,
    span: Span,
}

/// A [`CallBody`]'s error: a [`WireError`], boxed as the translating body takes its upstream's
/// errors (`body::UpstreamBody`). Boxed here, where the error is made, rather than by a
/// `map_err` layer that every one of a stream's frames would pass through.
pub type CallError = Box<dyn std::error::Error + Send + Sync>;

impl Body for CallBody {
    type Data = Bytes;
    type Error = CallError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, CallError>>> {
        let this = &mut *self;
        match this.link.poll_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(Frame::data(data)))),
            over => {
                // The call is over: its span closes now, not whenever the body is dropped.
                this.span = Span::none();
                over.map(|end| {
                    end.map(|failed| failed.map(Frame::data).map_err(|e: WireError| e.into()))
                })
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.link.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.link.remaining() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// Reads a whole (small) JSON response body, bounded in size and time.
pub async fn read_json(
    body: CallBody,
    limit: usize,
    timeout: Duration,
    what: &str,
) -> Result<serde_json::Value, Failure> {
    let read = tokio::time::timeout(timeout, http_body_util::Limited::new(body, limit).collect());
    let bytes = match read.await {
        Err(_) => {
            let secs = timeout.as_secs_f64();
            tracing::warn!(
                response = what,
                timeout_s = secs,
                "the upstream's response did not finish in time"
            );
            return Err(Failure::new(
                ErrorCode::UpstreamIdleTimeout,
                format!("the upstream did not finish its response within {secs} s"),
            ));
        }
        Ok(Err(error)) => {
            tracing::warn!(response = what, limit_bytes = limit, %error, "could not read the upstream's response");
            return Err(Failure::new(
                ErrorCode::UpstreamMalformed,
                "the upstream's response could not be read",
            ));
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    serde_json::from_slice(&bytes).map_err(|error| {
        tracing::warn!(response = what, %error, "the upstream's response is not JSON");
        Failure::new(
            ErrorCode::UpstreamMalformed,
            "the upstream's response is not JSON",
        )
    })
}

/// The first bytes of a refusing upstream's body, bounded in size and time.
async fn excerpt(mut body: CallBody) -> String {
    let mut bytes = Vec::new();
    let read = async {
        while bytes.len() < EXCERPT_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        bytes.extend_from_slice(&data);
                    }
                }
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
    bytes.truncate(EXCERPT_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if text.ends_with('\u{FFFD}') {
        text.pop(); // a character cut by the bound
    }
    text.trim().to_string()
}
