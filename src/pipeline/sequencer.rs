//! The run lifecycle guard (`dialects.md` rows 4, 5, 21–24; `agui.md` §5.2 and §9; AG-UI 1.1
//! "Runs and Steps").
//!
//! Whatever a reader hands it, the stream it emits holds the canonical invariants:
//! `RUN_STARTED` first (synthesised from the request when missing, ids rewritten to the
//! request's), every text message, tool call, reasoning message and span, step and subagent
//! closed before `RUN_FINISHED`, exactly one terminal event per run, and the stream's last run
//! always ended. Upstream end without a terminal and upstream failure become `RUN_ERROR` with a
//! gateway code.
//!
//! A stream may carry several runs in sequence (1.1): after a run closes, a `RUN_STARTED`
//! opens the next one with nothing open, and a `RUN_ERROR` after `RUN_FINISHED` reports a late
//! failure of the run that closed; anything else after a close is dropped. How the client's
//! dialect takes them is its writer's [`Runs`]: every run as it comes, or folded into one run.
//! The stream is over when the upstream ends (or fails, or, folded, at a `RUN_ERROR`); an
//! upstream that ends or fails between runs ends the stream cleanly, since every run it
//! carried was ended.
//!
//! It also keeps the 1.0 client's attribution rules (`agui.md` §5.2): an event that continues
//! or closes an entity carries its opener's `subagentRunId`; steps are tracked per subagent
//! lane; a subagent id is used once; a tool call's `parentMessageId` names an assistant message
//! of the same lane or is dropped; run-level events carry no `subagentRunId`. Where the upstream
//! contradicts itself so that no repair keeps every byte with its owner (a tool call id reused
//! under another name, a terminal naming another run), the run ends with `RUN_ERROR`.
//!
//! Memory is bounded: at most [`MAX_OPEN_ENTITIES`] open entities with ids of at most
//! [`MAX_ID_BYTES`] (beyond: `UPSTREAM_LIMIT_EXCEEDED`), and at most [`MAX_TRACKED_IDS`]
//! remembered message and subagent ids per run (beyond, checks that need them degrade, never
//! fail).

use crate::dialect::Runs;
use crate::error::{ErrorCode, Failure};
use crate::event::{
    Custom, Event, EventBase, ReasoningMessageStart, RunError, RunFinished, RunOutcome, RunStarted,
    TextMessageStart, TextRole, PROTOCOL_VERSION,
};
// Entities that open and must close, and the events that end them.
use crate::event::Entity as Kind;

use super::owners::{Owners, Space};
use crate::event::{DeltaKind, DeltaRef, DropKind, Note, Rule, RunIds};

/// Entities open at once in one run.
pub const MAX_OPEN_ENTITIES: usize = 1024;
/// Longest id (message, tool call, step name, …) the guard accepts.
pub const MAX_ID_BYTES: usize = 4096;
/// Message and subagent ids remembered per run for the attribution checks.
pub use super::owners::MAX_TRACKED_IDS;

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

/// One open entity. `lane` is the opener's `subagentRunId`: closing events carry it, and
/// steps are keyed by it (the 1.0 client tracks steps per subagent, everything else globally).
#[derive(Debug)]
struct Open {
    kind: Kind,
    id: String,
    lane: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Running,
    /// The run closed (`errored`: with `RUN_ERROR`); another may start on the stream.
    Closed {
        errored: bool,
    },
    /// The stream is over: nothing more is read.
    Ended,
}

/// See the module docs.
#[derive(Debug)]
pub struct RunSequencer {
    ids: RunIds,
    /// Keep the upstream's `threadId`/`runId` instead of rewriting them to the request's.
    keep_upstream_run_ids: bool,
    phase: Phase,
    /// How the client takes several runs.
    runs: Runs,
    /// Runs started on this stream.
    started: u64,
    /// The current run's ids as the upstream declared them on its `RUN_STARTED` (empty when
    /// it sent none): a terminal naming other ids ends the run.
    declared: RunIds,
    /// The current run's ids as the client sees them.
    current: RunIds,
    /// Folded runs: the terminal events of the run that closed, written when the stream ends
    /// or carried by the boundary when another run starts.
    held: Held,
    /// The gateway code the stream ended with, when the gateway ended it.
    failure: Option<ErrorCode>,
    /// Open entities in opening order; closing walks it backwards (innermost first).
    open: Vec<Open>,
    /// Who owns each id of the run (attribution).
    owners: Owners,
    /// Subagents that have finished: their ids cannot be used again.
    finished_subagents: Vec<String>,
}

