//! Canonical events → an AAP turn (`translation.md` §4.2, §5, §6.2 B1–B4, §7).
//!
//! The writer folds every event into the run's [`Transcript`] (the session history the turn
//! will commit) and writes the turn in the client's mode:
//! - `delta`: `text_delta` / `thinking_delta` as they arrive. AAP deltas carry no message id,
//!   so of two text (or two reasoning) messages open at once only the first streams live; the
//!   other's text is read back from the transcript when the live one ends.
//! - `message`: one `text` / `thinking` event per message, written at its end; the live
//!   message's event is built as its deltas arrive ([`super::whole`]), a waiting one's is read
//!   from the transcript.
//! - `none`: nothing until the terminal event, then the JSON `{stopReason, messages}`.
//!
//! Tool calls are written whole at `TOOL_CALL_END` (`tool_call`, input per §5), results as
//! `tool_result`. At the terminal event the stop is classified (§7): calls left without a
//! result are pending — a client tool's call for the client to run, any other call (the
//! gateway's confirm tool, typically) a permission request — and interrupts become permission
//! requests answered with `resume`.
//!
//! With [`TurnOptions::extension`], the streaming modes also carry the `agui` extension
//! ([`super::ext`]): message boundaries, the events AAP has no home for and the fields its
//! events cannot hold, so the gateway's own AAP client gives back the AG-UI run.

use std::collections::{HashMap, HashSet, VecDeque};

use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::ext;
use super::history::{content_to_aap, to_aap};
use super::read::args_text;
use super::types::{event as name, StopReason, StreamMode, TurnResponse};
use super::whole::{write_head, Whole};
use crate::dialect::aap::transcript::Transcript;
use crate::error::Failure;
use crate::event::{args_object, DeltaKind, DeltaRef};
use crate::event::{
    DropKind, Event, EventBase, EventType, Interrupt, Message, Note, RunOutcome, ToolCall,
    ToolCallArgs, ToolCallEnd, ToolCallStart,
};
use crate::sse;

/// What the writer needs to know about the turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TurnOptions {
    pub mode: StreamMode,
    /// Names of the session's client tools.
    pub client_tools: Vec<String>,
    /// The confirm tool the gateway declares to the agent.
    pub confirm_tool: String,
    /// Write the `agui` extension in the streaming modes.
    pub extension: bool,
}

