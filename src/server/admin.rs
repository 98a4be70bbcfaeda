//! The admin listener (separate from the data plane, like linkerd's): `GET /metrics`
//! (OpenMetrics text), `GET /live` (the process serves), `GET /ready` (routes loaded, listener
//! bound, not draining). Kubernetes probes and Prometheus scrape it.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::accept::AcceptBackoff;
use super::Shared;

/// Serves the admin endpoints until the task is dropped.
pub async fn serve_admin(listener: TcpListener, shared: Shared) -> std::io::Result<()> {
    let mut backoff = AcceptBackoff::default();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(pair) => {
                backoff.succeeded();
                pair
            }
            Err(error) => {
                tokio::time::sleep(backoff.failed(&error)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let service = service_fn(move |request| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(respond(&shared, &request)) }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "admin connection ended with an error");
            }
        });
    }
}

fn respond(shared: &Shared, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *r.status_mut() = status;
        r
    };
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    match request.uri().path() {
        "/live" => text(StatusCode::OK, "live\n"),
        "/ready" if shared.ready.load(Ordering::SeqCst) => text(StatusCode::OK, "ready\n"),
        "/ready" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        "/metrics" => {
            let mut r = Response::new(Full::new(Bytes::from(shared.metrics.encode())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        _ => text(StatusCode::NOT_FOUND, "try /metrics, /live or /ready\n"),
    }
}
