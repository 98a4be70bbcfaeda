//! `TranslatingBody` driven by a scripted upstream body under paused time: no test waits on a
//! real clock, and a missing waker shows up as a hang the paused runtime reports.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::time::Sleep;

use super::*;
use crate::dialect::Dialect;
use crate::event::RunIds;
use crate::pipeline::PipelineSpec;

enum Step {
    Data(&'static str),
    Owned(String),
    Wait(Duration),
    Fail,
}

/// An upstream body that follows a script, then ends (or stays silent forever with `silent`).
struct ScriptBody {
    steps: VecDeque<Step>,
    sleep: Option<Pin<Box<Sleep>>>,
    silent_at_end: bool,
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.steps.pop_front() {
                Some(Step::Data(s)) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(s))))),
                Some(Step::Owned(s)) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(s))))),
                Some(Step::Wait(d)) => self.sleep = Some(Box::pin(tokio::time::sleep(d))),
                Some(Step::Fail) => return Poll::Ready(Some(Err("connection reset".into()))),
                None if self.silent_at_end => return Poll::Pending,
                None => return Poll::Ready(None),
            }
        }
    }
}

/// A translating body over `upstream` (idle 30 s, heartbeat 10 s) that drains when `drain` fires.
fn translating<B>(upstream: B, drain: DrainSignal) -> TranslatingBody
where
    B: Body<Data = Bytes, Error = Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    translating_within(upstream, drain, None, None)
}

/// [`translating`] with a run bounded by `max_duration` and `max_bytes`.
fn translating_within<B>(
    upstream: B,
    drain: DrainSignal,
    max_duration: Option<Duration>,
    max_bytes: Option<u64>,
) -> TranslatingBody
where
    B: Body<Data = Bytes, Error = Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let ids = RunIds {
        thread_id: "t".into(),
        run_id: "r".into(),
    };
    let pipeline = Pipeline::new(PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids)).unwrap();
    let timers = StreamLimits {
        idle_timeout: Duration::from_secs(30),
        heartbeat_interval: Duration::from_secs(10),
        max_duration,
        max_bytes,
    };
    let record = crate::telemetry::metrics::Metrics::new().stream_started("/");
    let parts = StreamParts {
        timers,
        drain,
        span: tracing::Span::none(),
        record,
    };
    TranslatingBody::new(Source::Body(upstream.boxed_unsync()), pipeline, (), parts)
}

/// The signal of a drain deadline reached `after` from now (by a task of its own).
fn reached_after(after: Duration) -> DrainSignal {
    let deadline = super::super::drain_deadline::DrainDeadline::new();
    let signal = deadline.signal();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        deadline.reach();
    });
    signal
}

fn scripted(steps: Vec<Step>, silent_at_end: bool) -> ScriptBody {
    ScriptBody {
        steps: steps.into(),
        sleep: None,
        silent_at_end,
    }
}

fn body(steps: Vec<Step>, silent_at_end: bool) -> TranslatingBody {
    translating(scripted(steps, silent_at_end), DrainSignal::never())
}

/// Every frame as text, in order.
async fn frames(mut body: TranslatingBody) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame;
        let data = frame.into_data().expect("data frames only");
        assert!(!data.is_empty(), "never an empty frame");
        out.push(String::from_utf8(data.to_vec()).unwrap());
    }
    assert!(body.is_end_stream());
    assert!(body.frame().await.is_none(), "None forever after the end");
    out
}