/// A call the client must answer before the session can go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub tool_call_id: String,
    /// The name the client was shown.
    pub name: String,
    pub kind: PendingKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PendingKind {
    /// A client tool's call: answered with a `tool` message.
    ClientTool,
    /// A call of any other tool left open by the agent (its confirm tool, typically): answered
    /// with `tool_permission`, which becomes the call's tool message (§6.2 B3).
    Permission,
    /// An AG-UI interrupt: answered with `tool_permission`, which becomes a `resume` entry
    /// (§6.2 B1, B2). `synthetic`: the call was made up by the gateway to show the interrupt.
    #[serde(rename_all = "camelCase")]
    Interrupt {
        interrupt_id: String,
        #[serde(default)]
        synthetic: bool,
    },
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStop {
    pub reason: StopReason,
    pub pending: Vec<Pending>,
}

/// The first frame of every streamed turn.
pub const TURN_START_FRAME: &[u8] = b"event: turn_start\ndata: {}\n\n";

/// Prefix of a synthetic call standing for an interrupt without a tool call (§2.2).
pub const INTERRUPT_CALL_PREFIX: &str = "intr:";

/// One kind of message (text or reasoning) in the streaming modes: the live one and those
/// waiting.
#[derive(Debug, Default)]
struct Lane {
    live: Option<String>,
    /// Started while another was live: (id, ended).
    waiting: VecDeque<(String, bool)>,
    /// `message` mode: the live message's event so far, its text always the transcript's.
    whole: Option<Whole>,
}

/// See the module docs.
#[derive(Debug)]
pub struct AapWriter {
    options: TurnOptions,
    transcript: Transcript,
    text: Lane,
    reasoning: Lane,
    /// Calls already written as `tool_call` (a repeated END writes nothing).
    written: HashSet<String>,
    ext: Ext,
    stop: Option<TurnStop>,
    /// What the writer left out since the last `take_notes`.
    notes: Vec<Note>,
}

/// What the `agui` extension writes later than the event it comes from: message boundaries
/// (a message waiting behind a live one opens when it is shown) and calls' starts (a call is
/// written at its end).
#[derive(Debug, Default)]
struct Ext {
    enabled: bool,
    /// `*_MESSAGE_START` data by message id, until the message is shown.
    starts: HashMap<String, (EventType, Map<String, Value>)>,
    /// `*_MESSAGE_END` data by message id, until the message is closed.
    ends: HashMap<String, (EventType, Map<String, Value>)>,
    calls: HashMap<String, ToolCallStart>,
}

impl Ext {
    /// Keeps what a later event of the extension needs.
    fn note(&mut self, event: &Event) {
        let id = match event {
            Event::TextMessageStart(e) => &e.message_id,
            Event::ReasoningMessageStart(e) => &e.message_id,
            Event::TextMessageEnd(e) => &e.message_id,
            Event::ReasoningMessageEnd(e) => &e.message_id,
            Event::ToolCallStart(e) => {
                self.calls.insert(e.tool_call_id.clone(), e.clone());
                return;
            }
            _ => return,
        };
        let entry = (event.event_type(), ext::payload(event));
        let map = match event {
            Event::TextMessageStart(_) | Event::ReasoningMessageStart(_) => &mut self.starts,
            _ => &mut self.ends,
        };
        map.insert(id.clone(), entry);
    }

    /// The message `id` is shown from here on: its start.
    fn open(&mut self, id: &str, out: &mut BytesMut) {
        if let Some((ty, data)) = self.starts.remove(id).filter(|_| self.enabled) {
            write_event(out, &ext::event_name(ty), &data);
        }
    }

    /// The message `id` was shown whole: its end (made up when the run ended first).
    fn close(&mut self, id: &str, kind: Kind, out: &mut BytesMut) {
        if !self.enabled {
            return;
        }
        let (ty, data) = self.ends.remove(id).unwrap_or_else(|| {
            let ty = match kind {
                Kind::Text => EventType::TextMessageEnd,
                Kind::Thinking => EventType::ReasoningMessageEnd,
            };
            (ty, Map::from_iter([("messageId".to_owned(), id.into())]))
        });
        write_event(out, &ext::event_name(ty), &data);
    }

    /// An event AAP has no home for, or a folded run boundary.
    fn other(&mut self, event: &Event, out: &mut BytesMut) {
        match event {
            Event::Custom(c) if c.name == super::RUN_BOUNDARY => {
                for (key, ty) in [
                    ("finished", EventType::RunFinished),
                    ("error", EventType::RunError),
                    ("started", EventType::RunStarted),
                ] {
                    if let Some(Value::Object(data)) = c.value.get(key) {
                        let mut data = data.clone();
                        data.remove("type");
                        write_event(out, &ext::event_name(ty), &data);
                    }
                }
            }
            other if ext::is_verbatim(other.event_type()) => {
                write_event(
                    out,
                    &ext::event_name(other.event_type()),
                    &ext::payload(other),
                );
            }
            _ => {}
        }
    }
}

/// Whether leaving `event` out of a plain AAP stream loses something its client could act on:
/// state, activity, a messages snapshot (a correction), a subagent's failure, `CUSTOM` and
/// `RAW` (a folded boundary included: it holds an earlier run's end). Steps, reasoning spans,
/// encrypted values and a subagent's start and success only structure what AAP shows anyway.
fn carries_content(event: &Event) -> bool {
    matches!(
        event,
        Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::MessagesSnapshot(_)
            | Event::SubagentError(_)
            | Event::Custom(_)
            | Event::Raw(_)
    )
}

impl AapWriter {
    pub fn new(options: TurnOptions, transcript: Transcript) -> AapWriter {
        let ext = Ext {
            enabled: options.extension && options.mode != StreamMode::None,
            ..Ext::default()
        };
        AapWriter {
            options,
            transcript,
            text: Lane::default(),
            reasoning: Lane::default(),
            written: HashSet::new(),
            ext,
            stop: None,
            notes: Vec::new(),
        }
    }

    /// What the client receives before any upstream byte: `turn_start` in the streaming modes.
    pub fn opening(&self) -> Option<&'static [u8]> {
        match self.options.mode {
            StreamMode::None => None,
            _ => Some(TURN_START_FRAME),
        }
    }

    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// The stop, once the terminal event was written.
    pub fn stop(&self) -> Option<&TurnStop> {
        self.stop.as_ref()
    }

    /// Takes the transcript and the stop (none if the run never ended) out of the writer,
    /// which is done with the run.
    pub fn take(&mut self) -> (Transcript, Option<TurnStop>) {
        let empty = Transcript::new(Vec::new(), None, 0);
        (
            std::mem::replace(&mut self.transcript, empty),
            self.stop.take(),
        )
    }

    /// How a call shows to the client: its name and input (§5), a confirm call naming the tool
    /// it asks about as that tool (see [`call_view`]).
    pub fn view(&self, call: &ToolCall) -> (String, Map<String, Value>) {
        call_view(call, &self.options.confirm_tool, &self.options.client_tools)
    }

    /// Writes one canonical event. Fails when the transcript's bounds are reached; the run must
    /// then end (the pipeline turns the failure into the terminal event).
    pub fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
        self.transcript.apply(&event)?;
        let delta = self.options.mode == StreamMode::Delta;
        let streaming = self.streaming();
        if self.ext.enabled {
            self.ext.note(&event);
        }
        if matches!(event, Event::MessagesSnapshot(_)) {
            let at = Shown::new(&self.transcript, self.options.mode, Kind::Text);
            self.text.reread(at);
            let at = Shown::new(&self.transcript, self.options.mode, Kind::Thinking);
            self.reasoning.reread(at);
        }
        match event {
            Event::TextMessageStart(e) if streaming => {
                let at = Shown::new(&self.transcript, self.options.mode, Kind::Text);
                self.text.start(e.message_id, at, &mut self.ext, out)
            }
            Event::ReasoningMessageStart(e) if streaming => {
                let at = Shown::new(&self.transcript, self.options.mode, Kind::Thinking);
                self.reasoning.start(e.message_id, at, &mut self.ext, out)
            }
            Event::TextMessageContent(e) if self.text.live.as_deref() == Some(&e.message_id) => {
                self.text
                    .shown_delta(delta, name::TEXT_DELTA, &e.delta, out)
            }
            Event::ReasoningMessageContent(e)
                if self.reasoning.live.as_deref() == Some(&e.message_id) =>
            {
                self.reasoning
                    .shown_delta(delta, name::THINKING_DELTA, &e.delta, out)
            }
            Event::TextMessageEnd(e) if streaming => {
                let at = Shown::new(&self.transcript, self.options.mode, Kind::Text);
                self.text.end(&e.message_id, at, &mut self.ext, out)
            }
            Event::ReasoningMessageEnd(e) if streaming => {
                let at = Shown::new(&self.transcript, self.options.mode, Kind::Thinking);
                self.reasoning.end(&e.message_id, at, &mut self.ext, out)
            }
            Event::ToolCallEnd(e) => self.write_call(&e.tool_call_id, None, out),
            Event::ToolCallResult(e) if self.streaming() => {
                let content = content_to_aap(&e.content);
                let mut data = json!({"toolCallId": e.tool_call_id, "content": content});
                if self.ext.enabled {
                    data[ext::FIELD] = Value::Object(ext::result_field(&e));
                }
                write_event(out, name::TOOL_RESULT, &data);
            }
            Event::RunFinished(e) => {
                let terminal = self
                    .ext
                    .enabled
                    .then(|| ext::terminal_field(&Event::RunFinished(e.clone())));
                let limit = e
                    .result
                    .as_ref()
                    .and_then(|r| r.get("stopReason"))
                    .and_then(Value::as_str)
                    .and_then(StopReason::limit);
                let stop = match (limit, e.outcome) {
                    (Some(reason), _) => TurnStop {
                        reason,
                        pending: Vec::new(),
                    },
                    (None, Some(RunOutcome::Cancelled)) => TurnStop {
                        reason: StopReason::EndTurn,
                        pending: Vec::new(),
                    },
                    (None, Some(RunOutcome::Interrupt { interrupts })) => {
                        self.interrupted(&interrupts, out)
                    }
                    (None, _) => self.settle(Vec::new()),
                };
                self.end_turn(stop, terminal, out);
            }
            Event::RunError(e) => {
                let terminal = self
                    .ext
                    .enabled
                    .then(|| ext::terminal_field(&Event::RunError(e.clone())));
                let reason = e
                    .code
                    .as_deref()
                    .and_then(StopReason::limit)
                    .unwrap_or(StopReason::Error);
                self.end_turn(
                    TurnStop {
                        reason,
                        pending: Vec::new(),
                    },
                    terminal,
                    out,
                );
            }
            other if self.ext.enabled => self.ext.other(&other, out),
            other => {
                // A lossy downgrade must say so (AG-UI 1.1 versioning): content a plain AAP
                // client would have acted on is counted and warned once per stream.
                // A `none` answer is built from the transcript, which a snapshot corrects.
                let answered = self.options.mode == StreamMode::None
                    && matches!(other, Event::MessagesSnapshot(_));
                if carries_content(&other) && !answered {
                    self.notes.push(Note::Dropped(DropKind::NoHome));
                }
            }
        }
        Ok(())
    }

    fn streaming(&self) -> bool {
        self.options.mode != StreamMode::None
    }

    /// Writes the call `id` once; `interrupt`: the interrupt the call was made up to show.
    fn write_call(&mut self, id: &str, interrupt: Option<&str>, out: &mut BytesMut) {
        if !self.written.insert(id.to_owned()) {
            return;
        }
        if !self.streaming() {
            return;
        }
        let Some(call) = self.transcript.tool_call(id) else {
            return;
        };
        let (name, input) = self.view(call);
        let field = self.ext.enabled.then(|| match interrupt {
            Some(interrupt) => Map::from_iter([(ext::INTERRUPT.to_owned(), interrupt.into())]),
            None => {
                let shown = args_text(&Value::Object(input.clone()));
                ext::call_field(
                    self.ext.calls.get(id),
                    &name,
                    &call.function.arguments,
                    &shown,
                )
            }
        });
        let mut data = json!({"toolCallId": id, "name": name, "input": input});
        if let Some(field) = field {
            data[ext::FIELD] = Value::Object(field);
        }
        write_event(out, name::TOOL_CALL, &data);
    }

    /// The calls this run left without a result, classified (§6.2 B3, B4), after those already
    /// in `pending`.
    fn settle(&self, mut pending: Vec<Pending>) -> TurnStop {
        for call in self.transcript.calls() {
            if call.resolved || pending.iter().any(|p| p.tool_call_id == call.id) {
                continue;
            }
            let kind = if self.options.client_tools.contains(&call.name) {
                PendingKind::ClientTool
            } else {
                PendingKind::Permission
            };
            let shown = self
                .transcript
                .tool_call(&call.id)
                .map_or_else(|| call.name.clone(), |c| self.view(c).0);
            pending.push(Pending {
                tool_call_id: call.id.clone(),
                name: shown,
                kind,
            });
        }
        TurnStop {
            reason: if pending.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            },
            pending,
        }
    }

    /// An interrupt outcome (§6.2 B1, B2): each interrupt is a permission request on its tool
    /// call, or on a synthetic call when the call is not one of this run's.
    fn interrupted(&mut self, interrupts: &[Interrupt], out: &mut BytesMut) -> TurnStop {
        let mut pending = Vec::new();
        for interrupt in interrupts {
            let known = interrupt
                .tool_call_id
                .as_deref()
                .and_then(|id| self.transcript.call(id))
                .map(|c| (c.id.clone(), c.name.clone()));
            let synthetic = known.is_none();
            let (id, shown) = match known {
                Some((id, name)) => (id, name),
                None => self.synthesise_call(interrupt, out),
            };
            pending.push(Pending {
                tool_call_id: id,
                name: shown,
                kind: PendingKind::Interrupt {
                    interrupt_id: interrupt.id.clone(),
                    synthetic,
                },
            });
        }
        let mut stop = self.settle(pending);
        stop.reason = StopReason::ToolUse;
        stop
    }

    /// The call an AAP client is shown for an interrupt it has no call for.
    fn synthesise_call(&mut self, interrupt: &Interrupt, out: &mut BytesMut) -> (String, String) {
        let (id, tool) = match &interrupt.tool_call_id {
            Some(id) => (id.clone(), "interrupt:tool_call".to_owned()),
            None => (
                format!("{INTERRUPT_CALL_PREFIX}{}", interrupt.id),
                format!("interrupt:{}", interrupt.reason),
            ),
        };
        let mut input = Map::new();
        if let Some(message) = &interrupt.message {
            input.insert("message".into(), message.clone().into());
        }
        if interrupt.tool_call_id.is_none() {
            if let Some(schema) = &interrupt.response_schema {
                input.insert("responseSchema".into(), schema.clone());
            }
        }
        let parent = match self.transcript.generated().last() {
            Some(Message::Assistant(m)) => Some(m.id.clone()),
            _ => None,
        };
        let events = [
            Event::ToolCallStart(ToolCallStart {
                tool_call_id: id.clone(),
                tool_call_name: tool.clone(),
                parent_message_id: parent,
                base: EventBase::default(),
            }),
            Event::ToolCallArgs(ToolCallArgs {
                tool_call_id: id.clone(),
                delta: Value::Object(input).to_string(),
                base: EventBase::default(),
            }),
            Event::ToolCallEnd(ToolCallEnd {
                tool_call_id: id.clone(),
                base: EventBase::default(),
            }),
        ];
        for event in events {
            // Synthetic and small: within any budget a run that got this far has left.
            // A synthetic call is tiny and its id new: the transcript always takes it.
            let applied = self.transcript.apply(&event);
            debug_assert!(applied.is_ok(), "the transcript refused a synthetic call");
        }
        self.transcript.set_call_metadata(&id, synthetic_marker());
        self.write_call(&id, Some(&interrupt.id), out);
        (id, tool)
    }

    /// `terminal`: the extension's `agui` member of `turn_stop`.
    fn end_turn(&mut self, stop: TurnStop, terminal: Option<Value>, out: &mut BytesMut) {
        if self.streaming() {
            let mode = self.options.mode;
            let at = Shown::new(&self.transcript, mode, Kind::Thinking);
            self.reasoning.flush(at, &mut self.ext, out);
            let at = Shown::new(&self.transcript, mode, Kind::Text);
            self.text.flush(at, &mut self.ext, out);
            let mut data = json!({ "stopReason": stop.reason.as_str() });
            if let Some(terminal) = terminal {
                data[ext::FIELD] = terminal;
            }
            write_event(out, name::TURN_STOP, &data);
        } else {
            // A tool_use stop shows its pending calls; any other stop has none.
            let messages = if stop.reason == StopReason::ToolUse {
                to_aap(self.transcript.generated(), &|c| self.view(c))
            } else {
                to_aap(&self.transcript.generated_resolved(), &|c| self.view(c))
            };
            let response = TurnResponse {
                stop_reason: stop.reason,
                messages,
            };
            let encoded = serde_json::to_writer(bytes::BufMut::writer(&mut *out), &response);
            // The wire types always serialise into memory.
            debug_assert!(encoded.is_ok(), "could not encode an AAP turn response");
        }
        self.stop = Some(stop);
    }
}

