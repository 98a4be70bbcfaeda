//! Decoder → reader → sequencer → writer: upstream bytes in, client bytes out.
//!
//! The one code path behind both the proxy's translating body and the `translate` command, so
//! what an operator replays offline is exactly what the gateway does live. Synchronous and
//! allocation-light: scratch vectors are reused between calls, and each call appends the
//! encoded events produced by the bytes it was given. Only what the protocol makes incomplete
//! waits for later bytes: a partial SSE event, and object tool arguments held until the call's
//! end (`dialects.md` row 6).

use std::fmt;

use bytes::BytesMut;

use crate::dialect::aap::read::{AapReader, ReadOptions, TurnEnd};
use crate::dialect::aap::{AapWriter, TurnOptions};
use crate::dialect::agui::{AguiReader, AguiWriter, ReaderOptions, UnknownFields};
use crate::dialect::hai::{HaiOptions, HaiReader, HaiWriter};
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::event::{Event, Message};
use crate::mapping::Mappings;
use crate::sse::{Framing, SseDecoder, SseError, SseItem, DEFAULT_MAX_EVENT_BYTES};

use crate::dialect::aap::transcript::Transcript;
use crate::event::{Clock, DropKind, Note, RunIds};

pub mod owners;
pub mod sequencer;
pub mod verify;

pub use sequencer::{Input, RunSequencer};

/// What a pipeline is built from.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub upstream: Dialect,
    pub client: Dialect,
    pub ids: RunIds,
    pub mappings: Mappings,
    pub max_event_bytes: usize,
    /// How the upstream frames its events (from its `Content-Type`).
    pub framing: Framing,
    pub keep_upstream_run_ids: bool,
    pub unknown_fields: UnknownFields,
    /// Policy choices of the AG-UI reader.
    pub reader: ReaderOptions,
    /// HAI's reader and writer profile.
    pub hai: HaiOptions,
    /// Names of the frontend tools the request declared.
    pub tools: Vec<String>,
    /// The time stamped on events of dialects that require one.
    pub clock: Clock,
    /// The AAP turn a run answers, when the client speaks AAP.
    pub aap: AapTurn,
    /// How an AAP upstream's turns are read, when the upstream speaks AAP.
    pub aap_read: ReadOptions,
}

/// What an AAP client's writer starts from: the turn's options, and the session history and
/// state the run continues (its transcript grows from them).
#[derive(Debug, Clone)]
pub struct AapTurn {
    pub options: TurnOptions,
    pub history: Vec<Message>,
    pub state: Option<serde_json::Value>,
    /// Bytes the run may add to the history.
    pub budget: usize,
}

impl Default for AapTurn {
    fn default() -> Self {
        AapTurn {
            options: TurnOptions {
                confirm_tool: crate::dialect::confirm::DEFAULT_TOOL.into(),
                ..TurnOptions::default()
            },
            history: Vec::new(),
            state: None,
            budget: DEFAULT_TURN_BUDGET,
        }
    }
}

/// What one run may add to a transcript when nothing smaller is configured.
pub const DEFAULT_TURN_BUDGET: usize = 64 << 20;

impl PipelineSpec {
    /// Defaults for everything but the dialects and ids.
    pub fn new(upstream: Dialect, client: Dialect, ids: RunIds) -> PipelineSpec {
        PipelineSpec {
            upstream,
            client,
            ids,
            mappings: Mappings::builtin(),
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            framing: Framing::Sse,
            keep_upstream_run_ids: false,
            unknown_fields: UnknownFields::default(),
            reader: ReaderOptions::default(),
            hai: HaiOptions::default(),
            tools: Vec::new(),
            clock: Clock::Fixed(0),
            aap: AapTurn::default(),
            aap_read: ReadOptions::default(),
        }
    }
}

