//! The run lifecycle guard (`dialects.md` rows 4, 5, 21–24; `agui.md` §5.2 and §9).
//!
//! Whatever a reader hands it, the stream it emits holds the canonical invariants:
//! `RUN_STARTED` first (synthesised from the request when missing, ids rewritten to the
//! request's), every text message, tool call, reasoning message and span, step and subagent
//! closed before `RUN_FINISHED`, exactly one terminal event, and nothing after it. Upstream end
//! without a terminal and upstream failure become `RUN_ERROR` with a gateway code.

use crate::error::{ErrorCode, Failure};
use crate::event::{
    Event, EventBase, ReasoningEnd, ReasoningMessageEnd, ReasoningMessageStart, RunError,
    RunOutcome, RunStarted, StepFinished, SubagentFinished, TextMessageEnd, TextMessageStart,
    ToolCallEnd, PROTOCOL_VERSION,
};

use super::{DropKind, Note, Rule, RunIds};

/// One input to the sequencer.
// Inputs are consumed at once, never stored: boxing the event would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Input {
    Event(Event),
    /// The upstream body ended.
    UpstreamEnd,
    /// The upstream broke, stalled or sent something unusable.
    UpstreamFailed(Failure),
}

/// Kinds of entities that open and must close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    ReasoningMessage,
    ReasoningSpan,
    Step,
    Subagent,
}

/// One open entity. `lane` is the opener's `subagentRunId`: closing events carry it, and
/// steps are keyed by it (the 1.0 client tracks steps per subagent, everything else globally).
#[derive(Debug)]
struct Open {
    kind: Kind,
    id: String,
    lane: Option<String>,
}

impl Open {
    fn is(&self, kind: Kind, id: &str, lane: &Option<String>) -> bool {
        self.kind == kind && self.id == id && (kind != Kind::Step || self.lane == *lane)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Running,
    Finished,
}

/// See the module docs.
#[derive(Debug)]
pub struct RunSequencer {
    ids: RunIds,
    /// Keep the upstream's `threadId`/`runId` instead of rewriting them to the request's.
    keep_upstream_run_ids: bool,
    phase: Phase,
    /// Open entities in opening order; closing walks it backwards (innermost first).
    open: Vec<Open>,
    /// The `subagentRunId` of the event being sequenced.
    lane: Option<String>,
}

impl RunSequencer {
    pub fn new(ids: RunIds) -> RunSequencer {
        RunSequencer {
            ids,
            keep_upstream_run_ids: false,
            phase: Phase::NotStarted,
            open: Vec::new(),
            lane: None,
        }
    }

    /// Keep upstream run ids (`keep_upstream_run_ids = true`); missing ones are still filled.
    pub fn keep_upstream_run_ids(mut self, keep: bool) -> RunSequencer {
        self.keep_upstream_run_ids = keep;
        self
    }

    /// True once the terminal event has been emitted.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// Feeds one input; appends what the client must see to `out`. Never fails: bad input is
    /// dropped (noted) or ends the run with `RUN_ERROR`.
    pub fn step(&mut self, input: Input, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        if self.phase == Phase::Finished {
            if matches!(input, Input::Event(_)) {
                notes.push(Note::Dropped(DropKind::AfterTerminal));
            }
            return;
        }
        match input {
            Input::Event(event) => self.event(event, out, notes),
            Input::UpstreamEnd => self.fail(
                Failure::new(
                    ErrorCode::UpstreamTruncated,
                    "upstream stream ended without a terminal event",
                ),
                out,
                notes,
            ),
            Input::UpstreamFailed(failure) => self.fail(failure, out, notes),
        }
    }

    fn fail(&mut self, failure: Failure, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        let error = RunError {
            message: failure.message,
            code: Some(failure.code.as_str().into_owned()),
            usage: None,
            base: EventBase::default(),
        };
        self.event(Event::RunError(error), out, notes);
    }

    fn is_open(&self, kind: Kind, id: &str) -> bool {
        self.open.iter().any(|o| o.is(kind, id, &self.lane))
    }

