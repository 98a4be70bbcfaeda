//! The mock upstream: an AG-UI agent over HTTP/1.1, scripted from its command line, run as its
//! own process (the bench executable re-executed with the `mock` subcommand).
//!
//! Every POST answers one run as an SSE stream: `RUN_STARTED` (ids echoed from the request),
//! `TEXT_MESSAGE_START`, N `TEXT_MESSAGE_CONTENT` events whose text delta carries a send
//! timestamp and a sequence number (`t=<ns>;s=<seq>;`), `TEXT_MESSAGE_END`, `RUN_FINISHED`.
//! The body generates its frames when hyper polls it, so a slow reader slows the mock down
//! instead of filling a queue. `GET /stats` answers how many bytes and events it produced.
//! Paced content events follow each run's own jittered schedule on a precise timer
//! ([`crate::pacer`]) rather than tokio's millisecond ticks.
//!
//! Three shapes of body: `event` chunking makes every SSE event its own HTTP chunk, as the
//! Python and TypeScript AG-UI SDKs do (hyper still gathers the chunks that are ready together
//! into one vectored write); `write` also hands each chunk to the socket on its own while the
//! reader keeps up, as an SDK's server does; `batch` packs as many events as fit in 16 KiB into
//! one chunk. `--extra-field` adds a
//! member no reader knows (`"ts":<unix ns>`) to every event, as some SDK-based agents do.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::time::{Instant, Sleep};

use crate::marker;
use crate::pacer::{Precise, Schedule};

/// Paces below this keep their events on a precise, jittered schedule (`pacer`); slower ones
/// (the memory scenario's 500 ms, thousands of streams) keep tokio's timer, as a descriptor per
/// stream would double the mock's, and what they measure does not depend on when events meet.
const PRECISE_BELOW: Duration = Duration::from_millis(100);

/// Runs started, to seed each run's jitter differently.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// How the mock answers.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// N content events, paced or as fast as the reader takes them.
    Normal,
    /// The opening events, then silence on an open stream.
    Hold,
    /// Content events as fast as the reader takes them until `flood_bytes` were produced.
    Flood,
}

/// How the mock cuts its body into HTTP chunks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// One SSE event per HTTP chunk; chunks ready together leave in one vectored write.
    Event,
    /// One SSE event per HTTP chunk, each handed to the socket on its own while it takes them.
    Write,
    /// Unpaced content events packed into chunks of up to 16 KiB (paced ones stay one per
    /// chunk).
    Batch,
}

impl Chunking {
    pub fn name(self) -> &'static str {
        match self {
            Chunking::Event => "event",
            Chunking::Write => "write",
            Chunking::Batch => "batch",
        }
    }
}

/// The script of every run the mock answers.
#[derive(clap::Args, Clone, Debug)]
pub struct Script {
    /// Delay before the first event, in milliseconds.
    #[arg(long, default_value_t = 25)]
    pub delay_ms: u64,
    /// Content events per run.
    #[arg(long, default_value_t = 100)]
    pub events: u64,
    /// Time between content events in microseconds; 0 = as fast as possible, many per frame.
    #[arg(long, default_value_t = 10_000)]
    pub pace_us: u64,
    /// Size of each text delta in bytes.
    #[arg(long, default_value_t = marker::DELTA_BYTES)]
    pub delta_bytes: usize,
    #[arg(long, value_enum, default_value = "normal")]
    pub mode: Mode,
    /// Bytes of content a flood run produces.
    #[arg(long, default_value_t = 50_000_000)]
    pub flood_bytes: u64,
    /// One event per HTTP chunk, or many.
    #[arg(long, value_enum, default_value = "event")]
    pub chunking: Chunking,
    /// Adds `"ts":<unix ns>`, a member the gateway does not know, to every event.
    #[arg(long)]
    pub extra_field: bool,
}

