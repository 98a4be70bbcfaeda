//! The tolerant HAI reader: a HAI upstream's events in, canonical AG-UI 1.0 events out
//! (`translation.md` §3.3, `hai.md` §8).
//!
//! Business messages become text messages (thinking outputs a reasoning message `M:thinking`
//! inside them; other outputs `CUSTOM hai.business_data`), collaboration events
//! `CUSTOM hai.agent_collaborative_message` (or subagents), run-event extras `metadata.hai`, and
//! unknown types `CUSTOM hai.event`. Everything HAI shares with AG-UI goes through the AG-UI
//! reader, which already absorbs HAI's variants there (object tool arguments, single-op state
//! deltas, nested errors, second timestamps); HAI's `from:""` on every patch operation is
//! removed here first, as the AG-UI reader keeps what an operation does not define. Sequence
//! repairs are the sequencer's, as for any upstream.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::business::{self, Output};
use super::extension::{self, Ext};
use super::history::{self, HistoryContent};
use super::{custom, HaiOptions, METADATA_KEY};
use crate::dialect::agui::fix::{self, Timestamps};
use crate::dialect::agui::{AguiReader, ReaderOptions};
use crate::error::{ErrorCode, Failure};
use crate::event::{
    Custom, Event, EventBase, ReasoningEnd, ReasoningMessageContent, ReasoningMessageEnd,
    ReasoningMessageStart, ReasoningStart, SubagentFinished, SubagentOutcome, SubagentStarted,
    TextMessageContent, TextMessageEnd, TextMessageStart, TextRole,
};
use crate::event::{DeltaKind, DeltaRef, DropKind, IdMint, Note, Rule, RunIds};
use crate::json::{self, JsonStr, Scalar};
use crate::mapping::{AguiAliases, HaiTables, Mappings};
use crate::sse::{SseEvent, SseEventRef};

/// Tool calls remembered per run to derive `pendingToolCallIds`; beyond, calls are not listed.
const MAX_TRACKED_CALLS: usize = 8192;

/// How a HAI upstream's collaboration events are read (`hai.collaboration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collaboration {
    /// `CUSTOM hai.agent_collaborative_message`, reproducible for a HAI client.
    #[default]
    Custom,
    /// `SUBAGENT_STARTED`/`FINISHED` around the content `CUSTOM`.
    Subagent,
}

/// An open business message.
#[derive(Debug)]
struct Open {
    id: String,
    /// Its reasoning message `<id>:thinking` is open.
    thinking: bool,
    /// Made up by the gateway's writer to hold a lone reasoning message: no text message.
    wrapper: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct HaiReader {
    agui: AguiReader,
    tables: Arc<HaiTables>,
    aliases: Arc<AguiAliases>,
    timestamps: Timestamps,
    collaboration: Collaboration,
    history: HistoryContent,
    mint: IdMint,
    open: Vec<Open>,
    /// Frontend tools the request declared.
    declared: HashSet<String>,
    /// Calls of this run to declared tools, in order, and the ids that got a result.
    calls: Vec<String>,
    resolved: HashSet<String>,
    /// Subagents opened by collaboration events (`Collaboration::Subagent`).
    subagents: Vec<String>,
    /// `text` outputs keep their name in the route's tables, so [`plain_text`] may read them.
    text_is_text: bool,
    /// The `messageId` of this run's `RUN_STARTED` when it was the gateway writer's default
    /// (the run id, role `assistant`): it says nothing, so it does not become `metadata.hai`.
    default_message_id: Option<String>,
}

impl HaiReader {
    pub fn new(
        ids: &RunIds,
        mappings: &Mappings,
        reader: ReaderOptions,
        options: &HaiOptions,
        declared_tools: impl IntoIterator<Item = String>,
    ) -> HaiReader {
        HaiReader {
            agui: AguiReader::new(ids, Arc::clone(&mappings.agui), reader),
            tables: Arc::clone(&mappings.hai),
            aliases: Arc::clone(&mappings.agui),
            timestamps: reader.timestamps,
            collaboration: options.collaboration,
            history: options.history_content,
            mint: IdMint::new(&ids.run_id),
            open: Vec::new(),
            declared: declared_tools.into_iter().collect(),
            calls: Vec::new(),
            resolved: HashSet::new(),
            subagents: Vec::new(),
            text_is_text: mappings.hai.output_type("text") == "text",
            default_message_id: None,
        }
    }

