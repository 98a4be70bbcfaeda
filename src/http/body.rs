//! `TranslatingBody`: the only async piece of a translated stream (`STYLE.md` §2,
//! `specs/streaming.md` §4–7).
//!
//! hyper polls it when it can write; it polls the upstream only then, so back-pressure is free
//! and nothing runs unless the client reads. One poll, in order:
//! 1. a waiting frame (the opening `: ok` comment) goes out first;
//! 2. after the terminal event, `None` forever; the drain signal is checked before the upstream,
//!    so an upstream that always has data cannot hide the shutdown deadline;
//! 3. loop on the upstream: every data frame that is already there is decoded, translated and
//!    encoded, and what they produce leaves as one output frame once the upstream has nothing
//!    more (or [`OUT_BUDGET`] bytes are ready): writes follow the upstream's socket reads, not
//!    its events, and nothing waits for data that has not arrived. The upstream body drives its
//!    own connection (`upstream::link`), so one poll here sees all that one read brought. A
//!    bounded number of frames is read per poll, then what is ready leaves (or, with nothing,
//!    the body wakes itself and yields); end, error or a trailers frame end the run. Once the
//!    client's terminal event is written, what is ready leaves at once and the next poll
//!    yields, so that hyper writes it before the stream's end is handled (the upstream's end,
//!    the owner, the metrics). Within one read, what the read has written leaves before an
//!    event of the general path is stepped (a message's or the run's end: parsed whole and
//!    stepped by the guard, cold code run once per message): the pipeline stops there
//!    ([`Pipeline::pause_after_output`]), the frame leaves, and the next poll steps the rest
//!    before it polls the upstream. A read leaves in two frames at most, and a stream's last
//!    delta, read with `TEXT_MESSAGE_END` and `RUN_FINISHED`, does not wait for them;
//! 4. with the upstream pending and nothing to send, the idle timer (fires →
//!    `UPSTREAM_IDLE_TIMEOUT`, or between runs — every run the stream carried ended — a clean
//!    end) and the heartbeat (fires → `: ping`) are polled, so `Pending` is returned only when
//!    every source (drain signal included) has registered the waker. Both timers share one
//!    sleep ([`Deadlines`]): moving them per frame costs a store, not a timer-wheel lock.
//!
//! A route may bound a run ([`StreamLimits`]): past `max_stream_duration` from its start, or
//! once the upstream has sent `max_stream_bytes`, the run ends with `STREAM_DURATION_EXCEEDED`
//! or `STREAM_BYTES_EXCEEDED` in the client's dialect and the upstream connection is closed.
//! The end is checked whenever upstream data arrives (so an upstream that always has data
//! cannot outrun it) and is one of the deadlines the body sleeps on (so a silent one cannot
//! either). Bytes are counted as they come from the upstream, before translation: the same
//! bound means the same upstream behaviour whatever the client's dialect. The events within
//! the bound are translated, those past it (or cut by it) are not.
//!
//! A run may span several upstream requests (an AAP agent's turns): the body then starts from
//! a future that opens the first one, and its [`RunOwner`] decides at each hand-over
//! ([`Pipeline::at_handover`]) whether another request follows. While a request is opening,
//! heartbeats go on and the idle timer rests (the request has its own connect and header
//! timeouts). When the stream ends, however it ends, the owner is told once
//! ([`RunOwner::ended`]); an owner with state to keep hands it to a task of its own over a
//! channel, so nothing here waits or writes a store.
//!
//! A writer whose wire is one document rather than a stream ([`Pipeline::is_stream`]) gets no
//! opening comment and no heartbeats.
//!
//! `Error = Infallible`: upstream trouble becomes a terminal `RUN_ERROR` event, never a cut
//! connection. Dropping the body (the client left) drops the upstream body, which closes the
//! upstream connection: that is the cancellation.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use tokio::time::Instant;
use tracing::Span;

use super::deadline::{Deadlines, Due};
pub use super::drain_deadline::DrainSignal;

