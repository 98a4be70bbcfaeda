//! Decoder → reader → sequencer → writer: upstream bytes in, client bytes out.
//!
//! The one code path behind both the translating body and the `translate` command, so what an
//! operator replays offline is exactly what the gateway does live. It composes any
//! [`Reader`] with any [`Writer`] (`dialect::codec`) and knows no dialect: the registry
//! (`dialect`) builds the pair for a route ([`PipelineSpec`]), and an adapter that needs its
//! reader's or writer's results (AAP sessions) builds the pipeline with the concrete type
//! ([`Pipeline::from_parts`]) and reads them through [`Pipeline::reader`] and
//! [`Pipeline::writer_mut`].
//!
//! Synchronous and allocation-light: the vectors that carry events between the stages are the
//! thread's spares (`event::spare`), lent for one call, and each call appends the encoded
//! events produced by the bytes it was given. Only what the protocol makes
//! incomplete waits for later bytes: a partial SSE event, and object tool arguments held until
//! the call's end (`dialects.md` row 6). Diagnostics are counted ([`Pipeline::note_counts`]),
//! never logged here: the caller logs and records them.
//!
//! Pure: must not import the I/O side (`http`, `server`, `adapters`, `session`), hyper, tokio
//! or tracing.

use std::fmt;

use bytes::BytesMut;

use crate::dialect::{check_pair, AnyReader, AnyWriter, CodecOptions, Dialect, Reader, Writer};
use crate::error::{ErrorCode, Failure};
use crate::event::{spare, Clock, DeltaRef, DropKind, Event, Note, RunIds};
use crate::sse::{Framing, SseDecoder, SseError, SseEvent, SseItem, DEFAULT_MAX_EVENT_BYTES};

pub mod owners;
pub mod sequencer;
pub mod output_check;
pub mod verify;

pub use crate::dialect::Unsupported;
pub use sequencer::{Input, RunSequencer};

/// What a pipeline needs beyond its reader and writer.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub ids: RunIds,
    pub max_event_bytes: usize,
    /// How the upstream frames its events (from its `Content-Type`).
    pub framing: Framing,
    pub keep_upstream_run_ids: bool,
    /// The time stamped on events of dialects that require one.
    pub clock: Clock,
}

impl PipelineOptions {
    /// Defaults for everything but the ids. The clock is fixed at 0: the I/O side passes the
    /// wall clock in.
    pub fn new(ids: RunIds) -> PipelineOptions {
        PipelineOptions {
            ids,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            framing: Framing::Sse,
            keep_upstream_run_ids: false,
            clock: Clock::Fixed(0),
        }
    }
}

/// A pipeline between two dialects of the registry, as a route or the `translate` command
/// describes it.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub upstream: Dialect,
    pub client: Dialect,
    /// The readers' and writers' options, per dialect.
    pub codecs: CodecOptions,
    /// The pipeline's own options.
    pub options: PipelineOptions,
}

impl PipelineSpec {
    /// Defaults for everything but the dialects and ids.
    pub fn new(upstream: Dialect, client: Dialect, ids: RunIds) -> PipelineSpec {
        PipelineSpec {
            upstream,
            client,
            codecs: CodecOptions::default(),
            options: PipelineOptions::new(ids),
        }
    }
}

/// Counters of one stream, for the end-of-stream log line and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Upstream SSE events decoded.
    pub events_in: u64,
    /// Canonical events written to the client.
    pub events_out: u64,
    /// Repairs applied.
    pub fixups: u64,
    /// Inputs dropped.
    pub dropped: u64,
}

/// See the module docs.
pub struct Pipeline<R = AnyReader, W = AnyWriter> {
    decoder: SseDecoder,
    buf: BytesMut,
    reader: R,
    sequencer: RunSequencer,
    writer: W,
    notes: Vec<Note>,
    stats: StreamStats,
    /// How often each repair and drop happened (a handful of distinct notes per stream).
    note_counts: Vec<(Note, u64)>,
    /// Why the run ended, when the gateway ended it.
    failure: Option<ErrorCode>,
    clock: Clock,
    max_event_bytes: usize,
    /// How long the output was when the first run's end (`RUN_FINISHED`, `RUN_ERROR`) since
    /// the last [`Self::take_terminal_at`] was written: what came before it need not wait
    /// for what the run's end waits for.
    terminal_at: Option<usize>,
    /// [`Self::push`] stops before an event of the general path once it has written output
    /// ([`Self::pause_after_output`]).
    pause_after_output: bool,
    /// It stopped there: the rest of the bytes it was given wait for [`Self::push_rest`].
    paused: bool,
}