/// The metadata that marks a call the gateway made up (an interrupt shown as a call): kept in
/// the session history for the client, never sent to the agent.
fn synthetic_marker() -> Map<String, Value> {
    Map::from_iter([("aap".to_owned(), json!({ "synthetic": true }))])
}

/// True for a call the gateway made up (see [`synthetic_marker`]).
pub fn is_synthetic(call: &ToolCall) -> bool {
    call.metadata
        .as_ref()
        .and_then(|m| m.get("aap"))
        .and_then(|a| a.get("synthetic"))
        == Some(&Value::Bool(true))
}

/// How a call shows to an AAP client (§5): its name and its arguments as one object. A call of
/// the confirm tool (not a client tool) whose arguments name the tool to confirm (`tool`, with
/// its `arguments`) shows as a call of that tool, so the client asks permission for the tool
/// that will actually run.
pub fn call_view(
    call: &ToolCall,
    confirm_tool: &str,
    client_tools: &[String],
) -> (String, Map<String, Value>) {
    let mut input = args_object(&call.function.arguments);
    let name = &call.function.name;
    if name == confirm_tool && !client_tools.contains(name) {
        if let Some(Value::String(tool)) = input.get("tool") {
            let tool = tool.clone();
            let arguments = match input.remove("arguments") {
                Some(Value::Object(object)) => object,
                _ => Map::new(),
            };
            return (tool, arguments);
        }
    }
    (name.clone(), input)
}

