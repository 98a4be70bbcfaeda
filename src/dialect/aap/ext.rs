//! The `agui` extension of AAP turns: what an AG-UI run holds that AAP cannot, carried so that
//! the gateway's own AAP client gives back the run the AAP face was sent (README "The AAP
//! extension"). Owns the names and the shapes both sides share; the writer (`write`) puts
//! them on the wire, the reader (`read`) takes them back.
//!
//! Two forms, both under the one prefix `agui`:
//! - extension events `agui.<AG-UI type>` whose data is the AG-UI event without `type`: message
//!   boundaries (`TEXT_MESSAGE_START/END`, `REASONING_MESSAGE_START/END`, which carry ids,
//!   roles and metadata so that deltas stay plain), the events AAP has no home for, and a folded
//!   run boundary as `agui.RUN_FINISHED` / `agui.RUN_ERROR` + `agui.RUN_STARTED`;
//! - one member `agui` (an object) on `tool_call`, `tool_result` and `turn_stop` data, holding
//!   the AG-UI fields that event cannot.
//!
//! A plain AAP client ignores both (unknown events, unknown members); a plain AAP agent sends
//! neither, and is read as before.

use serde_json::{Map, Value};

use crate::event::{Event, EventType, MessageContent, ToolCallResult, ToolCallStart};

/// The request header by which an AAP client asks for extensions on a turn's stream: a
/// comma-separated list of names; [`NAME`] asks for this one. The gateway's AAP client sends
/// it on every turn; the face writes the extension for a turn that asks (or always, with
/// `agui_extension = true`), so plain AAP clients keep plain streams.
pub const REQUEST_HEADER: &str = "x-aap-extensions";
/// This extension's name in [`REQUEST_HEADER`].
pub const NAME: &str = "agui";

/// Whether a [`REQUEST_HEADER`] value asks for this extension.
pub fn requested<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> bool {
    values.into_iter().any(|value| {
        value
            .split(|b| *b == b',')
            .any(|name| name.trim_ascii().eq_ignore_ascii_case(NAME.as_bytes()))
    })
}

/// Prefix of every extension event name.
pub const EVENT_PREFIX: &str = "agui.";
/// The extension member on standard AAP event data.
pub const FIELD: &str = "agui";
/// On a `tool_call`'s `agui`: the id of the interrupt the call was made up to show (the call
/// itself is no AG-UI event).
pub const INTERRUPT: &str = "interrupt";
/// On a `tool_call`'s `agui`: the argument text, when the call's `input` does not give it back.
pub const ARGUMENTS: &str = "arguments";

/// The types carried as extension events of their own, whole, and read back as they came.
/// Message boundaries and run boundaries are extension events too, but each side treats them
/// specially.
pub fn is_verbatim(ty: EventType) -> bool {
    use EventType as T;
    matches!(
        ty,
        T::StepStarted
            | T::StepFinished
            | T::StateSnapshot
            | T::StateDelta
            | T::MessagesSnapshot
            | T::ActivitySnapshot
            | T::ActivityDelta
            | T::ReasoningStart
            | T::ReasoningEnd
            | T::ReasoningEncryptedValue
            | T::SubagentStarted
            | T::SubagentFinished
            | T::SubagentError
            | T::Raw
            | T::Custom
    )
}

/// The extension event name of an AG-UI type.
pub fn event_name(ty: EventType) -> String {
    format!("{EVENT_PREFIX}{}", ty.as_str())
}

/// An AG-UI event as JSON without its `type`: an extension event's data.
pub fn payload(event: &Event) -> Map<String, Value> {
    match serde_json::to_value(event) {
        Ok(Value::Object(mut map)) => {
            map.remove("type");
            map
        }
        // Canonical events always serialise into an object.
        _ => Map::new(),
    }
}