fn types(frames: &[String]) -> Vec<String> {
    frames
        .iter()
        .flat_map(|f| f.split_terminator("\n\n"))
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|json| {
            serde_json::from_str::<serde_json::Value>(json).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

const STARTED: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
const FINISHED: &str = "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

#[tokio::test(start_paused = true)]
async fn opens_with_a_comment_then_what_is_ready_leaves_together() {
    let out = frames(body(
        vec![
            Step::Data(STARTED),
            Step::Data("data: {\"type\":\"CUSTOM\",\"na"),
            Step::Data("me\":\"x\",\"value\":1}\n\n"),
            Step::Data("data: {\"type\":\"CUSTOM\",\"name\":\"y\","),
            Step::Wait(Duration::from_millis(1)),
            Step::Data("\"value\":2}\n\n"),
            Step::Wait(Duration::from_millis(1)),
            Step::Data(FINISHED),
        ],
        false,
    ))
    .await;
    assert_eq!(out[0], ": ok\n\n");
    // Four ready upstream frames leave as one; the event cut by the pause waits for its end,
    // which does not wait for the next read.
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(types(&out[1..2]), ["RUN_STARTED", "CUSTOM"]);
    assert_eq!(types(&out[2..3]), ["CUSTOM"]);
    assert_eq!(types(&out[3..]), ["RUN_FINISHED"]);
}

#[tokio::test(start_paused = true)]
async fn ready_output_leaves_in_frames_of_about_the_budget() {
    const DELTAS: usize = 2_000;
    let mut steps = vec![
        Step::Data(STARTED),
        Step::Data("data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n"),
    ];
    for i in 0..DELTAS {
        steps.push(Step::Owned(format!(
            "data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"{i:>40}\"}}\n\n"
        )));
    }
    steps.push(Step::Data(
        "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
    ));
    steps.push(Step::Data(FINISHED));
    let out = frames(body(steps, false)).await;
    let bytes: usize = out.iter().map(String::len).sum();
    let content = types(&out)
        .iter()
        .filter(|t| *t == "TEXT_MESSAGE_CONTENT")
        .count();
    assert_eq!(content, DELTAS);
    // Each frame is full but for the last: the budget, at most one event over.
    for frame in &out[1..out.len() - 1] {
        assert!(
            (OUT_BUDGET..OUT_BUDGET + 200).contains(&frame.len()),
            "{}",
            frame.len()
        );
    }
    assert!(
        out.len() - 1 <= bytes / OUT_BUDGET + 1,
        "{} frames",
        out.len()
    );
}

#[tokio::test(start_paused = true)]
async fn heartbeats_during_upstream_silence_then_the_stream_goes_on() {
    let out = frames(body(
        vec![
            Step::Data(STARTED),
            Step::Wait(Duration::from_secs(25)),
            Step::Data(FINISHED),
        ],
        false,
    ))
    .await;
    let pings = out.iter().filter(|f| *f == ": ping\n\n").count();
    assert_eq!(pings, 2, "one ping per 10 s of silence: {out:?}");
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_FINISHED"]);
}

#[tokio::test(start_paused = true)]
async fn idle_upstream_ends_with_a_terminal_error() {
    let out = frames(body(vec![Step::Data(STARTED)], true)).await;
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(out.last().unwrap().contains("UPSTREAM_IDLE_TIMEOUT"));
}

#[tokio::test(start_paused = true)]
async fn upstream_comments_keep_the_idle_timer_alive() {
    let mut steps = vec![Step::Data(STARTED)];
    for _ in 0..5 {
        steps.push(Step::Wait(Duration::from_secs(20)));
        steps.push(Step::Data(": keepalive\n\n"));
    }
    steps.push(Step::Data(FINISHED));
    let out = frames(body(steps, false)).await;
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "RUN_FINISHED"],
        "100 s of comments, no idle timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn an_upstream_error_or_end_without_terminal_is_a_run_error() {
    let out = frames(body(vec![Step::Data(STARTED), Step::Fail], false)).await;
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(out.last().unwrap().contains("UPSTREAM_TRUNCATED"));
    let out = frames(body(vec![Step::Data(STARTED)], false)).await;
    assert!(out
        .last()
        .unwrap()
        .contains("upstream stream ended without a terminal event"));
}

#[tokio::test(start_paused = true)]
async fn a_second_run_follows_the_first_and_a_lingering_upstream_ends_cleanly() {
    let out = frames(body(
        vec![
            Step::Data(STARTED),
            Step::Data(FINISHED),
            Step::Data(STARTED),
            Step::Data(FINISHED),
        ],
        true,
    ))
    .await;
    // The upstream stays silent after its second run: the idle timeout ends the stream
    // without an error, since no run is open.
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "RUN_FINISHED", "RUN_STARTED", "RUN_FINISHED"]
    );
}