/// Text or thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
}

impl Kind {
    /// The event carrying a delta (`delta` mode) or a whole message (`message` mode).
    fn event(self, mode: StreamMode) -> &'static str {
        match (self, mode) {
            (Kind::Text, StreamMode::Delta) => name::TEXT_DELTA,
            (Kind::Thinking, StreamMode::Delta) => name::THINKING_DELTA,
            (Kind::Text, _) => name::TEXT,
            (Kind::Thinking, _) => name::THINKING,
        }
    }

    /// The key of a whole message's text in its event.
    fn key(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Thinking => "thinking",
        }
    }
}

/// Where a lane's messages are shown from: their text, the mode, and which lane.
#[derive(Clone, Copy)]
struct Shown<'a> {
    transcript: &'a Transcript,
    mode: StreamMode,
    kind: Kind,
}

impl<'a> Shown<'a> {
    fn new(transcript: &'a Transcript, mode: StreamMode, kind: Kind) -> Shown<'a> {
        Shown {
            transcript,
            mode,
            kind,
        }
    }
}

impl Lane {
    fn start(&mut self, id: String, at: Shown<'_>, ext: &mut Ext, out: &mut BytesMut) {
        if self.live.is_none() {
            ext.open(&id, out);
            self.go_live(id, at);
        } else {
            self.waiting.push_back((id, false));
        }
    }

