//! The AAP reader: an AAP agent's turns (SSE or the `none` JSON body) as canonical AG-UI events
//! (`translation.md` §4.4, §5, §6.2 A1–A2, §7).
//!
//! AAP has no message ids and no message boundaries in delta mode, so the reader mints ids
//! (`<runId>.m<n>` text and minted parents, `.r<n>` reasoning, `.t<n>` tool results) and infers
//! boundaries at kind switches, tool events and the stop. One run may span several AAP turns
//! (answers, then the user's message); [`AapReader::next_turn`] starts the next one within the
//! same run, ids continuing.
//!
//! The first `turn_stop` ends a turn; everything after it is dropped (the reference SDK sends a
//! second one on model errors). The reader then holds the stop ([`AapReader::stop`]) until its
//! owner either starts another turn or ends the run ([`AapReader::finish`]), which writes the
//! terminal events: `RUN_FINISHED` (with `pendingToolCallIds`, or the interrupt outcome for
//! permission calls), or `RUN_ERROR`. Permission calls are offered to the client as the confirm
//! tool (`confirm:perm:<id>`) or as interrupts (`perm:<id>`), per [`Hitl`].
//!
//! A turn of the gateway's own AAP face may carry the `agui` extension ([`super::ext`]); read
//! back, it gives the AG-UI run the face was sent: message ids, roles and boundaries from the
//! `agui.*_MESSAGE_START/END` events, the events AAP has no home for, the calls', results' and
//! terminal event's fields from their `agui` members. A malformed extension is dropped (and
//! noted), the event it came on read as plain AAP.
//!
//! Alongside, the reader fingerprints every message it makes the client's reducer build, so the
//! next request can tell whether the client changed one ([`super::fingerprint::Fingerprint`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::ext;
use super::fingerprint::{Fingerprint, Forwarded};
use super::history::content_from_aap;
use super::types::{event as name, Block, Content, StopReason};
use crate::error::{ErrorCode, Failure};
use crate::event::{DeltaKind, DeltaRef, DropKind, Entity, IdMint, Note, RunIds};
use crate::event::{
    Event, EventBase, EventType, Interrupt, MessageContent, ReasoningMessageContent,
    ReasoningMessageEnd, ReasoningMessageStart, ReasoningRole, ReasoningStart, RunError,
    RunFinished, RunOutcome, RunStarted, TextMessageContent, TextMessageEnd, TextMessageStart,
    TextRole, ToolCallArgs, ToolCallEnd, ToolCallResult, ToolCallStart, ToolRole,
};
use crate::json::{for_each_field, Cursor, JsonStr, Scalar};
use crate::sse::{SseEvent, SseEventRef};

/// Prefix of the confirm call offering an AAP permission to the client (§6.1).
pub const PERMISSION_CONFIRM_PREFIX: &str = "confirm:perm:";
/// Prefix of the interrupt offering an AAP permission to the client (§6.2 A1).
pub const PERMISSION_INTERRUPT_PREFIX: &str = "perm:";
/// The message of a `turn_stop: error` (AAP carries none).
pub const AAP_ERROR_MESSAGE: &str = "upstream agent reported an error";
/// How much of a call's arguments a confirm call's `action` quotes.
const ACTION_ARGS_CHARS: usize = 500;

/// How the client is asked for a permission the agent needs (`hitl.style`, resolved per request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hitl {
    /// A call of the client's confirm tool (flow A2).
    ConfirmTool(String),
    /// An AG-UI 1.0 interrupt (flow A1).
    Interrupt,
    /// The client cannot be asked (flow A3); the run's owner answers for it.
    Unconfirmable,
}

/// What `max_tokens` and `refusal` stops become (`aap.limit_stops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitStops {
    /// `RUN_FINISHED {result: {stopReason}}`.
    #[default]
    FinishedWithResult,
    /// `RUN_ERROR {code: stopReason}`.
    RunError,
}

impl std::str::FromStr for LimitStops {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "finished_with_result" => Ok(LimitStops::FinishedWithResult),
            "run_error" => Ok(LimitStops::RunError),
            other => Err(format!(
                "unknown value {other:?} (expected finished_with_result or run_error)"
            )),
        }
    }
}

/// The reader's settings for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOptions {
    /// Names of the tools the client runs; any other unresolved call is a permission request.
    pub client_tools: Vec<String>,
    pub hitl: Hitl,
    pub limit_stops: LimitStops,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            client_tools: Vec::new(),
            hitl: Hitl::ConfirmTool(crate::dialect::confirm::DEFAULT_TOOL.into()),
            limit_stops: LimitStops::default(),
        }
    }
}

