//! The load generator's client: one HTTP/1.1 connection per stream (or, for the soak, streams
//! sharing HTTP/2 connections), the request each face expects (AG-UI, HAI, AAP delta or
//! message), and the checks and timings of one stream: every marker in order and exactly once,
//! the terminal event, TTFB, TTFE and per-event latency.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::marker;

/// The protocol the client speaks to the system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Face {
    AgUi,
    Hai,
    AapDelta,
    AapMessage,
}

impl Face {
    fn is_aap(self) -> bool {
        matches!(self, Face::AapDelta | Face::AapMessage)
    }

    /// Whether an event ends the stream well.
    fn is_terminal(self, event: &[u8]) -> bool {
        if self.is_aap() {
            event.starts_with(b"event: turn_stop") && contains(event, b"end_turn")
        } else {
            contains(event, b"\"RUN_FINISHED\"")
        }
    }

    /// Whether an event ends the stream badly.
    fn is_failure(self, event: &[u8]) -> bool {
        if self.is_aap() {
            event.starts_with(b"event: turn_stop") && !contains(event, b"end_turn")
        } else {
            contains(event, b"\"RUN_ERROR\"")
        }
    }
}

/// Where and how to open streams.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    pub face: Face,
}

/// Counters shared by many streams that are held open (memory scenarios).
#[derive(Default)]
pub struct Progress {
    /// Streams whose first event arrived.
    pub opened: AtomicUsize,
    /// Streams that received a heartbeat after their first event.
    pub heartbeat: AtomicUsize,
    /// Streams that received a content event.
    pub flowing: AtomicUsize,
    /// Streams that failed before their end.
    pub failed: AtomicUsize,
}

/// What one stream saw.
#[derive(Debug, Default)]
pub struct Outcome {
    pub error: Option<String>,
    /// Content markers received in order (each counts one content event of the mock).
    pub markers: u64,
    /// Receive − send of the last marker, one per received event with markers.
    pub latencies_ns: Vec<u64>,
    /// Send time (epoch ns) of the marker each of `latencies_ns` was taken from.
    pub sent_at_ns: Vec<u64>,
    /// This stream's opening, epoch ns: from its first request's send (an AAP session's, else
    /// the run's) to the upstream having the run (the first content event's `q=` stamp). The
    /// process in the middle opens the stream in between; an event of another stream that
    /// reached it then may wait for that work.
    pub opening: Option<(u64, u64)>,
    pub ttfb_ns: u64,
    pub ttfe_ns: Option<u64>,
    /// The hop's share of the time to first event: request sent → the mock had it, plus the
    /// first content event's send → receive; the mock's own wait left out (`marker`).
    pub ttfe_hop_ns: Option<u64>,
    pub session_ns: Option<u64>,
    /// Receive time (epoch ns) of the first event of any kind and of the first with a marker.
    pub first_event_at: Option<u64>,
    pub first_marker_at: Option<u64>,
    /// Send time (epoch ns) of the last marker.
    pub last_sent: u64,
    pub heartbeats: u64,
    /// The first bytes of the body, for qualification.
    pub head: Vec<u8>,
    pub status: u16,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

const HEAD_BYTES: usize = 4096;

/// A connection a stream's requests go on.
pub enum Conn {
    /// HTTP/1.1: one connection per stream.
    H1(http1::SendRequest<Full<Bytes>>),
    /// HTTP/2 with prior knowledge: a handle on a connection many streams share.
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    async fn send(
        &mut self,
        host: &str,
        request: hyper::http::request::Builder,
        path: &str,
        body: Full<Bytes>,
    ) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        match self {
            Conn::H1(sender) => {
                let request = request.uri(path).header("host", host).body(body)?;
                sender.ready().await?;
                Ok(sender.send_request(request).await?)
            }
            Conn::H2(sender) => {
                // HTTP/2 carries the authority in the URI, not in a Host header.
                let request = request.uri(format!("http://{host}{path}")).body(body)?;
                sender.ready().await?;
                Ok(sender.send_request(request).await?)
            }
        }
    }
}