    /// Message `id` becomes the live one (in `message` mode, its event begins with its text
    /// so far).
    fn go_live(&mut self, id: String, at: Shown<'_>) {
        if at.mode == StreamMode::Message {
            let text = at.transcript.text_of(&id);
            self.whole = Some(Whole::begin(at.kind.event(at.mode), at.kind.key(), text));
        }
        self.live = Some(id);
    }

    /// A delta of the live message, already in the transcript: written (`delta` mode) or added
    /// to the message's event (`message` mode).
    fn shown_delta(&mut self, delta_mode: bool, event: &str, delta: &str, out: &mut BytesMut) {
        if delta_mode {
            write_delta(out, event, delta);
        } else if let Some(whole) = &mut self.whole {
            whole.push(delta);
        }
    }

    /// The transcript's messages were replaced (a snapshot): the live message's event starts
    /// again from its text there.
    fn reread(&mut self, at: Shown<'_>) {
        if let Some(id) = self.live.take() {
            self.go_live(id, at);
        }
    }

    /// Writes the live message `id` whole (`message` mode).
    fn write_live(&mut self, id: &str, at: Shown<'_>, out: &mut BytesMut) {
        let text = at.transcript.text_of(id);
        match self.whole.take() {
            Some(whole) if whole.len() == text.len() => whole.finish(out),
            // The transcript did not take the deltas (a snapshot had dropped the message):
            // what it holds is what the message is.
            _ => write_whole(out, at.kind, text),
        }
    }