#[tokio::test(start_paused = true)]
async fn after_an_error_nothing_but_a_new_run_is_sent() {
    let out = frames(body(
        vec![
            Step::Data(STARTED),
            Step::Data("data: {\"type\":\"RUN_ERROR\",\"message\":\"boom\"}\n\n"),
            Step::Data(FINISHED),
        ],
        false,
    ))
    .await;
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
}

#[tokio::test(start_paused = true)]
async fn the_drain_deadline_ends_the_stream_with_gateway_shutdown() {
    let body = translating(
        scripted(vec![Step::Data(STARTED)], true),
        reached_after(Duration::from_secs(25)),
    );
    let out = frames(body).await;
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(out.last().unwrap().contains("GATEWAY_SHUTDOWN"));
}

/// An upstream that always has a frame ready: comments forever, or events forever.
struct Flood {
    frame: &'static str,
}

impl Body for Flood {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            self.frame.as_bytes(),
        )))))
    }
}

fn flood_body(frame: &'static str, drain: DrainSignal) -> TranslatingBody {
    translating(Flood { frame }, drain)
}

/// Reads `body` to its end, moving the paused clock on by `step` every `every` frames; its last
/// frame. Panics when 100,000 frames pass without an end.
async fn last_frame_advancing(mut body: TranslatingBody, every: usize, step: Duration) -> String {
    let mut frames = 0;
    let mut last = String::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame;
        last = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
        frames += 1;
        if frames % every == 0 {
            tokio::time::advance(step).await;
        }
        assert!(frames < 100_000, "the stream never ended: {last}");
    }
    last
}

#[tokio::test(start_paused = true)]
async fn the_drain_deadline_is_seen_even_when_the_upstream_always_has_data() {
    let event = "data: {\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":1}\n\n";
    let body = flood_body(event, reached_after(Duration::from_secs(1)));
    let last = last_frame_advancing(body, 1000, Duration::from_millis(400)).await;
    assert!(last.contains("GATEWAY_SHUTDOWN"), "{last}");
}

#[tokio::test(start_paused = true)]
async fn a_run_past_max_stream_duration_ends_even_when_the_upstream_always_has_data() {
    let event = "data: {\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":1}\n\n";
    let started = Instant::now();
    let body = translating_within(
        Flood { frame: event },
        DrainSignal::never(),
        Some(Duration::from_secs(2)),
        None,
    );
    let last = last_frame_advancing(body, 100, Duration::from_millis(100)).await;
    assert!(last.contains("STREAM_DURATION_EXCEEDED"), "{last}");
    assert!(last.contains("max_stream_duration"), "{last}");
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_secs(2) && lasted <= Duration::from_millis(2100),
        "ended after {lasted:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_run_ends_at_max_stream_duration_not_at_its_idle_timeout() {
    let started = Instant::now();
    let body = translating_within(
        scripted(vec![Step::Data(STARTED)], true),
        DrainSignal::never(),
        Some(Duration::from_secs(5)),
        None,
    );
    let out = frames(body).await;
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(out.last().unwrap().contains("STREAM_DURATION_EXCEEDED"));
    // Heartbeats went on until then (one per 10 s of silence: none in 5 s).
    assert!(!out.iter().any(|f| f == ": ping\n\n"), "{out:?}");
}

/// Every frame of a stream over `upstream` bounded to `bound` upstream bytes.
async fn frames_within_bytes(upstream: ScriptBody, bound: u64) -> Vec<String> {
    frames(translating_within(
        upstream,
        DrainSignal::never(),
        None,
        Some(bound),
    ))
    .await
}

