//! The HTTP client OTLP trace exports go through: hyper (HTTP/1.1, `http://` or `https://`
//! with the system's roots) on a small tokio runtime of its own.
//!
//! Why a runtime of its own: the SDK's batch span processor runs exports on a thread it owns
//! and blocks that thread on each export's future, with no tokio runtime around it, while
//! hyper needs one (its connector, its timers). So each request is spawned onto the export
//! runtime and the batch thread only waits for the task's result, which needs no runtime.
//! Apart from the serving runtime, a slow or unreachable collector never takes a worker from
//! requests, and the export runtime can be built before the serving one exists.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError};
use tokio::runtime::{Handle, Runtime};

/// How much of a collector's answer is read: OTLP responses are small (partial success).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// How long a TCP connect to the collector may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default bound on one export request, as the OTLP specification sets it.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an export request failed, beyond what hyper says.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the collector did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the export runtime could not be started: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("TLS for the collector could not be set up: {0}")]
    Tls(#[source] rustls::Error),
}

/// The runtime exports run on: one worker thread, I/O and timers.
pub fn runtime() -> Result<Runtime, ExportError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .map_err(ExportError::Runtime)
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct ExportClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    runtime: Handle,
    timeout: Duration,
}

impl ExportClient {
    /// A client whose requests run on `runtime`, each bounded by the OTLP timeout
    /// (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`, in ms; 10 s).
    pub fn new(runtime: Handle) -> Result<ExportClient, ExportError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config().map_err(ExportError::Tls)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(ExportClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            runtime,
            timeout: timeout_from_env(),
        })
    }
}

#[async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let exchange = async move {
            let response = client.request(request.map(Full::new)).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES).collect().await?;
            Ok::<_, HttpError>(Response::from_parts(parts, body.to_bytes()))
        };
        let task = self.runtime.spawn(async move {
            match tokio::time::timeout(timeout, exchange).await {
                Ok(answered) => answered,
                Err(_) => Err(Box::new(ExportError::Timeout(timeout)) as HttpError),
            }
        });
        // A JoinHandle wakes whoever awaits it, runtime or not: the batch thread can wait here.
        task.await.map_err(|e| Box::new(e) as HttpError)?
    }
}

/// TLS to the collector: the system's roots, ring, TLS 1.2 and 1.3.
fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    // Certificates the system lists but rustls cannot read are skipped, as an unreadable
    // store is: a plain `http://` collector needs none of them.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn timeout_from_env() -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok()?.trim().parse::<u64>().ok())
    .map(Duration::from_millis)
    .unwrap_or(DEFAULT_TIMEOUT)
}