impl<R: Reader, W: Writer> fmt::Debug for Pipeline<R, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("stats", &self.stats)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The pipeline `spec` describes, with the registry's reader and writer.
    pub fn new(spec: PipelineSpec) -> Result<Pipeline, Unsupported> {
        check_pair(spec.upstream, spec.client)?;
        let options = spec.options;
        let reader = spec
            .upstream
            .reader(&options.ids, options.framing, &spec.codecs);
        let writer = spec.client.writer(&spec.codecs);
        Ok(Pipeline::from_parts(reader, writer, options))
    }
}

impl<R: Reader, W: Writer> Pipeline<R, W> {
    /// A pipeline from `reader` to `writer`.
    pub fn from_parts(reader: R, writer: W, options: PipelineOptions) -> Pipeline<R, W> {
        Pipeline {
            decoder: SseDecoder::with_framing(options.framing, options.max_event_bytes),
            buf: BytesMut::new(),
            reader,
            sequencer: RunSequencer::new(options.ids)
                .keep_upstream_run_ids(options.keep_upstream_run_ids)
                .runs(writer.runs()),
            writer,
            notes: Vec::new(),
            stats: StreamStats::default(),
            note_counts: Vec::new(),
            failure: None,
            clock: options.clock,
            max_event_bytes: options.max_event_bytes,
            terminal_at: None,
            pause_after_output: false,
            paused: false,
        }
    }

    /// Writes what the run opens with before the upstream is contacted ([`Reader::start`]).
    pub fn begin(&mut self, out: &mut BytesMut) {
        self.tick();
        self.read_and_step(out, |reader, events, _| reader.start(events));
    }

    /// True when the upstream's current response stopped at a hand-over point and the run
    /// has not ended: its owner may continue it with another response ([`Pipeline::resume`]).
    pub fn at_handover(&self) -> bool {
        self.sequencer.run_open() && self.reader.at_handover()
    }

    /// Continues the run with the upstream's next response, framed as `framing`.
    pub fn resume(&mut self, framing: Framing) {
        self.reader.next_response(framing);
        self.decoder = SseDecoder::with_framing(framing, self.max_event_bytes);
        self.buf.clear();
    }

    pub fn reader(&self) -> &R {
        &self.reader
    }

    pub fn writer(&self) -> &W {
        &self.writer
    }

    pub fn writer_mut(&mut self) -> &mut W {
        &mut self.writer
    }

    /// True once the stream is over (its last run ended and nothing more is read); later
    /// input is ignored. A stream may carry several runs, so a terminal event alone does not
    /// end it unless the client's dialect folds runs and the terminal was a `RUN_ERROR`.
    pub fn is_finished(&self) -> bool {
        self.sequencer.is_finished()
    }

    /// True when every run the stream carried has ended but the upstream has not: its end, or
    /// its silence, now ends the stream cleanly.
    pub fn between_runs(&self) -> bool {
        !self.sequencer.run_open() && !self.sequencer.is_finished()
    }

    /// How many bytes of the output were there when the first run's end since the last call
    /// was written to it (the client's terminal event, and what the writer wrote with it,
    /// follow). The caller takes it (or moves it, [`Self::output_taken`]) whenever it takes
    /// from that output, so that the offset always points into what the output holds now.
    pub fn take_terminal_at(&mut self) -> Option<usize> {
        self.terminal_at.take()
    }

    /// What [`Self::take_terminal_at`] would give, kept.
    pub fn terminal_at(&self) -> Option<usize> {
        self.terminal_at
    }

    /// The caller took `n` bytes from the front of the output, none of them past the run's
    /// end: the offset of that end moves with them.
    pub fn output_taken(&mut self, n: usize) {
        if let Some(at) = &mut self.terminal_at {
            *at = at.saturating_sub(n);
        }
    }

    pub fn stats(&self) -> StreamStats {
        self.stats
    }

    /// Repairs and drops so far, with their counts.
    pub fn note_counts(&self) -> &[(Note, u64)] {
        &self.note_counts
    }