/// Opens one stream on a connection of its own, reads it to its end and checks `expected`
/// markers arrived.
pub async fn stream(target: Target, expected: u64, progress: Option<&Progress>) -> Outcome {
    let mut outcome = Outcome::default();
    let result = match connect(target.addr).await {
        Ok(sender) => run(Conn::H1(sender), target, expected, progress, &mut outcome).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        outcome.error = Some(format!("{e:#}"));
        if let Some(p) = progress {
            p.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    outcome
}

/// Like [`stream`], on a shared HTTP/2 connection.
pub async fn stream_h2(
    sender: http2::SendRequest<Full<Bytes>>,
    target: Target,
    expected: u64,
) -> Outcome {
    let mut outcome = Outcome::default();
    if let Err(e) = run(Conn::H2(sender), target, expected, None, &mut outcome).await {
        outcome.error = Some(format!("{e:#}"));
    }
    outcome
}

async fn run(
    mut sender: Conn,
    target: Target,
    expected: u64,
    progress: Option<&Progress>,
    out: &mut Outcome,
) -> anyhow::Result<()> {
    let host = target.addr.to_string();
    // An AAP stream opens with its session: that request is part of the opening.
    let began_ns = marker::now_ns();
    let path = if target.face.is_aap() {
        let started = Instant::now();
        let created = post(
            &mut sender,
            &host,
            "/sessions",
            r#"{"agent":{"name":"bench"}}"#,
        )
        .await
        .context("create session")?;
        out.session_ns = Some(started.elapsed().as_nanos() as u64);
        let (status, body) = read_all(created).await?;
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let id = json["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow!("session: {status} {}", String::from_utf8_lossy(&body)))?;
        format!("/sessions/{id}/turns")
    } else {
        "/".to_string()
    };
    let body = request_body(target.face);
    let sent = Instant::now();
    let sent_ns = marker::now_ns();
    let response = post(&mut sender, &host, &path, body)
        .await
        .context("send")?;
    out.ttfb_ns = sent.elapsed().as_nanos() as u64;
    out.status = response.status().as_u16();
    if !response.status().is_success() {
        let (status, body) = read_all(response).await?;
        bail!("status {status}: {}", String::from_utf8_lossy(&body));
    }
    let mut body = response.into_body();
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut next_seq = 0u64;
    let mut ended = false;
    let mut opened = false;
    let mut flowing = false;
    let mut beat = false;
    while let Some(frame) = body.frame().await {
        let frame = frame.context("body")?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let at = marker::now_ns();
        if out.head.len() < HEAD_BYTES {
            out.head
                .extend_from_slice(&data[..data.len().min(HEAD_BYTES)]);
        }
        buf.extend_from_slice(&data);
        let mut start = 0;
        while let Some(end) = memchr::memmem::find(&buf[start..], b"\n\n") {
            let event = &buf[start..start + end];
            start += end + 2;
            if event.starts_with(b":") {
                out.heartbeats += 1;
                if opened && !beat {
                    beat = true;
                    if let Some(p) = progress {
                        p.heartbeat.fetch_add(1, Ordering::Relaxed);
                    }
                }
                continue;
            }
            if ended {
                bail!("event after the terminal event");
            }
            if !opened {
                opened = true;
                out.first_event_at = Some(at);
                if let Some(p) = progress {
                    p.opened.fetch_add(1, Ordering::Relaxed);
                }
            }
            let mut last = None;
            let mut bad = None;
            let mut first_hop = None;
            marker::scan(event, |m| {
                if let (0, Some(request_ns)) = (m.seq, m.request_ns) {
                    first_hop =
                        Some(request_ns.saturating_sub(sent_ns) + at.saturating_sub(m.sent_ns));
                    out.opening = Some((began_ns, request_ns));
                }
                if m.seq != next_seq % 1_000_000 && bad.is_none() {
                    bad = Some((m.seq, next_seq));
                }
                next_seq += 1;
                last = Some(m.sent_ns);
            });
            if let Some((got, want)) = bad {
                bail!("marker {got} where {want} was due");
            }
            if let Some(sent_ns) = last {
                out.latencies_ns.push(at.saturating_sub(sent_ns));
                out.sent_at_ns.push(sent_ns);
                out.last_sent = sent_ns;
                if out.first_marker_at.is_none() {
                    out.first_marker_at = Some(at);
                    out.ttfe_ns = Some(sent.elapsed().as_nanos() as u64);
                    out.ttfe_hop_ns = first_hop;
                }
                if !flowing {
                    flowing = true;
                    if let Some(p) = progress {
                        p.flowing.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if target.face.is_failure(event) {
                bail!("failed: {}", String::from_utf8_lossy(event));
            }
            if target.face.is_terminal(event) {
                ended = true;
            }
        }
        buf.drain(..start);
        out.markers = next_seq;
    }
    out.markers = next_seq;
    if !ended {
        bail!("no terminal event after {next_seq} markers");
    }
    if next_seq != expected {
        bail!("{next_seq} markers, {expected} expected");
    }
    if let Some(id) = path.strip_suffix("/turns") {
        // Frees the session so long runs stay under the store's limit.
        let _ = sender
            .send(&host, Request::delete(id), id, Full::new(Bytes::new()))
            .await;
    }
    Ok(())
}

/// The request body each face sends.
fn request_body(face: Face) -> &'static str {
    match face {
        Face::AgUi => concat!(
            r#"{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}],"#,
            r#""tools":[],"context":[],"state":{},"forwardedProps":{}}"#
        ),
        Face::Hai => concat!(
            r#"{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi","#,
            r#""timestamp":1760000000000}],"context":[],"tools":[]}"#
        ),
        Face::AapDelta => r#"{"stream":"delta","messages":[{"role":"user","content":"hi"}]}"#,
        Face::AapMessage => r#"{"stream":"message","messages":[{"role":"user","content":"hi"}]}"#,
    }
}

/// One HTTP/1.1 connection; its driver runs on the current runtime.
pub async fn connect(addr: SocketAddr) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .context("handshake")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One HTTP/2 connection with prior knowledge (h2c); its driver runs on the current runtime.
pub async fn connect_h2(addr: SocketAddr) -> anyhow::Result<http2::SendRequest<Full<Bytes>>> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .context("HTTP/2 handshake")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

async fn post(
    sender: &mut Conn,
    host: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    let body = Full::new(Bytes::copy_from_slice(body.as_bytes()));
    sender.send(host, request, path, body).await
}

async fn read_all(
    response: hyper::Response<hyper::body::Incoming>,
) -> anyhow::Result<(u16, Bytes)> {
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// `GET path` as JSON, on a fresh connection.
pub async fn get_json(addr: SocketAddr, path: &str) -> anyhow::Result<serde_json::Value> {
    let mut sender = connect(addr).await?;
    let request = Request::get(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()))?;
    let response = tokio::time::timeout(Duration::from_secs(5), sender.send_request(request))
        .await
        .context("timeout")??;
    let (_, body) = read_all(response).await?;
    serde_json::from_slice(&body).context("json")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}