use crate::dialect::{AnyReader, AnyWriter, Reader, Writer};
use crate::error::{ErrorCode, Failure};
use crate::event::Note;
use crate::pipeline::Pipeline;
use crate::sse::{Framing, HEARTBEAT_COMMENT, OPENING_COMMENT};
use crate::telemetry::metrics::{Outcome, StreamEnd, StreamRecord};

/// An upstream response body, whatever produced it (hyper, or the in-process demo agent).
pub type UpstreamBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// The heartbeat interval of a quiet body: never, in practice.
const QUIET_HEARTBEAT: Duration = Duration::from_secs(365 * 86400);

/// Upstream frames handled in one poll at most: what is ready then leaves, or, with nothing to
/// send (comments only), the body yields, so a flooding upstream cannot hold a runtime worker.
const FRAMES_PER_POLL: usize = 256;

/// Output gathered from ready upstream frames before it leaves as one frame.
pub const OUT_BUDGET: usize = 16 * 1024;

/// A request being opened: the upstream body and its framing, or why it could not be had.
pub type OpenFuture =
    Pin<Box<dyn Future<Output = Result<(UpstreamBody, Framing), Failure>> + Send>>;

/// What follows a hand-over.
pub enum Next {
    /// Another request, streamed into the same run.
    Open(OpenFuture),
    /// The run ends with the stop.
    End,
    /// The run ends with a gateway error instead.
    Fail(Failure),
}

/// Who a stream's run belongs to beyond the body: the adapter that continues it across
/// upstream requests, or keeps what it produced. A plain stream's owner is `()`.
pub trait RunOwner<R, W>: Send + Unpin + 'static {
    /// The upstream's response stopped at a hand-over ([`Pipeline::at_handover`]); its
    /// connection is closed. Default: the run ends there.
    fn after_handover(&mut self, _pipeline: &mut Pipeline<R, W>) -> Next {
        Next::End
    }

    /// The stream ended, however it ended: terminal event written, or the client went away
    /// (then from `Drop`). Called once. Must not block or do I/O: hand results to a task.
    ///
    /// An owner that must know its results are safe before the client learns the run is over
    /// returns a future: the body holds the run's last frame until it resolves (a session
    /// written back before the client can send its next turn). Ignored when the client left.
    fn ended(&mut self, _pipeline: &mut Pipeline<R, W>, _outcome: Outcome) -> Option<Hold> {
        None
    }

    /// Whether [`Self::ended`] would hold the last frame now. The body then sends what the run
    /// wrote before its end first and tells the owner after: telling it wakes the task that
    /// keeps the results, and another worker thread may run that task (on the same CPU)
    /// before this one has written. Default: no.
    fn holds_end(&self) -> bool {
        false
    }
}

/// What a [`RunOwner`] makes the stream's last frame wait for.
pub type Hold = Pin<Box<dyn Future<Output = ()> + Send>>;

impl<R: Send + 'static, W: Send + 'static> RunOwner<R, W> for () {}

/// Where upstream bytes come from now.
pub enum Source {
    Body(UpstreamBody),
    Opening(OpenFuture),
}

/// Timers and bounds of one stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Longest gap between upstream frames (comments count) before the run fails.
    pub idle_timeout: Duration,
    /// Downstream silence after which a `: ping` comment is written.
    pub heartbeat_interval: Duration,
    /// How long the stream may last from its start (`max_stream_duration`); `None`: unbounded.
    pub max_duration: Option<Duration>,
    /// Upstream bytes the stream may carry (`max_stream_bytes`); `None`: unbounded.
    pub max_bytes: Option<u64>,
}

/// What a stream gets from its route and the gateway: timers, the drain signal, its span and
/// its metrics record.
pub struct StreamParts {
    pub timers: StreamLimits,
    pub drain: DrainSignal,
    pub span: Span,
    pub record: StreamRecord,
}

