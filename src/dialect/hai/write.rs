//! The HAI writer: canonical events in, what `hai-client` accepts out (`translation.md` §3.4,
//! `hai.md` §6 obligations 1–11, profile per §9).
//!
//! Text messages become business messages; a reasoning message becomes thinking outputs of the
//! business message it belongs to (its own one when none is open); `CUSTOM hai.*` events turn
//! back into the HAI events they came from. Tool arguments are held until the call ends (one
//! whole object, bounded) unless the profile streams them. Every event gets an integer
//! timestamp: the canonical one, else the pipeline's clock reading.

use std::collections::HashMap;

use bytes::BytesMut;
use serde_json::{Map, Value};

use super::business::{self, ATTRIBUTES};
use super::extension::{self, base_lost};
use super::history::{self, AssistantContent};
use super::{custom, DeltaEncoding, Subagents, ToolArgsEncoding, WriterOptions, METADATA_KEY};
use crate::dialect::confirm;
use crate::error::{ErrorCode, Failure};
use crate::event::args_object;
use crate::event::{
    ContentPart, DeltaKind, DeltaRef, Event, EventBase, MessageContent, RunOutcome,
};
use crate::{json, sse};

/// Tool calls whose arguments may be held at once (`translation.md` §5).
const MAX_HELD_CALLS: usize = 1024;
/// Argument text held for one call (`translation.md` §5: over it the run fails).
const MAX_HELD_ARGS_BYTES: usize = 1 << 20;

/// A business message the canonical stream opened. Its `BUSINESS_DATA_START` is written with
/// its first content: `hai-client` parses the buffer of every message at its end, and an empty
/// buffer does not parse, so a message that never gets content is not written at all.
#[derive(Debug)]
struct Business {
    id: String,
    role: String,
    start_ms: i64,
    written: bool,
    /// The `agui` member of its `BUSINESS_DATA_START`.
    agui: Map<String, Value>,
    /// Opened to hold a reasoning message alone: made up for plain HAI clients.
    wrapper: bool,
}

#[derive(Debug)]
struct Reasoning {
    id: String,
    /// The business message its thinking outputs go to.
    target: String,
    /// The business message was opened for this reasoning message alone.
    own_target: bool,
    started_ms: i64,
    /// Flags were synthesised (the source was not HAI); `elapsed` of the last chunk.
    synthesised: Option<i64>,
    /// Its id is the one the HAI reader derives from the target (`<target>:thinking`), so it
    /// needs no extension to come back.
    native: bool,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct HaiWriter {
    options: WriterOptions,
    now_ms: i64,
    thread_id: String,
    run_id: String,
    open: Vec<Business>,
    reasoning: Vec<Reasoning>,
    args: HashMap<String, String>,
    /// The events being written are made up for plain HAI clients (an interrupt's confirm
    /// call): they carry the `synthetic` mark.
    making_up: bool,
    /// Reused for the delta text of [`Self::plain_text`].
    scratch: BytesMut,
    /// The digits of the clock's reading, formatted once per upstream read.
    now_text: json::IntText,
}

impl HaiWriter {
    pub fn new(options: WriterOptions) -> HaiWriter {
        HaiWriter {
            options,
            ..HaiWriter::default()
        }
    }