    /// Reads one SSE event. `Err` means the payload is unusable and the run must end.
    pub fn read(
        &mut self,
        sse: &SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        if let Some(event) = self.plain_text(&sse.data) {
            out.push(event);
            return Ok(());
        }
        let value: Value = serde_json::from_slice(&sse.data).map_err(|_| {
            Failure::new(
                ErrorCode::UpstreamMalformed,
                "an upstream event's data is not JSON; the upstream does not speak HAI over SSE",
            )
        })?;
        let Value::Object(mut map) = value else {
            notes.push(Note::Dropped(DropKind::NotAnObject));
            return Ok(());
        };
        let tables = Arc::clone(&self.tables);
        let ty = map
            .get("type")
            .and_then(Value::as_str)
            .and_then(|t| tables.event_type(t));
        let Some(ty) = ty else {
            // Kept verbatim: a HAI client gets it back as it was (§3.3 "unknown type").
            let base = self.base(&map, notes);
            out.push(custom_event(custom::EVENT, Value::Object(map), base));
            return Ok(());
        };
        let ext = Ext::take(&mut map, notes);
        if ext == Ext::Synthetic {
            // Made up by the gateway's writer for plain HAI clients: what it stands for comes
            // back through the extension elsewhere.
            match ty {
                "BUSINESS_DATA_START" => {
                    if let Some(id) = message_id(&map) {
                        self.open.push(Open {
                            id,
                            thinking: false,
                            wrapper: true,
                        });
                    }
                }
                "BUSINESS_DATA_END" => {
                    if let Some(id) = message_id(&map) {
                        self.open.retain(|o| o.id != id);
                    }
                }
                _ => {}
            }
            return Ok(());
        }
        match ty {
            "BUSINESS_DATA_START" => self.business_start(map, &ext, out, notes),
            "BUSINESS_DATA_CONTENT" => self.business_content(map, &ext, out, notes),
            "BUSINESS_DATA_END" => self.business_end(map, &ext, out, notes),
            "AGENT_COLLABORATIVE_MESSAGE_START"
            | "AGENT_COLLABORATIVE_MESSAGE_CONTENT"
            | "AGENT_COLLABORATIVE_MESSAGE_END"
                if ext.is_some() =>
            {
                return self.subagent(map, ty, ext, out, notes);
            }
            "AGENT_COLLABORATIVE_MESSAGE_START" => self.collaboration(map, "start", out, notes),
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT" => self.collaboration(map, "content", out, notes),
            "AGENT_COLLABORATIVE_MESSAGE_END" => self.collaboration(map, "end", out, notes),
            "RUN_STARTED" | "RUN_FINISHED" => {
                let mut hai = Map::new();
                for key in ["messageId", "role"] {
                    if let Some(v) = map.shift_remove(key) {
                        hai.insert(key.into(), v);
                    }
                }
                let message = hai.get("messageId").and_then(Value::as_str);
                let assistant = hai.get("role").and_then(Value::as_str) == Some("assistant");
                if ty == "RUN_STARTED" {
                    let run_id = map.get("runId").and_then(Value::as_str);
                    self.default_message_id = message
                        .filter(|m| assistant && Some(*m) == run_id)
                        .map(str::to_owned);
                }
                if assistant && hai.len() == 2 && message == self.default_message_id.as_deref() {
                    hai.clear();
                }
                ext.merge_into(&mut map);
                if ty == "RUN_FINISHED" {
                    self.end_run();
                    if !map.contains_key("outcome") {
                        let pending = self.pending_calls();
                        if !pending.is_empty() {
                            map.insert(
                                "outcome".into(),
                                serde_json::json!({"type":"success","pendingToolCallIds":pending}),
                            );
                        }
                    }
                }
                if !hai.is_empty() {
                    put_hai(&mut map, hai);
                }
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "RUN_ERROR" => {
                ext.merge_into(&mut map);
                self.end_run();
                let nested = map
                    .get("error")
                    .is_some_and(|e| e.is_string() || e.get("message").is_some());
                if !map.get("message").is_some_and(Value::is_string) && !nested {
                    map.insert("message".into(), self.tables.error_message.clone().into());
                }
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "STATE_DELTA" => {
                if let Some(delta) = map.get_mut("delta") {
                    drop_undefined_from(delta, notes);
                }
                ext.merge_into(&mut map);
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "TOOL_CALL_START" => {
                let id = map.get("toolCallId").and_then(Value::as_str);
                let name = map.get("toolCallName").and_then(Value::as_str);
                if let (Some(id), Some(name)) = (id, name) {
                    if self.declared.contains(name) && self.calls.len() < MAX_TRACKED_CALLS {
                        self.calls.push(id.to_owned());
                    }
                }
                ext.merge_into(&mut map);
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "TOOL_CALL_RESULT" => {
                if let Some(id) = map.get("toolCallId").and_then(Value::as_str) {
                    if self.calls.iter().any(|c| c == id) {
                        self.resolved.insert(id.to_owned());
                    }
                }
                ext.merge_into(&mut map);
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "MESSAGE_SNAPSHOT" => {
                notes.push(Note::Fixup(Rule::SnapshotName));
                map.insert("type".into(), "MESSAGES_SNAPSHOT".into());
                if let Some(Value::Array(messages)) = map.shift_remove("messages") {
                    let decoded = history::decode(messages, self.history, &tables, &mut self.mint);
                    map.insert("messages".into(), Value::Array(decoded));
                }
                // The AG-UI messages as they were, when the snapshot carries them.
                if ext
                    .lost()
                    .is_some_and(|l| !l.get("messages").is_some_and(Value::is_array))
                {
                    notes.push(Note::Dropped(DropKind::InvalidEvent));
                }
                ext.merge_into(&mut map);
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            "CUSTOM" => {
                let name = map.get("name").and_then(Value::as_str).unwrap_or_default();
                if name == custom::RUN && map.get("value").is_some_and(Value::is_object) {
                    // A boundary between two runs a HAI stream folded into one: both events
                    // come back, so a stream of several runs crosses a HAI hop whole.
                    if let Some(Value::Object(mut boundary)) = map.shift_remove("value") {
                        for key in ["finished", "error", "started"] {
                            if let Some(event @ Value::Object(_)) = boundary.shift_remove(key) {
                                self.agui.read_value(event, None, out, notes)?;
                            }
                        }
                    }
                    return Ok(());
                }
                if let Some(event) = map
                    .get("value")
                    .and_then(|value| extension::event_of_custom(name, value))
                {
                    // An AG-UI event HAI has no home for, carried by the gateway's writer.
                    return self.agui.read_value(event, None, out, notes);
                }
                if name.starts_with("hai.") {
                    // The `hai.` namespace is the gateway's own inside AG-UI: escape it.
                    let mut value = Map::new();
                    for key in ["name", "value"] {
                        if let Some(v) = map.shift_remove(key) {
                            value.insert(key.into(), v);
                        }
                    }
                    map.insert("name".into(), custom::CUSTOM.into());
                    map.insert("value".into(), Value::Object(value));
                }
                ext.merge_into(&mut map);
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
            // Steps, tool args and ends, state, RAW: AG-UI's own shapes.
            _ => {
                ext.merge_into(&mut map);
                // A call that had no argument text: HAI needs `{}`, the run had nothing.
                if ty == "TOOL_CALL_ARGS" && map.get("delta").is_some_and(|d| d == "") {
                    return Ok(());
                }
                return self.agui.read_value(Value::Object(map), None, out, notes);
            }
        }
        Ok(())
    }

    fn business_start(
        &mut self,
        map: Map<String, Value>,
        ext: &Ext,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        let id = match message_id(&map) {
            Some(id) => id,
            None => {
                notes.push(Note::Fixup(Rule::TextEventGaps));
                self.mint.next('m')
            }
        };
        let role = map
            .get("role")
            .and_then(Value::as_str)
            .map_or(TextRole::Assistant, |r| self.aliases.role(r));
        if !self.open.iter().any(|o| o.id == id) {
            self.open.push(Open {
                id: id.clone(),
                thinking: false,
                wrapper: false,
            });
        }
        let mut base = self.base(&map, notes);
        ext.apply_base(&mut base, notes);
        out.push(Event::TextMessageStart(TextMessageStart {
            message_id: id,
            role,
            name: ext.str("name").map(str::to_owned),
            base,
        }));
    }

    fn business_content(
        &mut self,
        mut map: Map<String, Value>,
        ext: &Ext,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        let id = match message_id(&map).or_else(|| self.single_open()) {
            Some(id) => id,
            None => {
                notes.push(Note::Fixup(Rule::TextEventGaps));
                self.mint.next('m')
            }
        };
        if !self.open.iter().any(|o| o.id == id) {
            notes.push(Note::Fixup(Rule::TextEventGaps));
            self.open.push(Open {
                id: id.clone(),
                thinking: false,
                wrapper: false,
            });
            out.push(Event::TextMessageStart(TextMessageStart {
                message_id: id.clone(),
                role: TextRole::Assistant,
                name: None,
                base: EventBase::default(),
            }));
        }
        let mut base = self.base(&map, notes);
        ext.apply_base(&mut base, notes);
        // A reasoning message the gateway's writer named: its start and end come as events
        // of their own (`CUSTOM agui.REASONING_*`), so none is derived here.
        let named_reasoning = ext.str("messageId").map(str::to_owned);
        let delta = map.shift_remove("delta").unwrap_or(Value::Null);
        let tables = Arc::clone(&self.tables);
        for object in business::decode_delta(delta, &map) {
            match business::classify(object, &tables) {
                Output::Text(delta, hai) => {
                    out.push(Event::TextMessageContent(TextMessageContent {
                        message_id: id.clone(),
                        delta,
                        base: with_hai(base.clone(), hai),
                    }));
                }
                Output::Thinking(delta, hai) => {
                    if let Some(reasoning_id) = &named_reasoning {
                        // The thinking panel's flags of an AG-UI reasoning message are the
                        // writer's own, not the agent's.
                        let mut hai = hai;
                        for flag in business::THINKING_FLAGS {
                            hai.shift_remove(flag);
                        }
                        out.push(Event::ReasoningMessageContent(ReasoningMessageContent {
                            message_id: reasoning_id.clone(),
                            delta,
                            base: with_hai(base.clone(), hai),
                        }));
                        continue;
                    }
                    let reasoning_id = format!("{id}:thinking");
                    if let Some(open) = self.open.iter_mut().find(|o| o.id == id) {
                        if !open.thinking {
                            open.thinking = true;
                            out.push(Event::ReasoningStart(ReasoningStart {
                                message_id: reasoning_id.clone(),
                                base: EventBase::default(),
                            }));
                            out.push(Event::ReasoningMessageStart(ReasoningMessageStart {
                                message_id: reasoning_id.clone(),
                                role: Default::default(),
                                base: EventBase::default(),
                            }));
                        }
                    }
                    out.push(Event::ReasoningMessageContent(ReasoningMessageContent {
                        message_id: reasoning_id,
                        delta,
                        base: with_hai(base.clone(), hai),
                    }));
                }
                Output::Opaque(object) => {
                    let mut value = Map::with_capacity(object.len() + 1);
                    value.insert("messageId".into(), id.clone().into());
                    value.extend(object);
                    out.push(custom_event(
                        custom::BUSINESS_DATA,
                        Value::Object(value),
                        base.clone(),
                    ));
                }
            }
        }
    }

    /// A `BUSINESS_DATA_CONTENT` of an open message whose delta is one plain text output and
    /// which carries nothing else the general path reads — nearly every event of an answer —
    /// read without building JSON trees. `None`: anything else, which
    /// [`Self::business_content`] reads (to the same event for what this accepts; tested).
    fn plain_text(&self, data: &[u8]) -> Option<Event> {
        const PREFIX: &str = r#"{"output":{"type":"text","content":"#;
        // The delta's text as it stands inside its JSON string, around text without escapes.
        const ESCAPED_PREFIX: &str = r#"{\"output\":{\"type\":\"text\",\"content\":\""#;
        const ESCAPED_SUFFIX: &str = r#"\"}}"#;
        if !self.text_is_text {
            return None;
        }
        if let Some((id, text, timestamp)) = plain_text_layout(data) {
            let id = id.decode();
            if id.is_empty()
                || !self.open.iter().any(|o| o.id == *id)
                || !self.timestamps.keeps(timestamp)
            {
                return None;
            }
            return Some(Event::TextMessageContent(TextMessageContent {
                message_id: id.into_owned(),
                delta: text.to_owned(),
                base: EventBase {
                    timestamp,
                    ..EventBase::default()
                },
            }));
        }
        let (mut ty, mut id, mut delta, mut timestamp) = (None, None, None, None);
        json::for_each_field(data, |key, value| {
            let fresh = match (key, value) {
                ("type", Scalar::Str(s)) => ty.replace(s).is_none(),
                ("messageId", Scalar::Str(s)) => id.replace(s).is_none(),
                ("delta", Scalar::Str(s)) => delta.replace(s).is_none(),
                ("timestamp", Scalar::Int(n, _)) => timestamp.replace(n).is_none(),
                // What the general path reads, in any other shape.
                (key, _) if READ_BY_CONTENT.contains(&key) => false,
                // Ignored by the general path too: a content event's role is its start's, and
                // a field HAI does not define carries nothing a client reads.
                _ => true,
            };
            fresh.then_some(())
        })?;
        let id = id?.decode();
        if id.is_empty() || ty?.plain()? != "BUSINESS_DATA_CONTENT" {
            return None;
        }
        if !self.open.iter().any(|o| o.id == *id) || !self.timestamps.keeps(timestamp) {
            return None;
        }
        let delta = delta?;
        let inner = delta
            .raw()
            .strip_prefix(ESCAPED_PREFIX)
            .and_then(|rest| rest.strip_suffix(ESCAPED_SUFFIX))
            .filter(|text| memchr::memchr(b'\\', text.as_bytes()).is_none());
        let text = match inner {
            // No escape at either level: the text is what stands there.
            Some(text) => text.to_owned(),
            None => {
                let delta = delta.decode();
                let literal = delta.strip_prefix(PREFIX)?.strip_suffix("}}")?;
                json::str_literal(literal)?.into_owned()
            }
        };
        Some(Event::TextMessageContent(TextMessageContent {
            message_id: id.into_owned(),
            delta: text,
            base: EventBase {
                timestamp,
                ..EventBase::default()
            },
        }))
    }

    fn business_end(
        &mut self,
        map: Map<String, Value>,
        ext: &Ext,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        let Some(id) = message_id(&map).or_else(|| self.single_open()) else {
            notes.push(Note::Dropped(DropKind::Orphan));
            return;
        };
        if let Some(pos) = self.open.iter().position(|o| o.id == id) {
            let open = self.open.remove(pos);
            if open.wrapper {
                return;
            }
            if open.thinking {
                let reasoning_id = format!("{id}:thinking");
                out.push(Event::ReasoningMessageEnd(ReasoningMessageEnd {
                    message_id: reasoning_id.clone(),
                    base: EventBase::default(),
                }));
                out.push(Event::ReasoningEnd(ReasoningEnd {
                    message_id: reasoning_id,
                    base: EventBase::default(),
                }));
            }
        }
        let mut base = self.base(&map, notes);
        ext.apply_base(&mut base, notes);
        out.push(Event::TextMessageEnd(TextMessageEnd {
            message_id: id,
            base,
        }));
    }

    /// A collaboration event the gateway's writer made of an AG-UI subagent (it carries the
    /// `agui` member): the subagent event again, whatever `hai.collaboration` says.
    fn subagent(
        &mut self,
        mut map: Map<String, Value>,
        ty: &str,
        ext: Ext,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        let Some(id) = message_id(&map) else {
            notes.push(Note::Dropped(DropKind::Orphan));
            return Ok(());
        };
        let mut event = Map::new();
        let agui_ty = match ty {
            "AGENT_COLLABORATIVE_MESSAGE_START" => {
                event.insert("name".into(), map.shift_remove("to").unwrap_or_default());
                match map.shift_remove("from") {
                    Some(Value::String(from)) if from == "agent" => {}
                    Some(from) => {
                        let mut hai = Map::new();
                        hai.insert("from".into(), from);
                        put_hai(&mut event, hai);
                    }
                    None => {}
                }
                "SUBAGENT_STARTED"
            }
            "AGENT_COLLABORATIVE_MESSAGE_END" if ext.str("message").is_some() => "SUBAGENT_ERROR",
            "AGENT_COLLABORATIVE_MESSAGE_END" => "SUBAGENT_FINISHED",
            // A content event with lost fields: none is written; nothing to give back.
            _ => return Ok(()),
        };
        event.insert("type".into(), agui_ty.into());
        event.insert("subagentRunId".into(), id.into());
        if let Some(ts) = map.shift_remove("timestamp") {
            event.insert("timestamp".into(), ts);
        }
        ext.merge_into(&mut event);
        self.agui.read_value(Value::Object(event), None, out, notes)
    }

    fn collaboration(
        &mut self,
        mut map: Map<String, Value>,
        phase: &str,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        let base = self.base(&map, notes);
        map.shift_remove("type");
        if let Some(Value::String(text)) = map.get("delta") {
            if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
                map.insert("delta".into(), Value::Object(object));
            }
        }
        let mut value = Map::with_capacity(map.len() + 1);
        value.insert("phase".into(), phase.into());
        if self.collaboration == Collaboration::Custom {
            value.extend(map);
            out.push(custom_event(
                custom::COLLABORATIVE,
                Value::Object(value),
                base,
            ));
            return;
        }
        // `hai.collaboration = subagent`: the hand-off as an AG-UI subagent.
        match phase {
            "start" => {
                let id = message_id(&map).unwrap_or_else(|| self.mint.next('a'));
                let name = map
                    .get("to")
                    .and_then(Value::as_str)
                    .unwrap_or("agent")
                    .to_owned();
                let mut hai = Map::new();
                if let Some(from) = map.get("from") {
                    hai.insert("from".into(), from.clone());
                }
                self.subagents.push(id.clone());
                out.push(Event::SubagentStarted(SubagentStarted {
                    subagent_run_id: id,
                    name,
                    description: None,
                    parent_subagent_run_id: None,
                    parent_tool_call_id: None,
                    parent_message_id: None,
                    base: with_hai(base, hai),
                }));
            }
            "content" => {
                let mut base = base;
                base.subagent_run_id = message_id(&map).or_else(|| self.subagents.last().cloned());
                value.extend(map);
                out.push(custom_event(
                    custom::COLLABORATIVE,
                    Value::Object(value),
                    base,
                ));
            }
            _ => {
                let id = message_id(&map).or_else(|| self.subagents.last().cloned());
                let Some(id) = id else {
                    notes.push(Note::Dropped(DropKind::Orphan));
                    return;
                };
                self.subagents.retain(|s| *s != id);
                out.push(Event::SubagentFinished(SubagentFinished {
                    subagent_run_id: id,
                    result: None,
                    outcome: Some(SubagentOutcome::Success),
                    base,
                }));
            }
        }
    }

    /// A terminal: the sequencer closes what is open; the reader forgets it.
    fn end_run(&mut self) {
        self.open.clear();
        self.subagents.clear();
    }

    /// This run's calls to declared frontend tools that got no result.
    fn pending_calls(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter(|id| !self.resolved.contains(*id))
            .cloned()
            .collect()
    }

    fn single_open(&self) -> Option<String> {
        match self.open.as_slice() {
            [only] => Some(only.id.clone()),
            _ => None,
        }
    }

    /// The event's timestamp as the route's policy wants it (`dialects.md` row 17).
    fn base(&self, map: &Map<String, Value>, notes: &mut Vec<Note>) -> EventBase {
        let timestamp = map.get("timestamp").and_then(|ts| {
            let fixed = match self.timestamps {
                Timestamps::Normalise => fix::timestamp_ms(ts).and_then(|v| v.as_i64()),
                Timestamps::Drop => None,
                Timestamps::Passthrough => ts.as_i64(),
            };
            if fixed != ts.as_i64() {
                notes.push(Note::Fixup(Rule::Timestamps));
            }
            fixed
        });
        EventBase {
            timestamp,
            ..EventBase::default()
        }
    }
}

/// HAI writes `from:""` on every patch operation (`dialects.md` row 13); only `move` and `copy`
/// define it, so elsewhere it is HAI's habit, not the agent's meaning, and does not cross over.
/// (An AG-UI agent's own undefined members are kept: RFC 6902 makes them part of the patch.)
fn drop_undefined_from(delta: &mut Value, notes: &mut Vec<Note>) {
    let ops = match delta {
        Value::Array(ops) => ops.iter_mut().collect(),
        single => vec![single],
    };
    for op in ops.into_iter().filter_map(Value::as_object_mut) {
        let defined = matches!(op.get("op").and_then(Value::as_str), Some("move" | "copy"));
        if !defined && op.shift_remove("from").is_some() {
            notes.push(Note::Fixup(Rule::StateDeltaShape));
        }
    }
}

/// The keys of a `BUSINESS_DATA_CONTENT` its general reading looks at; a content event may carry
/// any other without consequence.
const READ_BY_CONTENT: [&str; 8] = [
    "type",
    "messageId",
    "delta",
    "timestamp",
    extension::MEMBER,
    "layout",
    "blockId",
    "style",
];

/// A plain text delta as HAI agents and the gateway's writer lay it out — type, message id,
/// the delta, a timestamp before or after it, then fields HAI does not define, no whitespace,
/// no escape in the text — read by comparing its fixed text ([`json::Cursor`]): its id, text
/// and timestamp.
fn plain_text_layout(data: &[u8]) -> Option<(json::JsonStr<'_>, &str, Option<i64>)> {
    let mut c = json::Cursor::new(data);
    c.expect(br#"{"type":"BUSINESS_DATA_CONTENT","messageId":""#)?;
    let id = c.string_rest()?;
    let mut timestamp = None;
    if c.accept(br#","timestamp":"#) {
        timestamp = Some(c.integer()?);
    }
    c.expect(br#","delta":"{\"output\":{\"type\":\"text\",\"content\":\""#)?;
    let text = c.plain_run()?;
    c.expect(br#"\"}}""#)?;
    if timestamp.is_none() && c.accept(br#","timestamp":"#) {
        timestamp = Some(c.integer()?);
    }
    // Fields HAI does not define, which the general path ignores too.
    while let Some((key, _)) = c.member() {
        if READ_BY_CONTENT.contains(&key) {
            return None;
        }
    }
    c.expect(b"}")?;
    c.at_end().then_some((id, text, timestamp))
}

fn message_id(map: &Map<String, Value>) -> Option<String> {
    map.get("messageId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn custom_event(name: &str, value: Value, base: EventBase) -> Event {
    Event::Custom(Custom {
        name: name.to_owned(),
        value,
        base,
    })
}

fn with_hai(mut base: EventBase, hai: Map<String, Value>) -> EventBase {
    if !hai.is_empty() {
        base.metadata
            .get_or_insert_with(Box::default)
            .insert(METADATA_KEY.into(), Value::Object(hai));
    }
    base
}

fn put_hai(map: &mut Map<String, Value>, hai: Map<String, Value>) {
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    if let Value::Object(metadata) = metadata {
        metadata.insert(METADATA_KEY.into(), Value::Object(hai));
    }
}

impl crate::dialect::codec::Reader for HaiReader {
    fn read(
        &mut self,
        event: &crate::sse::SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        HaiReader::read(self, event, out, notes)
    }

    /// What [`HaiReader::plain_text`] reads from the layout HAI agents write, lent: a text
    /// delta of an open message, its text without escapes at either level.
    fn read_delta<'a>(&'a mut self, event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
        if !self.text_is_text {
            return None;
        }
        let (id, text, timestamp) = plain_text_layout(event.data)?;
        let id = id.plain()?;
        if id.is_empty()
            || !self.open.iter().any(|o| o.id == id)
            || !self.timestamps.keeps(timestamp)
        {
            return None;
        }
        Some(DeltaRef {
            kind: DeltaKind::Text,
            id,
            delta: JsonStr::from_plain(text)?,
            timestamp,
            extra: "",
            source: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseDecoder;
    use bytes::BytesMut;

    /// Reads a whole HAI stream with the default options (`fast`: plain text deltas may take
    /// the fast path).
    pub(super) fn read(stream: &str, fast: bool) -> (Vec<Event>, Vec<Note>) {
        let ids = RunIds {
            thread_id: "t".into(),
            run_id: "r".into(),
        };
        let mappings = Mappings::builtin();
        let options = HaiOptions::default();
        let mut reader = HaiReader::new(&ids, &mappings, ReaderOptions::default(), &options, []);
        reader.text_is_text &= fast;
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        let mut decoder = SseDecoder::default();
        let mut buf = BytesMut::from(stream);
        while let Ok(Some(crate::sse::SseItem::Event(e))) = decoder.decode(&mut buf) {
            reader.read(&e, &mut out, &mut notes).unwrap();
        }
        (out, notes)
    }

    #[test]
    fn plain_text_deltas_read_as_the_general_path_reads_them() {
        let content = |extra: &str| {
            format!(r#"data: {{"type":"BUSINESS_DATA_CONTENT","messageId":"m1"{extra}}}"#) + "\n\n"
        };
        let mut stream =
            String::from("data: {\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"m1\"}\n\n");
        for extra in [
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"plain\"}}""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"a \\u007bb\\u007d \\\"q\\\" é\"}}","timestamp":1760000000000"#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"\"}}""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"s\"}}","timestamp":1760000000"#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"a\"}}{\"output\":{\"type\":\"text\",\"content\":\"b\"}}""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"},\"blockId\":\"b\"}""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","blockId":"b""#,
            r#","delta":"{\"output\":{\"type\":\"think\",\"data\":{\"content\":\"hm\"}}}""#,
            r#","delta":"just text""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","ts":1732460000000000000,"role":"assistant""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"tab\\t\"}}","ts":"x\n""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","agui":7"#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","layout":"l""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","timestamp":"1760000000000""#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"} }""#,
            r#","timestamp":1760000000000,"delta":"{\"output\":{\"type\":\"text\",\"content\":\"first\"}}","ts":"x""#,
            r#","timestamp":1760000000000,"delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","blockId":"b""#,
            r#","timestamp":1760000000000,"delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","timestamp":1"#,
            r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","agui":{"messageId":"r"}"#,
        ] {
            stream.push_str(&content(extra));
        }
        stream.push_str(
            &content(r#","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}""#)
                .replace("m1", "m2"),
        );
        let (fast, slow) = (read(&stream, true), read(&stream, false));
        assert_eq!(fast, slow);
        assert!(fast.0.len() > 10, "{:?}", fast.0);
    }

    #[test]
    fn plain_text_deltas_with_fields_hai_does_not_define_take_the_fast_path() {
        let ids = RunIds {
            thread_id: "t".into(),
            run_id: "r".into(),
        };
        let mut reader = HaiReader::new(
            &ids,
            &Mappings::builtin(),
            ReaderOptions::default(),
            &HaiOptions::default(),
            [],
        );
        reader.open.push(Open {
            id: "m1".into(),
            thinking: false,
            wrapper: false,
        });
        let delta = r#""{\"output\":{\"type\":\"text\",\"content\":\"hé \\\"q\\\"\"}}""#;
        for (fields, text) in [
            (r#""ts":1732460000000000000"#, "hé \"q\""),
            (r#""role":"assistant","model":"m""#, "hé \"q\""),
        ] {
            let data = format!(
                r#"{{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","delta":{delta},{fields}}}"#
            );
            let Some(Event::TextMessageContent(e)) = reader.plain_text(data.as_bytes()) else {
                panic!("declined {data}");
            };
            assert_eq!(e.delta, text);
        }
        for plain in [
            r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","delta":"{\"output\":{\"type\":\"text\",\"content\":\"plain\"}}","ts":5}"#,
            r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","timestamp":1760000000000,"delta":"{\"output\":{\"type\":\"text\",\"content\":\"plain\"}}","role":"assistant"}"#,
        ] {
            let Some(Event::TextMessageContent(e)) = reader.plain_text(plain.as_bytes()) else {
                panic!("declined {plain}");
            };
            assert_eq!(e.delta, "plain");
        }
        for declined in [
            r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","blockId":"b"}"#,
            r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m9","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}"}"#,
            r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","delta":"{\"output\":{\"type\":\"text\",\"content\":\"x\"}}","ts":{"a":1}}"#,
        ] {
            assert!(
                reader.plain_text(declined.as_bytes()).is_none(),
                "{declined}"
            );
        }
    }
}

#[cfg(test)]
mod extension_tests {
    use super::*;

    fn read(stream: &str) -> (Vec<Event>, Vec<Note>) {
        super::tests::read(stream, true)
    }

    #[test]
    fn malformed_extensions_are_ignored_not_fatal() {
        let (out, notes) = read(concat!(
            "data: {\"type\":\"RUN_STARTED\",\"runId\":\"r\",\"agui\":5}\n\n",
            "data: {\"type\":\"CUSTOM\",\"name\":\"agui.NOPE\",\"value\":{}}\n\n",
            "data: {\"type\":\"CUSTOM\",\"name\":\"agui.RAW\",\"value\":\"x\"}\n\n",
            "data: {\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"m\",\"agui\":{\"metadata\":3,\"subagentRunId\":[1]}}\n\n",
            "data: {\"type\":\"RUN_FINISHED\",\"runId\":\"r\",\"agui\":{\"outcome\":\"bad\"}}\n\n",
        ));
        let types: Vec<&str> = out.iter().map(|e| e.event_type().as_str()).collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "CUSTOM",
                "CUSTOM",
                "TEXT_MESSAGE_START",
                "RUN_FINISHED"
            ]
        );
        // Unknown or non-object `agui.*` customs stay what they were.
        assert!(matches!(&out[1], Event::Custom(c) if c.name == "agui.NOPE"));
        assert_eq!(out[3].base().metadata, None);
        assert!(notes.contains(&Note::Dropped(DropKind::InvalidEvent)));
    }

    #[test]
    fn synthetic_events_are_dropped_and_lost_fields_come_back() {
        let (out, _) = read(concat!(
            "data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"confirm:intr:i\",\"toolCallName\":\"confirmAction\",\"agui\":{\"synthetic\":true}}\n\n",
            "data: {\"type\":\"TOOL_CALL_END\",\"toolCallId\":\"confirm:intr:i\",\"agui\":{\"synthetic\":true}}\n\n",
            "data: {\"type\":\"RUN_FINISHED\",\"runId\":\"r\",\"agui\":{\"outcome\":{\"type\":\"cancelled\"}}}\n\n",
        ));
        assert_eq!(out.len(), 1);
        assert!(matches!(
            &out[0],
            Event::RunFinished(f) if f.outcome == Some(crate::event::RunOutcome::Cancelled)
        ));
    }
}
