//! `ScriptedUpstream`: a real HTTP/1.1 server on `127.0.0.1:0` that answers each request with a
//! `Script` (status, headers, then timed body steps) chosen from the recorded request.
//!
//! Bodies are always sent with `transfer-encoding: chunked`; each `Step::Bytes` is one chunk,
//! written and flushed on its own. `Step::Close` drops the connection without the terminating
//! chunk, so the gateway sees a truncated body. While a script runs, the connection's read side
//! is watched: if the gateway closes the connection (or a write fails) before the script is over,
//! that is recorded as a *cancellation* (see `wait_for_cancellation`).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpListener, TcpStream,
    },
    sync::watch,
    task::AbortHandle,
};

use super::{find_bytes, header_value, header_values, parse_head};

/// One timed action of a scripted response body.
#[derive(Clone, Debug)]
pub enum Step {
    /// Written and flushed as one chunk of the chunked body (empty payloads are skipped, since an
    /// empty chunk would end the body).
    Bytes(Vec<u8>),
    /// Pause before the next step.
    Sleep(Duration),
    /// Keep the connection open forever, sending nothing more.
    Stall,
    /// Drop the TCP connection abruptly (no terminating chunk).
    Close,
    /// Only meaningful as the first step: read the request, then never send response headers.
    NoHeaders,
    /// Only meaningful as the first step: read the request, then drop the connection without a
    /// response.
    DropBeforeHeaders,
}