impl RunSequencer {
    pub fn new(ids: RunIds) -> RunSequencer {
        RunSequencer {
            current: ids.clone(),
            ids,
            keep_upstream_run_ids: false,
            phase: Phase::NotStarted,
            runs: Runs::Several,
            started: 0,
            declared: RunIds {
                thread_id: String::new(),
                run_id: String::new(),
            },
            held: Held::default(),
            failure: None,
            open: Vec::new(),
            owners: Owners::default(),
            finished_subagents: Vec::new(),
        }
    }

    /// Keep upstream run ids (`keep_upstream_run_ids = true`); missing ones are still filled.
    pub fn keep_upstream_run_ids(mut self, keep: bool) -> RunSequencer {
        self.keep_upstream_run_ids = keep;
        self
    }

    /// How the client takes several runs on one stream (the writer's [`Runs`]).
    pub fn runs(mut self, runs: Runs) -> RunSequencer {
        self.runs = runs;
        self
    }

    /// True once the stream is over: its last run ended and nothing more is read.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// The gateway code the stream ended with, when the gateway ended it (an upstream failure
    /// or a stream the guard refused to carry further).
    pub fn failure(&self) -> Option<ErrorCode> {
        self.failure
    }

    /// True while a run has not ended (or none has started): a failure now ends it.
    pub fn run_open(&self) -> bool {
        matches!(self.phase, Phase::NotStarted | Phase::Running)
    }

    /// Whether `event` continues an entity that is open: a text, reasoning or argument delta of
    /// an open message or call while the run runs. Then it takes its opener's lane here, and
    /// stepping it would pass it on as it is, alone and without a note: the caller may hand it
    /// on without stepping it. False: step it.
    pub fn continues(&self, event: &mut Event) -> bool {
        if self.phase != Phase::Running {
            return false;
        }
        match event {
            Event::TextMessageContent(e) => {
                self.continue_open(Kind::Text, &e.message_id, &mut e.base)
            }
            Event::ReasoningMessageContent(e) => {
                self.continue_open(Kind::ReasoningMessage, &e.message_id, &mut e.base)
            }
            Event::ToolCallArgs(e) => self.continue_open(Kind::Tool, &e.tool_call_id, &mut e.base),
            _ => false,
        }
    }

    /// [`Self::continues`] for a delta lent by the reader ([`DeltaRef`]), which has no lane:
    /// true when it continues an open message or call that has none either, so that it passes
    /// on exactly as it came.
    pub fn continues_delta(&self, delta: &DeltaRef<'_>) -> bool {
        let kind = match delta.kind {
            DeltaKind::Text => Kind::Text,
            DeltaKind::Reasoning => Kind::ReasoningMessage,
            DeltaKind::ToolArgs => Kind::Tool,
        };
        self.phase == Phase::Running
            && self
                .find(kind, delta.id, &None)
                .is_some_and(|pos| self.open[pos].lane.is_none())
    }

