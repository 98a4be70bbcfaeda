//! The admin listener (separate from the data plane, like linkerd's): `GET /metrics`
//! (OpenMetrics text), `GET /live` (the process serves), `GET /ready` (routes loaded, listener
//! bound, not draining), and `POST /drain`, which starts the drain a SIGTERM starts
//! ([`super::lifecycle`]) and answers once it has finished. Kubernetes probes and Prometheus
//! scrape it; a pod's `preStop` hook drains through it (`dialect-proxy drain`).
//!
//! `POST /drain` is taken from loopback peers only (403 otherwise): the admin port is open to
//! probes and scrapers on the pod network, and none of them may take the gateway out of
//! service. Inside a pod, every container shares the loopback interface.

use std::convert::Infallible;
use std::net::SocketAddr;
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
        let (stream, peer) = match listener.accept().await {
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
            async move { Ok::<_, Infallible>(respond(&shared, peer, &request).await) }
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

async fn respond(
    shared: &Shared,
    peer: SocketAddr,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *r.status_mut() = status;
        r
    };
    let path = request.uri().path();
    if path == "/drain" {
        if request.method() != Method::POST {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "POST only\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        if !may_drain(peer) {
            tracing::warn!(%peer, "POST /drain refused: not from loopback");
            return text(
                StatusCode::FORBIDDEN,
                "POST /drain is taken from loopback only\n",
            );
        }
        let started = shared.control.drain();
        tracing::info!(%peer, started, "POST /drain: waiting for open requests to end");
        shared.control.drained().await;
        let mut r = Response::new(Full::new(Bytes::from_static(b"{\"drained\":true}\n")));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    }
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    match path {
        "/live" => text(StatusCode::OK, "live\n"),
        "/ready" if shared.control.is_ready() => text(StatusCode::OK, "ready\n"),
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
        _ => text(
            StatusCode::NOT_FOUND,
            "try /metrics, /live, /ready or POST /drain\n",
        ),
    }
}

/// Whether `peer` may start a drain: loopback only, IPv4-mapped IPv6 included.
fn may_drain(peer: SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::may_drain;

    #[test]
    fn only_loopback_peers_may_drain() {
        for allowed in [
            "127.0.0.1:1",
            "127.8.9.10:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(may_drain(allowed.parse().unwrap()), "{allowed}");
        }
        for refused in [
            "10.0.0.7:1",
            "192.168.1.2:1",
            "[::ffff:10.0.0.7]:1",
            "[fe80::1]:1",
            "0.0.0.0:1",
        ] {
            assert!(!may_drain(refused.parse().unwrap()), "{refused}");
        }
    }
}