/// A scripted response. Headers are sent as soon as the request has been read (unless the first
/// step is `Step::NoHeaders`); then the steps run in order; if they all complete, the terminating
/// chunk is sent and the connection stays usable for another request.
#[derive(Clone, Debug)]
pub struct Script {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

/// The SSE frame for one event: `data: <json>\n\n`.
pub fn sse_frame(json: &str) -> Vec<u8> {
    format!("data: {json}\n\n").into_bytes()
}

impl Script {
    pub fn new(status: u16) -> Self {
        Script {
            status,
            headers: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// 200 `text/event-stream` with no body steps yet.
    pub fn sse_headers() -> Self {
        Script::new(200)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
    }

    /// 200 `text/event-stream`, one chunk per event (`data: <json>\n\n`), then a clean end.
    pub fn sse(events: &[&str]) -> Self {
        Script::sse_headers().events(events)
    }

    /// Same as `sse`, from JSON values.
    pub fn sse_json(events: &[Value]) -> Self {
        Script::sse_headers().events_json(events)
    }

    /// Reads the request, never answers.
    pub fn no_headers() -> Self {
        Script::new(200).step(Step::NoHeaders)
    }

    /// Reads the request, then drops the connection without answering.
    pub fn drop_before_headers() -> Self {
        Script::new(200).step(Step::DropBeforeHeaders)
    }

    /// A non-streaming answer such as an upstream error page.
    pub fn status_body(status: u16, content_type: &str, body: impl AsRef<[u8]>) -> Self {
        Script::new(status)
            .header("content-type", content_type)
            .bytes(body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    pub fn bytes(self, bytes: impl AsRef<[u8]>) -> Self {
        self.step(Step::Bytes(bytes.as_ref().to_vec()))
    }

    pub fn event(self, json: &str) -> Self {
        self.step(Step::Bytes(sse_frame(json)))
    }

    pub fn events(self, events: &[&str]) -> Self {
        events.iter().fold(self, |s, e| s.event(e))
    }

    pub fn event_json(self, event: &Value) -> Self {
        self.event(&event.to_string())
    }

    pub fn events_json(self, events: &[Value]) -> Self {
        events.iter().fold(self, |s, e| s.event_json(e))
    }

    /// `n` SSE comments of `bytes` bytes each (at least 4), `pause` apart: an upstream that
    /// keeps its stream alive without an event (or, with no pause, floods it).
    pub fn comments(mut self, n: usize, bytes: usize, pause: Duration) -> Self {
        let comment = format!(": {}\n\n", "k".repeat(bytes.saturating_sub(4)));
        for _ in 0..n {
            self = self.bytes(&comment);
            if !pause.is_zero() {
                self = self.sleep(pause);
            }
        }
        self
    }

    pub fn sleep(self, d: Duration) -> Self {
        self.step(Step::Sleep(d))
    }

    pub fn sleep_ms(self, ms: u64) -> Self {
        self.sleep(Duration::from_millis(ms))
    }

    pub fn stall(self) -> Self {
        self.step(Step::Stall)
    }

    pub fn close(self) -> Self {
        self.step(Step::Close)
    }
}

/// A request as the upstream received it. Header names are lowercased, in arrival order.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        header_values(&self.headers, name)
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    /// The body parsed as JSON (panics with the body text if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "upstream request body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

type Responder = dyn Fn(&RecordedRequest) -> Script + Send + Sync;

struct Shared {
    requests: Mutex<Vec<RecordedRequest>>,
    request_count: watch::Sender<usize>,
    cancellations: watch::Sender<usize>,
    /// When each cancellation was seen, in order.
    cancelled_at: Mutex<Vec<Instant>>,
    /// Scripts running now (between a request read and its answer's end).
    running: watch::Sender<usize>,
    tasks: Mutex<Vec<AbortHandle>>,
    responder: Box<Responder>,
}

/// The scripted upstream agent. Dropping it stops the server and closes its connections.
pub struct ScriptedUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ScriptedUpstream {
    /// Starts the server; `responder` picks a script for each recorded request.
    pub async fn start<F>(responder: F) -> ScriptedUpstream
    where
        F: Fn(&RecordedRequest) -> Script + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind scripted upstream");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            request_count: watch::channel(0).0,
            cancellations: watch::channel(0).0,
            cancelled_at: Mutex::new(Vec::new()),
            running: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
            responder: Box::new(responder),
        });
        let accept_shared = shared.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let conn_shared = accept_shared.clone();
                let handle = tokio::spawn(serve_connection(stream, conn_shared));
                accept_shared
                    .tasks
                    .lock()
                    .unwrap()
                    .push(handle.abort_handle());
            }
        });
        shared.tasks.lock().unwrap().push(accept.abort_handle());
        ScriptedUpstream { addr, shared }
    }

    /// Starts a server that answers every request with the same script.
    pub async fn with_script(script: Script) -> ScriptedUpstream {
        ScriptedUpstream::start(move |_| script.clone()).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT<path>`; `path` should start with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many times the peer closed a connection while a script was still in progress.
    pub fn cancellations(&self) -> usize {
        *self.shared.cancellations.borrow()
    }

    /// Waits until at least `n` requests have been received; returns the `n`-th one.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> RecordedRequest {
        let mut rx = self.shared.request_count.subscribe();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok());
        let count = *self.shared.request_count.borrow();
        assert!(
            reached,
            "scripted upstream: expected {n} request(s) within {timeout:?}, got {count}"
        );
        self.shared.requests.lock().unwrap()[n - 1].clone()
    }

    /// Waits for the first request.
    pub async fn wait_for_request(&self, timeout: Duration) -> RecordedRequest {
        self.wait_for_requests(1, timeout).await
    }

    /// When the `n`-th cancellation (from 1) was seen, waiting for it up to `timeout`.
    pub async fn wait_for_cancellation_at(&self, n: usize, timeout: Duration) -> Option<Instant> {
        let mut rx = self.shared.cancellations.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n)).await;
        if !waited.is_ok_and(|r| r.is_ok()) {
            return None;
        }
        self.shared.cancelled_at.lock().unwrap().get(n - 1).copied()
    }

    /// Waits until no script is running: every answer has ended, by its script or by the peer.
    /// Returns false on timeout.
    pub async fn wait_until_idle(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.running.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0)).await;
        waited.is_ok_and(|r| r.is_ok())
    }

    /// Waits until the peer has closed at least one connection while its script was still in
    /// progress (mid-body, stalled, or before headers). Returns false on timeout.
    pub async fn wait_for_cancellation(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.cancellations.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|c| *c >= 1)).await;
        waited.is_ok_and(|r| r.is_ok())
    }
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        for task in self.shared.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

enum Outcome {
    /// All steps ran and the body was terminated: the connection may serve another request.
    Completed,
    /// The script closed the connection itself (`Step::Close`).
    ClosedByScript,
    /// The peer went away while the script was in progress.
    PeerClosed,
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut rd, &mut buf).await else {
            return;
        };
        let script = (shared.responder)(&request);
        shared.requests.lock().unwrap().push(request);
        shared.request_count.send_modify(|c| *c += 1);

        shared.running.send_modify(|n| *n += 1);
        let outcome = tokio::select! {
            outcome = run_script(&script, &mut wr) => outcome,
            () = wait_peer_close(&mut rd, &mut buf) => Outcome::PeerClosed,
        };
        if let Outcome::PeerClosed = outcome {
            shared.cancelled_at.lock().unwrap().push(Instant::now());
            shared.cancellations.send_modify(|c| *c += 1);
        }
        shared.running.send_modify(|n| *n -= 1);
        match outcome {
            Outcome::Completed => continue,
            Outcome::ClosedByScript | Outcome::PeerClosed => return,
        }
    }
}

/// Resolves when the read side reports EOF or an error. Any bytes read meanwhile are kept for the
/// next request.
async fn wait_peer_close(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) {
    loop {
        buf.reserve(4096);
        if let Ok(0) | Err(_) = rd.read_buf(buf).await {
            return;
        }
    }
}

async fn run_script(script: &Script, wr: &mut OwnedWriteHalf) -> Outcome {
    match script.steps.first() {
        Some(Step::NoHeaders) => return std::future::pending().await,
        Some(Step::DropBeforeHeaders) => return Outcome::ClosedByScript,
        _ => {}
    }
    let reason = http::StatusCode::from_u16(script.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Scripted");
    let mut head = format!("HTTP/1.1 {} {}\r\n", script.status, reason);
    for (name, value) in &script.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\n\r\n");
    if write_flush(wr, head.as_bytes()).await.is_err() {
        return Outcome::PeerClosed;
    }
    for step in &script.steps {
        match step {
            Step::Bytes(bytes) if bytes.is_empty() => {}
            Step::Bytes(bytes) => {
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(bytes);
                chunk.extend_from_slice(b"\r\n");
                if write_flush(wr, &chunk).await.is_err() {
                    return Outcome::PeerClosed;
                }
            }
            Step::Sleep(d) => tokio::time::sleep(*d).await,
            Step::Stall => return std::future::pending().await,
            Step::Close => return Outcome::ClosedByScript,
            Step::NoHeaders | Step::DropBeforeHeaders => {}
        }
    }
    if write_flush(wr, b"0\r\n\r\n").await.is_err() {
        return Outcome::PeerClosed;
    }
    Outcome::Completed
}

async fn write_flush(wr: &mut OwnedWriteHalf, bytes: &[u8]) -> std::io::Result<()> {
    wr.write_all(bytes).await?;
    wr.flush().await
}

/// Reads one request (head plus a content-length or chunked body). `None` on EOF or garbage.
async fn read_request(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<RecordedRequest> {
    let head_end = loop {
        if let Some(i) = find_bytes(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 || !fill(rd, buf).await {
            return None;
        }
    };
    let (request_line, headers) = parse_head(&buf[..head_end]);
    buf.drain(..head_end + 4);
    let mut parts = request_line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let version = parts.next().unwrap_or("").to_string();

    let chunked = header_value(&headers, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked_body(rd, buf).await?
    } else {
        let len: usize = header_value(&headers, "content-length")
            .map(|v| v.parse().ok())
            .unwrap_or(Some(0))?;
        while buf.len() < len {
            if !fill(rd, buf).await {
                return None;
            }
        }
        buf.drain(..len).collect()
    };
    Some(RecordedRequest {
        method,
        path,
        version,
        headers,
        body,
    })
}

async fn read_chunked_body(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find_bytes(buf, b"\r\n") {
                break i;
            }
            if !fill(rd, buf).await {
                return None;
            }
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).to_string();
        buf.drain(..line_end + 2);
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, then the blank line.
            loop {
                let end = loop {
                    if let Some(i) = find_bytes(buf, b"\r\n") {
                        break i;
                    }
                    if !fill(rd, buf).await {
                        return None;
                    }
                };
                buf.drain(..end + 2);
                if end == 0 {
                    return Some(body);
                }
            }
        }
        while buf.len() < size + 2 {
            if !fill(rd, buf).await {
                return None;
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn fill(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> bool {
    buf.reserve(8192);
    matches!(rd.read_buf(buf).await, Ok(n) if n > 0)
}