    /// The time stamped on events that carry none.
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    /// Appends the HAI events for one canonical event. `Err` when the run cannot go on in HAI
    /// (tool arguments beyond the bound); the caller ends the run with it.
    pub fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
        let ts = event.base().timestamp.unwrap_or(self.now_ms);
        match event {
            Event::RunStarted(e) => {
                let mut lost = base_lost(&e.base);
                if let Some(parent) = &e.parent_run_id {
                    lost.insert("parentRunId".into(), parent.clone().into());
                }
                self.thread_id = e.thread_id;
                self.run_id = e.run_id;
                let mut fields = self.run_fields(&e.base);
                extension::put(&mut fields, lost);
                self.frame(out, "RUN_STARTED", fields, ts);
            }
            Event::RunFinished(e) => {
                if let Some(RunOutcome::Interrupt { interrupts }) = &e.outcome {
                    let mut calls = Vec::new();
                    for interrupt in interrupts {
                        confirm::confirm_call(interrupt, &self.options.confirm_tool, &mut calls);
                    }
                    // Made up for plain HAI clients; the outcome below is the real thing.
                    self.making_up = true;
                    let written = calls.into_iter().try_for_each(|call| self.write(call, out));
                    self.making_up = false;
                    written?;
                }
                self.close_all(out, ts);
                let mut lost = base_lost(&e.base);
                for (key, value) in [
                    ("outcome", e.outcome.as_ref().map(serde_json::to_value)),
                    ("result", e.result.clone().map(Ok)),
                    ("usage", e.usage.as_ref().map(serde_json::to_value)),
                ] {
                    if let Some(Ok(value)) = value {
                        lost.insert(key.into(), value);
                    }
                }
                let mut fields = self.run_fields(&e.base);
                if self.options.run_ids {
                    // The run's own ids: after folded runs (`hai.run`), the last run's.
                    fields.insert("threadId".into(), e.thread_id.into());
                    fields.insert("runId".into(), e.run_id.into());
                }
                extension::put(&mut fields, lost);
                self.frame(out, "RUN_FINISHED", fields, ts);
            }
            Event::RunError(e) => {
                if self.options.error_notice {
                    let id = format!("{}.error", self.run_id);
                    let object = business::text_business(&e.message, None);
                    self.open_business(&id, "assistant", Map::new(), ts);
                    self.business(out, &id, object, Map::new(), ts);
                    self.end_business(out, &id, Map::new(), ts);
                }
                let mut lost = base_lost(&e.base);
                if let Some(Ok(usage)) = e.usage.as_ref().map(serde_json::to_value) {
                    lost.insert("usage".into(), usage);
                }
                let mut fields = Map::new();
                fields.insert("message".into(), e.message.into());
                if let Some(code) = e.code {
                    fields.insert("code".into(), code.into());
                }
                extension::put(&mut fields, lost);
                self.frame(out, "RUN_ERROR", fields, ts);
            }
            Event::StepStarted(e) => {
                self.step(out, "STEP_STARTED", e.step_name, base_lost(&e.base), ts)
            }
            Event::StepFinished(e) => {
                self.step(out, "STEP_FINISHED", e.step_name, base_lost(&e.base), ts)
            }
            Event::TextMessageStart(e) => {
                let mut lost = base_lost(&e.base);
                if let Some(name) = e.name {
                    lost.insert("name".into(), name.into());
                }
                self.open_business(&e.message_id, e.role.as_str(), lost, ts);
            }
            Event::TextMessageContent(e) => {
                let hai = hai_metadata(&e.base);
                let lost = base_lost(&e.base);
                if e.delta.is_empty() && hai.is_none() && lost.is_empty() {
                    return Ok(());
                }
                if hai.is_none()
                    && lost.is_empty()
                    && self.options.delta_encoding == DeltaEncoding::JsonString
                {
                    self.ensure_started(out, &e.message_id);
                    self.plain_text(out, &e.message_id, &e.delta, ts);
                    return Ok(());
                }
                let object = business::text_business(&e.delta, hai);
                self.business(out, &e.message_id, object, lost, ts);
            }
            Event::TextMessageEnd(e) => {
                self.end_business(out, &e.message_id, base_lost(&e.base), ts)
            }
            Event::ReasoningMessageStart(e) => {
                let own = e
                    .message_id
                    .strip_suffix(":thinking")
                    .filter(|m| self.open.iter().any(|b| b.id == *m))
                    .map(str::to_owned)
                    .or_else(|| match self.open.as_slice() {
                        [only] => Some(only.id.clone()),
                        _ => None,
                    });
                let native = own
                    .as_deref()
                    .is_some_and(|t| self.is_native(&e.message_id, t))
                    && base_lost(&e.base).is_empty();
                if !native {
                    let (name, value) =
                        extension::custom_of(&Event::ReasoningMessageStart(e.clone()));
                    self.custom_frame(out, name, value, ts);
                }
                let (target, own_target) = match own {
                    Some(target) => (target, false),
                    None => {
                        self.open_business(&e.message_id, "assistant", extension::synthetic(), ts);
                        if let Some(open) = self.open.iter_mut().find(|b| b.id == e.message_id) {
                            open.wrapper = true;
                        }
                        (e.message_id.clone(), true)
                    }
                };
                self.reasoning.push(Reasoning {
                    id: e.message_id,
                    target,
                    own_target,
                    started_ms: ts,
                    synthesised: None,
                    native,
                });
            }
            Event::ReasoningMessageContent(e) => {
                let Some(r) = self.reasoning.iter_mut().find(|r| r.id == e.message_id) else {
                    return Ok(());
                };
                let hai = hai_metadata(&e.base);
                let has_flags = hai.is_some_and(|h| h.contains_key("thinking"));
                let elapsed = (ts - r.started_ms).max(0) / 1000;
                if !has_flags {
                    r.synthesised = Some(elapsed);
                }
                let target = r.target.clone();
                let mut lost = base_lost(&e.base);
                if !r.native {
                    lost.insert("messageId".into(), e.message_id.clone().into());
                }
                let flags = [
                    ("elapsed", elapsed.into()),
                    ("thinking", true.into()),
                    ("collapse", true.into()),
                ];
                let object = business::thinking_business(&e.delta, hai, flags);
                self.business(out, &target, object, lost, ts);
            }
            Event::ReasoningMessageEnd(e) => {
                let Some(pos) = self.reasoning.iter().position(|r| r.id == e.message_id) else {
                    return Ok(());
                };
                let r = self.reasoning.remove(pos);
                if let (Some(elapsed), true) = (r.synthesised, self.options.thinking_final_chunk) {
                    let elapsed = elapsed.max((ts - r.started_ms).max(0) / 1000);
                    let flags = [
                        ("elapsed", elapsed.into()),
                        ("thinking", false.into()),
                        ("collapse", true.into()),
                    ];
                    let object = business::thinking_business("", None, flags);
                    self.business(out, &r.target, object, extension::synthetic(), ts);
                }
                if r.own_target {
                    self.end_business(out, &r.target, Map::new(), ts);
                }
                if !(r.native && base_lost(&e.base).is_empty()) {
                    let (name, value) = extension::custom_of(&Event::ReasoningMessageEnd(e));
                    self.custom_frame(out, name, value, ts);
                }
            }
            // A span named after an open business message is the one the HAI reader derives
            // around its thinking; any other span comes back only through the extension.
            Event::ReasoningStart(ref e) if self.native_span(&e.message_id, &e.base) => {}
            Event::ReasoningEnd(ref e) if self.native_span(&e.message_id, &e.base) => {}
            other @ (Event::ReasoningStart(_)
            | Event::ReasoningEnd(_)
            | Event::ReasoningEncryptedValue(_)) => {
                let (name, value) = extension::custom_of(&other);
                self.custom_frame(out, name, value, ts);
            }
            Event::ToolCallStart(e) => {
                if self.options.tool_args != ToolArgsEncoding::Stream {
                    if self.args.len() >= MAX_HELD_CALLS {
                        return Err(Failure::new(
                            ErrorCode::UpstreamLimitExceeded,
                            format!("more than {MAX_HELD_CALLS} tool calls open at once"),
                        ));
                    }
                    self.args.insert(e.tool_call_id.clone(), String::new());
                }
                let lost = self.lost(&e.base);
                let mut fields = Map::new();
                fields.insert("toolCallId".into(), e.tool_call_id.into());
                fields.insert("toolCallName".into(), e.tool_call_name.into());
                if let Some(parent) = e.parent_message_id {
                    fields.insert("parentMessageId".into(), parent.into());
                }
                extension::put(&mut fields, lost);
                self.frame(out, "TOOL_CALL_START", fields, ts);
            }
            Event::ToolCallArgs(e) => {
                match self.args.get_mut(&e.tool_call_id) {
                    Some(held) => {
                        if held.len() + e.delta.len() > MAX_HELD_ARGS_BYTES {
                            return Err(Failure::new(
                            ErrorCode::InvalidToolArgs,
                            format!("the arguments of a tool call exceed {MAX_HELD_ARGS_BYTES} bytes"),
                        ));
                        }
                        held.push_str(&e.delta);
                    }
                    None => {
                        let lost = self.lost(&e.base);
                        let mut fields = Map::new();
                        fields.insert("toolCallId".into(), e.tool_call_id.into());
                        fields.insert("delta".into(), e.delta.into());
                        extension::put(&mut fields, lost);
                        self.frame(out, "TOOL_CALL_ARGS", fields, ts);
                    }
                }
            }
            Event::ToolCallEnd(e) => {
                let lost = self.lost(&e.base);
                if let Some(held) = self.args.remove(&e.tool_call_id) {
                    let object = Value::Object(args_object(&held));
                    let delta = match self.options.tool_args {
                        ToolArgsEncoding::Object => object,
                        _ => Value::String(business::json_string(&object)),
                    };
                    // The argument text as sent, when the one object HAI needs spells it
                    // otherwise (braces escaped for `hai-client`, spacing, a repair).
                    let same = match &delta {
                        Value::String(text) => *text == held,
                        other => serde_json::to_string(other).is_ok_and(|text| text == held),
                    };
                    let mut fields = Map::new();
                    fields.insert("toolCallId".into(), e.tool_call_id.clone().into());
                    fields.insert("delta".into(), delta);
                    if self.making_up {
                        extension::put(&mut fields, extension::synthetic());
                    } else if !same {
                        extension::put(
                            &mut fields,
                            Map::from_iter([("delta".into(), held.into())]),
                        );
                    }
                    self.frame(out, "TOOL_CALL_ARGS", fields, ts);
                }
                let mut fields = Map::new();
                fields.insert("toolCallId".into(), e.tool_call_id.into());
                extension::put(&mut fields, lost);
                self.frame(out, "TOOL_CALL_END", fields, ts);
            }
            Event::ToolCallResult(e) => {
                let mut lost = base_lost(&e.base);
                if let MessageContent::Parts(parts) = &e.content {
                    if let Ok(parts) = serde_json::to_value(parts) {
                        lost.insert("content".into(), parts);
                    }
                }
                let mut fields = Map::new();
                fields.insert("messageId".into(), e.message_id.into());
                fields.insert("toolCallId".into(), e.tool_call_id.into());
                fields.insert("content".into(), result_text(e.content).into());
                fields.insert("role".into(), "tool".into());
                extension::put(&mut fields, lost);
                self.frame(out, "TOOL_CALL_RESULT", fields, ts);
            }
            Event::StateSnapshot(e) => {
                let mut fields = Map::new();
                fields.insert("snapshot".into(), e.snapshot);
                extension::put(&mut fields, base_lost(&e.base));
                self.frame(out, "STATE_SNAPSHOT", fields, ts);
            }
            Event::StateDelta(mut e) => {
                let mut lost = base_lost(&e.base);
                if e.delta.iter().any(|op| !op.extra.is_empty()) {
                    if let Ok(whole) = serde_json::to_value(&e.delta) {
                        lost.insert("delta".into(), whole);
                    }
                }
                // `hai-client` refuses `from` on an operation that does not define it: members
                // RFC 6902 leaves undefined, which an AG-UI agent may send, stay out of HAI.
                for op in &mut e.delta {
                    op.extra.clear();
                }
                let mut fields = Map::new();
                fields.insert(
                    "delta".into(),
                    serde_json::to_value(e.delta).unwrap_or_default(),
                );
                extension::put(&mut fields, lost);
                self.frame(out, "STATE_DELTA", fields, ts);
            }
            Event::MessagesSnapshot(e) => {
                let messages = history::encode(
                    &e.messages,
                    AssistantContent::Business(self.options.delta_encoding),
                );
                let mut lost = base_lost(&e.base);
                if !history::encodes_exactly(&e.messages) {
                    if let Ok(whole) = serde_json::to_value(&e.messages) {
                        lost.insert("messages".into(), whole);
                    }
                }
                let mut fields = Map::new();
                fields.insert("messages".into(), Value::Array(messages));
                extension::put(&mut fields, lost);
                self.frame(out, self.options.snapshot_name.as_str(), fields, ts);
            }
            Event::Custom(e) => {
                let lost = base_lost(&e.base);
                self.custom(out, e.name, e.value, lost, ts)
            }
            Event::Raw(e) => {
                let mut fields = Map::new();
                fields.insert("event".into(), e.event);
                if let Some(source) = e.source {
                    fields.insert("source".into(), source.into());
                }
                extension::put(&mut fields, base_lost(&e.base));
                self.frame(out, "RAW", fields, ts);
            }
            Event::SubagentStarted(e) if self.options.subagents == Subagents::Collaborative => {
                let from = hai_metadata(&e.base)
                    .and_then(|h| h.get("from"))
                    .cloned()
                    .unwrap_or_else(|| "agent".into());
                // Always present, if empty: it tells the gateway's reader that this hand-off
                // is an AG-UI subagent.
                let mut lost = base_lost(&e.base);
                for (key, value) in [
                    ("description", &e.description),
                    ("parentSubagentRunId", &e.parent_subagent_run_id),
                    ("parentToolCallId", &e.parent_tool_call_id),
                    ("parentMessageId", &e.parent_message_id),
                ] {
                    if let Some(value) = value {
                        lost.insert(key.into(), value.clone().into());
                    }
                }
                let mut fields = Map::new();
                fields.insert("from".into(), from);
                fields.insert("to".into(), e.name.clone().into());
                fields.insert("messageId".into(), e.subagent_run_id.clone().into());
                fields.insert(extension::MEMBER.into(), Value::Object(lost));
                self.frame(out, "AGENT_COLLABORATIVE_MESSAGE_START", fields, ts);
                let task = serde_json::json!({"task": {"id": e.subagent_run_id, "name": e.name}});
                let mut fields = Map::new();
                fields.insert("messageId".into(), e.subagent_run_id.into());
                fields.insert("delta".into(), self.small_object(task));
                extension::put(&mut fields, extension::synthetic());
                self.frame(out, "AGENT_COLLABORATIVE_MESSAGE_CONTENT", fields, ts);
            }
            Event::SubagentFinished(e) if self.options.subagents == Subagents::Collaborative => {
                let mut lost = base_lost(&e.base);
                if let Some(Ok(outcome)) = e.outcome.as_ref().map(serde_json::to_value) {
                    lost.insert("outcome".into(), outcome);
                }
                if let Some(result) = e.result {
                    lost.insert("result".into(), result);
                }
                self.collaboration_end(out, e.subagent_run_id, lost, ts);
            }
            Event::SubagentError(e) if self.options.subagents == Subagents::Collaborative => {
                let mut lost = base_lost(&e.base);
                lost.insert("message".into(), e.message.into());
                if let Some(code) = e.code {
                    lost.insert("code".into(), code.into());
                }
                self.collaboration_end(out, e.subagent_run_id, lost, ts);
            }
            // No HAI meaning: carried as HAI `CUSTOM agui.<TYPE>` (§3.4).
            other @ (Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_)) => {
                let (name, value) = extension::custom_of(&other);
                self.custom_frame(out, name, value, ts);
            }
            // The sequencer expands chunks; nothing else is left.
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => {}
        }
        Ok(())
    }

    fn run_fields(&self, base: &EventBase) -> Map<String, Value> {
        let hai = hai_metadata(base);
        let mut fields = Map::new();
        if self.options.run_ids {
            fields.insert("threadId".into(), self.thread_id.clone().into());
            fields.insert("runId".into(), self.run_id.clone().into());
        }
        let message_id = hai
            .and_then(|h| h.get("messageId"))
            .cloned()
            .unwrap_or_else(|| self.run_id.clone().into());
        let role = hai
            .and_then(|h| h.get("role"))
            .cloned()
            .unwrap_or_else(|| "assistant".into());
        fields.insert("messageId".into(), message_id);
        fields.insert("role".into(), role);
        fields
    }

    fn step(&self, out: &mut BytesMut, ty: &str, name: String, lost: Map<String, Value>, ts: i64) {
        let mut fields = Map::new();
        fields.insert("stepName".into(), name.into());
        extension::put(&mut fields, lost);
        self.frame(out, ty, fields, ts);
    }

    /// The `agui` member of a tool-call event: the synthetic mark while a confirm call is
    /// written, else what its base loses.
    fn lost(&self, base: &EventBase) -> Map<String, Value> {
        if self.making_up {
            extension::synthetic()
        } else {
            base_lost(base)
        }
    }

    /// A reasoning message the HAI reader gives back by itself: thinking in the text message
    /// `target`, under the id the reader derives from it.
    fn is_native(&self, id: &str, target: &str) -> bool {
        id.strip_suffix(":thinking") == Some(target)
            && self.open.iter().any(|b| b.id == target && !b.wrapper)
    }

    /// A reasoning span the HAI reader gives back by itself (see [`Self::is_native`]).
    fn native_span(&self, id: &str, base: &EventBase) -> bool {
        id.strip_suffix(":thinking")
            .is_some_and(|target| self.is_native(id, target))
            && base_lost(base).is_empty()
    }

    /// Records an open business message; its START is written with its first content.
    fn open_business(&mut self, id: &str, role: &str, agui: Map<String, Value>, ts: i64) {
        if !self.open.iter().any(|b| b.id == id) {
            self.open.push(Business {
                id: id.to_owned(),
                role: role.to_owned(),
                start_ms: ts,
                written: false,
                wrapper: false,
                agui,
            });
        }
    }

    /// Writes the `BUSINESS_DATA_START` of `id` if its first content is about to go out.
    fn ensure_started(&mut self, out: &mut BytesMut, id: &str) {
        let Some(open) = self.open.iter_mut().find(|b| b.id == id) else {
            return;
        };
        if open.written {
            return;
        }
        open.written = true;
        let mut fields = Map::new();
        fields.insert("messageId".into(), id.into());
        fields.insert("role".into(), open.role.clone().into());
        extension::put(&mut fields, open.agui.clone());
        let ts = open.start_ms;
        self.frame(out, "BUSINESS_DATA_START", fields, ts);
    }

    fn end_business(&mut self, out: &mut BytesMut, id: &str, lost: Map<String, Value>, ts: i64) {
        let Some(pos) = self.open.iter().position(|b| b.id == id) else {
            return;
        };
        let open = self.open.remove(pos);
        if !open.written {
            return;
        }
        let mut fields = Map::new();
        fields.insert("messageId".into(), id.into());
        fields.insert("role".into(), open.role.into());
        if open.wrapper {
            extension::put(&mut fields, extension::synthetic());
        } else {
            extension::put(&mut fields, lost);
        }
        self.frame(out, "BUSINESS_DATA_END", fields, ts);
    }

    /// Ends what is still open before the run's end (reasoning-only business messages).
    fn close_all(&mut self, out: &mut BytesMut, ts: i64) {
        self.reasoning.clear();
        while let Some(open) = self.open.last() {
            let id = open.id.clone();
            self.end_business(out, &id, Map::new(), ts);
        }
    }

    /// One business output of message `id`, in the profile's encoding.
    fn business(
        &mut self,
        out: &mut BytesMut,
        id: &str,
        mut object: Map<String, Value>,
        lost: Map<String, Value>,
        ts: i64,
    ) {
        let mut fields = Map::new();
        fields.insert("messageId".into(), id.into());
        match self.options.delta_encoding {
            DeltaEncoding::JsonString => {
                fields.insert(
                    "delta".into(),
                    business::json_string(&Value::Object(object)).into(),
                );
            }
            DeltaEncoding::Object => {
                // Variant 2: blockId and style beside the delta, layout inside.
                let mut top = Vec::new();
                for key in &ATTRIBUTES[1..] {
                    if let Some(v) = object.shift_remove(*key) {
                        top.push((*key, v));
                    }
                }
                fields.insert("delta".into(), Value::Object(object));
                for (k, v) in top {
                    fields.insert(k.into(), v);
                }
            }
            DeltaEncoding::PlainText => match plain_text(&object) {
                Some(text) => {
                    fields.insert("delta".into(), text.into());
                }
                None => {
                    let mut value = Map::with_capacity(object.len() + 1);
                    value.insert("messageId".into(), id.into());
                    value.extend(object);
                    let mut fields = Map::new();
                    fields.insert("name".into(), custom::BUSINESS_DATA.into());
                    fields.insert("value".into(), Value::Object(value));
                    extension::put(&mut fields, lost);
                    self.frame(out, "CUSTOM", fields, ts);
                    return;
                }
            },
        }
        extension::put(&mut fields, lost);
        self.ensure_started(out, id);
        self.frame(out, "BUSINESS_DATA_CONTENT", fields, ts);
    }

    /// A text delta with nothing but its text — nearly every event of an answer — as variant 3,
    /// by hand: the bytes [`business::text_business`], [`Self::business`] and [`Self::frame`]
    /// write for it, without the JSON trees in between (tested against them).
    fn plain_text(&mut self, out: &mut BytesMut, id: &str, text: &str, ts: i64) {
        if json::is_plain_without(text, b'{', b'}') {
            // Nothing to escape in the text, at either level: the delta's string is the
            // escaped wrapper around the text as it is.
            out.reserve(128 + id.len() + text.len());
            out.extend_from_slice(br#"data: {"type":"BUSINESS_DATA_CONTENT","messageId":"#);
            json::write_str(out, id);
            out.extend_from_slice(br#","delta":"{\"output\":{\"type\":\"text\",\"content\":\""#);
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(br#"\"}}","timestamp":"#);
            self.now_text.write(out, ts);
            out.extend_from_slice(b"}\n\n");
            return;
        }
        let delta = &mut self.scratch;
        delta.clear();
        delta.extend_from_slice(br#"{"output":{"type":"text","content":"#);
        business::write_braceless_str(delta, text);
        delta.extend_from_slice(b"}}");
        // Built from `str` pieces and ASCII only: always UTF-8.
        let Ok(delta) = std::str::from_utf8(delta) else {
            return;
        };
        out.extend_from_slice(br#"data: {"type":"BUSINESS_DATA_CONTENT","messageId":"#);
        json::write_str(out, id);
        out.extend_from_slice(br#","delta":"#);
        json::write_str(out, delta);
        out.extend_from_slice(br#","timestamp":"#);
        json::write_int(out, ts);
        out.extend_from_slice(b"}\n\n");
    }

    /// A HAI `CUSTOM` event with nothing else.
    fn custom_frame(&self, out: &mut BytesMut, name: String, value: Value, ts: i64) {
        let mut fields = Map::new();
        fields.insert("name".into(), name.into());
        fields.insert("value".into(), value);
        self.frame(out, "CUSTOM", fields, ts);
    }

    fn custom(
        &mut self,
        out: &mut BytesMut,
        name: String,
        value: Value,
        lost: Map<String, Value>,
        ts: i64,
    ) {
        match (name.as_str(), value) {
            (custom::BUSINESS_DATA, Value::Object(mut object)) => {
                let id = match object.shift_remove("messageId") {
                    Some(Value::String(id)) => id,
                    _ => format!("{}.business", self.run_id),
                };
                if self.open.iter().any(|b| b.id == id) {
                    self.business(out, &id, object, lost, ts);
                } else {
                    self.open_business(&id, "assistant", Map::new(), ts);
                    self.business(out, &id, object, lost, ts);
                    self.end_business(out, &id, Map::new(), ts);
                }
            }
            (custom::COLLABORATIVE, Value::Object(mut fields)) => {
                let ty = match fields
                    .shift_remove("phase")
                    .as_ref()
                    .and_then(Value::as_str)
                {
                    Some("start") => "AGENT_COLLABORATIVE_MESSAGE_START",
                    Some("content") => "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
                    _ => "AGENT_COLLABORATIVE_MESSAGE_END",
                };
                if let Some(delta) = fields.shift_remove("delta") {
                    let delta = match delta {
                        Value::Object(_) => self.small_object(delta),
                        other => other,
                    };
                    fields.insert("delta".into(), delta);
                }
                self.frame(out, ty, fields, ts);
            }
            (custom::EVENT, Value::Object(mut original)) => {
                let ty = match original.shift_remove("type") {
                    Some(Value::String(ty)) => ty,
                    _ => String::new(),
                };
                self.frame(out, &ty, original, ts);
            }
            (custom::CUSTOM, Value::Object(mut inner)) => {
                let mut fields = Map::new();
                fields.insert(
                    "name".into(),
                    inner.shift_remove("name").unwrap_or_else(|| "".into()),
                );
                fields.insert(
                    "value".into(),
                    inner.shift_remove("value").unwrap_or_default(),
                );
                self.frame(out, "CUSTOM", fields, ts);
            }
            (_, value) => {
                let mut fields = Map::new();
                fields.insert("name".into(), name.into());
                fields.insert("value".into(), value);
                extension::put(&mut fields, lost);
                self.frame(out, "CUSTOM", fields, ts);
            }
        }
    }

    /// The end of an AG-UI subagent's hand-off; the `agui` member (possibly empty) says how it
    /// ended: `message`/`code` for `SUBAGENT_ERROR`, else `outcome`/`result`.
    fn collaboration_end(&self, out: &mut BytesMut, id: String, lost: Map<String, Value>, ts: i64) {
        let mut fields = Map::new();
        fields.insert("messageId".into(), id.into());
        fields.insert(extension::MEMBER.into(), Value::Object(lost));
        self.frame(out, "AGENT_COLLABORATIVE_MESSAGE_END", fields, ts);
    }

    /// A collaboration or argument object: the object itself in the `object` profile, else its
    /// escaped JSON text (`hai-client` concatenates and parses it).
    fn small_object(&self, object: Value) -> Value {
        match self.options.delta_encoding {
            DeltaEncoding::Object => object,
            _ => Value::String(business::json_string(&object)),
        }
    }

    /// `data: {"type":…, fields…, "timestamp":…}` — the fields' own timestamp wins.
    fn frame(&self, out: &mut BytesMut, ty: &str, fields: Map<String, Value>, ts: i64) {
        let encoded = sse::encode_json(
            out,
            None,
            &Frame {
                ty,
                fields: &fields,
                ts,
            },
        );
        // A JSON map always serialises into memory.
        debug_assert!(encoded.is_ok(), "could not encode a HAI {ty} event");
    }
}

/// One HAI event as it goes out: `type` first (the fields' own `type` if they carry one, as
/// an event kept whole does), the fields in their order, and `timestamp` last unless the
/// fields have one. Written straight from the fields rather than through a new map: building
/// that map (a hash and a copy per key) was about a third of a frame's cost.
struct Frame<'a> {
    ty: &'a str,
    fields: &'a Map<String, Value>,
    ts: i64,
}

impl serde::Serialize for Frame<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        // A linear look: these maps hold a handful of keys, fewer than a hash costs.
        match self.fields.iter().find(|(key, _)| *key == "type") {
            Some((_, own)) => map.serialize_entry("type", own)?,
            None => map.serialize_entry("type", self.ty)?,
        }
        let mut stamped = false;
        for (key, value) in self.fields {
            match key.as_str() {
                "type" => continue,
                "timestamp" => stamped = true,
                _ => {}
            }
            map.serialize_entry(key, value)?;
        }
        if !stamped {
            map.serialize_entry("timestamp", &self.ts)?;
        }
        map.end()
    }
}

fn hai_metadata(base: &EventBase) -> Option<&Map<String, Value>> {
    base.metadata
        .as_ref()
        .and_then(|m| m.get(METADATA_KEY))
        .and_then(Value::as_object)
}

/// A text output with nothing but its text, as variant 1 can carry it.
fn plain_text(object: &Map<String, Value>) -> Option<&str> {
    let output = object.get("output")?.as_object()?;
    if output.get("type")?.as_str()? != "text" {
        return None;
    }
    output.get("content")?.as_str()
}

/// Tool results are strings in HAI: text parts joined; any media part makes it the parts' JSON.
fn result_text(content: MessageContent) -> String {
    match content {
        MessageContent::Text(text) => text,
        MessageContent::Parts(parts) => {
            if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
                MessageContent::Parts(parts).text()
            } else {
                serde_json::to_string(&parts).unwrap_or_default()
            }
        }
    }
}

impl crate::dialect::codec::Writer for HaiWriter {
    fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
        HaiWriter::write(self, event, out)
    }

    fn write_delta(
        &mut self,
        delta: &DeltaRef<'_>,
        out: &mut BytesMut,
    ) -> Option<Result<(), Failure>> {
        // What `write` does with a text delta that has no metadata and no lane (a lent delta
        // has neither), and which it leaves as plain text: its unknown fields have no place
        // in HAI's content events either way.
        if delta.kind != DeltaKind::Text || self.options.delta_encoding != DeltaEncoding::JsonString
        {
            return None;
        }
        let text = delta.delta.decode();
        if !text.is_empty() {
            let ts = delta.timestamp.unwrap_or(self.now_ms);
            self.ensure_started(out, delta.id);
            self.plain_text(out, delta.id, &text, ts);
        }
        Some(Ok(()))
    }

    fn wants_clock(&self) -> bool {
        true
    }

    fn set_now(&mut self, now_ms: i64) {
        HaiWriter::set_now(self, now_ms);
    }

    fn runs(&self) -> crate::dialect::Runs {
        crate::dialect::Runs::Folded {
            boundary: custom::RUN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_text_deltas_are_the_bytes_the_general_path_writes() {
        for text in [
            "plain",
            "",
            "héllo 世界 / ~\u{7f}",
            "braces {x} }{ and \"q\" \\{ \n é 世界 \u{1}",
            "{}",
        ] {
            let mut general = BytesMut::new();
            let mut writer = HaiWriter::default();
            writer.business(
                &mut general,
                "m\"1",
                business::text_business(text, None),
                Map::new(),
                17,
            );
            let mut fast = BytesMut::new();
            writer.plain_text(&mut fast, "m\"1", text, 17);
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&general)
            );
        }
    }

    #[test]
    fn a_frame_puts_type_first_and_the_timestamp_last_unless_its_fields_carry_them() {
        let writer = HaiWriter::default();
        let frame = |fields: Value| {
            let mut out = BytesMut::new();
            let Value::Object(fields) = fields else {
                unreachable!()
            };
            writer.frame(&mut out, "RUN_STARTED", fields, 42);
            String::from_utf8(out.to_vec()).unwrap()
        };
        assert_eq!(
            frame(json!({"runId": "r", "threadId": "t"})),
            "data: {\"type\":\"RUN_STARTED\",\"runId\":\"r\",\"threadId\":\"t\",\"timestamp\":42}\n\n"
        );
        // An event kept whole names its own type, wherever it stands, and keeps its own time.
        assert_eq!(
            frame(json!({"a": 1, "timestamp": 7, "type": "KEPT", "b": 2})),
            "data: {\"type\":\"KEPT\",\"a\":1,\"timestamp\":7,\"b\":2}\n\n"
        );
    }

    fn write_all(writer: &mut HaiWriter, events: Value) -> Result<Vec<Value>, Failure> {
        let mut out = BytesMut::new();
        for event in events.as_array().unwrap() {
            writer.write(serde_json::from_value(event.clone()).unwrap(), &mut out)?;
        }
        let text = std::str::from_utf8(&out).unwrap();
        Ok(text
            .split_terminator("\n\n")
            .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
            .collect())
    }

    #[test]
    fn a_message_without_content_is_not_written() {
        let mut writer = HaiWriter::new(WriterOptions::default());
        writer.set_now(7);
        let events = write_all(
            &mut writer,
            json!([
                {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","timestamp":1},
                {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""},
                {"type":"TEXT_MESSAGE_END","messageId":"m"},
                {"type":"TEXT_MESSAGE_START","messageId":"n","role":"assistant","timestamp":2},
                {"type":"TEXT_MESSAGE_CONTENT","messageId":"n","delta":"hi"},
                {"type":"TEXT_MESSAGE_END","messageId":"n"}
            ]),
        )
        .unwrap();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "BUSINESS_DATA_START",
                "BUSINESS_DATA_CONTENT",
                "BUSINESS_DATA_END"
            ]
        );
        assert_eq!(events[0]["messageId"], "n");
        // The start keeps the time of its canonical event; the others get the clock.
        assert_eq!(events[0]["timestamp"], 2);
        assert_eq!(events[1]["timestamp"], 7);
    }

    #[test]
    fn held_arguments_are_bounded() {
        let mut writer = HaiWriter::new(WriterOptions::default());
        let big = "x".repeat(MAX_HELD_ARGS_BYTES / 2 + 1);
        let result = write_all(
            &mut writer,
            json!([
                {"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"},
                {"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":big},
                {"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":big}
            ]),
        );
        assert_eq!(result.unwrap_err().code, ErrorCode::InvalidToolArgs);
    }
}