    /// A message of the lane ended. In `message` mode it is written whole. In `delta` mode,
    /// when it was the live one, the waiting ones catch up in start order (all their text so
    /// far as one delta) until one is still open and becomes live. The extension's boundaries
    /// bracket each message where it is shown.
    fn end(&mut self, id: &str, at: Shown<'_>, ext: &mut Ext, out: &mut BytesMut) {
        let Shown {
            transcript,
            mode,
            kind,
        } = at;
        if self.live.as_deref() != Some(id) {
            match mode {
                StreamMode::Message => {
                    ext.open(id, out);
                    write_whole(out, kind, transcript.text_of(id));
                    ext.close(id, kind, out);
                    self.waiting.retain(|(w, _)| w != id);
                }
                _ => {
                    if let Some(w) = self.waiting.iter_mut().find(|(w, _)| w == id) {
                        w.1 = true;
                    }
                }
            }
            return;
        }
        if mode == StreamMode::Message {
            self.write_live(id, at, out);
        }
        ext.close(id, kind, out);
        self.live = None;
        while let Some((next, ended)) = self.waiting.pop_front() {
            ext.open(&next, out);
            if mode == StreamMode::Delta {
                write_delta(out, kind.event(mode), transcript.text_of(&next));
            }
            if ended {
                ext.close(&next, kind, out);
            } else {
                self.go_live(next, at);
                break;
            }
        }
    }