    /// The gateway error that ended the run, if it was the gateway that ended it.
    pub fn failure(&self) -> Option<ErrorCode> {
        self.failure
    }

    /// What the client receives before the first upstream byte, when its dialect opens a
    /// stream with an event ([`Writer::opening`]).
    pub fn opening(&self) -> Option<&'static [u8]> {
        self.writer.opening()
    }

    /// False when the client's wire is one document, not an event stream
    /// ([`Writer::is_stream`]).
    pub fn is_stream(&self) -> bool {
        self.writer.is_stream()
    }

    /// Has [`Self::push`] stop, once it has written output, before the first event that takes
    /// the general path (a message's or the run's start or end, a state event: parsed whole,
    /// stepped by the guard), until [`Self::push_rest`]. The live body turns it on so that what
    /// is written leaves before that slower work is done: when an upstream read carries a
    /// message's last delta with `TEXT_MESSAGE_END` and `RUN_FINISHED` (or AAP message mode's
    /// whole message with the run's end), the content reaches the client first. At most one
    /// stop per call, so a read is written in at most two parts.
    pub fn pause_after_output(&mut self, on: bool) {
        self.pause_after_output = on;
    }

    /// True when the last [`Self::push`] stopped early: call [`Self::push_rest`] next.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Feeds upstream bytes; appends the client's bytes for every complete event to `out`
    /// (all of them unless [`Self::pause_after_output`] is on).
    pub fn push(&mut self, chunk: &[u8], out: &mut BytesMut) {
        self.push_from(chunk, out, self.pause_after_output);
    }

    /// Steps what the last [`Self::push`] left when it stopped early, to the end.
    pub fn push_rest(&mut self, out: &mut BytesMut) {
        self.push_from(&[], out, false);
    }

    fn push_from(&mut self, chunk: &[u8], out: &mut BytesMut, may_pause: bool) {
        self.paused = false;
        if self.is_finished() {
            return;
        }
        self.tick();
        self.buf.extend_from_slice(chunk);
        // Output written before this mark is not this call's.
        let pause_from = may_pause.then_some(out.len());
        loop {
            let more = match self.lend_in_place(out, pause_from) {
                InPlace::Lent => !self.is_finished(),
                InPlace::Paused => {
                    self.paused = true;
                    false
                }
                // The reader has already declined to lend it.
                InPlace::Declined(event) => self.item(Ok(Some(SseItem::Event(event))), out, false),
                InPlace::NotPeeked => {
                    let item = self.decoder.decode(&mut self.buf);
                    self.item(item, out, true)
                }
            };
            if !more {
                break;
            }
        }
    }

    /// The next event, read where it lies in the buffer ([`SseDecoder::peek`]), when it is a
    /// delta the reader lends: handled, then stepped over. Nearly every event of a stream
    /// comes this way, and none of them is split off the buffer: the reference counts of a
    /// shared buffer, taken and given back per event, were a sixth of an AG-UI → AG-UI event's
    /// cost (`benches/codec.rs`). Otherwise nothing is done, and the decoder takes the event,
    /// unless output was written past `pause_from`: then the event stays where it is.
    fn lend_in_place(&mut self, out: &mut BytesMut, pause_from: Option<usize>) -> InPlace {
        let Some((event, peeked)) = self.decoder.peek(&self.buf) else {
            return InPlace::NotPeeked;
        };
        let Some(delta) = self.reader.read_delta(event) else {
            if pause_from.is_some_and(|from| out.len() > from) {
                return InPlace::Paused;
            }
            return InPlace::Declined(self.decoder.take(&mut self.buf, peeked));
        };
        // As `item` does with a lent delta; the event, built only when the writer did not take
        // the parts, is the one large value here, and is moved no further than it must.
        match write_lent(&self.sequencer, &mut self.writer, &delta, out) {
            Some(result) => {
                self.decoder.skip(&mut self.buf, peeked);
                self.lent_written(result, out);
            }
            None => {
                let event = delta.into_event();
                self.decoder.skip(&mut self.buf, peeked);
                self.lent_event(event, out);
            }
        }
        InPlace::Lent
    }

    /// Counts a lent delta the writer wrote, with the writer's result.
    fn lent_written(&mut self, result: Result<(), Failure>, out: &mut BytesMut) {
        self.stats.events_in += 1;
        self.stats.events_out += 1;
        self.written(result, out);
        self.count_notes();
    }

    /// Steps the event a lent delta stands for, the writer having declined the parts.
    fn lent_event(&mut self, event: Event, out: &mut BytesMut) {
        self.stats.events_in += 1;
        self.step_event(event, out);
    }

    /// The upstream body ended: flushes a last event without its blank line, lets the reader
    /// give up what it held, then ends the run (`UPSTREAM_TRUNCATED` unless a terminal event
    /// was seen).
    pub fn end(&mut self, out: &mut BytesMut) {
        self.drain_eof(out);
        self.read_and_step(out, |reader, events, _| reader.finish(events));
        self.step(Input::UpstreamEnd, out);
    }

    /// The upstream body ended: decodes what it left (a last event without its blank line, a
    /// whole JSON body) without ending the run, so a hand-over can still happen.
    pub fn drain_eof(&mut self, out: &mut BytesMut) {
        if self.paused {
            self.push_rest(out);
        }
        self.tick();
        while !self.is_finished() {
            let item = self.decoder.decode_eof(&mut self.buf);
            if !self.item(item, out, true) {
                break;
            }
        }
    }

    /// The upstream failed (read error, idle timeout, shutdown): ends the run with `failure`.
    pub fn fail(&mut self, failure: Failure, out: &mut BytesMut) {
        // What a stop left was read before the failure: it is translated first.
        if self.paused {
            self.push_rest(out);
        }
        self.tick();
        self.step(Input::UpstreamFailed(failure), out);
    }

    /// The stream is quiet: lets go of the buffers between events (they grow again with the
    /// next ones), so that a stream waiting on its agent holds only its state.
    pub fn release(&mut self) {
        if self.notes.is_empty() {
            self.notes = Vec::new();
        }
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
    }

    /// Reads the clock for the events of this call (one reading per upstream chunk).
    fn tick(&mut self) {
        if self.writer.wants_clock() {
            self.writer.set_now(self.clock.now_ms());
        }
    }

    /// Handles one decoder result; false when decoding must stop. `may_lend`: the reader has
    /// not yet been asked to lend the event ([`Reader::read_delta`]).
    fn item(
        &mut self,
        item: Result<Option<SseItem>, SseError>,
        out: &mut BytesMut,
        may_lend: bool,
    ) -> bool {
        match item {
            Ok(Some(SseItem::Event(event))) => {
                if let Some(delta) = may_lend
                    .then(|| self.reader.read_delta(event.view()))
                    .flatten()
                {
                    match write_lent(&self.sequencer, &mut self.writer, &delta, out) {
                        Some(result) => self.lent_written(result, out),
                        None => {
                            let event = delta.into_event();
                            self.lent_event(event, out);
                        }
                    }
                    return !self.is_finished();
                }
                self.stats.events_in += 1;
                let result = self.read_and_step(out, |reader, events, notes| {
                    reader.read(&event, events, notes)
                });
                if let Err(failure) = result {
                    self.fail(failure, out);
                }
                !self.is_finished()
            }
            Ok(Some(SseItem::Comment)) => true,
            Ok(Some(SseItem::Done)) => {
                self.notes.push(Note::Dropped(DropKind::EndMarker));
                true
            }
            Ok(None) => false,
            Err(SseError::EventTooLarge { limit }) => {
                let failure = Failure::new(
                    ErrorCode::UpstreamEventTooLarge,
                    format!(
                        "an upstream event exceeded the limit of {limit} bytes; raise max_event_bytes if the agent legitimately sends events this large"
                    ),
                );
                self.fail(failure, out);
                false
            }
        }
    }

    /// Has `read` put the reader's events in a vector lent for the call, steps every one of
    /// them, then gives the vector back to the thread.
    fn read_and_step<T>(
        &mut self,
        out: &mut BytesMut,
        read: impl FnOnce(&mut R, &mut Vec<Event>, &mut Vec<Note>) -> T,
    ) -> T {
        let mut events = spare::lend();
        let result = read(&mut self.reader, &mut events, &mut self.notes);
        for event in events.drain(..) {
            self.step_event(event, out);
        }
        spare::give_back(events);
        result
    }

    /// Steps one event the reader produced.
    fn step_event(&mut self, mut event: Event, out: &mut BytesMut) {
        // A delta of an open message or call — nearly every event — goes straight to the
        // writer: the same as stepping it, without moving the event through the guard's
        // output (events are large; `benches/codec.rs`).
        if self.sequencer.continues(&mut event) {
            self.write(event, out);
            self.count_notes();
        } else {
            self.step(Input::Event(event), out);
        }
    }

    fn step(&mut self, input: Input, out: &mut BytesMut) {
        let mut events = spare::lend();
        self.sequencer.step(input, &mut events, &mut self.notes);
        // The guard records the code whenever it ends a run itself: an upstream failure while
        // a run is open (between runs the stream just ends), or a stream it refuses to carry.
        if self.failure.is_none() {
            self.failure = self.sequencer.failure();
        }
        let mut drained = events.drain(..);
        for event in drained.by_ref() {
            if !self.write(event, out) {
                break;
            }
        }
        drop(drained);
        spare::give_back(events);
        self.count_notes();
    }

    /// Writes one event the guard let through; false when the writer refused it (a bound of
    /// the client's dialect), after the run was ended for it.
    fn write(&mut self, event: Event, out: &mut BytesMut) -> bool {
        if self.terminal_at.is_none() && matches!(event, Event::RunFinished(_) | Event::RunError(_))
        {
            self.terminal_at = Some(out.len());
        }
        self.stats.events_out += 1;
        let result = self.writer.write(event, out);
        self.written(result, out)
    }

    /// What follows a write: the writer's notes, and the run's end when it refused the event.
    fn written(&mut self, result: Result<(), Failure>, out: &mut BytesMut) -> bool {
        self.writer.take_notes(&mut self.notes);
        match result.err() {
            None => true,
            Some(failure) => {
                // The client's dialect cannot carry the run further: the sequencer ends it
                // like an upstream failure, and the writer writes that end.
                self.step(Input::UpstreamFailed(failure), out);
                false
            }
        }
    }

    /// Counts the notes of the last step.
    fn count_notes(&mut self) {
        for note in self.notes.drain(..) {
            match self.note_counts.iter_mut().find(|(n, _)| *n == note) {
                Some((_, count)) => *count += 1,
                None => self.note_counts.push((note, 1)),
            }
            match note {
                Note::Fixup(_) => self.stats.fixups += 1,
                Note::Dropped(_) => self.stats.dropped += 1,
            }
        }
    }
}

