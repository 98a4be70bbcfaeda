//! Unrecognised union members, removed at the smallest unit that holds them (AG-UI 1.1,
//! `basic/processing.mdx`, "Stripping reaches all the way down"; `basic/patterns/snapshots.mdx`,
//! "When a patch does not apply"):
//! - a JSON Patch operation whose `op` RFC 6902 does not define leaves its patch, the other
//!   operations stay (an empty patch is a valid no-op, so the event stays too);
//! - a content part of an unknown `type` leaves its list, the message or result stays;
//! - a media part whose `source` is of an unknown `type` leaves whole, because its source is
//!   required and a part without one would be malformed;
//! - a message of an unknown `role` leaves its snapshot, the snapshot stays.
//!
//! Only a discriminator that is a string naming nothing known is unrecognised. A missing or
//! wrongly typed discriminator, or any other known field of the wrong type, is malformed: it is
//! left in place for decoding to refuse, never repaired here. Members a patch operation does
//! not define are protocol-legal and never touched.

use serde_json::{Map, Value};

use crate::event::{DropKind, Note};

/// The operations of RFC 6902.
const PATCH_OPS: &[&str] = &["add", "remove", "replace", "move", "copy", "test"];
/// The content part types of AG-UI.
const PART_TYPES: &[&str] = &["text", "image", "audio", "video", "document"];
/// The part types whose `source` is required.
const MEDIA_TYPES: &[&str] = &["image", "audio", "video", "document"];
/// The kinds of a media part's source.
const SOURCE_TYPES: &[&str] = &["data", "url", "file"];
/// The message roles of AG-UI.
const ROLES: &[&str] = &[
    "developer",
    "system",
    "assistant",
    "user",
    "tool",
    "activity",
    "reasoning",
];

/// The discriminator `key` of `value` when it is a string that `known` does not hold.
fn unknown<'a>(value: &'a Value, key: &str, known: &[&str]) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|name| !known.contains(name))
}

/// True for an operation whose `op` is a string RFC 6902 does not define.
pub fn is_unknown_op(op: &Value) -> bool {
    unknown(op, "op", PATCH_OPS).is_some()
}

/// Drops the operations of a patch whose `op` RFC 6902 does not define.
pub fn patch_ops(ops: &mut Vec<Value>, notes: &mut Vec<Note>) {
    ops.retain(|op| {
        let keep = !is_unknown_op(op);
        if !keep {
            notes.push(Note::Dropped(DropKind::UnknownPatchOp));
        }
        keep
    });
}

/// Why a content part cannot be carried, if it cannot: its type, or its media source's kind,
/// is unknown.
fn unknown_part(part: &Value) -> Option<DropKind> {
    if unknown(part, "type", PART_TYPES).is_some() {
        return Some(DropKind::UnknownContentPart);
    }
    let media = part
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| MEDIA_TYPES.contains(&t));
    let source = part.get("source").filter(|_| media)?;
    unknown(source, "type", SOURCE_TYPES).map(|_| DropKind::UnknownPartSource)
}

/// Drops the content parts that cannot be carried (see [`unknown_part`]).
pub fn content_parts(parts: &mut Vec<Value>, notes: &mut Vec<Note>) {
    parts.retain(|part| match unknown_part(part) {
        Some(kind) => {
            notes.push(Note::Dropped(kind));
            false
        }
        None => true,
    });
}

/// Drops the unknown parts of a tool result's `content`, but only when it is a parts list at
/// all: at least one of its elements is a part AG-UI describes. Any other array is the tool's
/// own data, which row 8 turns into text whole rather than lose it element by element.
pub fn tool_result_parts(parts: &mut Vec<Value>, notes: &mut Vec<Note>) {
    let is_parts = parts.iter().any(|part| {
        part.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| PART_TYPES.contains(&t))
    });
    if is_parts {
        content_parts(parts, notes);
    }
}

/// Drops the messages of a snapshot whose role AG-UI does not describe, and the parts of the
/// others' content that cannot be carried.
pub fn messages(messages: &mut Vec<Value>, notes: &mut Vec<Note>) {
    messages.retain(|message| {
        let keep = unknown(message, "role", ROLES).is_none();
        if !keep {
            notes.push(Note::Dropped(DropKind::UnknownMessageRole));
        }
        keep
    });
    for message in messages.iter_mut().filter_map(Value::as_object_mut) {
        message_parts(message, notes);
    }
}