    /// The run ended with messages still open (an error cuts them): what the client has not
    /// seen of them is written, so every mode shows the same text.
    fn flush(&mut self, at: Shown<'_>, ext: &mut Ext, out: &mut BytesMut) {
        let Shown {
            transcript,
            mode,
            kind,
        } = at;
        // The live message streamed its deltas already; in `message` mode it was never shown.
        // Waiting messages were never shown in either mode (`message` mode removes them at
        // their end).
        if let Some(id) = self.live.take() {
            if mode == StreamMode::Message {
                self.write_live(&id, at, out);
            }
            ext.close(&id, kind, out);
        }
        for (id, _) in self.waiting.drain(..) {
            ext.open(&id, out);
            match mode {
                StreamMode::Delta => write_delta(out, kind.event(mode), transcript.text_of(&id)),
                _ => write_whole(out, kind, transcript.text_of(&id)),
            }
            ext.close(&id, kind, out);
        }
    }
}

fn write_whole(out: &mut BytesMut, kind: Kind, text: &str) {
    match kind {
        Kind::Text => write_text(out, name::TEXT, "text", text),
        Kind::Thinking => write_text(out, name::THINKING, "thinking", text),
    }
}

/// `event: <name>\ndata: {"delta":…}`, written by hand: nearly every event of a turn.
fn write_delta(out: &mut BytesMut, event: &str, delta: &str) {
    write_text(out, event, "delta", delta);
}

/// `event: <name>\ndata: {"<key>":<text>}` unless the text is empty, written by hand (what
/// serde_json would write, without building a JSON value and copying the text into it).
fn write_text(out: &mut BytesMut, event: &str, key: &str, text: &str) {
    if !text.is_empty() {
        write_head(out, event, key, text.len());
        crate::json::write_str(out, text);
        out.extend_from_slice(b"}\n\n");
    }
}

fn write_event<T: Serialize + ?Sized>(out: &mut BytesMut, event: &str, data: &T) {
    let encoded = sse::encode_json(out, Some(event), data);
    // The wire types always serialise into memory.
    debug_assert!(encoded.is_ok(), "could not encode an AAP {event} event");
}

impl crate::dialect::codec::Writer for AapWriter {
    fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
        AapWriter::write(self, event, out)
    }

    fn write_delta(
        &mut self,
        delta: &DeltaRef<'_>,
        out: &mut BytesMut,
    ) -> Option<Result<(), Failure>> {
        // What `write` does with a text or reasoning delta when the extension adds nothing to
        // it: into the transcript, and out when its message is the live one.
        if self.ext.enabled {
            return None;
        }
        let text = delta.delta.decode();
        let (appended, lane, name) = match delta.kind {
            DeltaKind::Text => (
                self.transcript.append_text(delta.id, &text),
                &mut self.text,
                name::TEXT_DELTA,
            ),
            DeltaKind::Reasoning => (
                self.transcript.append_reasoning(delta.id, &text),
                &mut self.reasoning,
                name::THINKING_DELTA,
            ),
            DeltaKind::ToolArgs => return None,
        };
        if appended.is_ok() && lane.live.as_deref() == Some(delta.id) {
            let delta_mode = self.options.mode == StreamMode::Delta;
            lane.shown_delta(delta_mode, name, &text, out);
        }
        Some(appended)
    }

    fn opening(&self) -> Option<&'static [u8]> {
        AapWriter::opening(self)
    }

    fn is_stream(&self) -> bool {
        self.options.mode != StreamMode::None
    }

    /// A turn has one stop: the upstream's runs fold into it, and its `turn_stop` reports how
    /// the last one ended (or the first failure).
    fn runs(&self) -> crate::dialect::Runs {
        crate::dialect::Runs::Folded {
            boundary: super::RUN_BOUNDARY,
        }
    }

    fn take_notes(&mut self, notes: &mut Vec<crate::event::Note>) {
        self.transcript.take_notes(notes);
        notes.append(&mut self.notes);
    }
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