/// Translates a whole recorded stream at once (the `translate` command and golden tests).
pub fn translate_all(spec: PipelineSpec, input: &[u8]) -> Result<BytesMut, Unsupported> {
    let mut pipeline = Pipeline::new(spec)?;
    let mut out = BytesMut::new();
    if let Some(opening) = pipeline.opening() {
        out.extend_from_slice(opening);
    }
    pipeline.begin(&mut out);
    pipeline.push(input, &mut out);
    pipeline.end(&mut out);
    Ok(out)
}

/// What [`Pipeline::lend_in_place`] did with the next event.
enum InPlace {
    /// It was a delta the reader lent: handled and stepped over.
    Lent,
    /// The reader would not lend it: here it is, split off the buffer.
    Declined(SseEvent),
    /// The reader would not lend it, and the call stops before it ([`Pipeline::push`]).
    Paused,
    /// There is none the decoder can show where it lies.
    NotPeeked,
}

/// Nearly every event: a delta of an open message, written from the bytes it came in when the
/// writer can. `None`: the event it stands for must be built and stepped.
fn write_lent<W: Writer>(
    sequencer: &RunSequencer,
    writer: &mut W,
    delta: &DeltaRef<'_>,
    out: &mut BytesMut,
) -> Option<Result<(), Failure>> {
    if sequencer.continues_delta(delta) {
        writer.write_delta(delta, out)
    } else {
        None
    }
}

