//! The lenient AG-UI reader: any vendor variant in, canonical 1.0 events out
//! (`specs/dialects.md`, processing order 1–6; sequence repairs are the sequencer's).
//!
//! Per SSE event: parse (a data block that is not JSON is retried line by line, row 18; still
//! not JSON is fatal for the run, `UPSTREAM_MALFORMED`), resolve the type (`type`, else an
//! `event` key, else the SSE `event:` name; spelling and renames, rows 2/14/16), rename keys
//! (rows 1/7), fix values (rows 3, 6, 8, 9, 10, 13, 17, 25, 27), decode into the canonical type,
//! then expand chunks (row 11) and legacy thinking (row 12, `thinking`). Unrecognised union
//! members inside an event (a patch operation, a content part, a message role) leave at the
//! smallest unit that holds them (`strip`). A known type whose fields still do not fit is
//! dropped and noted, never passed on half-valid. Held tool
//! arguments (rows 6, 7) live in `args`; events that are already strict 1.0 skip all of this
//! through `fast`.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::args::{args_event, ToolArgs, MAX_HELD_ARGS_BYTES};
use super::chunks::ChunkExpander;
use super::fast;
use super::fix;
use super::options::{ReaderOptions, SYSTEM_EXCEPTION};
use super::strip;
use super::thinking::Thinking;
use crate::error::{ErrorCode, Failure};
use crate::event::{spare, DeltaRef, DropKind, IdMint, Note, Rule, RunIds};
use crate::event::{Event, EventBase, EventType, RunAgentInput, RunError, TextMessageStart};
use crate::mapping::AguiAliases;
use crate::sse::{SseEvent, SseEventRef};

/// See the module docs.
#[derive(Debug)]
pub struct AguiReader {
    aliases: Arc<AguiAliases>,
    options: ReaderOptions,
    mint: IdMint,
    chunks: ChunkExpander,
    /// Open text messages per lane, to resolve events that lack a `messageId` (row 10).
    open_text: Vec<(Option<String>, String)>,
    held_args: ToolArgs,
    thinking: Thinking,
    /// Decode well-formed 1.0 events straight into their type (see `fast::read`).
    fast_path: bool,
    fast: fast::Scratch,
}

impl AguiReader {
    pub fn new(ids: &RunIds, aliases: Arc<AguiAliases>, options: ReaderOptions) -> AguiReader {
        AguiReader {
            fast: fast::Scratch::new(&aliases),
            aliases,
            options,
            mint: IdMint::new(&ids.run_id),
            chunks: ChunkExpander::default(),
            open_text: Vec::new(),
            held_args: ToolArgs::default(),
            thinking: Thinking::default(),
            fast_path: true,
        }
    }

    /// Reads one SSE event. `Err` means the payload is unusable and the run must end.
    pub fn read(
        &mut self,
        sse: &SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        if self.fast_path && self.held_args.is_empty() {
            let first = out.len();
            if fast::read(&sse.data, self.options, &mut self.fast, out) {
                let mut pushed = Ok(());
                if !self.chunks.passes(&out[first]) {
                    if let Some(event) = out.pop() {
                        pushed = self.chunks.push(event, &mut self.mint, out, notes);
                    }
                }
                if out[first..].iter().any(Event::is_terminal) {
                    self.run_ended();
                }
                self.track_open_text(&out[first..]);
                return pushed;
            }
        }
        match serde_json::from_slice::<Value>(&sse.data) {
            Ok(value) => self.read_value(value, sse.name.as_deref(), out, notes),
            // Several JSON objects joined by newlines in one data block (row 18).
            Err(_) => {
                let text = std::str::from_utf8(&sse.data).map_err(|_| malformed("is not UTF-8"))?;
                let values = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(serde_json::from_str::<Value>)
                    .collect::<Result<Vec<_>, _>>()
                    .ok()
                    .filter(|v| v.len() > 1)
                    .ok_or_else(|| malformed("is not JSON"))?;
                notes.push(Note::Fixup(Rule::MultiObjectData));
                values
                    .into_iter()
                    .try_for_each(|v| self.read_value(v, sse.name.as_deref(), out, notes))
            }
        }
    }

