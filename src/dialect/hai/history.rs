//! Conversation history between HAI and canonical messages (`translation.md` §3.1, §3.2, §3.4):
//! request bodies in both directions and `MESSAGE_SNAPSHOT` in both directions.
//!
//! HAI messages are AG-UI's plus `timestamp` and `extra` (kept in `metadata.hai`), and an
//! assistant message coming back from `hai-client` holds the concatenated business objects of
//! its stream. Decoding splits that into the canonical text (and a reasoning message for the
//! thinking outputs) while keeping the original string, so writing it back to HAI reproduces it.

use serde_json::{Map, Value};

use super::business::{self, Output};
use super::{DeltaEncoding, METADATA_KEY};
use crate::event::IdMint;
use crate::event::Message;
use crate::mapping::HaiTables;

/// How assistant history in business-object form is read (`hai.history_content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryContent {
    /// Text outputs become the content, thinking outputs a reasoning message before it.
    #[default]
    Decode,
    /// The content string is kept as it is.
    Verbatim,
}

/// What a HAI message has beyond AG-UI's, kept in `metadata.hai` in this order.
pub(super) const HAI_MESSAGE_KEYS: [&str; 2] = ["timestamp", "extra"];

/// Converts HAI messages (JSON) into canonical message JSON, ready for the AG-UI message fixes
/// and deserialisation. Messages without an id get `<runId>.h<n>`.
pub(super) fn decode(
    messages: Vec<Value>,
    mode: HistoryContent,
    tables: &HaiTables,
    mint: &mut IdMint,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let Value::Object(mut map) = message else {
            out.push(message);
            continue;
        };
        if map
            .get("id")
            .is_none_or(|id| id.as_str().is_none_or(str::is_empty))
        {
            map.insert("id".into(), mint.next('h').into());
        }
        let mut hai = Map::new();
        for key in HAI_MESSAGE_KEYS {
            if let Some(v) = map.shift_remove(key).filter(|v| !v.is_null()) {
                hai.insert(key.into(), v);
            }
        }
        let mut reasoning = None;
        if mode == HistoryContent::Decode
            && map.get("role").and_then(Value::as_str) == Some("assistant")
        {
            reasoning = decode_assistant(&mut map, &mut hai, tables);
        }
        if !hai.is_empty() {
            let metadata = map
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(metadata) = metadata {
                metadata.insert(METADATA_KEY.into(), Value::Object(hai));
            }
        }
        out.extend(reasoning);
        out.push(Value::Object(map));
    }
    out
}

/// An assistant `content` in business-object form, or a UI `contents` array: the text outputs
/// become the content; returns the reasoning message the thinking outputs make.
fn decode_assistant(
    map: &mut Map<String, Value>,
    hai: &mut Map<String, Value>,
    tables: &HaiTables,
) -> Option<Value> {
    let objects = match map.get("content") {
        Some(Value::String(raw)) => {
            let objects = business::split_objects(raw)?;
            hai.insert("rawContent".into(), Value::String(raw.clone()));
            objects
        }
        _ => match map.shift_remove("contents") {
            Some(Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| match v {
                    Value::Object(o) => Some(o),
                    _ => None,
                })
                .collect(),
            Some(other) => {
                map.insert("contents".into(), other);
                return None;
            }
            None => return None,
        },
    };
    hai.insert(
        "outputs".into(),
        Value::Array(objects.iter().cloned().map(Value::Object).collect()),
    );
    let (mut text, mut thinking, mut saw_thinking) = (String::new(), String::new(), false);
    for object in objects {
        match business::classify(object, tables) {
            Output::Text(t, _) => text.push_str(&t),
            Output::Thinking(t, _) => {
                saw_thinking = true;
                thinking.push_str(&t);
            }
            Output::Opaque(_) => {}
        }
    }
    map.insert("content".into(), Value::String(text));
    let id = map.get("id").and_then(Value::as_str).unwrap_or_default();
    saw_thinking.then(|| {
        serde_json::json!({"id": format!("{id}:thinking"), "role": "reasoning", "content": thinking})
    })
}

