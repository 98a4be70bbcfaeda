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
    RunFinished, RunOutcome, RunStarted, StepFinished, SubagentFinished, TextMessageEnd,
    TextMessageStart, ToolCallEnd, PROTOCOL_VERSION,
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
    open: Vec<(Kind, String)>,
}

impl RunSequencer {
    pub fn new(ids: RunIds) -> RunSequencer {
        RunSequencer {
            ids,
            keep_upstream_run_ids: false,
            phase: Phase::NotStarted,
            open: Vec::new(),
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
        self.open.iter().any(|(k, i)| *k == kind && i == id)
    }

    /// Removes an open entity; false when it was not open.
    fn close(&mut self, kind: Kind, id: &str) -> bool {
        match self.open.iter().rposition(|(k, i)| *k == kind && i == id) {
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
        self.open.push((kind, id.to_string()));
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
        while let Some((kind, id)) = self.open.pop() {
            notes.push(Note::Fixup(Rule::UnclosedEntities));
            out.push(closing_event(kind, id));
        }
    }

    fn event(&mut self, mut event: Event, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
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
                    self.open.push((Kind::Text, e.message_id.clone()));
                    out.push(Event::TextMessageStart(TextMessageStart {
                        message_id: e.message_id.clone(),
                        role: Default::default(),
                        name: None,
                        base: EventBase::default(),
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
                    out.push(closing_event(Kind::Tool, e.tool_call_id.clone()));
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
                    self.open
                        .push((Kind::ReasoningMessage, e.message_id.clone()));
                    out.push(Event::ReasoningMessageStart(ReasoningMessageStart {
                        message_id: e.message_id.clone(),
                        role: Default::default(),
                        base: EventBase::default(),
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

/// The event that closes an open entity.
fn closing_event(kind: Kind, id: String) -> Event {
    let base = EventBase::default();
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

/// Convenience for callers that build a `RUN_FINISHED` themselves.
pub fn run_finished(ids: &RunIds) -> RunFinished {
    RunFinished {
        thread_id: ids.thread_id.clone(),
        run_id: ids.run_id.clone(),
        result: None,
        outcome: None,
        usage: None,
        base: EventBase::default(),
    }
}

#[cfg(test)]
#[path = "sequencer_tests.rs"]
mod tests;