impl Script {
    /// The command-line arguments that reproduce this script.
    pub fn to_args(&self) -> Vec<String> {
        let mode = match self.mode {
            Mode::Normal => "normal",
            Mode::Hold => "hold",
            Mode::Flood => "flood",
        };
        [
            ("--delay-ms", self.delay_ms.to_string()),
            ("--events", self.events.to_string()),
            ("--pace-us", self.pace_us.to_string()),
            ("--delta-bytes", self.delta_bytes.to_string()),
            ("--mode", mode.to_string()),
            ("--flood-bytes", self.flood_bytes.to_string()),
            ("--chunking", self.chunking.name().to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .chain(self.extra_field.then(|| "--extra-field".to_string()))
        .collect()
    }

    /// A normal run of `events` content events `pace` apart after `delay_ms`, one per chunk.
    pub fn paced(delay_ms: u64, events: u64, pace: Duration) -> Script {
        Script {
            delay_ms,
            events,
            pace_us: pace.as_micros() as u64,
            delta_bytes: marker::DELTA_BYTES,
            mode: Mode::Normal,
            flood_bytes: 0,
            chunking: Chunking::Event,
            extra_field: false,
        }
    }

    /// The script of an unpaced single run of `events` content events with `delta_bytes`
    /// deltas, in this chunking.
    pub fn unpaced(events: u64, delta_bytes: usize, chunking: Chunking) -> Script {
        Script {
            delay_ms: 0,
            events,
            pace_us: 0,
            delta_bytes,
            mode: Mode::Normal,
            flood_bytes: 0,
            chunking,
            extra_field: false,
        }
    }
}

/// What the mock produced since it started.
#[derive(Default)]
struct Stats {
    bytes: AtomicU64,
    events: AtomicU64,
}

/// Largest body frame the unpaced modes write.
const FRAME_BYTES: usize = 16 * 1024;
/// How long a held stream stays silent.
const HOLD: Duration = Duration::from_secs(3600);

/// Entry point of the `mock` subcommand: serves until killed.
pub fn main(script: Script) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("mock runtime")?;
    runtime.block_on(serve(script))
}

async fn serve(script: Script) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("mock bind")?;
    let addr = listener.local_addr()?;
    println!("mock listening on http://{addr}");
    let script = Arc::new(script);
    let stats = Arc::new(Stats::default());
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                eprintln!("mock accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let script = script.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let script = script.clone();
                let stats = stats.clone();
                async move { Ok::<_, Infallible>(answer(req, script, stats).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    req: Request<Incoming>,
    script: Arc<Script>,
    stats: Arc<Stats>,
) -> Response<MockBody> {
    if req.method() == hyper::Method::GET && req.uri().path() == "/stats" {
        let json = serde_json::json!({
            "bytes": stats.bytes.load(Ordering::Relaxed),
            "events": stats.events.load(Ordering::Relaxed),
        });
        return Response::builder()
            .header("content-type", "application/json")
            .body(MockBody::Fixed(Some(Bytes::from(json.to_string()))))
            .unwrap_or_default();
    }
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let input: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = |key: &str, default: &str| {
        input
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or(default)
            .to_string()
    };
    let received_ns = marker::now_ns();
    let run = Run::new(
        script,
        stats,
        id("threadId", "thread"),
        id("runId", "run"),
        received_ns,
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(MockBody::Run(Box::new(run)))
        .unwrap_or_default()
}

/// A response body: a fixed document or one scripted run.
pub enum MockBody {
    Fixed(Option<Bytes>),
    Run(Box<Run>),
}

impl Default for MockBody {
    fn default() -> Self {
        MockBody::Fixed(None)
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            MockBody::Fixed(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Run(run) => run.poll_next(cx).map(|f| f.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            MockBody::Fixed(bytes) => bytes.is_none(),
            MockBody::Run(run) => run.phase == Phase::Done && run.pending.is_empty(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Opening,
    Content,
    Holding,
    Closing,
    Done,
}

/// One scripted run, generated frame by frame as hyper asks for it.
pub struct Run {
    script: Arc<Script>,
    stats: Arc<Stats>,
    thread_id: String,
    run_id: String,
    /// When the whole request was in (epoch ns): stamped into the first content event.
    received_ns: u64,
    phase: Phase,
    timer: Pin<Box<Sleep>>,
    /// The precise timer and the schedule of a run paced below [`PRECISE_BELOW`].
    paced: Option<(Precise, Schedule)>,
    next_seq: u64,
    content_bytes: u64,
    /// Frames made but not yet handed to hyper (the opening and closing events, one chunk
    /// each under `event` chunking).
    pending: VecDeque<Bytes>,
    /// Under unpaced `write` chunking, whether this poll already gave way once (see
    /// [`Run::poll_next`]).
    gave_way: bool,
}

impl Run {
    fn new(
        script: Arc<Script>,
        stats: Arc<Stats>,
        thread_id: String,
        run_id: String,
        received_ns: u64,
    ) -> Run {
        let start = Instant::now() + Duration::from_millis(script.delay_ms);
        Run {
            script,
            stats,
            thread_id,
            run_id,
            received_ns,
            phase: Phase::Opening,
            timer: Box::pin(tokio::time::sleep_until(start)),
            paced: None,
            next_seq: 0,
            content_bytes: 0,
            pending: VecDeque::new(),
            gave_way: false,
        }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(frame) = self.pending.pop_front() {
            return Poll::Ready(Some(frame));
        }
        let frame = match self.phase {
            Phase::Opening => {
                if self.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let mut out = BytesMut::new();
                let started = serde_json::json!({
                    "type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
                });
                self.event(&mut out, &started.to_string());
                self.event(
                    &mut out,
                    r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#,
                );
                let now = Instant::now();
                self.phase = match self.script.mode {
                    Mode::Hold => {
                        self.timer.as_mut().reset(now + HOLD);
                        Phase::Holding
                    }
                    _ => {
                        let pace = self.pace();
                        if !pace.is_zero() && pace < PRECISE_BELOW {
                            let seed = RUNS.fetch_add(1, Ordering::Relaxed);
                            let mut schedule = Schedule::new(now, pace, seed);
                            // Without a timerfd (out of descriptors), tokio's timer paces.
                            self.paced = Precise::new()
                                .and_then(|mut timer| {
                                    timer.arm(schedule.next_at())?;
                                    Ok((timer, schedule))
                                })
                                .ok();
                        }
                        self.timer.as_mut().reset(now + pace);
                        Phase::Content
                    }
                };
                out
            }
            Phase::Holding => {
                if self.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.phase = Phase::Closing;
                return self.poll_next(cx);
            }
            Phase::Content => {
                let pace = self.pace();
                let batch = pace.is_zero() && self.script.chunking == Chunking::Batch;
                if let Some((timer, schedule)) = self.paced.as_mut() {
                    match timer.poll_fired(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => {
                            eprintln!("mock timer: {e}");
                            self.paced = None;
                        }
                        Poll::Ready(Ok(())) => {
                            if let Err(e) = timer.arm(schedule.next_at()) {
                                eprintln!("mock timer: {e}");
                                self.paced = None;
                            }
                        }
                    }
                } else if !pace.is_zero() {
                    if self.timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let next = self.timer.deadline() + pace;
                    self.timer.as_mut().reset(next);
                } else if self.script.chunking == Chunking::Write && !self.gave_way {
                    // hyper keeps polling a body that is always ready and gathers its chunks
                    // into one vectored write. An SDK's server hands each event to the socket
                    // as it is yielded instead: giving way once per event makes hyper flush
                    // each chunk on its own while the reader keeps up, and still lets chunks
                    // queue behind a full socket, as an SDK server's transport buffer does.
                    self.gave_way = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                self.gave_way = false;
                let mut out = BytesMut::with_capacity(if batch { FRAME_BYTES + 256 } else { 256 });
                loop {
                    self.content(&mut out);
                    if self.content_done() {
                        self.phase = Phase::Closing;
                        break;
                    }
                    if !batch || out.len() + 300 > FRAME_BYTES {
                        break;
                    }
                }
                out
            }
            Phase::Closing => {
                let mut out = BytesMut::new();
                self.event(&mut out, r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#);
                let finished = serde_json::json!({
                    "type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id,
                });
                self.event(&mut out, &finished.to_string());
                self.phase = Phase::Done;
                out
            }
            Phase::Done => return Poll::Ready(None),
        };
        self.stats
            .bytes
            .fetch_add(frame.len() as u64, Ordering::Relaxed);
        let mut frame = frame.freeze();
        if self.script.chunking != Chunking::Batch {
            // One chunk per event: the opening and closing pairs leave one at a time.
            while let Some(end) = memchr::memmem::find(&frame, b"\n\n") {
                if end + 2 == frame.len() {
                    break;
                }
                self.pending.push_back(frame.split_to(end + 2));
            }
            if !self.pending.is_empty() {
                self.pending.push_back(frame);
                return Poll::Ready(self.pending.pop_front());
            }
        }
        Poll::Ready(Some(frame))
    }

    fn pace(&self) -> Duration {
        match self.script.mode {
            Mode::Flood => Duration::ZERO,
            _ => Duration::from_micros(self.script.pace_us),
        }
    }

    fn content_done(&self) -> bool {
        match self.script.mode {
            Mode::Flood => self.content_bytes >= self.script.flood_bytes,
            _ => self.next_seq >= self.script.events,
        }
    }

    /// Appends one content event, stamped now.
    fn content(&mut self, out: &mut BytesMut) {
        let before = out.len();
        let now = marker::now_ns();
        let request = (self.next_seq == 0).then_some(self.received_ns);
        let delta = marker::delta(now, self.next_seq, self.script.delta_bytes, request);
        out.put_slice(br#"data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""#);
        out.put_slice(delta.as_bytes());
        out.put_slice(b"\"");
        if self.script.extra_field {
            out.put_slice(format!(r#","ts":{now}"#).as_bytes());
        }
        out.put_slice(b"}\n\n");
        self.next_seq += 1;
        self.content_bytes += (out.len() - before) as u64;
        self.stats.events.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends one event whose data is the JSON object `json`, with the extra member if the
    /// script asks for it.
    fn event(&self, out: &mut BytesMut, json: &str) {
        out.put_slice(b"data: ");
        match json.strip_suffix('}').filter(|_| self.script.extra_field) {
            Some(open) => {
                out.put_slice(open.as_bytes());
                out.put_slice(format!(r#","ts":{}}}"#, marker::now_ns()).as_bytes());
            }
            None => out.put_slice(json.as_bytes()),
        }
        out.put_slice(b"\n\n");
    }
}