    /// Reads one decoded payload (the HAI reader hands its AG-UI-shaped events here).
    pub(crate) fn read_value(
        &mut self,
        value: Value,
        sse_name: Option<&str>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        let Value::Object(map) = value else {
            // JSON, but not an event (a bare `"keepalive"` string, a number): dropped, counted
            // (`dialects.md` processing order, step 2).
            notes.push(Note::Dropped(DropKind::NotAnObject));
            return Ok(());
        };
        let first = out.len();
        // Events resolved from the object, before chunk expansion.
        let mut resolved_events = spare::lend();
        let resolved = self.resolve(map, sse_name, &mut resolved_events, notes);
        let mut expanded = Ok(());
        for event in resolved_events.drain(..) {
            if expanded.is_ok() {
                expanded = self.chunks.push(event, &mut self.mint, out, notes);
            }
        }
        spare::give_back(resolved_events);
        self.track_open_text(&out[first..]);
        expanded.and(resolved)
    }

    /// One object in, zero or more canonical (possibly chunk) events out.
    fn resolve(
        &mut self,
        mut map: Map<String, Value>,
        sse_name: Option<&str>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        let Some(spelled) = type_name(&mut map, sse_name, notes) else {
            notes.push(Note::Dropped(DropKind::UnknownType));
            return Ok(());
        };
        let aliases = Arc::clone(&self.aliases);
        fix::snake_keys(&mut map, &aliases, notes);
        if spelled.starts_with("THINKING") {
            fix::base_fields(&mut map, self.options.timestamps, notes);
            self.thinking
                .read(&spelled, map, &mut self.mint, out, notes);
            return Ok(());
        }
        // A 1.0 name first (the common case, no hashing), then the rename table.
        let ty = match EventType::from_wire(&spelled) {
            Some(ty) => ty,
            None => match aliases.events.get(&spelled) {
                Some(ty) => {
                    notes.push(Note::Fixup(if spelled.starts_with("ACTION_EXECUTION") {
                        Rule::ActionExecution
                    } else {
                        Rule::SnapshotName
                    }));
                    *ty
                }
                None => {
                    notes.push(Note::Dropped(DropKind::UnknownType));
                    return Ok(());
                }
            },
        };
        if !aliases.fields.is_empty() {
            fix::field_aliases(&mut map, &aliases, [&spelled, ty.as_str()], notes);
        }
        fix::base_fields(&mut map, self.options.timestamps, notes);
        if !self.fix_values(ty, &mut map, out, notes)? {
            return Ok(());
        }
        // A terminal event is worth more than its optional extras: if one of them does not fit
        // (a vendor's `usage` shape, say), retry without it rather than lose the run's end. Not
        // the outcome: a run's ending read as a success it was not would misreport it.
        let retry = matches!(ty, EventType::RunFinished | EventType::RunError).then(|| {
            let mut bare = map.clone();
            bare.remove("usage");
            bare.remove("result");
            bare
        });
        let decoded = match (Event::from_payload(ty, Value::Object(map)), retry) {
            (Ok(event), _) => Ok(event),
            (Err(error), Some(mut bare)) => {
                notes.push(Note::Dropped(DropKind::Lossy));
                match Event::from_payload(ty, Value::Object(bare.clone())) {
                    Ok(event) => Ok(event),
                    Err(_)
                        if bare.remove("outcome").is_some()
                            && Event::from_payload(ty, Value::Object(bare)).is_ok() =>
                    {
                        return Err(invalid_outcome("does not fit its type's schema"));
                    }
                    Err(_) => Err(error),
                }
            }
            (Err(error), None) => Err(error),
        };
        match decoded {
            Ok(event) => self.emit(event, out),
            Err(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
        }
        Ok(())
    }

    /// Type-specific repairs; false when the object was consumed (held, converted or dropped).
    fn fix_values(
        &mut self,
        ty: EventType,
        map: &mut Map<String, Value>,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<bool, Failure> {
        match ty {
            EventType::RunError => fix::run_error(map, notes),
            EventType::RunStarted => {
                missing_run_ids(map, notes);
                // The echoed input is optional; one we cannot read must not cost the event.
                if let Some(input) = map.get("input") {
                    if serde_json::from_value::<RunAgentInput>(input.clone()).is_err() {
                        notes.push(Note::Fixup(Rule::VendorExtras));
                        map.remove("input");
                    }
                }
            }
            EventType::RunFinished => {
                missing_run_ids(map, notes);
                fix_outcome(map, &self.aliases, notes)?;
                self.held_args.flush_all(out);
            }
            EventType::ToolCallChunk => {
                if let Some(delta) = map.get_mut("delta").filter(|d| !d.is_string()) {
                    notes.push(Note::Fixup(Rule::ObjectToolArgs));
                    *delta = Value::String(fix::compact(delta));
                }
            }
            EventType::TextMessageStart | EventType::TextMessageChunk => {
                if let Some(role) = map.get("role") {
                    let role_text = role.as_str().unwrap_or_default();
                    let fixed = self.aliases.role(role_text);
                    if fixed.as_str() != role_text {
                        notes.push(Note::Fixup(Rule::TextEventGaps));
                        map.insert("role".into(), fixed.as_str().into());
                    }
                }
                if ty == EventType::TextMessageStart && !map.contains_key("messageId") {
                    notes.push(Note::Fixup(Rule::TextEventGaps));
                    map.insert("messageId".into(), self.mint.next('m').into());
                }
            }
            EventType::TextMessageContent | EventType::TextMessageEnd => {
                if !map.get("messageId").is_some_and(Value::is_string) {
                    notes.push(Note::Fixup(Rule::TextEventGaps));
                    let lane = map.get("subagentRunId").and_then(Value::as_str);
                    let open = self.single_open_text(lane);
                    match (open, ty) {
                        (Some(id), _) => {
                            map.insert("messageId".into(), id.into());
                        }
                        (None, EventType::TextMessageContent) => {
                            let id = self.mint.next('m');
                            out.push(Event::TextMessageStart(TextMessageStart {
                                message_id: id.clone(),
                                role: Default::default(),
                                name: None,
                                base: EventBase {
                                    subagent_run_id: lane.map(str::to_owned),
                                    ..EventBase::default()
                                },
                            }));
                            map.insert("messageId".into(), id.into());
                        }
                        (None, _) => {
                            notes.push(Note::Dropped(DropKind::Orphan));
                            return Ok(false);
                        }
                    }
                }
                if ty == EventType::TextMessageContent && !map.contains_key("delta") {
                    notes.push(Note::Fixup(Rule::TextEventGaps));
                    map.insert("delta".into(), "".into());
                }
            }
            EventType::ToolCallStart => {
                if let Some(args) = map.remove("args") {
                    notes.push(Note::Fixup(Rule::FieldAlias));
                    if let Some(held) = self.held_args.hold(tool_call_id(map), notes) {
                        held.fallback = Some(args);
                    }
                }
            }
            EventType::ToolCallArgs => {
                let id = tool_call_id(map);
                match map.get_mut("delta") {
                    Some(Value::String(_)) => {
                        if let Some(held) = self.held_args.get_mut(&id) {
                            if let Some(merged) = held.merged.take() {
                                // A mix of object and string deltas: serialise what was held.
                                notes.push(Note::Dropped(DropKind::Lossy));
                                out.push(args_event(id, fix::compact(&Value::Object(merged))));
                            }
                            held.saw_string = true;
                        }
                    }
                    Some(Value::Object(_)) => {
                        notes.push(Note::Fixup(Rule::ObjectToolArgs));
                        let mut rest = std::mem::take(map);
                        let Some(Value::Object(obj)) = rest.remove("delta") else {
                            return Ok(false);
                        };
                        rest.remove("toolCallId");
                        let base = serde_json::from_value::<EventBase>(Value::Object(rest))
                            .unwrap_or_default();
                        let text_len = fix::compact(&Value::Object(obj.clone())).len();
                        match self.held_args.hold(id.clone(), notes) {
                            Some(held) if !held.saw_string => {
                                held.merged_bytes += text_len;
                                if held.merged_bytes > MAX_HELD_ARGS_BYTES {
                                    return Err(Failure::new(
                                        ErrorCode::InvalidToolArgs,
                                        format!("the object arguments of a tool call exceed {MAX_HELD_ARGS_BYTES} bytes"),
                                    ));
                                }
                                held.merged_base.get_or_insert(base);
                                held.merged.get_or_insert_with(Map::new).extend(obj);
                            }
                            // Strings came first, or too many calls are held: pass it on as text.
                            _ => {
                                let mut event = args_event(id, fix::compact(&Value::Object(obj)));
                                *event.base_mut() = base;
                                out.push(event);
                            }
                        }
                        return Ok(false);
                    }
                    Some(other) => {
                        notes.push(Note::Fixup(Rule::ObjectToolArgs));
                        let text = fix::compact(other);
                        *other = Value::String(text);
                        if let Some(held) = self.held_args.get_mut(&id) {
                            held.saw_string = true;
                        }
                    }
                    None => {}
                }
            }
            EventType::ToolCallEnd => {
                let id = tool_call_id(map);
                if let Some(args) = map.remove("args") {
                    notes.push(Note::Fixup(Rule::FieldAlias));
                    if let Some(held) = self.held_args.hold(id.clone(), notes) {
                        held.fallback = Some(args);
                    }
                }
                self.held_args.flush(&id, out);
            }
            EventType::ToolCallResult => {
                fix::tool_result_content(map, notes);
                if map
                    .get("messageId")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    notes.push(Note::Fixup(Rule::ToolResultShape));
                    map.insert("messageId".into(), self.mint.next('t').into());
                }
                let id = tool_call_id(map);
                self.held_args.flush(&id, out);
            }
            EventType::StateDelta => {
                if let Some(delta) = map.get_mut("delta") {
                    if self.options.drop_unrooted_patches && fix::has_unrooted_path(delta) {
                        notes.push(Note::Dropped(DropKind::InvalidEvent));
                        return Ok(false);
                    }
                    fix::patch(delta, notes);
                }
            }
            EventType::ActivityDelta => {
                if let Some(patch) = map.get_mut("patch") {
                    fix::patch(patch, notes);
                }
            }
            EventType::MessagesSnapshot => {
                if let Some(Value::Array(messages)) = map.get_mut("messages") {
                    for m in messages.iter_mut().filter_map(Value::as_object_mut) {
                        fix::message(m, &self.aliases, notes);
                    }
                    // After the repairs, so a legacy part is upgraded before it is judged.
                    strip::messages(messages, notes);
                }
            }
            EventType::Custom
                if !self.options.system_exception_passthrough
                    && map.get("name").and_then(Value::as_str) == Some(SYSTEM_EXCEPTION) =>
            {
                notes.push(Note::Fixup(Rule::SystemException));
                let message = match map.remove("value") {
                    Some(Value::String(s)) => s,
                    Some(v) if !v.is_null() => fix::compact(&v),
                    _ => "the upstream reported a system exception".into(),
                };
                self.emit(
                    Event::RunError(RunError {
                        message,
                        code: Some(SYSTEM_EXCEPTION.into()),
                        usage: None,
                        base: EventBase::default(),
                    }),
                    out,
                );
                return Ok(false);
            }
            _ => {}
        }
        Ok(true)
    }

    /// Pushes an event; a terminal forgets held arguments and legacy thinking state.
    fn emit(&mut self, event: Event, out: &mut Vec<Event>) {
        if event.is_terminal() {
            self.run_ended();
        }
        out.push(event);
    }

    /// A terminal event, on either path: held arguments and an open thinking block end with
    /// the run.
    fn run_ended(&mut self) {
        self.held_args.clear();
        self.thinking = Thinking::default();
    }

    fn single_open_text(&self, lane: Option<&str>) -> Option<String> {
        let mut in_lane = self.open_text.iter().filter(|(l, _)| l.as_deref() == lane);
        match (in_lane.next(), in_lane.next()) {
            (Some((_, id)), None) => Some(id.clone()),
            _ => None,
        }
    }

    fn track_open_text(&mut self, events: &[Event]) {
        for e in events {
            match e {
                Event::TextMessageStart(s) => {
                    let key = (s.base.subagent_run_id.clone(), s.message_id.clone());
                    if !self.open_text.contains(&key) {
                        self.open_text.push(key);
                    }
                }
                Event::TextMessageEnd(s) => self.open_text.retain(|(_, id)| *id != s.message_id),
                Event::RunFinished(_) | Event::RunError(_) => self.open_text.clear(),
                _ => {}
            }
        }
    }
}

fn malformed(what: &str) -> Failure {
    Failure::new(
        ErrorCode::UpstreamMalformed,
        format!("an upstream event's data {what}; the upstream does not speak AG-UI over SSE"),
    )
}

/// Row 2: `type`, else an `event` key, else the SSE event name; upper-cased, `.`/`-` → `_`.
fn type_name(
    map: &mut Map<String, Value>,
    sse_name: Option<&str>,
    notes: &mut Vec<Note>,
) -> Option<String> {
    let raw = match map.remove("type") {
        Some(Value::String(s)) => s,
        _ => match map.get("event") {
            Some(Value::String(_)) => match map.remove("event") {
                Some(Value::String(s)) => s,
                _ => return None,
            },
            _ => sse_name?.to_owned(),
        },
    };
    if raw.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Some(raw);
    }
    notes.push(Note::Fixup(Rule::TypeSpelling));
    Some(
        raw.chars()
            .map(|c| match c {
                '.' | '-' => '_',
                c => c.to_ascii_uppercase(),
            })
            .collect(),
    )
}