#[tokio::test(start_paused = true)]
async fn max_stream_bytes_ends_the_run_with_the_events_within_it_translated() {
    let content =
        |i: usize| format!("data: {{\"type\":\"CUSTOM\",\"name\":\"n{i}\",\"value\":{i}}}\n\n");
    let mut steps = vec![Step::Data(STARTED)];
    steps.extend((0..5).map(|i| Step::Owned(content(i))));
    steps.push(Step::Data(FINISHED));
    // Room for the start and exactly two events; the third would pass the bound.
    let bound = (STARTED.len() + content(0).len() + content(1).len()) as u64;
    let out = frames_within_bytes(scripted(steps, false), bound).await;
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_ERROR"],
        "{out:?}"
    );
    let last = out.last().unwrap();
    assert!(last.contains("STREAM_BYTES_EXCEEDED"), "{last}");
    assert!(
        !out.concat().contains("\"n2\""),
        "the third event was not sent"
    );

    // One upstream read that holds the events within the bound and a flood past it.
    let mut read = format!("{STARTED}{}", content(0));
    let bound = (read.len() + 10) as u64;
    read.push_str(&": flood\n\n".repeat(10_000));
    let out = frames_within_bytes(scripted(vec![Step::Owned(read)], true), bound).await;
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "CUSTOM", "RUN_ERROR"],
        "{out:?}"
    );
    assert!(out.last().unwrap().contains("STREAM_BYTES_EXCEEDED"));
}

#[tokio::test(start_paused = true)]
async fn a_run_within_its_bounds_is_untouched() {
    let steps = vec![
        Step::Data(STARTED),
        Step::Wait(Duration::from_secs(3)),
        Step::Data(FINISHED),
    ];
    let bound = (STARTED.len() + FINISHED.len()) as u64;
    let body = translating_within(
        scripted(steps, false),
        DrainSignal::never(),
        Some(Duration::from_secs(4)),
        Some(bound),
    );
    assert_eq!(types(&frames(body).await), ["RUN_STARTED", "RUN_FINISHED"]);
}

#[tokio::test(start_paused = true)]
async fn a_comment_flood_yields_instead_of_spinning() {
    let mut body = flood_body(": noise\n\n", DrainSignal::never());
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(
        matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(Some(_))
        ),
        "`: ok` first"
    );
    // Comments produce nothing to send: the body must give the worker back after its budget.
    assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
}

/// An owner that holds the last frame until `release` fires, and counts its calls.
struct Holding {
    release: Option<tokio::sync::oneshot::Receiver<()>>,
    ended: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The outcome the owner was told last.
    outcome: std::sync::Arc<std::sync::Mutex<Option<Outcome>>>,
}

impl RunOwner<crate::dialect::AnyReader, crate::dialect::AnyWriter> for Holding {
    fn ended(&mut self, _: &mut Pipeline, outcome: Outcome) -> Option<Hold> {
        self.ended.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        *self.outcome.lock().unwrap() = Some(outcome);
        let release = self.release.take()?;
        Some(Box::pin(async move {
            let _ = release.await;
        }))
    }

    fn holds_end(&self) -> bool {
        self.release.is_some()
    }
}

/// A stream's parts without bounds or a drain (idle 30 s, heartbeat 10 s), recorded in `record`.
fn unbounded(record: crate::telemetry::metrics::StreamRecord) -> StreamParts {
    StreamParts {
        timers: StreamLimits {
            idle_timeout: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            max_duration: None,
            max_bytes: None,
        },
        drain: DrainSignal::never(),
        span: tracing::Span::none(),
        record,
    }
}

/// A stream whose owner holds its last frame until the sender fires; the count of the owner's
/// `ended` calls, and the outcome it was told.
type Held = (
    TranslatingBody<crate::dialect::AnyReader, crate::dialect::AnyWriter, Holding>,
    tokio::sync::oneshot::Sender<()>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::Mutex<Option<Outcome>>>,
);

/// An AG-UI → HAI stream on `upstream`, held ([`Held`]). A HAI client takes one run per
/// stream: its terminal is written when the upstream ends or a run fails, the moment the owner
/// is told, so it is the frame the owner holds.
fn held(upstream: ScriptBody, max_event_bytes: usize) -> Held {
    held_by(upstream, max_event_bytes, Dialect::Hai)
}

/// [`held`] for a client speaking `client`.
fn held_by(upstream: ScriptBody, max_event_bytes: usize, client: Dialect) -> Held {
    let ids = RunIds {
        thread_id: "t".into(),
        run_id: "r".into(),
    };
    let mut spec = PipelineSpec::new(Dialect::AgUi, client, ids);
    spec.options.max_event_bytes = max_event_bytes;
    let pipeline = Pipeline::new(spec).unwrap();
    let (release, held) = tokio::sync::oneshot::channel();
    let ended = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let outcome = std::sync::Arc::default();
    let owner = Holding {
        release: Some(held),
        ended: std::sync::Arc::clone(&ended),
        outcome: std::sync::Arc::clone(&outcome),
    };
    let parts = unbounded(crate::telemetry::metrics::Metrics::new().stream_started("/"));
    let body = TranslatingBody::new(
        Source::Body(upstream.boxed_unsync()),
        pipeline,
        owner,
        parts,
    );
    (body, release, ended, outcome)
}

