//! The two traits a wire dialect implements, and all the pipeline knows of one: a [`Reader`]
//! (wire → canonical events plus notes) and a [`Writer`] (canonical events → wire).
//!
//! Both are plain synchronous state machines (`STYLE.md` §1): they take one input and append
//! zero or more outputs to buffers the caller owns and reuses; they never log, read a clock or
//! touch the network. What a stateful protocol needs beyond one request (AAP's sessions and
//! turns) is not expressed here: the adapter that owns such a run builds the pipeline with the
//! concrete reader or writer type and reads its results from it directly.
//!
//! Imports nothing of its siblings, so every dialect folder can depend on it.

use bytes::BytesMut;

use crate::error::Failure;
use crate::event::{DeltaRef, Event, Note};
use crate::sse::{Framing, SseEvent, SseEventRef};

/// Wire → canonical. Never fails on bad input: what cannot be used is dropped and noted; `Err`
/// means the upstream's stream is unusable and the run must end with that failure.
pub trait Reader: Send + Unpin {
    /// Events the run opens with before any upstream byte, when the upstream's answers only
    /// start after requests of the gateway's own (an AAP agent: `RUN_STARTED` at once).
    fn start(&mut self, _out: &mut Vec<Event>) {}

    /// Reads one decoded upstream event.
    fn read(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure>;

    /// An event when it is a content delta this reader can lend without building the
    /// event ([`DeltaRef`]): what [`Reader::read`] would produce for it, with no note, and the
    /// reader's state moved on as `read` would move it. `None`: call `read`.
    fn read_delta<'a>(&'a mut self, _event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
        None
    }

    /// The upstream's body ended and everything it held was read: what the reader kept back
    /// comes out now (an AAP turn's held stop becomes the run's terminal events).
    fn finish(&mut self, _out: &mut Vec<Event>) {}

    /// True when the upstream's current response ended at a point where the run may go on
    /// with another request of the same run (an AAP turn's stop): the run's owner decides.
    fn at_handover(&self) -> bool {
        false
    }

    /// The run goes on with the next upstream response, framed as `framing`.
    fn next_response(&mut self, _framing: Framing) {}
}

/// Canonical → wire. `Err` means the client's dialect cannot carry the run further (a bound of
/// the writer was reached); the pipeline then ends the run and the writer writes that end.
pub trait Writer: Send + Unpin {
    /// Appends the wire form of one canonical event.
    fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure>;

    /// Writes a content delta the pipeline lends ([`Reader::read_delta`]) when the writer can
    /// without the event: the same bytes, state and result as [`Writer::write`] of
    /// [`DeltaRef::into_event`]. `None`: the writer wrote nothing and wants the event.
    fn write_delta(
        &mut self,
        _delta: &DeltaRef<'_>,
        _out: &mut BytesMut,
    ) -> Option<Result<(), Failure>> {
        None
    }

    /// What the client receives before the first upstream byte when its dialect opens a
    /// stream with an event of its own (AAP's `turn_start`); otherwise the transport's
    /// opening comment is sent.
    fn opening(&self) -> Option<&'static [u8]> {
        None
    }

    /// False when the client's wire is one document rather than an event stream (AAP's
    /// `none` mode): nothing but the writer's output may go into it (no comments, no
    /// heartbeats).
    fn is_stream(&self) -> bool {
        true
    }

    /// Whether the writer stamps events with the time handed to [`Writer::set_now`].
    fn wants_clock(&self) -> bool {
        false
    }

    /// The time for the events of the next upstream chunk, in milliseconds since the epoch.
    fn set_now(&mut self, _now_ms: i64) {}

    /// Moves what the writer noted since the last call into `notes`: what it had to leave
    /// aside while writing (a state patch that does not apply to the state it keeps).
    fn take_notes(&mut self, _notes: &mut Vec<Note>) {}

    /// How the client's dialect takes a stream that carries several runs.
    fn runs(&self) -> Runs {
        Runs::Several
    }
}

/// How a client's dialect takes an upstream stream that carries several runs in sequence
/// (AG-UI 1.1: a new `RUN_STARTED` after a closed run, a late `RUN_ERROR` after
/// `RUN_FINISHED`). The sequencer applies it; the writer only declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// Every run as it comes (AG-UI).
    Several,
    /// One run per stream: the client cannot follow a second one (HAI's client, a fork of the
    /// 0.0 AG-UI client, rejects anything after `RUN_FINISHED`; an AAP turn has one stop).
    /// Later runs fold into the first: each boundary becomes one `CUSTOM` event named
    /// `boundary` whose value holds the `RUN_FINISHED` and `RUN_STARTED` it replaces, and the
    /// stream's one `RUN_FINISHED` waits for the upstream's end. A `RUN_ERROR` ends the stream:
    /// folding past it would hide the failure.
    Folded { boundary: &'static str },
}