/// True when [`encode`] then [`decode`] give `messages` back: text-only user, system,
/// developer and tool messages and assistant messages read from HAI (their `rawContent` kept),
/// with no metadata but HAI's own. Anything else (reasoning, activity, parts, an AG-UI
/// assistant message, foreign metadata) needs the AG-UI messages beside the HAI ones.
pub(super) fn encodes_exactly(messages: &[Message]) -> bool {
    messages.iter().all(|message| {
        let own_metadata_only = |metadata: &Option<Map<String, Value>>| {
            metadata
                .as_ref()
                .is_none_or(|m| m.keys().all(|k| k == METADATA_KEY))
        };
        match message {
            Message::User(m) => {
                matches!(m.content, crate::event::MessageContent::Text(_))
                    && own_metadata_only(&m.metadata)
            }
            Message::System(m) | Message::Developer(m) => own_metadata_only(&m.metadata),
            Message::Tool(m) => {
                matches!(m.content, crate::event::MessageContent::Text(_))
                    && m.encrypted_value.is_none()
                    && own_metadata_only(&m.metadata)
            }
            Message::Assistant(m) => {
                own_metadata_only(&m.metadata)
                    && hai_of(&m.metadata).is_some_and(|h| h.contains_key("rawContent"))
            }
            Message::Reasoning(_) | Message::Activity(_) => false,
        }
    })
}

/// How an assistant message's content is written for a HAI peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AssistantContent {
    /// Plain text (a HAI upstream's request history).
    Plain,
    /// Business objects in this encoding, as `hai-client` re-parses them (snapshots).
    Business(DeltaEncoding),
}

/// Converts canonical messages into HAI messages. `rawContent` kept from a HAI reading wins;
/// reasoning messages fold into the assistant message right after them (as a thinking output,
/// for `Business`) or are dropped, as are activity messages.
pub(super) fn encode(messages: &[Message], assistant: AssistantContent) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut pending_thinking: Option<&str> = None;
    for message in messages {
        let (mut map, metadata) = match message {
            Message::Reasoning(m) => {
                pending_thinking = Some(&m.content);
                continue;
            }
            Message::Activity(_) => {
                pending_thinking = None;
                continue;
            }
            Message::User(m) => (
                base("user", &m.id, Some(m.content.text()), m.name.as_deref()),
                &m.metadata,
            ),
            Message::System(m) | Message::Developer(m) => {
                let role = if matches!(message, Message::System(_)) {
                    "system"
                } else {
                    "developer"
                };
                (
                    base(role, &m.id, Some(m.content.clone()), m.name.as_deref()),
                    &m.metadata,
                )
            }
            Message::Tool(m) => {
                let mut map = base("tool", &m.id, Some(m.content.text()), None);
                map.insert("toolCallId".into(), m.tool_call_id.clone().into());
                if let Some(error) = &m.error {
                    map.insert("error".into(), error.clone().into());
                }
                (map, &m.metadata)
            }
            Message::Assistant(m) => {
                let hai = hai_of(&m.metadata);
                let content = assistant_content(
                    m.content.as_deref().unwrap_or_default(),
                    pending_thinking.take(),
                    hai,
                    assistant,
                );
                let mut map = base("assistant", &m.id, content, m.name.as_deref());
                if let Some(calls) = &m.tool_calls {
                    map.insert(
                        "toolCalls".into(),
                        serde_json::to_value(calls).unwrap_or_default(),
                    );
                }
                (map, &m.metadata)
            }
        };
        pending_thinking = None;
        if let Some(hai) = hai_of(metadata) {
            for key in ["timestamp", "extra"] {
                if let Some(v) = hai.get(key) {
                    map.insert(key.into(), v.clone());
                }
            }
        }
        out.push(Value::Object(map));
    }
    out
}

fn base(role: &str, id: &str, content: Option<String>, name: Option<&str>) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id".into(), id.into());
    map.insert("role".into(), role.into());
    if let Some(content) = content {
        map.insert("content".into(), content.into());
    }
    if let Some(name) = name {
        map.insert("name".into(), name.into());
    }
    map
}

fn hai_of(metadata: &Option<Map<String, Value>>) -> Option<&Map<String, Value>> {
    metadata
        .as_ref()
        .and_then(|m| m.get(METADATA_KEY))
        .and_then(Value::as_object)
}