#[cfg(test)]
#[path = "lend_tests.rs"]
mod lend_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn agui(input: &str) -> String {
        let ids = RunIds {
            thread_id: "t".into(),
            run_id: "r".into(),
        };
        let spec = PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids);
        String::from_utf8(translate_all(spec, input.as_bytes()).unwrap().to_vec()).unwrap()
    }

    /// Numbers an event carries through the gateway keep their value to the last bit: a
    /// number parsed to a neighbouring double would be written back as another number (found
    /// by the `round_trip` fuzz target; serde_json's `float_roundtrip`).
    #[test]
    fn numbers_keep_their_value_through_the_gateway() {
        let numbers = [
            "5.555555555555555e96",
            "0.1",
            "2.2250738585072014e-308",
            "1e23",
        ];
        let state = format!("[{}]", numbers.join(","));
        let input = format!(
            "data: {{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}}\n\n\
             data: {{\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{state}}}\n\n\
             data: {{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}}\n\n"
        );
        let out = agui(&input);
        let snapshot = out
            .split("\n\n")
            .find(|frame| frame.contains("STATE_SNAPSHOT"))
            .expect("the snapshot");
        let written: serde_json::Value =
            serde_json::from_str(snapshot.trim_start_matches("data: ")).unwrap();
        let values: Vec<f64> = numbers.iter().map(|n| n.parse().unwrap()).collect();
        let kept: Vec<f64> = written["snapshot"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(kept, values, "{snapshot}");
    }

    /// AG-UI → AG-UI forwards the bytes of a delta the pipeline leaves as it is, and encodes
    /// again what it changes: here, the delta of a message a subagent opened takes its lane.
    #[test]
    fn unchanged_deltas_keep_their_bytes_and_changed_ones_are_encoded_again() {
        // Compact, in its own key order and escapes: forwarded as it came.
        let delta = r#"{"messageId":"m","delta":"a\u0062","type":"TEXT_MESSAGE_CONTENT"}"#;
        // The same with spaces: written compact, as every event the gateway writes.
        let spaced = r#"{"messageId":"m", "delta":"c", "type":"TEXT_MESSAGE_CONTENT"}"#;
        let lane_delta = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"s1","delta":"x"}"#;
        let input = [
            r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
            delta,
            spaced,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"s1","subagentRunId":"sub"}"#,
            lane_delta,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"s1"}"#,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
            r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
        ]
        .map(|data| format!("data: {data}\n\n"))
        .concat();
        let out = agui(&input);
        assert!(out.contains(&format!("data: {delta}\n\n")), "{out}");
        assert!(!out.contains(spaced), "{out}");
        assert!(
            out.contains(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"c"}"#),
            "{out}"
        );
        assert!(!out.contains(lane_delta), "{out}");
        assert!(
            out.contains(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"s1","delta":"x","subagentRunId":"sub"}"#),
            "{out}"
        );
    }

    /// A quiet stream's buffers go, and the stream reads on as if they had stayed: the same
    /// bytes out with a release between every event as without any.
    #[test]
    fn released_buffers_change_nothing_but_what_is_held() {
        let events = [
            r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
            r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"assistant","delta":"a"}"#,
            r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"b"}"#,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
            r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
        ];
        let ids = RunIds {
            thread_id: "t".into(),
            run_id: "r".into(),
        };
        let spec = || PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids.clone());
        let mut kept = Pipeline::new(spec()).unwrap();
        let mut released = Pipeline::new(spec()).unwrap();
        let (mut kept_out, mut released_out) = (BytesMut::new(), BytesMut::new());
        for event in events {
            let frame = format!("data: {event}\n\n");
            // Half an event first: the decoder holds it over the release.
            let (head, tail) = frame.as_bytes().split_at(frame.len() / 2);
            kept.push(head, &mut kept_out);
            kept.push(tail, &mut kept_out);
            released.push(head, &mut released_out);
            released.release();
            assert!(
                !released.buf.is_empty(),
                "the cut event is held over the release"
            );
            released.push(tail, &mut released_out);
            released.release();
            assert_eq!(released.notes.capacity(), 0);
        }
        kept.end(&mut kept_out);
        released.end(&mut released_out);
        assert_eq!(kept_out, released_out);
        let out = String::from_utf8_lossy(&released_out);
        assert!(
            out.contains("TEXT_MESSAGE_START") && out.contains("RUN_FINISHED"),
            "{out}"
        );
    }

    /// A delta whose data came in several `data:` lines is written as one.
    #[test]
    fn a_multi_line_delta_is_written_on_one_line() {
        let input = "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\ndata: \"messageId\":\"m\",\"delta\":\"x\"}\n\n";
        let out = agui(input);
        assert!(
            out.contains(
                "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"x\"}\n\n"
            ),
            "{out}"
        );
    }
}