impl ReadOptions {
    /// How an AAP agent's turns are read for an AAP client (the AAP face in front of an AAP
    /// agent): `client_tools` are the client's own tools, and a permission the agent asks for
    /// becomes an interrupt on the agent's own call, which the AAP writer shows the client as
    /// that very call awaiting `tool_permission` (`translation.md` §6.2 A1 then B1), so the
    /// client sees the agent's stop as the agent made it.
    pub fn for_aap_client(client_tools: Vec<String>, limit_stops: LimitStops) -> ReadOptions {
        ReadOptions {
            client_tools,
            hitl: Hitl::Interrupt,
            limit_stops,
        }
    }
}

/// A call the agent made in the current turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AapCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// The message the client's reducer hangs the call on.
    pub parent: String,
    /// Whether the agent already sent its result (trusted server tools).
    pub resolved: bool,
}

impl AapCall {
    /// The client runs it (`name` is one of its tools); otherwise it awaits permission.
    pub fn is_client(&self, options: &ReadOptions) -> bool {
        options.client_tools.contains(&self.name)
    }
}

/// How a turn ended, held until the run's owner decides what follows.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub reason: StopReason,
    /// The turn's calls left without a result, in call order.
    pub unresolved: Vec<AapCall>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
}

impl Kind {
    /// The message entity of this kind (a reasoning message sits in a span of its own).
    fn message(self) -> Entity {
        match self {
            Kind::Text => Entity::Text,
            Kind::Reasoning => Entity::ReasoningMessage,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct AapReader {
    ids: RunIds,
    mint: IdMint,
    options: ReadOptions,
    /// The `none` body is read whole, at the end of the turn.
    json: bool,
    open: Option<(Kind, String)>,
    /// The current assistant segment's last text message, or its minted parent.
    parent: Option<String>,
    calls: Vec<AapCall>,
    seen_calls: Vec<String>,
    stop: Option<TurnEnd>,
    /// The stop the run ended with, kept for the owner's record.
    last_stop: Option<TurnEnd>,
    finished: bool,
    /// Every message the client's reducer builds from this run, fingerprinted.
    outputs: Vec<Forwarded>,
    /// Messages the extension opened and has not closed, in opening order, with the subagent
    /// their start is attributed to: deltas of a kind go to the last one of that kind, under
    /// the same attribution (AAP deltas carry none).
    ext_open: Vec<(Kind, String, Option<String>)>,
    /// The current turn's terminal event, from its `turn_stop`'s extension.
    ext_terminal: Option<Event>,
}

/// `turn_stop`'s data.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StopData {
    stop_reason: String,
    #[serde(default)]
    agui: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallData {
    tool_call_id: String,
    name: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    agui: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResultData {
    tool_call_id: String,
    content: Content,
    #[serde(default)]
    agui: Option<Value>,
}

/// The `none` turn response, read leniently.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonTurn {
    stop_reason: String,
    #[serde(default)]
    messages: Vec<Value>,
}

impl AapReader {
    pub fn new(ids: &RunIds, options: ReadOptions) -> AapReader {
        AapReader {
            ids: ids.clone(),
            mint: IdMint::new(&ids.run_id),
            options,
            json: false,
            open: None,
            parent: None,
            calls: Vec::new(),
            seen_calls: Vec::new(),
            stop: None,
            last_stop: None,
            finished: false,
            outputs: Vec::new(),
            ext_open: Vec::new(),
            ext_terminal: None,
        }
    }

    pub fn options(&self) -> &ReadOptions {
        &self.options
    }

    /// The run's first event, written before the agent is even contacted
    /// (`aap.early_run_started`).
    pub fn start(&self, out: &mut Vec<Event>) {
        out.push(Event::RunStarted(RunStarted {
            thread_id: self.ids.thread_id.clone(),
            run_id: self.ids.run_id.clone(),
            protocol_version: None,
            parent_run_id: None,
            input: None,
            base: EventBase::default(),
        }));
    }

    /// Reads the next turn's body as the `none` JSON (`true`) or as SSE.
    pub fn set_json(&mut self, json: bool) {
        self.json = json;
    }

    /// The stop of the current turn, once its `turn_stop` was read.
    pub fn stop(&self) -> Option<&TurnEnd> {
        self.stop.as_ref().filter(|_| !self.finished)
    }

    /// Whether the current turn's `turn_stop` carried the run's own terminal event (the `agui`
    /// extension): the run ends as the AG-UI agent ended it, so calls the stop leaves open are
    /// the client's to answer (an interrupt made up as a call included), never the gateway's.
    pub fn stop_carries_terminal(&self) -> bool {
        self.ext_terminal.is_some()
    }

    /// The stop the run ended with, once it has ended on one.
    pub fn final_stop(&self) -> Option<&TurnEnd> {
        self.last_stop.as_ref()
    }

    /// The messages this run built on the client, in order, with their fingerprints.
    pub fn outputs(&self) -> &[Forwarded] {
        &self.outputs
    }

    /// Starts another turn of the same run: the held stop is dropped; ids continue.
    pub fn next_turn(&mut self) {
        self.stop = None;
        self.calls.clear();
        self.parent = None;
        self.ext_open.clear();
        self.ext_terminal = None;
    }

    /// Reads one upstream event.
    pub fn read(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        if self.stop.is_some() || self.finished {
            notes.push(Note::Dropped(DropKind::AfterTerminal));
            return Ok(());
        }
        if let Some((kind, delta)) = plain_delta(event) {
            self.delta(kind, &delta, out);
            return Ok(());
        }
        // Data that is not JSON at all is a peer that does not speak AAP's framing: fatal, as
        // it is for the AG-UI reader. JSON that is not an object is one bad event, dropped.
        let mut data = match serde_json::from_slice::<Value>(&event.data) {
            Ok(Value::Object(data)) => data,
            Ok(_) => {
                notes.push(Note::Dropped(DropKind::NotAnObject));
                return Ok(());
            }
            Err(_) => {
                return Err(Failure::new(
                    ErrorCode::UpstreamMalformed,
                    format!(
                        "an upstream {} event's data is not JSON; the upstream does not speak AAP over SSE",
                        event.name.as_deref().unwrap_or("unnamed")
                    ),
                ))
            }
        };
        if self.json && event.name.is_none() {
            self.read_json(Value::Object(data), out, notes);
            return Ok(());
        }
        // The name from the `event:` line, else from the data (a frame some peers send).
        let event_name: Cow<'_, str> = match &event.name {
            Some(n) => Cow::Borrowed(n),
            None => match data.remove("event") {
                Some(Value::String(n)) => Cow::Owned(n),
                _ => {
                    notes.push(Note::Dropped(DropKind::UnknownType));
                    return Ok(());
                }
            },
        };
        if event_name.starts_with(ext::EVENT_PREFIX) {
            self.extension(&event_name, data, out, notes);
            return Ok(());
        }
        let data = Value::Object(data);
        match &*event_name {
            name::TURN_START => {}
            name::TEXT_DELTA | name::THINKING_DELTA => {
                let kind = if event_name == name::TEXT_DELTA {
                    Kind::Text
                } else {
                    Kind::Reasoning
                };
                match data.get("delta").and_then(Value::as_str) {
                    Some(delta) => self.delta(kind, delta, out),
                    None => notes.push(Note::Dropped(DropKind::InvalidEvent)),
                }
            }
            name::TEXT | name::THINKING => {
                let (kind, field) = if event_name == name::TEXT {
                    (Kind::Text, "text")
                } else {
                    (Kind::Reasoning, "thinking")
                };
                match data.get(field).and_then(Value::as_str) {
                    Some(text) => self.whole(kind, text, out),
                    None => notes.push(Note::Dropped(DropKind::InvalidEvent)),
                }
            }
            name::TOOL_CALL => match serde_json::from_value::<CallData>(data) {
                Ok(call) => self.call(call, out, notes),
                Err(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            },
            name::TOOL_RESULT => match serde_json::from_value::<ResultData>(data) {
                Ok(result) => self.result(result, out, notes),
                Err(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            },
            name::TURN_STOP => match serde_json::from_value::<StopData>(data) {
                Ok(stop) => self.turn_stop(&stop.stop_reason, stop.agui, out, notes),
                Err(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            },
            _ => notes.push(Note::Dropped(DropKind::UnknownType)),
        }
        Ok(())
    }

    /// Ends the run after the held stop: the terminal events (see the module docs). Without a
    /// stop (the body ended early) nothing is written; the sequencer reports the truncation.
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        let Some(stop) = self.stop.take() else {
            self.close(out);
            return;
        };
        self.finished = true;
        self.last_stop = Some(stop.clone());
        if let Some(terminal) = self.ext_terminal.take() {
            out.push(terminal);
            return;
        }
        let (thread_id, run_id) = (self.ids.thread_id.clone(), self.ids.run_id.clone());
        let finished = |result: Option<Value>, outcome: Option<RunOutcome>| {
            Event::RunFinished(RunFinished {
                thread_id: thread_id.clone(),
                run_id: run_id.clone(),
                result,
                outcome,
                usage: None,
                base: EventBase::default(),
            })
        };
        let error = |message: &str, code: &str| {
            Event::RunError(RunError {
                message: message.to_owned(),
                code: Some(code.to_owned()),
                usage: None,
                base: EventBase::default(),
            })
        };
        match stop.reason {
            StopReason::EndTurn => out.push(finished(None, None)),
            StopReason::Error => out.push(error(AAP_ERROR_MESSAGE, "AAP_ERROR")),
            StopReason::MaxTokens | StopReason::Refusal => match self.options.limit_stops {
                LimitStops::FinishedWithResult => out.push(finished(
                    Some(json!({"stopReason": stop.reason.as_str()})),
                    None,
                )),
                LimitStops::RunError => out.push(error(
                    &format!("the agent stopped: {}", stop.reason.as_str()),
                    stop.reason.as_str(),
                )),
            },
            StopReason::ToolUse => {
                let outcome = self.pending_outcome(&stop.unresolved, out);
                out.push(finished(None, Some(outcome)));
            }
        }
    }

    /// The outcome of a `tool_use` stop; writes the confirm calls it offers first.
    fn pending_outcome(&mut self, unresolved: &[AapCall], out: &mut Vec<Event>) -> RunOutcome {
        let permissions: Vec<&AapCall> = unresolved
            .iter()
            .filter(|c| !c.is_client(&self.options))
            .collect();
        if !permissions.is_empty() && self.options.hitl == Hitl::Interrupt {
            return RunOutcome::Interrupt {
                interrupts: permissions
                    .iter()
                    .map(|c| permission_interrupt(c))
                    .collect(),
            };
        }
        let mut pending = Vec::with_capacity(unresolved.len());
        for call in unresolved {
            if call.is_client(&self.options) {
                pending.push(call.id.clone());
                continue;
            }
            if let Hitl::ConfirmTool(tool) = &self.options.hitl {
                let confirm = AapCall {
                    id: format!("{PERMISSION_CONFIRM_PREFIX}{}", call.id),
                    name: tool.clone(),
                    input: json!({"action": permission_action(call), "importance": "high"}),
                    parent: call.parent.clone(),
                    resolved: false,
                };
                self.emit_call(&confirm, out);
                pending.push(confirm.id);
            }
        }
        RunOutcome::Success {
            pending_tool_call_ids: (!pending.is_empty()).then_some(pending),
        }
    }

    fn turn_stop(
        &mut self,
        reason: &str,
        agui: Option<Value>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        self.close(out);
        for (kind, id, lane) in std::mem::take(&mut self.ext_open) {
            out.push(kind.message().end_event(id, lane));
        }
        let reason = match reason {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "refusal" => StopReason::Refusal,
            // `error`, and any reason v3 does not define.
            _ => StopReason::Error,
        };
        if let Some(field) = agui {
            let terminal = ext::read_terminal(&field, &self.ids.thread_id, &self.ids.run_id);
            // A failure stands for `RUN_ERROR` only, and `RUN_ERROR` for a failure or a limit.
            self.ext_terminal = terminal.filter(|t| match t {
                Event::RunError(_) => {
                    reason != StopReason::EndTurn && reason != StopReason::ToolUse
                }
                _ => reason != StopReason::Error,
            });
            if self.ext_terminal.is_none() {
                notes.push(Note::Dropped(DropKind::InvalidEvent));
            }
        }
        let unresolved = self.calls.iter().filter(|c| !c.resolved).cloned().collect();
        self.stop = Some(TurnEnd { reason, unresolved });
    }

    /// Closes what is open; the stop's events come from [`AapReader::finish`].
    pub fn close(&mut self, out: &mut Vec<Event>) {
        if let Some((kind, id)) = self.open.take() {
            close_message(kind, id, out);
        }
    }

    fn open_message(&mut self, kind: Kind, out: &mut Vec<Event>) -> String {
        if let Some((open, id)) = &self.open {
            if *open == kind {
                return id.clone();
            }
        }
        self.close(out);
        let id = self.mint.next(match kind {
            Kind::Text => 'm',
            Kind::Reasoning => 'r',
        });
        match kind {
            Kind::Text => {
                out.push(Event::TextMessageStart(TextMessageStart {
                    message_id: id.clone(),
                    role: TextRole::Assistant,
                    name: None,
                    base: EventBase::default(),
                }));
                self.parent = Some(id.clone());
                self.outputs.push(Forwarded::new(id.clone(), "assistant"));
            }
            Kind::Reasoning => {
                out.push(Event::ReasoningStart(ReasoningStart {
                    message_id: id.clone(),
                    base: EventBase::default(),
                }));
                out.push(Event::ReasoningMessageStart(ReasoningMessageStart {
                    message_id: id.clone(),
                    role: ReasoningRole::default(),
                    base: EventBase::default(),
                }));
                self.outputs.push(Forwarded::new(id.clone(), "reasoning"));
            }
        }
        self.open = Some((kind, id.clone()));
        id
    }

    fn delta(&mut self, kind: Kind, delta: &str, out: &mut Vec<Event>) {
        if delta.is_empty() {
            return;
        }
        let (id, base) = match self.ext_open.iter().rev().find(|(k, ..)| *k == kind) {
            Some((_, id, lane)) => (id.clone(), EventBase::in_lane(lane.clone())),
            None => (self.open_message(kind, out), EventBase::default()),
        };
        self.feed(&id, |f| f.text(delta));
        out.push(match kind {
            Kind::Text => Event::TextMessageContent(TextMessageContent {
                message_id: id,
                delta: delta.to_owned(),
                base,
            }),
            Kind::Reasoning => Event::ReasoningMessageContent(ReasoningMessageContent {
                message_id: id,
                delta: delta.to_owned(),
                base,
            }),
        });
    }

    fn whole(&mut self, kind: Kind, text: &str, out: &mut Vec<Event>) {
        if self.ext_open.iter().any(|(k, ..)| *k == kind) {
            // The extension bracketed the message: its text is the open one's.
            self.delta(kind, text, out);
            return;
        }
        self.close(out);
        if text.is_empty() {
            return;
        }
        self.delta(kind, text, out);
        self.close(out);
    }

    fn call(&mut self, mut call: CallData, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        self.close(out);
        if self.seen_calls.contains(&call.tool_call_id) {
            notes.push(Note::Dropped(DropKind::DuplicateStart));
            return;
        }
        match call.agui.take() {
            Some(Value::Object(field)) => {
                if self.ext_call(&call, field, out) {
                    return;
                }
                notes.push(Note::Dropped(DropKind::InvalidEvent));
            }
            Some(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            None => {}
        }
        let parent = match &self.parent {
            Some(parent) => parent.clone(),
            None => {
                let id = self.mint.next('m');
                self.outputs.push(Forwarded::new(id.clone(), "assistant"));
                self.parent = Some(id.clone());
                id
            }
        };
        let call = AapCall {
            id: call.tool_call_id,
            name: call.name,
            input: call.input,
            parent,
            resolved: false,
        };
        self.seen_calls.push(call.id.clone());
        self.emit_call(&call, out);
        self.calls.push(call);
    }

    /// START, one ARGS with the whole input, END; the call joins its parent's fingerprint.
    fn emit_call(&mut self, call: &AapCall, out: &mut Vec<Event>) {
        let args = args_text(&call.input);
        if !call.id.starts_with(PERMISSION_CONFIRM_PREFIX) {
            self.feed(&call.parent, |f| f.tool_call(&call.id, &call.name, &args));
        }
        out.push(Event::ToolCallStart(ToolCallStart {
            tool_call_id: call.id.clone(),
            tool_call_name: call.name.clone(),
            parent_message_id: Some(call.parent.clone()),
            base: EventBase::default(),
        }));
        out.push(Event::ToolCallArgs(ToolCallArgs {
            tool_call_id: call.id.clone(),
            delta: args,
            base: EventBase::default(),
        }));
        out.push(Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: call.id.clone(),
            base: EventBase::default(),
        }));
    }

    fn result(&mut self, mut result: ResultData, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        self.close(out);
        match result.agui.take() {
            Some(Value::Object(field)) => match self.ext_result(&result, field, out) {
                Some(()) => return,
                None => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            },
            Some(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            None => {}
        }
        if let Some(call) = self.calls.iter_mut().find(|c| c.id == result.tool_call_id) {
            call.resolved = true;
        }
        let content = result_content(&result.content);
        let id = self.mint.next('t');
        let mut output = Forwarded::new(id.clone(), "tool");
        output.fingerprint_mut().text(&content.text());
        self.outputs.push(output);
        out.push(Event::ToolCallResult(ToolCallResult {
            message_id: id,
            tool_call_id: result.tool_call_id,
            content,
            role: ToolRole::default(),
            base: EventBase::default(),
        }));
        // The agent's next words are a new assistant message.
        self.parent = None;
    }

    /// Replays a `none` body: each assistant message's blocks as message-mode events, each tool
    /// message as a result, then the stop.
    fn read_json(&mut self, body: Value, out: &mut Vec<Event>, notes: &mut Vec<Note>) {
        let Ok(turn) = serde_json::from_value::<JsonTurn>(body) else {
            notes.push(Note::Dropped(DropKind::InvalidEvent));
            return;
        };
        for message in turn.messages {
            match message.get("role").and_then(Value::as_str) {
                Some("assistant") => {
                    let content = message
                        .get("content")
                        .cloned()
                        .and_then(|c| serde_json::from_value::<Content>(c).ok());
                    let blocks = match content {
                        Some(Content::Text(text)) => vec![Block::Text { text }],
                        Some(Content::Blocks(blocks)) => blocks,
                        None => {
                            notes.push(Note::Dropped(DropKind::InvalidEvent));
                            continue;
                        }
                    };
                    for block in blocks {
                        match block {
                            Block::Text { text } => self.whole(Kind::Text, &text, out),
                            Block::Thinking { thinking } => {
                                self.whole(Kind::Reasoning, &thinking, out)
                            }
                            Block::ToolUse {
                                tool_call_id,
                                name,
                                input,
                            } => self.call(
                                CallData {
                                    tool_call_id,
                                    name,
                                    input: Value::Object(input),
                                    agui: None,
                                },
                                out,
                                notes,
                            ),
                            Block::Image { .. } => notes.push(Note::Dropped(DropKind::Lossy)),
                        }
                    }
                }
                Some("tool") => match serde_json::from_value::<ResultData>(message) {
                    Ok(result) => self.result(result, out, notes),
                    Err(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
                },
                _ => notes.push(Note::Dropped(DropKind::InvalidEvent)),
            }
        }
        self.turn_stop(&turn.stop_reason, None, out, notes);
    }

    /// An extension event (see the module docs); one that is not a well-formed AG-UI event of
    /// a type the extension carries is dropped.
    fn extension(
        &mut self,
        name: &str,
        data: Map<String, Value>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        let Some(event) = ext::read_event(name, data) else {
            notes.push(Note::Dropped(DropKind::InvalidEvent));
            return;
        };
        match event {
            Event::TextMessageStart(ref e) => {
                self.close(out);
                self.parent = Some(e.message_id.clone());
                self.outputs
                    .push(Forwarded::new(e.message_id.clone(), e.role.as_str()));
                let lane = e.base.subagent_run_id.clone();
                self.ext_open.push((Kind::Text, e.message_id.clone(), lane));
            }
            Event::ReasoningMessageStart(ref e) => {
                self.close(out);
                self.outputs
                    .push(Forwarded::new(e.message_id.clone(), "reasoning"));
                let lane = e.base.subagent_run_id.clone();
                self.ext_open
                    .push((Kind::Reasoning, e.message_id.clone(), lane));
            }
            Event::TextMessageEnd(TextMessageEnd { ref message_id, .. })
            | Event::ReasoningMessageEnd(ReasoningMessageEnd { ref message_id, .. }) => {
                self.ext_open.retain(|(_, id, _)| id != message_id);
            }
            // A folded run boundary: the closed run ends under this request's ids, the next
            // one keeps its own run id.
            Event::RunFinished(mut e) => {
                self.close(out);
                e.thread_id.clone_from(&self.ids.thread_id);
                e.run_id.clone_from(&self.ids.run_id);
                out.push(Event::RunFinished(e));
                return;
            }
            // The closed run's failure (its own, or a late one after its `RUN_FINISHED`).
            Event::RunError(e) => {
                self.close(out);
                out.push(Event::RunError(e));
                return;
            }
            Event::RunStarted(mut e) => {
                e.thread_id.clone_from(&self.ids.thread_id);
                self.ids.run_id.clone_from(&e.run_id);
                out.push(Event::RunStarted(e));
                return;
            }
            ref other if ext::is_verbatim(other.event_type()) => self.close(out),
            _ => {
                notes.push(Note::Dropped(DropKind::UnknownType));
                return;
            }
        }
        out.push(event);
    }

    /// A call with its extension member: the call as the AG-UI run had it, or no event at all
    /// for a call made up to show an interrupt (the terminal event restores the interrupt).
    /// `false`: the member is malformed; the call is to be read as plain AAP.
    fn ext_call(
        &mut self,
        call: &CallData,
        mut field: Map<String, Value>,
        out: &mut Vec<Event>,
    ) -> bool {
        if let Some(interrupt) = field.get(ext::INTERRUPT) {
            if !interrupt.is_string() {
                return false;
            }
            self.seen_calls.push(call.tool_call_id.clone());
            self.calls.push(AapCall {
                id: call.tool_call_id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                parent: self.parent.clone().unwrap_or_default(),
                resolved: false,
            });
            return true;
        }
        let arguments = match field.remove(ext::ARGUMENTS) {
            Some(Value::String(arguments)) => arguments,
            None => args_text(&call.input),
            Some(_) => return false,
        };
        field.insert("toolCallId".into(), call.tool_call_id.clone().into());
        field
            .entry("toolCallName")
            .or_insert_with(|| call.name.clone().into());
        let Ok(Event::ToolCallStart(start)) =
            Event::from_payload(EventType::ToolCallStart, Value::Object(field))
        else {
            return false;
        };
        let id = call.tool_call_id.clone();
        if let Some(parent) = &start.parent_message_id {
            self.feed(parent, |f| {
                f.tool_call(&id, &start.tool_call_name, &arguments)
            });
        }
        self.seen_calls.push(id.clone());
        self.calls.push(AapCall {
            id: id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            parent: start.parent_message_id.clone().unwrap_or_default(),
            resolved: false,
        });
        // The call's arguments and end are attributed like its start.
        let lane = start.base.subagent_run_id.clone();
        out.push(Event::ToolCallStart(start));
        if !arguments.is_empty() {
            out.push(Event::ToolCallArgs(ToolCallArgs {
                tool_call_id: id.clone(),
                delta: arguments,
                base: EventBase::in_lane(lane.clone()),
            }));
        }
        out.push(Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: id,
            base: EventBase::in_lane(lane),
        }));
        true
    }

    /// A result with its extension member: the result as the AG-UI run had it (its message id,
    /// its content parts). `None`: the member is malformed.
    fn ext_result(
        &mut self,
        result: &ResultData,
        mut field: Map<String, Value>,
        out: &mut Vec<Event>,
    ) -> Option<()> {
        field.insert("toolCallId".into(), result.tool_call_id.clone().into());
        if !field.contains_key("content") {
            let content = serde_json::to_value(result_content(&result.content)).ok()?;
            field.insert("content".into(), content);
        }
        let Ok(Event::ToolCallResult(event)) =
            Event::from_payload(EventType::ToolCallResult, Value::Object(field))
        else {
            return None;
        };
        if let Some(call) = self.calls.iter_mut().find(|c| c.id == event.tool_call_id) {
            call.resolved = true;
        }
        let mut output = Forwarded::new(event.message_id.clone(), "tool");
        output.fingerprint_mut().text(&event.content.text());
        self.outputs.push(output);
        out.push(Event::ToolCallResult(event));
        self.parent = None;
        Some(())
    }

    /// Feeds the fingerprint of output `id` (every id the reader hands out is recorded first).
    fn feed(&mut self, id: &str, feed: impl FnOnce(&mut Fingerprint)) {
        if let Some(output) = self.outputs.iter_mut().rev().find(|f| f.id == id) {
            feed(output.fingerprint_mut());
        }
    }
}

fn close_message(kind: Kind, id: String, out: &mut Vec<Event>) {
    out.push(kind.message().end_event(id.clone(), None));
    if kind == Kind::Reasoning {
        out.push(Entity::ReasoningSpan.end_event(id, None));
    }
}

/// A call's input as argument text (§5): compact JSON, with the wrappers the gateway itself
/// writes toward AAP (`{"_raw": s}`, `{"_value": v}`) taken off again.
pub fn args_text(input: &Value) -> String {
    if let Value::Object(map) = input {
        if map.len() == 1 {
            match (map.get("_raw"), map.get("_value")) {
                (Some(Value::String(raw)), _) => return raw.clone(),
                (_, Some(value)) => return value.to_string(),
                _ => {}
            }
        }
    }
    input.to_string()
}

/// A tool result's content: a string, or parts when it holds images (`aap.tool_result_parts`
/// `auto`); blocks that cannot be parts fall back to their text.
fn result_content(content: &Content) -> MessageContent {
    content_from_aap(content, "content", true).unwrap_or_else(|_| {
        let Content::Blocks(blocks) = content else {
            return MessageContent::Text(String::new());
        };
        let text: Vec<String> = blocks
            .iter()
            .map(|b| match b {
                Block::Text { text } => text.clone(),
                Block::Thinking { thinking } => thinking.clone(),
                other => serde_json::to_string(other).unwrap_or_default(),
            })
            .collect();
        MessageContent::Text(text.join("\n"))
    })
}

/// The confirm call's `action` for a permission (§6.1).
fn permission_action(call: &AapCall) -> String {
    let args = call.input.to_string();
    let quoted: String = args.chars().take(ACTION_ARGS_CHARS).collect();
    format!("Run tool \"{}\" with arguments {quoted}", call.name)
}

/// The interrupt asking for a permission (§6.2 A1).
fn permission_interrupt(call: &AapCall) -> Interrupt {
    Interrupt {
        id: format!("{PERMISSION_INTERRUPT_PREFIX}{}", call.id),
        reason: "tool_call".into(),
        message: Some(format!("Allow {}?", call.name)),
        tool_call_id: Some(call.id.clone()),
        response_schema: Some(json!({
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"}
            },
            "required": ["approved"]
        })),
        expires_at: None,
        metadata: None::<Map<String, Value>>,
        subagent_run_id: None,
    }
}

/// A `text_delta` or `thinking_delta` whose data is a flat object with one `delta` string —
/// nearly every event of a turn — read without building a JSON tree. `None`: anything else,
/// which the general path reads (with the same result for what this accepts).
fn plain_delta(event: &SseEvent) -> Option<(Kind, Cow<'_, str>)> {
    if let Some((kind, delta)) = plain_delta_layout(event.view()) {
        return Some((kind, delta.decode()));
    }
    let kind = delta_kind(event.view())?;
    let mut delta = None;
    for_each_field(&event.data, |key, value| match (key, value) {
        ("delta", Scalar::Str(s)) => delta.replace(s).is_none().then_some(()),
        ("delta", Scalar::Int(..)) => None,
        _ => Some(()),
    })?;
    Some((kind, delta?.decode()))
}

/// The kind of a delta event, by its name.
fn delta_kind(event: SseEventRef<'_>) -> Option<Kind> {
    match event.name? {
        name::TEXT_DELTA => Some(Kind::Text),
        name::THINKING_DELTA => Some(Kind::Reasoning),
        _ => None,
    }
}

/// A delta as AAP agents write it: `{"delta":"…"}`, perhaps with fields AAP does not define
/// after it, which the general path ignores too.
fn plain_delta_layout(event: SseEventRef<'_>) -> Option<(Kind, JsonStr<'_>)> {
    let kind = delta_kind(event)?;
    let mut c = Cursor::new(event.data);
    c.expect(br#"{"delta":""#)?;
    let delta = c.string_rest()?;
    let mut again = false;
    while let Some((key, _)) = c.member() {
        again |= key == "delta";
    }
    (!again && c.accept(b"}") && c.at_end()).then_some((kind, delta))
}

impl crate::dialect::codec::Reader for AapReader {
    fn read(
        &mut self,
        event: &crate::sse::SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        AapReader::read(self, event, out, notes)
    }

    /// What [`AapReader::read`] makes of a delta in the layout AAP agents write, lent: a
    /// delta of the message its kind has open, outside the extension's brackets.
    fn read_delta<'a>(&'a mut self, event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
        if self.stop.is_some() || self.finished {
            return None;
        }
        let (kind, delta) = plain_delta_layout(event)?;
        if delta.raw().is_empty() || self.ext_open.iter().any(|(k, ..)| *k == kind) {
            return None;
        }
        let id = match &self.open {
            Some((open, id)) if *open == kind => id,
            _ => return None,
        };
        // `feed`, on the fields it reads.
        if let Some(output) = self.outputs.iter_mut().rev().find(|f| f.id == *id) {
            output.fingerprint_mut().text(&delta.decode());
        }
        Some(DeltaRef {
            kind: match kind {
                Kind::Text => DeltaKind::Text,
                Kind::Reasoning => DeltaKind::Reasoning,
            },
            id,
            delta,
            timestamp: None,
            extra: "",
            source: None,
        })
    }

    fn start(&mut self, out: &mut Vec<Event>) {
        AapReader::start(self, out);
    }

    fn finish(&mut self, out: &mut Vec<Event>) {
        AapReader::finish(self, out);
    }

    fn at_handover(&self) -> bool {
        self.stop().is_some()
    }

    fn next_response(&mut self, framing: crate::sse::Framing) {
        self.next_turn();
        self.set_json(framing == crate::sse::Framing::Json);
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
