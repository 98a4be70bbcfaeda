//! The run request on both sides: a client's body read leniently into a canonical
//! [`RunAgentInput`] (`dialects.md` row 19; `agui.md` §3.1), and the canonical input written as the
//! upstream's body.

use serde_json::{Map, Value};

use super::fix;
use crate::dialect::field_error;
use crate::error::{ErrorCode, Failure};
use crate::event::Note;
use crate::event::{RunAgentInput, PROTOCOL_VERSION};
use crate::mapping::AguiAliases;

/// Top-level snake_case spellings of the request (row 19).
const REQUEST_KEYS: &[(&str, &str)] = &[
    ("thread_id", "threadId"),
    ("run_id", "runId"),
    ("parent_run_id", "parentRunId"),
    ("forwarded_props", "forwardedProps"),
    ("protocol_version", "protocolVersion"),
];

/// Reads a client's request body. Errors are `INVALID_REQUEST` and name the offending field.
pub fn read_request(body: &[u8], aliases: &AguiAliases) -> Result<RunAgentInput, Failure> {
    input_from_map(request_object(body)?, aliases)
}

/// The request body as a JSON object, or `INVALID_REQUEST`.
pub(crate) fn request_object(body: &[u8]) -> Result<Map<String, Value>, Failure> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| invalid(field_error::describe(".", &e)))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(invalid("the body must be a JSON object".into())),
    }
}

fn invalid(message: String) -> Failure {
    Failure::new(ErrorCode::InvalidRequest, message)
}

/// The lenient AG-UI reading of a request object (row 19), shared by every request reader;
/// errors name the offending field.
pub(crate) fn input_from_map(
    mut map: Map<String, Value>,
    aliases: &AguiAliases,
) -> Result<RunAgentInput, Failure> {
    let mut notes: Vec<Note> = Vec::new();
    for (snake, camel) in REQUEST_KEYS {
        if let Some(v) = map.remove(*snake) {
            map.entry(*camel).or_insert(v);
        }
    }
    // TanStack mirrors forwardedProps as `data`; CloudBase Mini Programs send `botId`.
    if let Some(data) = map.remove("data") {
        if !map.contains_key("forwardedProps") {
            map.insert("forwardedProps".into(), data);
        }
    }
    if let Some(bot_id) = map.remove("botId") {
        let props = map
            .entry("forwardedProps")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.entry("botId").or_insert(bot_id);
        }
    }
    for key in [
        "state",
        "forwardedProps",
        "parentRunId",
        "protocolVersion",
        "resume",
    ] {
        if map.get(key).is_some_and(Value::is_null) {
            map.remove(key);
        }
    }
    for key in ["tools", "context"] {
        if map.get(key).is_none_or(Value::is_null) {
            map.insert(key.into(), Value::Array(Vec::new()));
        }
    }
    if let Some(Value::Array(messages)) = map.get_mut("messages") {
        for m in messages.iter_mut().filter_map(Value::as_object_mut) {
            fix::message(m, aliases, &mut notes);
        }
    }
    let input: RunAgentInput =
        serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
            let path = e.path().to_string();
            invalid(field_error::describe(&path, e.inner()))
        })?;
    for (field, value) in [("threadId", &input.thread_id), ("runId", &input.run_id)] {
        if value.is_empty() {
            return Err(invalid(format!("{field}: must not be empty")));
        }
    }
    Ok(input)
}

/// How the upstream wants its request (`dialects.md` row 20); the default is plain 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestProfile {
    /// Media parts as the pre-1.0 `binary` part (CloudBase-era backends).
    pub legacy_binary_parts: bool,
    /// Tool-message content flattened to text (media parts dropped).
    pub tool_content_as_text: bool,
}