    /// Marks an entity open in the current lane.
    fn push_open(&mut self, kind: Kind, id: &str) {
        self.open.push(Open {
            kind,
            id: id.to_string(),
            lane: self.lane.clone(),
        });
    }

    /// Removes an open entity; false when it was not open.
    fn close(&mut self, kind: Kind, id: &str) -> bool {
        match self.open.iter().rposition(|o| o.is(kind, id, &self.lane)) {
            Some(pos) => {
                self.open.remove(pos);
                true
            }
            None => false,
        }
    }

    /// Opens an entity, or notes a duplicate start; true when the event should pass.
    fn open(&mut self, kind: Kind, id: &str, notes: &mut Vec<Note>) -> bool {
        if self.is_open(kind, id) {
            notes.push(Note::Dropped(DropKind::DuplicateStart));
            return false;
        }
        self.push_open(kind, id);
        true
    }

    fn start_run(&mut self, out: &mut Vec<Event>) {
        out.push(Event::RunStarted(RunStarted {
            thread_id: self.ids.thread_id.clone(),
            run_id: self.ids.run_id.clone(),
            protocol_version: Some(PROTOCOL_VERSION.to_string()),
            parent_run_id: None,
            input: None,
            base: EventBase::default(),
        }));
        self.phase = Phase::Running;
    }

    /// Fills or rewrites a run's ids from the request.
    fn fix_ids(&self, thread_id: &mut String, run_id: &mut String, notes: &mut Vec<Note>) {
        for (have, want) in [(thread_id, &self.ids.thread_id), (run_id, &self.ids.run_id)] {
            if have != want && (have.is_empty() || !self.keep_upstream_run_ids) {
                have.clone_from(want);
                notes.push(Note::Fixup(Rule::RunIds));
            }
        }
    }

    fn close_all(&mut self, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        while let Some(open) = self.open.pop() {
            notes.push(Note::Fixup(Rule::UnclosedEntities));
            out.push(closing_event(open.kind, open.id, open.lane));
        }
    }