/// Row 5: run events without ids get empty ones, which the sequencer fills from the request.
fn missing_run_ids(map: &mut Map<String, Value>, notes: &mut Vec<Note>) {
    for key in ["threadId", "runId"] {
        if !map.get(key).is_some_and(Value::is_string) {
            notes.push(Note::Fixup(Rule::RunIds));
            map.insert(key.into(), Value::String(String::new()));
        }
    }
}

fn tool_call_id(map: &Map<String, Value>) -> String {
    map.get("toolCallId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Row 27, as AG-UI 1.1 has it: an outcome whose `type` is a string the schema does not
/// describe is an unrecognised union member, stripped (the run reads as success); an outcome of
/// the wrong shape (not an object, no string `type`, an interrupt without a non-empty list of
/// interrupt objects) is a malformed known value, fatal rather than read as a success that
/// would lose what the producer meant. A `null` outcome is a tolerated legacy absence.
fn fix_outcome(
    map: &mut Map<String, Value>,
    aliases: &AguiAliases,
    notes: &mut Vec<Note>,
) -> Result<(), Failure> {
    let outcome = match map.get_mut("outcome") {
        None => return Ok(()),
        Some(Value::Null) => {
            map.remove("outcome");
            notes.push(Note::Fixup(Rule::Outcome));
            return Ok(());
        }
        Some(Value::Object(outcome)) => outcome,
        // The protobuf binding flattens the outcome into its type name: the two outcomes
        // without fields read back whole, an interrupt's interrupts are lost.
        Some(Value::String(ty)) if ty != "interrupt" => {
            match ty.as_str() {
                "cancelled" => {
                    map.insert("outcome".into(), serde_json::json!({"type": "cancelled"}));
                }
                _ => {
                    map.remove("outcome");
                }
            }
            notes.push(Note::Fixup(Rule::Outcome));
            return Ok(());
        }
        Some(other) => return Err(invalid_outcome(&format!("is {}", json_kind(other)))),
    };
    fix::snake_keys(outcome, aliases, notes);
    if let Some(Value::Array(interrupts)) = outcome.get_mut("interrupts") {
        for interrupt in interrupts.iter_mut().filter_map(Value::as_object_mut) {
            fix::snake_keys(interrupt, aliases, notes);
        }
    }
    match outcome.get("type") {
        Some(Value::String(ty)) if ty == "success" || ty == "cancelled" => Ok(()),
        Some(Value::String(ty)) if ty == "interrupt" => match outcome.get("interrupts") {
            Some(Value::Array(list)) if !list.is_empty() && list.iter().all(Value::is_object) => {
                Ok(())
            }
            _ => Err(invalid_outcome(
                "is an interrupt without a non-empty list of interrupts",
            )),
        },
        Some(Value::String(_)) => {
            map.remove("outcome");
            notes.push(Note::Fixup(Rule::Outcome));
            Ok(())
        }
        _ => Err(invalid_outcome("has no string `type`")),
    }
}

fn invalid_outcome(what: &str) -> Failure {
    Failure::new(
        ErrorCode::UpstreamInvalidOutcome,
        format!("the upstream's RUN_FINISHED outcome {what}; the run's ending cannot be known"),
    )
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl crate::dialect::codec::Reader for AguiReader {
    fn read(
        &mut self,
        event: &crate::sse::SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        AguiReader::read(self, event, out, notes)
    }

    fn read_delta<'a>(&'a mut self, event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
        // `read` would pass such a delta on as the fast path decoded it: nothing held, no
        // chunk stream to close, and a delta changes none of the reader's state.
        if !self.fast_path || !self.held_args.is_empty() || !self.chunks.is_idle() {
            return None;
        }
        fast::delta(event.data, self.options, &mut self.fast)
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