    /// Feeds one input; appends what the client must see to `out`. Never fails: bad input is
    /// dropped (noted) or ends the run with `RUN_ERROR`.
    pub fn step(&mut self, input: Input, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        if self.phase == Phase::Ended {
            if matches!(input, Input::Event(_)) {
                notes.push(Note::Dropped(DropKind::AfterTerminal));
            }
            return;
        }
        match input {
            Input::Event(event) => self.event(event, out, notes),
            // Between runs the stream may end, or break, without loss: every run it carried
            // was ended.
            Input::UpstreamEnd | Input::UpstreamFailed(_) if !self.run_open() => {
                self.end_stream(out)
            }
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

    /// Ends the run with a gateway error; the stream ends with it (the upstream is gone, or
    /// not to be trusted further).
    fn fail(&mut self, failure: Failure, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        self.failure = Some(failure.code);
        let error = RunError {
            message: failure.message,
            code: Some(failure.code.as_str().into_owned()),
            usage: None,
            base: EventBase::default(),
        };
        self.event(Event::RunError(error), out, notes);
        // Folded, the error was held like any run's: the stream ends with it now.
        self.end_stream(out);
    }

    /// The stream is over between runs: a folded run's held terminal goes out now. The
    /// client's one terminal is the last run's: its failure when it failed (a late one
    /// included), else its `RUN_FINISHED`.
    fn end_stream(&mut self, out: &mut Vec<Event>) {
        let held = std::mem::take(&mut self.held);
        match (held.error, held.finished) {
            (Some(error), _) => out.push(Event::RunError(*error)),
            (None, Some(finished)) => out.push(Event::RunFinished(*finished)),
            (None, None) => {}
        }
        self.phase = Phase::Ended;
    }

    /// After a run closed: a `RUN_STARTED` opens the next run, a `RUN_ERROR` after
    /// `RUN_FINISHED` reports the closed run's late failure; anything else is dropped.
    fn after_close(
        &mut self,
        errored: bool,
        mut event: Event,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        match &mut event {
            Event::RunStarted(started) => {
                // Run-scoped tracking does not cross the boundary (1.1 "Several runs").
                self.open.clear();
                self.owners = Owners::default();
                self.finished_subagents.clear();
                self.begin_run(started, notes);
                match (self.runs, std::mem::take(&mut self.held)) {
                    (Runs::Folded { boundary }, held) => {
                        out.push(boundary_event(boundary, held, event));
                    }
                    (Runs::Several, _) => out.push(event),
                }
                self.phase = Phase::Running;
            }
            Event::RunError(error) if !errored => {
                // A late failure: the closed run failed after all, and the client must treat it
                // as failed. Folded, it is held with the run's `RUN_FINISHED`.
                match self.runs {
                    Runs::Several => out.push(event),
                    Runs::Folded { .. } => {
                        self.held.error = Some(Box::new(std::mem::replace(error, empty_error())))
                    }
                }
                self.phase = Phase::Closed { errored: true };
            }
            _ => notes.push(Note::Dropped(DropKind::AfterTerminal)),
        }
    }

    /// The open entity `(kind, id)` (steps: in `lane`).
    fn find(&self, kind: Kind, id: &str, lane: &Option<String>) -> Option<usize> {
        self.open
            .iter()
            .rposition(|o| o.kind == kind && o.id == id && (kind != Kind::Step || o.lane == *lane))
    }

    /// Opens an entity in `lane`; false when the event must not pass (a duplicate start, or
    /// a limit reached, which ends the run).
    fn open(
        &mut self,
        kind: Kind,
        id: &str,
        lane: &Option<String>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> bool {
        if self.find(kind, id, lane).is_some() {
            notes.push(Note::Dropped(DropKind::DuplicateStart));
            return false;
        }
        if self.open.len() >= MAX_OPEN_ENTITIES || id.len() > MAX_ID_BYTES {
            let problem = format!(
                "the upstream opened more than {MAX_OPEN_ENTITIES} entities at once, or an id longer than {MAX_ID_BYTES} bytes"
            );
            self.fail(
                Failure::new(ErrorCode::UpstreamLimitExceeded, problem),
                out,
                notes,
            );
            return false;
        }
        self.open.push(Open {
            kind,
            id: id.to_string(),
            lane: lane.clone(),
        });
        true
    }

    /// Closes an open entity; the event is re-attributed to its opener. False (and noted) when
    /// nothing was open.
    fn close(&mut self, kind: Kind, id: &str, base: &mut EventBase, notes: &mut Vec<Note>) -> bool {
        match self.find(kind, id, &base.subagent_run_id) {
            Some(pos) => {
                base.subagent_run_id = self.open.remove(pos).lane;
                true
            }
            None => {
                notes.push(Note::Dropped(DropKind::Orphan));
                false
            }
        }
    }

    /// For an event continuing an open entity: its opener's lane, applied to the event.
    fn continue_open(&self, kind: Kind, id: &str, base: &mut EventBase) -> bool {
        match self.find(kind, id, &base.subagent_run_id) {
            Some(pos) => {
                base.subagent_run_id.clone_from(&self.open[pos].lane);
                true
            }
            None => false,
        }
    }

    fn start_run(&mut self, out: &mut Vec<Event>) {
        let mut started = RunStarted {
            thread_id: String::new(),
            run_id: String::new(),
            protocol_version: None,
            parent_run_id: None,
            input: None,
            base: EventBase::default(),
        };
        self.begin_run(&mut started, &mut Vec::new());
        out.push(Event::RunStarted(started));
        self.phase = Phase::Running;
    }

    /// Takes a run's `RUN_STARTED`: remembers the ids the upstream declared, then fills or
    /// rewrites them. The stream's first run answers the request, so it takes the request's
    /// ids (unless `keep_upstream_run_ids`); a later run is another run of the same thread and
    /// keeps its own run id (minted from the request's when it has none).
    fn begin_run(&mut self, started: &mut RunStarted, notes: &mut Vec<Note>) {
        self.started += 1;
        self.declared.thread_id.clone_from(&started.thread_id);
        self.declared.run_id.clone_from(&started.run_id);
        let thread = &mut started.thread_id;
        if *thread != self.ids.thread_id && (thread.is_empty() || !self.keep_upstream_run_ids) {
            thread.clone_from(&self.ids.thread_id);
            notes.push(Note::Fixup(Rule::RunIds));
        }
        let run = &mut started.run_id;
        if self.started == 1 {
            if *run != self.ids.run_id && (run.is_empty() || !self.keep_upstream_run_ids) {
                run.clone_from(&self.ids.run_id);
                notes.push(Note::Fixup(Rule::RunIds));
            }
        } else if run.is_empty() {
            *run = format!("{}.run{}", self.ids.run_id, self.started);
            notes.push(Note::Fixup(Rule::RunIds));
        }
        started.protocol_version = Some(PROTOCOL_VERSION.to_string());
        self.current.thread_id.clone_from(&started.thread_id);
        self.current.run_id.clone_from(&started.run_id);
    }

    /// A terminal's ids: absent ones are the run's; ids other than those its `RUN_STARTED`
    /// declared make it another run's terminal, which no rewrite can make right.
    fn end_ids(&self, finished: &mut RunFinished, notes: &mut Vec<Note>) -> Result<(), Failure> {
        let pairs = [
            (
                &mut finished.thread_id,
                &self.declared.thread_id,
                &self.current.thread_id,
            ),
            (
                &mut finished.run_id,
                &self.declared.run_id,
                &self.current.run_id,
            ),
        ];
        for (have, declared, current) in pairs {
            if !have.is_empty() && !declared.is_empty() && have != declared {
                return Err(Failure::new(
                    ErrorCode::UpstreamRunMismatch,
                    format!(
                        "the upstream ended run {have:?} inside run {declared:?}; a terminal event must name the run it ends"
                    ),
                ));
            }
            if have != current {
                have.clone_from(current);
                notes.push(Note::Fixup(Rule::RunIds));
            }
        }
        Ok(())
    }

    /// Closes open text messages, reasoning messages and tool calls (not spans, steps or
    /// subagents, which a message snapshot does not touch).
    fn close_streaming(&mut self, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        let mut i = self.open.len();
        while i > 0 {
            i -= 1;
            if matches!(
                self.open[i].kind,
                Kind::Text | Kind::ReasoningMessage | Kind::Tool
            ) {
                let open = self.open.remove(i);
                notes.push(Note::Fixup(Rule::UnclosedEntities));
                out.push(open.kind.end_event(open.id, open.lane));
            }
        }
    }

    fn close_all(&mut self, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        while let Some(open) = self.open.pop() {
            notes.push(Note::Fixup(Rule::UnclosedEntities));
            out.push(open.kind.end_event(open.id, open.lane));
        }
    }

    fn event(&mut self, mut event: Event, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        if matches!(
            event,
            Event::RunStarted(_)
                | Event::RunFinished(_)
                | Event::RunError(_)
                | Event::MessagesSnapshot(_)
        ) && event.base_mut().subagent_run_id.take().is_some()
        {
            // Run-level events are never attributed to a subagent (`agui.md` §2.1).
            notes.push(Note::Fixup(Rule::Attribution));
        }
        match self.phase {
            Phase::NotStarted => {
                if let Event::RunStarted(started) = &mut event {
                    self.begin_run(started, notes);
                    self.phase = Phase::Running;
                    out.push(event);
                    return;
                }
                notes.push(Note::Fixup(Rule::MissingRunStarted));
                self.start_run(out);
            }
            Phase::Closed { errored } => return self.after_close(errored, event, out, notes),
            Phase::Running | Phase::Ended => {}
        }
        let pass = match &mut event {
            Event::RunStarted(_) => {
                notes.push(Note::Dropped(DropKind::DuplicateStart));
                false
            }
            Event::RunFinished(finished) => {
                if let Err(failure) = self.end_ids(finished, notes) {
                    return self.fail(failure, out, notes);
                }
                self.close_all(out, notes);
                if matches!(&finished.outcome, Some(RunOutcome::Interrupt { interrupts }) if interrupts.is_empty())
                {
                    finished.outcome = None;
                    notes.push(Note::Fixup(Rule::Outcome));
                }
                self.phase = Phase::Closed { errored: false };
                if let Runs::Folded { .. } = self.runs {
                    // Held until the stream ends or the next run starts.
                    if let Event::RunFinished(finished) = event {
                        self.held.finished = Some(Box::new(finished));
                    }
                    return;
                }
                true
            }
            Event::RunError(error) => {
                self.open.clear();
                self.phase = Phase::Closed { errored: true };
                if let Runs::Folded { .. } = self.runs {
                    // Held like a `RUN_FINISHED`: a later run may follow (1.1 allows a run
                    // after a failed one), and the client's one terminal is the last run's.
                    self.held.error = Some(Box::new(std::mem::replace(error, empty_error())));
                    return;
                }
                true
            }
            Event::TextMessageStart(e) => {
                let assistant = e.role == TextRole::Assistant;
                self.start(
                    Kind::Text,
                    Space::Message,
                    &e.message_id,
                    &mut e.base,
                    assistant,
                    out,
                    notes,
                )
            }
            Event::TextMessageContent(e) => self.continue_or_reopen(
                Kind::Text,
                Space::Message,
                &e.message_id,
                &mut e.base,
                out,
                notes,
                |id, base| {
                    Event::TextMessageStart(TextMessageStart {
                        message_id: id,
                        role: Default::default(),
                        name: None,
                        base,
                    })
                },
            ),
            Event::TextMessageEnd(e) => self.close(Kind::Text, &e.message_id, &mut e.base, notes),
            Event::ToolCallStart(e) => {
                if self
                    .owners
                    .is_renamed_tool(&e.tool_call_id, &e.tool_call_name)
                {
                    // A reused id under another tool's name: the client would rename the earlier
                    // call and append these arguments to it. No repair keeps both calls whole.
                    let problem = format!(
                        "the upstream started tool call {:?} as {:?}, an id it already gave to another tool",
                        e.tool_call_id, e.tool_call_name
                    );
                    return self.fail(
                        Failure::new(ErrorCode::UpstreamConflict, problem),
                        out,
                        notes,
                    );
                }
                self.own(Space::Tool, &e.tool_call_id, &mut e.base, notes);
                let lane = e.base.subagent_run_id.clone();
                if let Some(parent) = &e.parent_message_id {
                    if !self.owners.is_valid_parent(parent, &lane) {
                        notes.push(Note::Fixup(Rule::Attribution));
                        e.parent_message_id = None;
                    }
                }
                let opened = self.open(Kind::Tool, &e.tool_call_id, &lane, out, notes);
                if opened {
                    let name = Some(e.tool_call_name.as_str());
                    self.owners
                        .remember(Space::Tool, &e.tool_call_id, &lane, false, name);
                }
                opened
            }
            Event::ToolCallArgs(e) => {
                let open = self.continue_open(Kind::Tool, &e.tool_call_id, &mut e.base);
                if !open {
                    notes.push(Note::Dropped(DropKind::Orphan));
                }
                open
            }
            Event::ToolCallEnd(e) => self.close(Kind::Tool, &e.tool_call_id, &mut e.base, notes),
            Event::ToolCallResult(e) => {
                if let Some(pos) = self.find(Kind::Tool, &e.tool_call_id, &None) {
                    notes.push(Note::Fixup(Rule::OutOfOrder));
                    let opener = self.open.remove(pos);
                    out.push(Kind::Tool.end_event(opener.id, opener.lane));
                }
                self.own(Space::Message, &e.message_id, &mut e.base, notes);
                let lane = e.base.subagent_run_id.clone();
                self.owners
                    .remember(Space::Message, &e.message_id, &lane, false, None);
                true
            }
            Event::StepStarted(e) => {
                let lane = e.base.subagent_run_id.clone();
                self.open(Kind::Step, &e.step_name, &lane, out, notes)
            }
            Event::StepFinished(e) => self.close(Kind::Step, &e.step_name, &mut e.base, notes),
            Event::ReasoningStart(e) => self.start(
                Kind::ReasoningSpan,
                Space::Reasoning,
                &e.message_id,
                &mut e.base,
                false,
                out,
                notes,
            ),
            Event::ReasoningEnd(e) => {
                self.close(Kind::ReasoningSpan, &e.message_id, &mut e.base, notes)
            }
            Event::ReasoningMessageStart(e) => self.start(
                Kind::ReasoningMessage,
                Space::Reasoning,
                &e.message_id,
                &mut e.base,
                false,
                out,
                notes,
            ),
            Event::ReasoningMessageContent(e) => self.continue_or_reopen(
                Kind::ReasoningMessage,
                Space::Reasoning,
                &e.message_id,
                &mut e.base,
                out,
                notes,
                |id, base| {
                    Event::ReasoningMessageStart(ReasoningMessageStart {
                        message_id: id,
                        role: Default::default(),
                        base,
                    })
                },
            ),
            Event::ReasoningMessageEnd(e) => {
                self.close(Kind::ReasoningMessage, &e.message_id, &mut e.base, notes)
            }
            Event::SubagentStarted(e) => {
                // Subagent ids are single-use, and a parent must be one the run has seen.
                if self.finished_subagents.contains(&e.subagent_run_id) {
                    notes.push(Note::Dropped(DropKind::DuplicateStart));
                    return;
                }
                if let Some(parent) = &e.parent_subagent_run_id {
                    let known = self.find(Kind::Subagent, parent, &None).is_some()
                        || self.finished_subagents.contains(parent);
                    if !known {
                        notes.push(Note::Fixup(Rule::Attribution));
                        e.parent_subagent_run_id = None;
                    }
                }
                self.open(Kind::Subagent, &e.subagent_run_id, &None, out, notes)
            }
            Event::SubagentFinished(e) => {
                let id = e.subagent_run_id.clone();
                self.finish_subagent(id, &mut e.base, notes)
            }
            Event::SubagentError(e) => {
                let id = e.subagent_run_id.clone();
                self.finish_subagent(id, &mut e.base, notes)
            }
            // Readers expand chunks; one that slips through cannot be sent to a 1.0 client.
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => {
                notes.push(Note::Dropped(DropKind::InvalidEvent));
                false
            }
            Event::MessagesSnapshot(snapshot) => {
                // The client replaces its message list: messages and calls still streaming
                // would vanish under their next event, so they end here (a later event for one
                // of them re-opens it), and the snapshot's ids take owners like any message.
                self.close_streaming(out, notes);
                self.owners.declare_snapshot(&snapshot.messages);
                true
            }
            Event::StateSnapshot(_)
            | Event::StateDelta(_)
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

    /// A start event: takes the id's owner lane, opens the entity, remembers the id.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        kind: Kind,
        space: Space,
        id: &str,
        base: &mut EventBase,
        assistant: bool,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> bool {
        self.own(space, id, base, notes);
        let lane = base.subagent_run_id.clone();
        let opened = self.open(kind, id, &lane, out, notes);
        if opened {
            self.owners.remember(space, id, &lane, assistant, None);
        }
        opened
    }

    /// A continuation: passes with its opener's lane, or — for a closed or unseen id — re-opens
    /// it first with `start(id, base)` (1.0 clients append to the same message).
    #[allow(clippy::too_many_arguments)]
    fn continue_or_reopen(
        &mut self,
        kind: Kind,
        space: Space,
        id: &str,
        base: &mut EventBase,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
        start: impl FnOnce(String, EventBase) -> Event,
    ) -> bool {
        if self.continue_open(kind, id, base) {
            return true;
        }
        notes.push(Note::Fixup(Rule::OutOfOrder));
        let lane = self.owners.lane_of(space, id, &base.subagent_run_id);
        base.subagent_run_id.clone_from(&lane);
        if !self.open(kind, id, &lane, out, notes) {
            return false;
        }
        self.owners
            .remember(space, id, &lane, kind == Kind::Text, None);
        out.push(start(id.to_string(), EventBase::in_lane(lane.clone())));
        true
    }

    /// A start for a message id the run already knows takes that id's owner lane: the client
    /// keeps the first owner of an id for the whole run.
    fn own(&self, space: Space, id: &str, base: &mut EventBase, notes: &mut Vec<Note>) {
        if let Some(owner) = self.owners.get(space, id) {
            if owner.lane != base.subagent_run_id {
                notes.push(Note::Fixup(Rule::Attribution));
                base.subagent_run_id.clone_from(&owner.lane);
            }
        }
    }

    fn finish_subagent(&mut self, id: String, base: &mut EventBase, notes: &mut Vec<Note>) -> bool {
        let closed = self.close(Kind::Subagent, &id, base, notes);
        if closed && self.finished_subagents.len() < MAX_TRACKED_IDS {
            self.finished_subagents.push(id);
        }
        closed
    }
}

/// What a folded run closed with, until the stream ends or the next run starts. Boxed: every
/// stream carries this, and few ever fill it.
#[derive(Debug, Default)]
struct Held {
    finished: Option<Box<RunFinished>>,
    /// Its failure: the run's own `RUN_ERROR`, or a late one after its `RUN_FINISHED`.
    error: Option<Box<RunError>>,
}

/// A placeholder left where a held `RUN_ERROR` was taken from an event that is dropped next.
fn empty_error() -> RunError {
    RunError {
        message: String::new(),
        code: None,
        usage: None,
        base: EventBase::default(),
    }
}

/// The `CUSTOM` event that stands for a boundary between folded runs: its value holds the
/// terminal events of the run that closed (`finished`, `error`: each absent when the run had
/// none) and the next run's `RUN_STARTED` (`started`), as AG-UI events, so a reader of the
/// client's dialect can restore them.
fn boundary_event(name: &str, held: Held, started: Event) -> Event {
    let mut value = serde_json::Map::new();
    if let Some(finished) = held.finished {
        value.insert(
            "finished".into(),
            event_json(&Event::RunFinished(*finished)),
        );
    }
    if let Some(error) = held.error {
        value.insert("error".into(), event_json(&Event::RunError(*error)));
    }
    value.insert("started".into(), event_json(&started));
    Event::Custom(Custom {
        name: name.to_owned(),
        value: serde_json::Value::Object(value),
        base: EventBase::default(),
    })
}

fn event_json(event: &Event) -> serde_json::Value {
    // Canonical events always serialise into a value (string keys only).
    serde_json::to_value(event).unwrap_or_default()
}

#[cfg(test)]
#[path = "sequencer_tests.rs"]
mod tests;