/// See the module docs.
pub struct TranslatingBody<R = AnyReader, W = AnyWriter, O = ()>
where
    R: Reader,
    W: Writer,
    O: RunOwner<R, W>,
{
    /// `None` once the run has ended: dropping it closes the upstream connection at once.
    upstream: Option<Source>,
    owner: O,
    pipeline: Pipeline<R, W>,
    timers: StreamLimits,
    /// The idle timeout, the heartbeat and the end of a bounded run.
    deadlines: Deadlines,
    /// Upstream bytes received so far (counted only when the run is bounded by them).
    upstream_bytes: u64,
    drain: DrainSignal,
    /// A frame waiting to go out before anything else.
    waiting: Option<Bytes>,
    /// The waiting frame holds events (not the opening comment).
    waiting_events: bool,
    out: BytesMut,
    /// How much of `out` came before the client's terminal event (before the upstream read
    /// that ended the run, until the terminal is known): that much may leave while the last
    /// frame is held ([`RunOwner::ended`]).
    settled: usize,
    span: Span,
    record: StreamRecord,
    started: Instant,
    heartbeats: u64,
    /// The end has been recorded (metrics, the owner told).
    logged: bool,
    /// How the stream ended and how long it took, until its lines are logged: when the body
    /// is dropped, after its last frame went out, so that a write to the log does not stand
    /// between the run's last events and the client.
    unlogged: Option<(Outcome, Duration)>,
    /// What the last frame waits for ([`RunOwner::ended`]).
    holding: Option<Hold>,
    /// How the run ended, while what came before its end leaves and the owner, who will
    /// hold the rest, is not yet told ([`RunOwner::holds_end`]).
    ending: Option<Outcome>,
    /// A frame that carries the client's terminal event, or what comes right before it, has
    /// just been handed to hyper: the next poll yields ([`Self::take_before_end`]).
    flush_first: bool,
    /// The client's terminal event was written, handed to hyper or held for the owner, before
    /// the stream's end was handled ([`Self::take_before_end`]).
    terminal_written: bool,
}

impl<R: Reader, W: Writer, O: RunOwner<R, W>> TranslatingBody<R, W, O> {
    /// The body that streams `source` through `pipeline`; `owner` is told of hand-overs and
    /// of the end.
    pub fn new(source: Source, mut pipeline: Pipeline<R, W>, owner: O, parts: StreamParts) -> Self {
        let StreamParts {
            mut timers,
            drain,
            span,
            record,
        } = parts;
        let now = Instant::now();
        // The run may open with events of its own (`RUN_STARTED` before an AAP agent is
        // contacted), or the client's dialect with an event (AAP's `turn_start`).
        let mut first = BytesMut::new();
        pipeline.begin(&mut first);
        // The waiting frame, and whether it holds events (not just the opening comment).
        let (waiting, waiting_events) = if !first.is_empty() {
            (Some(first.freeze()), true)
        } else if let Some(opening) = pipeline.opening() {
            (Some(Bytes::from_static(opening)), true)
        } else if pipeline.is_stream() {
            (Some(Bytes::from_static(OPENING_COMMENT)), false)
        } else {
            (None, false)
        };
        if pipeline.is_stream() {
            // What a read wrote leaves before its slower events are stepped (step 3).
            pipeline.pause_after_output(true);
        } else {
            // One document: only what the pipeline writes goes into it.
            timers.heartbeat_interval = QUIET_HEARTBEAT;
        }
        TranslatingBody {
            upstream: Some(source),
            owner,
            pipeline,
            timers,
            deadlines: Deadlines::new(
                now + timers.idle_timeout,
                now + timers.heartbeat_interval,
                timers.max_duration.map(|max| now + max),
            ),
            upstream_bytes: 0,
            drain,
            waiting,
            waiting_events,
            out: BytesMut::new(),
            settled: 0,
            span,
            record,
            started: now,
            heartbeats: 0,
            logged: false,
            unlogged: None,
            holding: None,
            ending: None,
            flush_first: false,
            terminal_written: false,
        }
    }

