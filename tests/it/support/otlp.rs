//! `OtlpReceiver`: an OTLP/HTTP trace collector for the tests, on a real TCP port. It accepts
//! `POST /v1/traces` with a protobuf `ExportTraceServiceRequest` (decoded with the
//! `opentelemetry-proto` messages), answers `200` with an empty `ExportTraceServiceResponse`,
//! and keeps every span it was sent. Dropping it stops the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use tokio::net::TcpListener;
use tokio::task::AbortHandle;

/// One span as the collector received it; ids in lowercase hex (empty when absent).
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    /// `SpanKind` as its protobuf number (2 server, 3 client).
    pub kind: i32,
    /// The span's attributes, values as text.
    pub attributes: HashMap<String, String>,
    /// The attributes of the resource that sent it (`service.name`, …).
    pub resource: HashMap<String, String>,
}

pub const KIND_SERVER: i32 = 2;
pub const KIND_CLIENT: i32 = 3;

pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    /// Requests that were not a decodable `POST /v1/traces`.
    rejected: Arc<Mutex<Vec<String>>>,
    accept: AbortHandle,
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind OTLP receiver");
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let rejected = Arc::new(Mutex::new(Vec::new()));
        let (kept, refused) = (spans.clone(), rejected.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (kept, refused) = (kept.clone(), refused.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (kept, refused) = (kept.clone(), refused.clone());
                        async move { Ok::<_, hyper::Error>(receive(request, &kept, &refused).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        OtlpReceiver {
            addr,
            spans,
            rejected,
            accept: accept.abort_handle(),
        }
    }

    /// The value for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter appends `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// What was sent here that was not an OTLP trace export.
    pub fn rejected(&self) -> Vec<String> {
        self.rejected.lock().unwrap().clone()
    }

    /// Waits until a span named `name` in trace `trace_id` has arrived; panics after `patience`.
    pub async fn wait_for_span(
        &self,
        name: &str,
        trace_id: &str,
        patience: Duration,
    ) -> ReceivedSpan {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let found = self
                .spans()
                .into_iter()
                .find(|s| s.name == name && s.trace_id == trace_id);
            if let Some(span) = found {
                return span;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {name:?} span of trace {trace_id} arrived; received: {:#?}; rejected: {:?}",
                self.spans(),
                self.rejected()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn receive(
    request: Request<Incoming>,
    kept: &Mutex<Vec<ReceivedSpan>>,
    refused: &Mutex<Vec<String>>,
) -> Response<Full<Bytes>> {
    let head = format!(
        "{} {} {:?}",
        request.method(),
        request.uri().path(),
        request.headers().get("content-type")
    );
    let is_export = request.method() == hyper::Method::POST
        && request.uri().path() == "/v1/traces"
        && request
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes() == b"application/x-protobuf");
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            refused.lock().unwrap().push(format!("{head}: {error}"));
            return answer(400, Bytes::new());
        }
    };
    let decoded = ExportTraceServiceRequest::decode(body.as_ref());
    let export = match decoded {
        Ok(export) if is_export => export,
        other => {
            refused
                .lock()
                .unwrap()
                .push(format!("{head}: {:?}", other.err()));
            return answer(400, Bytes::new());
        }
    };
    let mut spans = kept.lock().unwrap();
    for resource_spans in export.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                spans.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    attributes: attributes(&span.attributes),
                    resource: resource.clone(),
                });
            }
        }
    }
    answer(
        200,
        ExportTraceServiceResponse::default().encode_to_vec().into(),
    )
}

fn answer(status: u16, body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/x-protobuf")
        .body(Full::new(body))
        .unwrap()
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