/// The body sent to an AG-UI upstream: the canonical input, announcing protocol 1.0, shaped by
/// the upstream's profile.
pub fn write_request(input: &RunAgentInput, profile: RequestProfile) -> Vec<u8> {
    let mut input = input.clone();
    input.protocol_version = Some(PROTOCOL_VERSION.to_string());
    if input.forwarded_props.is_none() {
        input.forwarded_props = Some(Value::Object(Map::new()));
    }
    // Serialising the canonical types cannot fail: every map key is a string.
    let mut body = serde_json::to_value(&input).unwrap_or_default();
    if profile != RequestProfile::default() {
        if let Some(Value::Array(messages)) = body.get_mut("messages") {
            for message in messages.iter_mut().filter_map(Value::as_object_mut) {
                shape_message(message, profile);
            }
        }
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

fn shape_message(message: &mut Map<String, Value>, profile: RequestProfile) {
    let is_tool = message.get("role").and_then(Value::as_str) == Some("tool");
    let Some(Value::Array(parts)) = message.get_mut("content") else {
        return;
    };
    if is_tool && profile.tool_content_as_text {
        let text: String = parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        message.insert("content".into(), Value::String(text));
        return;
    }
    if profile.legacy_binary_parts {
        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
            to_binary_part(part);
        }
    }
}

/// `{type:"image", source:{type, value, mimeType?}}` → `{type:"binary", mimeType, data|url|id}`.
fn to_binary_part(part: &mut Map<String, Value>) {
    if part.get("type").and_then(Value::as_str) == Some("text") {
        return;
    }
    let Some(Value::Object(source)) = part.remove("source") else {
        return;
    };
    let key = match source.get("type").and_then(Value::as_str) {
        Some("data") => "data",
        Some("url") => "url",
        _ => "id",
    };
    part.insert("type".into(), "binary".into());
    if let Some(mime) = source.get("mimeType") {
        part.insert("mimeType".into(), mime.clone());
    }
    if let Some(value) = source.get("value") {
        part.insert(key.into(), value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<RunAgentInput, Failure> {
        read_request(v.to_string().as_bytes(), &AguiAliases::builtin())
    }

    #[test]
    fn a_plain_http_agent_body_reads() {
        let input = read(
            json!({"threadId":"t","runId":"r","protocolVersion":"1.0","state":{},
            "messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],
            "forwardedProps":{}}),
        )
        .unwrap();
        assert_eq!(input.messages.len(), 1);
        assert_eq!(input.state, Some(json!({})));
    }

    #[test]
    fn request_dialects_are_accepted() {
        let input = read(json!({"thread_id":"t","run_id":"r","botId":"bot-1",
            "messages":[{"id":"a","role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},
                        {"id":"b","role":"tool","tool_call_id":"c","content":"ok"}],
            "state":null}))
        .unwrap();
        assert_eq!(input.thread_id, "t");
        assert!(input.tools.is_empty());
        assert_eq!(input.forwarded_props, Some(json!({"botId":"bot-1"})));
        assert!(input.state.is_none());
        assert!(input.extra.is_empty());
    }

    #[test]
    fn errors_name_the_bad_field() {
        let msg = |v: Value| read(v).unwrap_err().message;
        assert!(msg(json!({"runId":"r","messages":[]})).contains("threadId"));
        assert!(msg(json!({"threadId":"t","runId":"r","messages":"hi"}))
            .starts_with("messages: must be an array"));
        assert!(msg(
            json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"alien","content":"x"}]})
        )
        .starts_with("messages[0]"));
        assert_eq!(
            msg(json!({"threadId":"","runId":"r","messages":[]})),
            "threadId: must not be empty"
        );
        for json in [
            json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"alien","content":"x"}]}),
            json!({"threadId":"t","runId":7,"messages":[]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":{"a":1}}]}),
            json!({"threadId":"t","runId":"r","messages":[],"tools":[{"name":3}]}),
        ] {
            let m = msg(json.clone());
            for rust in ["struct", "enum", "variant", "RunAgentInput", "Message", "`"] {
                assert!(!m.contains(rust), "{json}: {rust:?} in {m:?}");
            }
        }
        assert!(msg(json!([1, 2])).contains("JSON object"));
        let err = read_request(b"{nope", &AguiAliases::builtin()).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains("not valid JSON"));
    }

    #[test]
    fn cloudbase_era_profiles() {
        let input = read(json!({"threadId":"t","runId":"r","messages":[
            {"id":"u","role":"user","content":[{"type":"text","text":"see"},
                {"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}},
                {"type":"document","source":{"type":"url","value":"https://x/y.pdf"}}]},
            {"id":"t1","role":"tool","toolCallId":"c","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},
                {"type":"image","source":{"type":"url","value":"https://x/z.png"}}]}]}))
        .unwrap();
        let profile = RequestProfile {
            legacy_binary_parts: true,
            tool_content_as_text: true,
        };
        let body: Value = serde_json::from_slice(&write_request(&input, profile)).unwrap();
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type":"text","text":"see"},
                   {"type":"binary","mimeType":"image/png","data":"AAAA"},
                   {"type":"binary","url":"https://x/y.pdf"}])
        );
        assert_eq!(body["messages"][1]["content"], json!("ab"));
    }

    #[test]
    fn the_upstream_body_announces_1_0() {
        let input = read(json!({"threadId":"t","runId":"r","messages":[]})).unwrap();
        let body: Value =
            serde_json::from_slice(&write_request(&input, RequestProfile::default())).unwrap();
        assert_eq!(body["protocolVersion"], "1.0");
        assert_eq!(body["tools"], json!([]));
        assert_eq!(body["forwardedProps"], json!({}));
        assert!(!body.to_string().contains("null"));
    }
}