#[tokio::test(start_paused = true)]
async fn the_last_frame_waits_for_what_the_owner_holds_it_for() {
    let upstream = scripted(vec![Step::Data(STARTED), Step::Data(FINISHED)], false);
    let (mut body, release, ended, _) = held(upstream, 1 << 20);
    let opening = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(opening, ": ok\n\n");
    let started = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&started).contains("RUN_STARTED"));
    // The run is over (the owner was told) but its last frame waits.
    let pending = tokio::time::timeout(Duration::from_secs(60), body.frame()).await;
    assert!(
        pending.is_err(),
        "the last frame left before the owner let it"
    );
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(!body.is_end_stream());
    release.send(()).unwrap();
    let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&last).contains("RUN_FINISHED"));
    assert!(body.frame().await.is_none());
    assert!(body.is_end_stream());
    drop(body);
    assert_eq!(
        ended.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "told once"
    );
}

/// One upstream read after `RUN_STARTED`: a message, then an event past the 512-byte
/// `max_event_bytes` [`held`] is given, which ends the run.
fn message_then_oversize() -> ScriptBody {
    let oversize = format!(
        "data: {{\"type\":\"CUSTOM\",\"name\":\"big\",\"value\":\"{}\"}}\n\n",
        "x".repeat(600)
    );
    let read = format!(
        "{}{}{}{oversize}",
        "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"early words\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n",
    );
    scripted(
        vec![
            Step::Data(STARTED),
            Step::Wait(Duration::from_millis(5)),
            Step::Owned(read),
        ],
        true,
    )
}

/// The frames up to the run's end that need not wait: the opening, `RUN_STARTED`, then the
/// message of [`message_then_oversize`] (or [`finished_then_lingering`]) in two frames, as the
/// read wrote it: its start and content first, then its end, stepped once they had left.
async fn until_early<O: RunOwner<crate::dialect::AnyReader, crate::dialect::AnyWriter>>(
    body: &mut TranslatingBody<crate::dialect::AnyReader, crate::dialect::AnyWriter, O>,
) -> [String; 2] {
    let opening = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(opening, ": ok\n\n");
    let started = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&started).contains("RUN_STARTED"));
    let content = early(body).await;
    let end = early(body).await;
    assert!(content.contains("early words"), "{content}");
    assert!(!end.contains("early words"), "{end}");
    [content, end]
}

/// The body's next frame, which must not wait for the run's end.
async fn early<O: RunOwner<crate::dialect::AnyReader, crate::dialect::AnyWriter>>(
    body: &mut TranslatingBody<crate::dialect::AnyReader, crate::dialect::AnyWriter, O>,
) -> String {
    let frame = tokio::time::timeout(Duration::from_secs(60), body.frame())
        .await
        .expect("the message waited with the run's end")
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    String::from_utf8_lossy(&frame).into_owned()
}