fn assistant_content(
    text: &str,
    thinking: Option<&str>,
    hai: Option<&Map<String, Value>>,
    mode: AssistantContent,
) -> Option<String> {
    if let Some(Value::String(raw)) = hai.and_then(|h| h.get("rawContent")) {
        return Some(raw.clone());
    }
    // Message content is a string whatever the event encoding: only plain text or objects.
    if matches!(
        mode,
        AssistantContent::Plain | AssistantContent::Business(DeltaEncoding::PlainText)
    ) {
        return (!text.is_empty()).then(|| text.to_owned());
    }
    let mut objects: Vec<Map<String, Value>> = Vec::new();
    if let Some(Value::Array(outputs)) = hai.and_then(|h| h.get("outputs")) {
        objects.extend(outputs.iter().filter_map(|o| o.as_object().cloned()));
    } else {
        if let Some(thinking) = thinking.filter(|t| !t.is_empty()) {
            let flags = [
                ("elapsed", 0.into()),
                ("thinking", false.into()),
                ("collapse", true.into()),
            ];
            objects.push(business::thinking_business(thinking, None, flags));
        }
        if !text.is_empty() {
            objects.push(business::text_business(text, None));
        }
    }
    if objects.is_empty() {
        return None;
    }
    Some(
        objects
            .into_iter()
            .map(|o| business::json_string(&Value::Object(o)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(v: Value) -> Vec<Message> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn business_history_decodes_and_encodes_back_verbatim() {
        let raw = r#"{"output":{"type":"thinking","data":{"content":"想","elapsed":1,"thinking":false,"collapse":true}}}{"output":{"type":"text","content":"答"}}{"output":{"type":"button","data":{"name":"再来"}}}"#;
        let decoded = decode(
            vec![
                json!({"role":"user","content":"问","timestamp":1620000000000_i64,"extra":{"k":1}}),
                json!({"id":"a1","role":"assistant","content":raw}),
                json!({"id":"a2","role":"assistant","content":"plain {not business}"}),
            ],
            HistoryContent::Decode,
            &HaiTables::builtin(),
            &mut IdMint::new("run-1"),
        );
        assert_eq!(
            decoded,
            vec![
                json!({"id":"run-1.h0","role":"user","content":"问","metadata":{"hai":{"timestamp":1620000000000_i64,"extra":{"k":1}}}}),
                json!({"id":"a1:thinking","role":"reasoning","content":"想"}),
                json!({"id":"a1","role":"assistant","content":"答","metadata":{"hai":{
                    "rawContent":raw,
                    "outputs":[{"output":{"type":"thinking","data":{"content":"想","elapsed":1,"thinking":false,"collapse":true}}},
                               {"output":{"type":"text","content":"答"}},
                               {"output":{"type":"button","data":{"name":"再来"}}}]}}}),
                json!({"id":"a2","role":"assistant","content":"plain {not business}"}),
            ]
        );
        let canonical = messages(Value::Array(decoded));
        let back = encode(
            &canonical,
            AssistantContent::Business(DeltaEncoding::JsonString),
        );
        assert_eq!(
            back,
            vec![
                json!({"id":"run-1.h0","role":"user","content":"问","timestamp":1620000000000_i64,"extra":{"k":1}}),
                json!({"id":"a1","role":"assistant","content":raw}),
                json!({"id":"a2","role":"assistant","content":"{\"output\":{\"type\":\"text\",\"content\":\"plain \\u007bnot business\\u007d\"}}"}),
            ]
        );
        let plain = encode(&canonical, AssistantContent::Plain);
        assert_eq!(plain[2]["content"], "plain {not business}");
    }

    #[test]
    fn canonical_history_encodes_for_hai() {
        let canonical = messages(json!([
            {"id":"u","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","value":"https://x/y.png"}},{"type":"text","text":"b"}]},
            {"id":"r","role":"reasoning","content":"hmm"},
            {"id":"a","role":"assistant","content":"yes","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"id":"t","role":"tool","toolCallId":"c","content":"ok"},
            {"id":"x","role":"activity","activityType":"plan","content":{}},
        ]));
        let hai = encode(
            &canonical,
            AssistantContent::Business(DeltaEncoding::JsonString),
        );
        assert_eq!(hai.len(), 3);
        assert_eq!(hai[0], json!({"id":"u","role":"user","content":"ab"}));
        assert_eq!(
            hai[1]["content"],
            r#"{"output":{"type":"thinking","data":{"content":"hmm","elapsed":0,"thinking":false,"collapse":true}}}{"output":{"type":"text","content":"yes"}}"#
        );
        assert_eq!(hai[1]["toolCalls"][0]["function"]["name"], "f");
        assert_eq!(
            hai[2],
            json!({"id":"t","role":"tool","content":"ok","toolCallId":"c"})
        );
        let plain = encode(&canonical, AssistantContent::Plain);
        assert_eq!(plain[1]["content"], "yes");
    }
}