    /// The run has ended: releases the upstream and records the stream.
    fn finish(&mut self) {
        self.upstream = None;
        if let Some(at) = self.pipeline.take_terminal_at() {
            // Only the client's terminal event (and what follows it) waits for the owner: what
            // the pipeline wrote before it leaves at once (AAP message mode's whole message,
            // written when `TEXT_MESSAGE_END` arrives beside `RUN_FINISHED`), and the terminal
            // waits even when the upstream's end, read after it, is what ended the stream (an
            // AG-UI client's `RUN_FINISHED`).
            self.settled = at.min(self.out.len());
        }
        let outcome = self.outcome();
        if self.settled > 0 && self.owner.holds_end() {
            // Told once what came before the end has left ([`Self::poll_last`]).
            self.ending = Some(outcome);
        } else {
            self.record_end(outcome);
        }
    }

    /// How the run ended, once it has.
    fn outcome(&self) -> Outcome {
        if self.pipeline.failure().is_some() {
            Outcome::Failed
        } else {
            Outcome::Completed
        }
    }

    /// Records the end once: the owner told, the metrics; its lines wait for [`Self::log_end`].
    fn record_end(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.logged, true) {
            return;
        }
        let hold = self
            .span
            .in_scope(|| self.owner.ended(&mut self.pipeline, outcome));
        if outcome != Outcome::Cancelled {
            self.holding = hold;
        }
        let duration = self.started.elapsed();
        self.record.finish(StreamEnd {
            outcome,
            code: self.pipeline.failure().map(ErrorCode::label),
            stats: self.pipeline.stats(),
            notes: self.pipeline.note_counts(),
            heartbeats: self.heartbeats,
            duration,
        });
        self.unlogged = Some((outcome, duration));
    }

    /// The stream's lines, once its end is recorded: one per kind of note, and the one `info`
    /// line per stream.
    fn log_end(&mut self) {
        let Some((outcome, duration)) = self.unlogged.take() else {
            return;
        };
        let _entered = self.span.enter();
        // One line per kind and stream. Content a reader would have seen is a warning that
        // names it (AG-UI 1.1: a lossy translation must say what it lost); repairs that lose
        // nothing, and drops of what carried nothing, stay at debug.
        for (note, count) in self.pipeline.note_counts() {
            match note {
                Note::Fixup(rule) => tracing::debug!(rule = rule.as_str(), count, "dialect fix-up"),
                Note::Dropped(kind) => match kind.lost() {
                    Some(lost) => tracing::warn!(
                        kind = kind.as_str(),
                        count,
                        lost,
                        "upstream content dropped"
                    ),
                    None => tracing::debug!(kind = kind.as_str(), count, "dropped upstream input"),
                },
            }
        }
        let stats = self.pipeline.stats();
        let code = self.pipeline.failure().map(ErrorCode::as_str);
        tracing::info!(
            outcome = outcome.as_str(),
            code = code.as_deref().unwrap_or(""),
            events_in = stats.events_in,
            events_out = stats.events_out,
            fixups = stats.fixups,
            dropped = stats.dropped,
            heartbeats = self.heartbeats,
            duration_ms = duration.as_millis() as u64,
            "stream ended"
        );
    }

    /// Ends the run with a gateway error and returns its terminal frame.
    fn fail(
        &mut self,
        failure: Failure,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.pipeline.fail(failure, &mut self.out);
        self.finish();
        self.poll_last(cx)
    }

    /// The run is over: the last frame leaves once what the owner holds it for is done.
    fn poll_last(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(outcome) = self.ending.take() {
            if let Some(early) = self.take_settled() {
                self.ending = Some(outcome);
                return Poll::Ready(Some(Ok(Frame::data(early))));
            }
            self.record_end(outcome);
        }
        if let Some(hold) = self.holding.as_mut() {
            if hold.as_mut().poll(cx).is_pending() {
                // What the run wrote before its end need not wait.
                return match self.take_settled() {
                    Some(early) => Poll::Ready(Some(Ok(Frame::data(early)))),
                    None => Poll::Pending,
                };
            }
            self.holding = None;
        }
        Poll::Ready(self.take_output().map(|b| Ok(Frame::data(b))))
    }

    /// The upstream's response stopped at a hand-over: its connection closes, and the owner
    /// opens the next request or the run ends.
    fn hand_over(&mut self) {
        self.upstream = None;
        let next = self
            .span
            .in_scope(|| self.owner.after_handover(&mut self.pipeline));
        match next {
            Next::Open(open) => self.upstream = Some(Source::Opening(open)),
            Next::End => self.pipeline.end(&mut self.out),
            Next::Fail(failure) => self.pipeline.fail(failure, &mut self.out),
        }
    }

    /// The upstream body ended: what it left is decoded; without a hand-over, the run ends
    /// (truncated, unless its terminal event came).
    fn upstream_ended(&mut self) {
        self.pipeline.drain_eof(&mut self.out);
        if !self.pipeline.at_handover() {
            self.pipeline.end(&mut self.out);
        }
    }

    /// After upstream bytes were read: a hand-over goes to the owner, a finished run ends.
    fn after_read(&mut self) {
        if self.pipeline.at_handover() {
            self.hand_over();
        }
        if self.pipeline.is_finished() {
            self.finish();
        }
    }

    /// The client's terminal event was written and the stream goes on (its upstream's end is
    /// still to be read): what may leave now, as one frame — all of it, or what came before
    /// the terminal when the owner will hold the end. The next poll then yields. hyper polls
    /// the body again before it writes what it was given, for as long as it has room; yielding
    /// lets it write the run's last events first, and what the stream's end costs (the
    /// upstream call's end and its connection back to the pool, the owner told, the metrics)
    /// comes after, not between the upstream's read and the client's write.
    fn take_before_end(&mut self) -> Option<Bytes> {
        let at = self.pipeline.terminal_at()?;
        // A writer may write nothing when the run ends (a HAI client's terminal waits for the
        // upstream's end).
        self.terminal_written |= self.out.len() > at;
        let frame = if self.owner.holds_end() {
            let before = at.min(self.out.len());
            if before == 0 {
                return None;
            }
            self.settled = 0;
            self.split_front(before)
        } else {
            self.take_output()?
        };
        self.flush_first = true;
        Some(frame)
    }

    /// What came before the client's terminal event, as one frame.
    fn take_settled(&mut self) -> Option<Bytes> {
        let settled = std::mem::take(&mut self.settled);
        (settled > 0).then(|| self.split_front(settled))
    }

    /// The first `n` bytes of the output, none past the client's terminal event, as one frame;
    /// the terminal's offset moves with them.
    fn split_front(&mut self, n: usize) -> Bytes {
        self.pipeline.output_taken(n);
        self.record.first_event();
        self.out.split_to(n).freeze()
    }

    /// How many of `len` more upstream bytes fit under `max_stream_bytes` (all of them when
    /// the stream is not bounded by bytes); counts them.
    fn allowed(&mut self, len: usize) -> usize {
        let Some(max) = self.timers.max_bytes else {
            return len;
        };
        let room = max.saturating_sub(self.upstream_bytes);
        let allowed = usize::try_from(room).map_or(len, |room| room.min(len));
        self.upstream_bytes += allowed as u64;
        allowed
    }

    /// The failure of a run whose upstream sent more than `max_stream_bytes`.
    fn bytes_exceeded(&self) -> Failure {
        let max = self.timers.max_bytes.unwrap_or_default();
        tracing::warn!(parent: &self.span, max_stream_bytes = max, "stream byte bound reached");
        Failure::new(
            ErrorCode::StreamBytesExceeded,
            format!(
                "the upstream sent more than {max} bytes (max_stream_bytes); the run was ended"
            ),
        )
    }

    /// The failure of a run that lasted past `max_stream_duration`.
    fn duration_exceeded(&self) -> Failure {
        let secs = self.timers.max_duration.unwrap_or_default().as_secs_f64();
        tracing::warn!(parent: &self.span, max_stream_duration_s = secs, "stream duration bound reached");
        Failure::new(
            ErrorCode::StreamDurationExceeded,
            format!("the run lasted {secs} s (max_stream_duration); it was ended"),
        )
    }

    /// The output holds the client's terminal event, which waits for an owner not yet told of
    /// the end: only what came before it may leave, and only through
    /// [`Self::take_before_end`].
    fn held_for_owner(&self) -> bool {
        self.pipeline.terminal_at().is_some() && self.owner.holds_end()
    }

    /// Takes what the pipeline produced as one frame.
    fn take_output(&mut self) -> Option<Bytes> {
        if self.out.is_empty() || self.holding.is_some() || self.held_for_owner() {
            return None;
        }
        self.settled = 0;
        // Offsets into `out` change now: a terminal event in this frame is gone to the client.
        let _ = self.pipeline.take_terminal_at();
        // What the pipeline writes is events, never comments.
        self.record.first_event();
        Some(self.out.split().freeze())
    }
}