#[tokio::test(start_paused = true)]
async fn events_read_beside_the_end_of_the_run_do_not_wait_for_the_owner() {
    // The message and the oversize event come in one upstream read: the run ends at the
    // oversize event, and only what that step wrote (the run's error) waits for the owner.
    let (mut body, release, ended, _) = held(message_then_oversize(), 512);
    let [content, end] = until_early(&mut body).await;
    assert_eq!(
        types(std::slice::from_ref(&content)),
        ["BUSINESS_DATA_START", "BUSINESS_DATA_CONTENT"],
        "{content}"
    );
    assert_eq!(
        types(std::slice::from_ref(&end)),
        ["BUSINESS_DATA_END"],
        "{end}"
    );
    // The owner is told once those frames have gone: telling it first could let its task run
    // before the frame is written.
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 0);
    let pending = tokio::time::timeout(Duration::from_secs(60), body.frame()).await;
    assert!(
        pending.is_err(),
        "the last frame left before the owner let it"
    );
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 1);
    release.send(()).unwrap();
    let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let last = String::from_utf8_lossy(&last);
    assert!(last.contains("RUN_ERROR"), "{last}");
    assert!(last.contains("UPSTREAM_EVENT_TOO_LARGE"), "{last}");
    assert!(!last.contains("early words"), "{last}");
    assert!(body.frame().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_terminal_written_before_the_upstream_ends_still_waits_for_the_owner() {
    // An AG-UI client's `RUN_FINISHED` is written when it is read; the stream ends only with
    // the upstream's body, read after it in the same poll. The terminal is what tells the
    // client the run is over: it waits for the owner, what came before it does not.
    let read = concat!(
        "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"early words\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n",
        "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    );
    let upstream = scripted(
        vec![
            Step::Data(STARTED),
            Step::Wait(Duration::from_millis(5)),
            Step::Data(read),
        ],
        false,
    );
    let (mut body, release, ended, outcome) = held_by(upstream, 1 << 20, Dialect::AgUi);
    let [content, end] = until_early(&mut body).await;
    assert_early_agui(&content, &end);
    let pending = tokio::time::timeout(Duration::from_secs(60), body.frame()).await;
    assert!(
        pending.is_err(),
        "the terminal left before the owner let it"
    );
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(*outcome.lock().unwrap(), Some(Outcome::Completed));
    release.send(()).unwrap();
    let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let last = String::from_utf8_lossy(&last);
    assert!(last.contains("RUN_FINISHED"), "{last}");
    assert!(body.frame().await.is_none());
}

/// An AG-UI client's early frames: the message's start and content, then its end; the run's
/// end in neither.
fn assert_early_agui(content: &str, end: &str) {
    assert_eq!(
        types(&[content.to_owned()]),
        ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"],
        "{content}"
    );
    assert_eq!(types(&[end.to_owned()]), ["TEXT_MESSAGE_END"], "{end}");
}

#[tokio::test(start_paused = true)]
async fn a_client_gone_after_the_early_frame_leaves_the_owner_the_run_as_it_ended() {
    gone_after_the_early_frame(held(message_then_oversize(), 512), Outcome::Failed).await;
}

/// The client of `held` takes the early frame and leaves: the owner is told then, once, that
/// the run ended with `outcome`.
async fn gone_after_the_early_frame(held: Held, outcome_told: Outcome) {
    let (mut body, _release, ended, outcome) = held;
    until_early(&mut body).await;
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 0);
    drop(body);
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(*outcome.lock().unwrap(), Some(outcome_told));
}

#[tokio::test(start_paused = true)]
async fn the_stream_ended_line_is_written_once_the_last_frame_has_left() {
    let logs = crate::telemetry::captured::Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let mut body = body(vec![Step::Data(STARTED), Step::Data(FINISHED)], false);
    let mut last = String::new();
    while let Some(frame) = body.frame().await {
        last = String::from_utf8(frame.unwrap().into_data().unwrap().to_vec()).unwrap();
    }
    assert!(last.contains("RUN_FINISHED"), "{last}");
    assert!(body.is_end_stream());
    // The run is over and its last frame is out; the line waits for the body to go.
    assert!(!logs.text().contains("stream ended"), "{}", logs.text());
    drop(body);
    let text = logs.text();
    assert_eq!(text.matches("stream ended").count(), 1, "{text}");
    assert!(text.contains("outcome=\"completed\""), "{text}");
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A plain AG-UI stream of `STARTED` then `FINISHED` in one read, recorded in `metrics`.
fn recorded(metrics: &std::sync::Arc<crate::telemetry::metrics::Metrics>) -> TranslatingBody {
    let ids = RunIds {
        thread_id: "t".into(),
        run_id: "r".into(),
    };
    let pipeline = Pipeline::new(PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids)).unwrap();
    let parts = unbounded(metrics.stream_started("/"));
    let upstream = scripted(vec![Step::Data(STARTED), Step::Data(FINISHED)], false);
    TranslatingBody::new(Source::Body(upstream.boxed_unsync()), pipeline, (), parts)
}

/// Polls `body` once; the data of a frame as text, `None` at the end.
fn poll_text(body: &mut TranslatingBody, cx: &mut Context<'_>) -> Poll<Option<String>> {
    Pin::new(body).poll_frame(cx).map(|frame| {
        frame.map(|f| {
            let Ok(f) = f;
            String::from_utf8(f.into_data().unwrap().to_vec()).unwrap()
        })
    })
}

#[tokio::test]
async fn the_terminal_is_written_before_the_end_of_the_stream_is_handled() {
    let metrics = crate::telemetry::metrics::Metrics::new();
    let mut body = recorded(&metrics);
    let wakes = std::sync::Arc::new(Wakes::default());
    let waker = std::task::Waker::from(std::sync::Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    assert_eq!(
        poll_text(&mut body, &mut cx),
        Poll::Ready(Some(": ok\n\n".into()))
    );
    let Poll::Ready(Some(run)) = poll_text(&mut body, &mut cx) else {
        panic!("the run's events were ready");
    };
    assert!(
        run.contains("RUN_STARTED") && run.contains("RUN_FINISHED"),
        "{run}"
    );
    // hyper polls again before it writes what it has: the body yields, so that the terminal
    // is written before the stream's end (the upstream's end, the metrics) is handled.
    assert!(poll_text(&mut body, &mut cx).is_pending());
    assert_eq!(
        wakes.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "woken to go on"
    );
    let active = "dialect_proxy_streams_active{route=\"/\"}";
    assert!(metrics.encode().contains(&format!("{active} 1")));
    assert_eq!(poll_text(&mut body, &mut cx), Poll::Ready(None));
    let text = metrics.encode();
    assert!(text.contains(&format!("{active} 0")), "{text}");
    assert!(
        text.contains("dialect_proxy_streams_total{route=\"/\",outcome=\"completed\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_client_gone_once_the_terminal_left_ended_a_completed_run() {
    let metrics = crate::telemetry::metrics::Metrics::new();
    let mut body = recorded(&metrics);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(poll_text(&mut body, &mut cx).is_ready());
    let Poll::Ready(Some(run)) = poll_text(&mut body, &mut cx) else {
        panic!("the run's events were ready");
    };
    assert!(run.contains("RUN_FINISHED"), "{run}");
    drop(body);
    let text = metrics.encode();
    assert!(
        text.contains("dialect_proxy_streams_total{route=\"/\",outcome=\"completed\"} 1"),
        "{text}"
    );
    assert!(!text.contains("outcome=\"cancelled\""), "{text}");
}

/// A run whose `RUN_FINISHED` came with its last message, its upstream still open after it, for
/// an AG-UI client, held ([`Held`]).
fn finished_then_lingering() -> Held {
    let read = concat!(
        "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"early words\"}\n\n",
        "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n",
        "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    );
    let steps = vec![
        Step::Data(STARTED),
        Step::Wait(Duration::from_millis(5)),
        Step::Data(read),
    ];
    held_by(scripted(steps, true), 1 << 20, Dialect::AgUi)
}

#[tokio::test(start_paused = true)]
async fn a_terminal_read_before_a_lingering_upstream_ends_waits_for_the_owner() {
    let (mut body, release, ended, outcome) = finished_then_lingering();
    let [content, end] = until_early(&mut body).await;
    assert_early_agui(&content, &end);
    // The upstream stays open: heartbeats go on until the stream ends cleanly at its idle
    // timeout (every run ended); the owner is told then, and the terminal waits for it.
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(frame) = tokio::time::timeout_at(until, body.frame()).await {
        let data = frame.unwrap().unwrap().into_data().unwrap();
        assert_eq!(
            data, HEARTBEAT_COMMENT,
            "the terminal left before the owner let it"
        );
    }
    assert_eq!(ended.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(*outcome.lock().unwrap(), Some(Outcome::Completed));
    release.send(()).unwrap();
    let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&last).contains("RUN_FINISHED"));
    assert!(body.frame().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_client_gone_while_its_terminal_is_held_leaves_the_owner_the_run_as_it_ended() {
    gone_after_the_early_frame(finished_then_lingering(), Outcome::Completed).await;
}