/// A dialect pair the build cannot translate yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("translating {from} to {to} is not supported by this build")]
pub struct Unsupported {
    pub from: Dialect,
    pub to: Dialect,
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

enum Reader {
    AgUi(Box<AguiReader>),
    Hai(Box<HaiReader>),
    Aap(Box<AapReader>),
}

enum Writer {
    AgUi(AguiWriter),
    Hai(Box<HaiWriter>),
    Aap(Box<AapWriter>),
}

/// See the module docs.
pub struct Pipeline {
    decoder: SseDecoder,
    buf: BytesMut,
    reader: Reader,
    sequencer: RunSequencer,
    writer: Writer,
    read_out: Vec<Event>,
    seq_out: Vec<Event>,
    notes: Vec<Note>,
    stats: StreamStats,
    /// How often each repair and drop happened (a handful of distinct notes per stream).
    note_counts: Vec<(Note, u64)>,
    /// Why the run ended, when the gateway ended it.
    failure: Option<ErrorCode>,
    clock: Clock,
    max_event_bytes: usize,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("stats", &self.stats)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    pub fn new(spec: PipelineSpec) -> Result<Pipeline, Unsupported> {
        if spec.upstream == Dialect::Aap && spec.client == Dialect::Aap {
            return Err(Unsupported {
                from: spec.upstream,
                to: spec.client,
            });
        }
        let reader = match spec.upstream {
            Dialect::AgUi => Reader::AgUi(Box::new(AguiReader::new(
                &spec.ids,
                spec.mappings.agui.clone(),
                spec.reader,
            ))),
            Dialect::Hai => Reader::Hai(Box::new(HaiReader::new(
                &spec.ids,
                &spec.mappings,
                spec.reader,
                &spec.hai,
                spec.tools,
            ))),
            Dialect::Aap => {
                let mut reader = AapReader::new(&spec.ids, spec.aap_read);
                reader.set_json(spec.framing == Framing::Json);
                Reader::Aap(Box::new(reader))
            }
        };
        let writer = match spec.client {
            Dialect::AgUi => Writer::AgUi(AguiWriter::new(spec.unknown_fields)),
            Dialect::Hai => Writer::Hai(Box::new(HaiWriter::new(spec.hai.writer))),
            Dialect::Aap => {
                let turn = spec.aap;
                let transcript = Transcript::new(turn.history, turn.state, turn.budget);
                Writer::Aap(Box::new(AapWriter::new(turn.options, transcript)))
            }
        };
        Ok(Pipeline {
            decoder: SseDecoder::with_framing(spec.framing, spec.max_event_bytes),
            buf: BytesMut::new(),
            reader,
            sequencer: RunSequencer::new(spec.ids)
                .keep_upstream_run_ids(spec.keep_upstream_run_ids),
            writer,
            read_out: Vec::new(),
            seq_out: Vec::new(),
            notes: Vec::new(),
            stats: StreamStats::default(),
            note_counts: Vec::new(),
            failure: None,
            clock: spec.clock,
            max_event_bytes: spec.max_event_bytes,
        })
    }

    /// Writes what the run opens with before the upstream is contacted: `RUN_STARTED` when
    /// the upstream's turns only start after requests of the gateway's own (AAP).
    pub fn begin(&mut self, out: &mut BytesMut) {
        self.tick();
        if let Reader::Aap(reader) = &mut self.reader {
            reader.start(&mut self.read_out);
            self.step_read(out);
        }
    }

    /// The stop of the AAP upstream's current turn, once read and until the run goes on or
    /// ends: the moment to decide what follows.
    pub fn turn_stop(&self) -> Option<&TurnEnd> {
        match &self.reader {
            Reader::Aap(r) if !self.is_finished() => r.stop(),
            _ => None,
        }
    }

    /// The AAP reader, for what a run's owner records when it ends.
    pub fn aap_reader(&self) -> Option<&AapReader> {
        match &self.reader {
            Reader::Aap(r) => Some(r),
            _ => None,
        }
    }

    /// Continues the run with the AAP upstream's next turn, framed as `framing`.
    pub fn next_turn(&mut self, framing: Framing) {
        if let Reader::Aap(r) = &mut self.reader {
            r.next_turn();
            r.set_json(framing == Framing::Json);
        }
        self.decoder = SseDecoder::with_framing(framing, self.max_event_bytes);
        self.buf.clear();
    }

    /// True once the terminal event has been written; later input is ignored.
    pub fn is_finished(&self) -> bool {
        self.sequencer.is_finished()
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
    /// stream with an event (AAP's `turn_start`).
    pub fn opening(&self) -> Option<&'static [u8]> {
        match &self.writer {
            Writer::Aap(w) => w.opening(),
            _ => None,
        }
    }

    /// The AAP writer, to take its results once the run is over.
    pub fn aap_mut(&mut self) -> Option<&mut AapWriter> {
        match &mut self.writer {
            Writer::Aap(w) => Some(w),
            _ => None,
        }
    }