/// The `agui` member of a `tool_call`: the call's `TOOL_CALL_START` without what the AAP event
/// holds (`toolCallId`, and the name when it is the one shown), and the argument text when the
/// shown `input` does not give it back.
pub fn call_field(
    start: Option<&ToolCallStart>,
    shown_name: &str,
    arguments: &str,
    shown_arguments: &str,
) -> Map<String, Value> {
    let mut field = start
        .map(|s| payload(&Event::ToolCallStart(s.clone())))
        .unwrap_or_default();
    field.remove("toolCallId");
    if field.get("toolCallName").and_then(Value::as_str) == Some(shown_name) {
        field.remove("toolCallName");
    }
    if arguments != shown_arguments {
        field.insert(ARGUMENTS.into(), arguments.into());
    }
    field
}

/// The `agui` member of a `tool_result`: the `TOOL_CALL_RESULT` without what the AAP event
/// holds (`toolCallId`, the `tool` role, and text content).
pub fn result_field(result: &ToolCallResult) -> Map<String, Value> {
    let mut field = payload(&Event::ToolCallResult(result.clone()));
    field.remove("toolCallId");
    field.remove("role");
    if matches!(result.content, MessageContent::Text(_)) {
        field.remove("content");
    }
    field
}

/// The `agui` member of a `turn_stop`: the run's terminal event, `type` kept (a limit stop may
/// stand for either), without the ids (each side's run ids follow its own request).
pub fn terminal_field(terminal: &Event) -> Value {
    let mut field = match serde_json::to_value(terminal) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    field.remove("threadId");
    field.remove("runId");
    Value::Object(field)
}

/// Reads an extension event: its AG-UI type and the event, or `None` when the name names no
/// AG-UI type or the data is not that event.
pub fn read_event(name: &str, data: Map<String, Value>) -> Option<Event> {
    let ty = EventType::from_wire(name.strip_prefix(EVENT_PREFIX)?)?;
    Event::from_payload(ty, Value::Object(data)).ok()
}

/// Reads a `turn_stop`'s `agui` member: a `RUN_FINISHED` or `RUN_ERROR` whose ids `thread_id`
/// and `run_id` fill in.
pub fn read_terminal(field: &Value, thread_id: &str, run_id: &str) -> Option<Event> {
    let mut map = field.as_object()?.clone();
    let ty = match map.remove("type")?.as_str()? {
        "RUN_FINISHED" => {
            map.insert("threadId".into(), thread_id.into());
            map.insert("runId".into(), run_id.into());
            EventType::RunFinished
        }
        "RUN_ERROR" => EventType::RunError,
        _ => return None,
    };
    Event::from_payload(ty, Value::Object(map)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extension_events_name_ag_ui_types_only() {
        let data = json!({"snapshot": {"a": 1}}).as_object().cloned().unwrap();
        assert!(matches!(
            read_event("agui.STATE_SNAPSHOT", data.clone()),
            Some(Event::StateSnapshot(_))
        ));
        assert!(read_event("agui.NOT_A_TYPE", data.clone()).is_none());
        assert!(read_event("STATE_SNAPSHOT", data).is_none());
        // Data that is not the named event.
        let bad = json!({"delta": 7}).as_object().cloned().unwrap();
        assert!(read_event("agui.STATE_DELTA", bad).is_none());
    }

    #[test]
    fn a_terminal_takes_the_readers_ids() {
        let field = json!({"type": "RUN_FINISHED", "outcome": {"type": "cancelled"}});
        let Some(Event::RunFinished(f)) = read_terminal(&field, "t", "r") else {
            panic!("not read");
        };
        assert_eq!((f.thread_id.as_str(), f.run_id.as_str()), ("t", "r"));
        assert!(read_terminal(&json!({"type": "TEXT_MESSAGE_END"}), "t", "r").is_none());
        assert!(read_terminal(&json!({"type": "RUN_ERROR"}), "t", "r").is_none());
        assert!(read_terminal(&json!("RUN_ERROR"), "t", "r").is_none());
    }
}