    fn event(&mut self, mut event: Event, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        self.lane.clone_from(&event.base().subagent_run_id);
        if self.phase == Phase::NotStarted {
            if let Event::RunStarted(started) = &mut event {
                self.fix_ids(&mut started.thread_id, &mut started.run_id, notes);
                started.protocol_version = Some(PROTOCOL_VERSION.to_string());
                self.phase = Phase::Running;
                out.push(event);
                return;
            }
            notes.push(Note::Fixup(Rule::MissingRunStarted));
            self.start_run(out);
        }
        let pass = match &mut event {
            Event::RunStarted(_) => {
                notes.push(Note::Dropped(DropKind::DuplicateStart));
                false
            }
            Event::RunFinished(finished) => {
                self.close_all(out, notes);
                self.fix_ids(&mut finished.thread_id, &mut finished.run_id, notes);
                if matches!(&finished.outcome, Some(RunOutcome::Interrupt { interrupts }) if interrupts.is_empty())
                {
                    finished.outcome = None;
                    notes.push(Note::Fixup(Rule::Outcome));
                }
                self.phase = Phase::Finished;
                true
            }
            Event::RunError(_) => {
                self.open.clear();
                self.phase = Phase::Finished;
                true
            }
            Event::TextMessageStart(e) => self.open(Kind::Text, &e.message_id, notes),
            Event::TextMessageContent(e) => {
                if !self.is_open(Kind::Text, &e.message_id) {
                    // Content for a closed or unseen id re-opens it: 1.0 clients append to the
                    // same message.
                    notes.push(Note::Fixup(Rule::OutOfOrder));
                    self.push_open(Kind::Text, &e.message_id);
                    out.push(Event::TextMessageStart(TextMessageStart {
                        message_id: e.message_id.clone(),
                        role: Default::default(),
                        name: None,
                        base: lane_base(&self.lane),
                    }));
                }
                true
            }
            Event::TextMessageEnd(e) => self.close_or_drop(Kind::Text, &e.message_id, notes),
            Event::ToolCallStart(e) => self.open(Kind::Tool, &e.tool_call_id, notes),
            Event::ToolCallArgs(e) => {
                let open = self.is_open(Kind::Tool, &e.tool_call_id);
                if !open {
                    notes.push(Note::Dropped(DropKind::Orphan));
                }
                open
            }
            Event::ToolCallEnd(e) => self.close_or_drop(Kind::Tool, &e.tool_call_id, notes),
            Event::ToolCallResult(e) => {
                if self.close(Kind::Tool, &e.tool_call_id) {
                    notes.push(Note::Fixup(Rule::OutOfOrder));
                    out.push(closing_event(
                        Kind::Tool,
                        e.tool_call_id.clone(),
                        self.lane.clone(),
                    ));
                }
                true
            }
            Event::StepStarted(e) => self.open(Kind::Step, &e.step_name, notes),
            Event::StepFinished(e) => self.close_or_drop(Kind::Step, &e.step_name, notes),
            Event::ReasoningStart(e) => self.open(Kind::ReasoningSpan, &e.message_id, notes),
            Event::ReasoningEnd(e) => self.close_or_drop(Kind::ReasoningSpan, &e.message_id, notes),
            Event::ReasoningMessageStart(e) => {
                self.open(Kind::ReasoningMessage, &e.message_id, notes)
            }
            Event::ReasoningMessageContent(e) => {
                if !self.is_open(Kind::ReasoningMessage, &e.message_id) {
                    notes.push(Note::Fixup(Rule::OutOfOrder));
                    self.push_open(Kind::ReasoningMessage, &e.message_id);
                    out.push(Event::ReasoningMessageStart(ReasoningMessageStart {
                        message_id: e.message_id.clone(),
                        role: Default::default(),
                        base: lane_base(&self.lane),
                    }));
                }
                true
            }
            Event::ReasoningMessageEnd(e) => {
                self.close_or_drop(Kind::ReasoningMessage, &e.message_id, notes)
            }
            Event::SubagentStarted(e) => self.open(Kind::Subagent, &e.subagent_run_id, notes),
            Event::SubagentFinished(e) => {
                self.close_or_drop(Kind::Subagent, &e.subagent_run_id, notes)
            }
            Event::SubagentError(e) => {
                self.close_or_drop(Kind::Subagent, &e.subagent_run_id, notes)
            }
            // Readers expand chunks; one that slips through cannot be sent to a 1.0 client.
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => {
                notes.push(Note::Dropped(DropKind::InvalidEvent));
                false
            }
            Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::MessagesSnapshot(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::ReasoningEncryptedValue(_)
            | Event::Raw(_)
            | Event::Custom(_) => true,
        };
        if pass {
            out.push(event);
        }
    }

    fn close_or_drop(&mut self, kind: Kind, id: &str, notes: &mut Vec<Note>) -> bool {
        let closed = self.close(kind, id);
        if !closed {
            notes.push(Note::Dropped(DropKind::Orphan));
        }
        closed
    }
}

fn lane_base(lane: &Option<String>) -> EventBase {
    EventBase {
        subagent_run_id: lane.clone(),
        ..EventBase::default()
    }
}

/// The event that closes an open entity, attributed to the opener's lane.
fn closing_event(kind: Kind, id: String, lane: Option<String>) -> Event {
    let base = EventBase {
        subagent_run_id: lane,
        ..EventBase::default()
    };
    match kind {
        Kind::Text => Event::TextMessageEnd(TextMessageEnd {
            message_id: id,
            base,
        }),
        Kind::Tool => Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: id,
            base,
        }),
        Kind::ReasoningMessage => Event::ReasoningMessageEnd(ReasoningMessageEnd {
            message_id: id,
            base,
        }),
        Kind::ReasoningSpan => Event::ReasoningEnd(ReasoningEnd {
            message_id: id,
            base,
        }),
        Kind::Step => Event::StepFinished(StepFinished {
            step_name: id,
            base,
        }),
        Kind::Subagent => Event::SubagentFinished(SubagentFinished {
            subagent_run_id: id,
            result: None,
            outcome: None,
            base,
        }),
    }
}

#[cfg(test)]
#[path = "sequencer_tests.rs"]
mod tests;