/// The parts of one message's content, where its role allows parts (user and tool messages).
fn message_parts(message: &mut Map<String, Value>, notes: &mut Vec<Note>) {
    let with_parts = matches!(
        message.get("role").and_then(Value::as_str),
        Some("user" | "tool")
    );
    if let (true, Some(Value::Array(parts))) = (with_parts, message.get_mut("content")) {
        content_parts(parts, notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn array(v: Value) -> Vec<Value> {
        match v {
            Value::Array(items) => items,
            other => panic!("not an array: {other}"),
        }
    }

    #[test]
    fn unknown_ops_leave_and_the_rest_of_the_patch_stays() {
        let mut ops = array(json!([
            {"op":"add","path":"/a","value":1},
            {"op":"increment","path":"/n","by":1},
            {"op":"remove","path":"/b","value":"leftover"},
            {"path":"/c","value":2},
            {"op":7,"path":"/d"}
        ]));
        let mut notes = Vec::new();
        patch_ops(&mut ops, &mut notes);
        // Missing and non-string `op`s are malformed, not unrecognised: left for decoding.
        assert_eq!(
            Value::Array(ops),
            json!([
                {"op":"add","path":"/a","value":1},
                {"op":"remove","path":"/b","value":"leftover"},
                {"path":"/c","value":2},
                {"op":7,"path":"/d"}
            ])
        );
        assert_eq!(notes, [Note::Dropped(DropKind::UnknownPatchOp)]);
    }

    #[test]
    fn unknown_parts_and_sources_leave_and_known_ones_stay() {
        let mut parts = array(json!([
            {"type":"text","text":"a"},
            {"type":"chart","spec":{}},
            {"type":"image","source":{"type":"blob","value":"x"}},
            {"type":"image","source":{"type":"url","value":"https://x/y.png"}},
            {"type":"text","text":"b","source":{"type":"blob"}},
            {"type":"audio"},
            {"kind":"row"}
        ]));
        let mut notes = Vec::new();
        content_parts(&mut parts, &mut notes);
        assert_eq!(
            Value::Array(parts),
            json!([
                {"type":"text","text":"a"},
                {"type":"image","source":{"type":"url","value":"https://x/y.png"}},
                {"type":"text","text":"b","source":{"type":"blob"}},
                {"type":"audio"},
                {"kind":"row"}
            ])
        );
        assert_eq!(
            notes,
            [
                Note::Dropped(DropKind::UnknownContentPart),
                Note::Dropped(DropKind::UnknownPartSource)
            ]
        );
    }

    #[test]
    fn a_tool_result_array_without_any_known_part_is_left_whole() {
        let data = json!([{"type":"row","id":1},{"type":"row","id":2}]);
        let mut parts = array(data.clone());
        let mut notes = Vec::new();
        tool_result_parts(&mut parts, &mut notes);
        assert_eq!(Value::Array(parts), data);
        assert!(notes.is_empty());

        let mut parts = array(json!([{"type":"text","text":"ok"},{"type":"row","id":1}]));
        tool_result_parts(&mut parts, &mut notes);
        assert_eq!(Value::Array(parts), json!([{"type":"text","text":"ok"}]));
        assert_eq!(notes, [Note::Dropped(DropKind::UnknownContentPart)]);
    }

    #[test]
    fn unknown_roles_leave_the_snapshot_and_parts_are_stripped_where_roles_allow_them() {
        let mut list = array(json!([
            {"id":"u","role":"user","content":[{"type":"text","text":"hi"},{"type":"poll"}]},
            {"id":"x","role":"critic","content":"no"},
            {"id":"n","content":"no role: malformed, left for decoding"},
            {"id":"t","role":"tool","toolCallId":"c","content":[{"type":"map"}]},
            {"id":"a","role":"activity","activityType":"t","content":{"type":"poll"}}
        ]));
        let mut notes = Vec::new();
        messages(&mut list, &mut notes);
        assert_eq!(
            Value::Array(list),
            json!([
                {"id":"u","role":"user","content":[{"type":"text","text":"hi"}]},
                {"id":"n","content":"no role: malformed, left for decoding"},
                {"id":"t","role":"tool","toolCallId":"c","content":[]},
                {"id":"a","role":"activity","activityType":"t","content":{"type":"poll"}}
            ])
        );
        assert_eq!(
            notes,
            [
                Note::Dropped(DropKind::UnknownMessageRole),
                Note::Dropped(DropKind::UnknownContentPart),
                Note::Dropped(DropKind::UnknownContentPart)
            ]
        );
    }
}