impl<R: Reader, W: Writer, O: RunOwner<R, W>> Body for TranslatingBody<R, W, O> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // The request's span is not entered here: a data frame's path logs nothing, and entering
        // a span (and leaving it) on every poll cost as much as translating a small event. What
        // logs names the span, or runs inside it (the owner, the opening of a next request).
        let this = &mut *self;
        if std::mem::take(&mut this.flush_first) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(frame) = this.waiting.take() {
            if this.waiting_events {
                this.record.first_event();
            }
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        // Checked first: an upstream that always has data must not hide the shutdown deadline.
        if this.upstream.is_some() && this.drain.poll_reached(cx).is_ready() {
            tracing::warn!(parent: &this.span, "drain deadline reached; ending the stream");
            let failure = Failure::new(
                ErrorCode::GatewayShutdown,
                "the gateway is shutting down; retry the run",
            );
            return this.fail(failure, cx);
        }
        let mut frames = 0;
        // The clock, read once per poll when the upstream first gave something.
        let mut read_at = None;
        loop {
            let Some(source) = this.upstream.as_mut() else {
                return this.poll_last(cx);
            };
            let polled = match source {
                // The rest of the last read, before anything more is read: as a frame of no
                // new bytes.
                _ if this.pipeline.paused() => {
                    Some(Poll::Ready(Some(Ok(Frame::data(Bytes::new())))))
                }
                Source::Opening(open) => match this.span.in_scope(|| open.as_mut().poll(cx)) {
                    Poll::Ready(Ok((body, framing))) => {
                        this.pipeline.resume(framing);
                        this.upstream = Some(Source::Body(body));
                        let now = *read_at.get_or_insert_with(Instant::now);
                        this.deadlines.set_idle(now + this.timers.idle_timeout);
                        continue;
                    }
                    Poll::Ready(Err(failure)) => return this.fail(failure, cx),
                    Poll::Pending => None,
                },
                Source::Body(body) => Some(Pin::new(body).poll_frame(cx)),
            };
            match polled {
                Some(Poll::Ready(Some(Ok(frame)))) => {
                    if frames == 0 {
                        // Once per poll: every frame of this poll arrived by now.
                        let now = *read_at.get_or_insert_with(Instant::now);
                        if this.deadlines.ended_by(now) {
                            return this.fail(this.duration_exceeded(), cx);
                        }
                        this.deadlines.set_idle(now + this.timers.idle_timeout);
                    }
                    frames += 1;
                    this.settled = this.out.len();
                    match frame.into_data() {
                        Ok(data) if data.is_empty() && this.pipeline.paused() => {
                            this.pipeline.push_rest(&mut this.out);
                        }
                        Ok(data) => {
                            let allowed = this.allowed(data.len());
                            this.pipeline.push(&data[..allowed], &mut this.out);
                            if allowed < data.len() && !this.pipeline.is_finished() {
                                return this.fail(this.bytes_exceeded(), cx);
                            }
                        }
                        // Trailers belong to the upstream's framing; they end its data.
                        Err(_trailers) => this.upstream_ended(),
                    }
                    if this.pipeline.paused() {
                        // What this read wrote so far leaves now; the rest is stepped when
                        // the body is next polled, before the upstream is.
                        break;
                    }
                    this.after_read();
                    if this.upstream.is_some() {
                        if let Some(frame) = this.take_before_end() {
                            this.deadlines
                                .set_heartbeat(now_or(read_at) + this.timers.heartbeat_interval);
                            return Poll::Ready(Some(Ok(Frame::data(frame))));
                        }
                    }
                    if this.out.len() >= OUT_BUDGET || frames >= FRAMES_PER_POLL {
                        break;
                    }
                }
                Some(Poll::Ready(Some(Err(error)))) => {
                    tracing::warn!(parent: &this.span, %error, "upstream body failed mid-stream");
                    return this.fail(
                        Failure::new(
                            ErrorCode::UpstreamTruncated,
                            "the upstream connection broke mid-stream",
                        ),
                        cx,
                    );
                }
                Some(Poll::Ready(None)) => {
                    // The run ends, or a hand-over opens the next request: the loop goes on
                    // with that (the last frame, or the opening request).
                    this.settled = this.out.len();
                    this.upstream_ended();
                    this.after_read();
                }
                pending => {
                    if !this.out.is_empty() && !this.held_for_owner() {
                        // The upstream has nothing more for now: what is ready leaves.
                        break;
                    }
                    // An opening request has its own timeouts; only a silent body is idle.
                    let due = ready!(this.deadlines.poll(cx, pending.is_some()));
                    if due == Due::End {
                        return this.fail(this.duration_exceeded(), cx);
                    }
                    if due == Due::Idle {
                        if this.pipeline.between_runs() {
                            // Every run ended and the upstream only lingers: the stream ends
                            // here, cleanly, as if the upstream had closed it.
                            this.upstream = None;
                            this.pipeline.end(&mut this.out);
                            this.finish();
                            return this.poll_last(cx);
                        }
                        let secs = this.timers.idle_timeout.as_secs_f64();
                        tracing::warn!(parent: &this.span, idle_timeout_s = secs, "upstream idle timeout");
                        let failure = Failure::new(
                            ErrorCode::UpstreamIdleTimeout,
                            format!("the upstream sent nothing for {secs} s (idle_timeout); the run was abandoned"),
                        );
                        return this.fail(failure, cx);
                    }
                    // Quiet for a heartbeat interval: the buffers between events go until the
                    // next ones (an idle stream's memory is then its state alone).
                    this.pipeline.release();
                    if this.out.is_empty() {
                        this.out = BytesMut::new();
                    }
                    this.heartbeats += 1;
                    let deadline = Instant::now() + this.timers.heartbeat_interval;
                    this.deadlines.set_heartbeat(deadline);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                        HEARTBEAT_COMMENT,
                    )))));
                }
            }
        }
        if let Some(frame) = this.take_output() {
            this.deadlines
                .set_heartbeat(now_or(read_at) + this.timers.heartbeat_interval);
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        // Many upstream frames in a row produced nothing to send (comments, partial events),
        // or a holding owner keeps the output: yield to the scheduler and come straight back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.upstream.is_none()
            && self.waiting.is_none()
            && self.out.is_empty()
            && self.holding.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// The clock read once per poll ([`TranslatingBody::poll_frame`]), or now.
fn now_or(read_at: Option<Instant>) -> Instant {
    read_at.unwrap_or_else(Instant::now)
}

impl<R: Reader, W: Writer, O: RunOwner<R, W>> Drop for TranslatingBody<R, W, O> {
    fn drop(&mut self) {
        // Dropped before its end: the client went away (hyper drops the body), which also
        // dropped the upstream body and so closed the upstream connection. A run that had
        // ended, its last events not yet all sent, ended as it did: its owner keeps it.
        let gone_after_the_end = self.terminal_written && self.pipeline.between_runs();
        let outcome = match self.ending.take() {
            Some(outcome) => outcome,
            // The client's terminal event was written and no other run began: the run ended as
            // it did; only the upstream's end, not needed any more, was not read.
            None if gone_after_the_end => self.outcome(),
            None => Outcome::Cancelled,
        };
        self.record_end(outcome);
        self.log_end();
    }
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