    /// Feeds upstream bytes; appends the client's bytes for every complete event to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut BytesMut) {
        if self.is_finished() {
            return;
        }
        self.tick();
        self.buf.extend_from_slice(chunk);
        loop {
            let item = self.decoder.decode(&mut self.buf);
            if !self.item(item, out) {
                break;
            }
        }
    }

    /// The upstream body ended: flushes a last event without its blank line, then ends the run
    /// (`UPSTREAM_TRUNCATED` unless a terminal event was seen).
    pub fn end(&mut self, out: &mut BytesMut) {
        self.drain_eof(out);
        if let Reader::Aap(reader) = &mut self.reader {
            // The held stop becomes the terminal events; without one, what is open closes
            // before the truncation is reported.
            reader.finish(&mut self.read_out);
            self.step_read(out);
        }
        self.step(Input::UpstreamEnd, out);
    }

    /// The upstream body ended: decodes what it left (a last event without its blank line, a
    /// whole JSON body) without ending the run, so a turn's stop can still hand over.
    pub fn drain_eof(&mut self, out: &mut BytesMut) {
        self.tick();
        while !self.is_finished() {
            let item = self.decoder.decode_eof(&mut self.buf);
            if !self.item(item, out) {
                break;
            }
        }
    }

    /// The upstream failed (read error, idle timeout, shutdown): ends the run with `failure`.
    pub fn fail(&mut self, failure: Failure, out: &mut BytesMut) {
        self.tick();
        self.step(Input::UpstreamFailed(failure), out);
    }

    /// Reads the clock for the events of this call (one reading per upstream chunk).
    fn tick(&mut self) {
        if let Writer::Hai(w) = &mut self.writer {
            w.set_now(self.clock.now_ms());
        }
    }

    /// Handles one decoder result; false when decoding must stop.
    fn item(&mut self, item: Result<Option<SseItem>, SseError>, out: &mut BytesMut) -> bool {
        match item {
            Ok(Some(SseItem::Event(event))) => {
                self.stats.events_in += 1;
                let result = match &mut self.reader {
                    Reader::AgUi(r) => r.read(&event, &mut self.read_out, &mut self.notes),
                    Reader::Hai(r) => r.read(&event, &mut self.read_out, &mut self.notes),
                    Reader::Aap(r) => r.read(&event, &mut self.read_out, &mut self.notes),
                };
                self.step_read(out);
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

    /// Steps every event the reader produced (the buffer is kept for reuse).
    fn step_read(&mut self, out: &mut BytesMut) {
        let mut events = std::mem::take(&mut self.read_out);
        for event in events.drain(..) {
            self.step(Input::Event(event), out);
        }
        self.read_out = events;
    }

    fn step(&mut self, input: Input, out: &mut BytesMut) {
        if let Input::UpstreamFailed(f) = &input {
            if !self.is_finished() {
                self.failure = Some(f.code);
            }
        }
        if matches!(input, Input::UpstreamEnd) && !self.is_finished() {
            self.failure = Some(ErrorCode::UpstreamTruncated);
        }
        self.sequencer
            .step(input, &mut self.seq_out, &mut self.notes);
        let mut refused = None;
        for event in self.seq_out.drain(..) {
            if refused.is_some() {
                break;
            }
            self.stats.events_out += 1;
            match &mut self.writer {
                Writer::AgUi(w) => w.write(event, out),
                Writer::Hai(w) => refused = w.write(event, out).err(),
                Writer::Aap(w) => refused = w.write(event, out).err(),
            }
        }
        self.seq_out.clear();
        if let Some(failure) = refused {
            // The client's dialect cannot carry the run further (a bound of the writer): the
            // sequencer ends it like an upstream failure, and the writer writes that end.
            self.step(Input::UpstreamFailed(failure), out);
        }
        for note in self.notes.drain(..) {
            match self.note_counts.iter_mut().find(|(n, _)| *n == note) {
                Some((_, count)) => *count += 1,
                None => self.note_counts.push((note, 1)),
            }
            match note {
                Note::Fixup(rule) => {
                    self.stats.fixups += 1;
                    tracing::trace!(rule = rule.as_str(), "dialect fix-up");
                }
                Note::Dropped(kind) => {
                    self.stats.dropped += 1;
                    tracing::trace!(kind = kind.as_str(), "dropped upstream input");
                }
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
