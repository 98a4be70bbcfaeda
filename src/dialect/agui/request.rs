//! The run request on both sides: a client's body read leniently into a canonical
//! [`RunAgentInput`] (`dialects.md` row 19; `agui.md` §3.1), and the canonical input written as the
//! upstream's body.

use std::sync::LazyLock;

use serde::Serialize;
use serde_json::{Map, Value};

use super::fix;
use crate::dialect::field_error;
use crate::error::{ErrorCode, Failure};
use crate::event::Note;
use crate::event::{Context, Message, ResumeEntry, RunAgentInput, Tool, PROTOCOL_VERSION};
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
    match strict_request(body) {
        Some(input) => non_empty_ids(input),
        None => input_from_map(request_object(body)?, aliases),
    }
}

/// What [`read_request`] gives without its fast path: the lenient reading every body would get.
/// The differential tests and the fuzz target hold the two to the same answer.
pub fn read_request_lenient(body: &[u8], aliases: &AguiAliases) -> Result<RunAgentInput, Failure> {
    input_from_map(request_object(body)?, aliases)
}

/// The fast path: a body that is already a strict 1.0 request decodes straight into its type.
/// The lenient reading builds a JSON tree, repairs it and decodes it again, several times the
/// work, for a body that needs none of it. `None` when anything the lenient reading would repair
/// may be present: a `null` anywhere (absent optionals, nulls dropped from messages), any
/// top-level or message key the types do not know (snake_case spellings, `data`, `botId`, a
/// vendor's extras), or anything the strict types refuse (a `binary` part, a non-object
/// `metadata`). Tested to agree with the lenient reading: `strict_and_lenient_readings_agree`.
fn strict_request(body: &[u8]) -> Option<RunAgentInput> {
    let input = strict_decode(body)?;
    let canonical = input.extra.is_empty() && input.messages.iter().all(|m| m.extra().is_empty());
    canonical.then_some(input)
}

/// The body decoded straight into the canonical types, when it has no `null` anywhere (the
/// lenient readings drop nulls before they decode) and is valid UTF-8 throughout; `None` when
/// the types refuse it. What is left in the `extra` maps is for the caller to judge: the AG-UI
/// and HAI fast paths each take only what their lenient reading would leave unchanged.
pub(crate) fn strict_decode(body: &[u8]) -> Option<RunAgentInput> {
    // serde_json checks the UTF-8 of what it decodes, not of what it skips (a key the types do
    // not know, inside a tool): the lenient reading refuses such a body, so this must too.
    if memchr::memmem::find(body, b"null").is_some() || simdutf8::basic::from_utf8(body).is_err() {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// Both ids are required and must say something.
fn non_empty_ids(input: RunAgentInput) -> Result<RunAgentInput, Failure> {
    for (field, value) in [("threadId", &input.thread_id), ("runId", &input.run_id)] {
        if value.is_empty() {
            return Err(invalid(format!("{field}: must not be empty")));
        }
    }
    Ok(input)
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
    non_empty_ids(input)
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
    if profile == RequestProfile::default() {
        // Serialising the canonical types cannot fail: every map key is a string.
        return serde_json::to_vec(&UpstreamInput::from(input)).unwrap_or_default();
    }
    reshaped(input, profile)
}

/// The body for an upstream with a profile: the canonical input as a JSON tree, its messages
/// reshaped.
fn reshaped(input: &RunAgentInput, profile: RequestProfile) -> Vec<u8> {
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

/// The input as a plain 1.0 upstream receives it, borrowed: the same fields in the same order
/// as [`RunAgentInput`]'s, the protocol version announced and `forwardedProps` always present.
/// Written straight from the borrowed input, without the copy and the JSON tree that a profile's
/// reshaping needs.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UpstreamInput<'a> {
    thread_id: &'a str,
    run_id: &'a str,
    messages: &'a [Message],
    tools: &'a [Tool],
    context: &'a [Context],
    protocol_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_run_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a Value>,
    forwarded_props: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    resume: Option<&'a [ResumeEntry]>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// An empty object, for an input without `forwardedProps`.
static NO_PROPS: LazyLock<Value> = LazyLock::new(|| Value::Object(Map::new()));

impl<'a> From<&'a RunAgentInput> for UpstreamInput<'a> {
    fn from(input: &'a RunAgentInput) -> UpstreamInput<'a> {
        // Destructured without `..`: a field added to the input must be placed here too.
        let RunAgentInput {
            thread_id,
            run_id,
            messages,
            tools,
            context,
            protocol_version: _,
            parent_run_id,
            state,
            forwarded_props,
            resume,
            extra,
        } = input;
        UpstreamInput {
            thread_id,
            run_id,
            messages,
            tools,
            context,
            protocol_version: PROTOCOL_VERSION,
            parent_run_id: parent_run_id.as_deref(),
            state: state.as_ref(),
            forwarded_props: forwarded_props.as_ref().unwrap_or(&NO_PROPS),
            resume: resume.as_deref(),
            extra,
        }
    }
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

    /// Bodies across what the lenient reading repairs and what it keeps.
    fn corpus() -> Vec<Value> {
        let user = json!({"id":"u1","role":"user","content":"hi"});
        vec![
            json!({"threadId":"t","runId":"r","messages":[user]}),
            json!({"threadId":"t","runId":"r","protocolVersion":"1.0","state":{"a":[1,2]},
                "messages":[user,
                    {"id":"a1","role":"assistant","content":"x","toolCalls":[
                        {"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
                    {"id":"t1","role":"tool","toolCallId":"c","content":"ok"},
                    {"id":"u2","role":"user","content":[{"type":"text","text":"see"},
                        {"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}}]}],
                "tools":[{"name":"f","description":"d","parameters":{"type":"object"}}],
                "context":[{"description":"d","value":"v"}],"forwardedProps":{"k":"v"},
                "parentRunId":"p"}),
            // A tool call without its `type`: both readings default it.
            json!({"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant",
                "toolCalls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}]}),
            // What only the lenient reading takes or repairs.
            json!({"thread_id":"t","run_id":"r","messages":[user]}),
            json!({"threadId":"t","runId":"r","messages":[user],"state":null,"tools":null}),
            json!({"threadId":"t","runId":"r","messages":[user],"data":{"k":1}}),
            json!({"threadId":"t","runId":"r","messages":[user],"botId":"b"}),
            json!({"threadId":"t","runId":"r","messages":[user],"vendor":{"x":1}}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"b","role":"tool",
                "tool_call_id":"c","content":"ok"}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":[
                {"type":"binary","mimeType":"image/png","data":"AAAA"}]}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user",
                "content":"hi","metadata":"not an object"}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user",
                "content":"hi","name":null}]}),
            // Refused by both.
            json!({"threadId":"","runId":"r","messages":[]}),
            json!({"threadId":"t","runId":"r","messages":"hi"}),
        ]
    }

    #[test]
    fn strict_and_lenient_readings_agree() {
        let aliases = AguiAliases::builtin();
        let mut strict = 0;
        for body in corpus() {
            let bytes = body.to_string().into_bytes();
            let lenient = read_request_lenient(&bytes, &aliases);
            let read = read_request(&bytes, &aliases);
            match (&read, &lenient) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{body}"),
                (Err(a), Err(b)) => assert_eq!(a.message, b.message, "{body}"),
                _ => panic!("{body}: {read:?} against {lenient:?}"),
            }
            strict += usize::from(strict_request(&bytes).is_some());
        }
        // The strict path is taken for the three canonical bodies and the one with an empty id
        // (refused after it), and for nothing that needs a repair.
        assert_eq!(strict, 4);
    }

    /// Found by the `requests` fuzz target: serde_json skips what a type does not know without
    /// checking its UTF-8, so the strict reading accepted a body the lenient one refuses.
    #[test]
    fn a_body_that_is_not_utf8_is_refused_whatever_holds_the_bad_bytes() {
        let aliases = AguiAliases::builtin();
        let mut body = br#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"f","description":"d","vendor":"x"}]}"#.to_vec();
        let at = body.windows(3).position(|w| w == b"\"x\"").unwrap() + 1;
        body[at] = 0xCB;
        assert!(strict_request(&body).is_none());
        let read = read_request(&body, &aliases).unwrap_err();
        let lenient = read_request_lenient(&body, &aliases).unwrap_err();
        assert_eq!(read.message, lenient.message);
        assert!(read.message.contains("not valid JSON"), "{}", read.message);
    }

    #[test]
    fn the_direct_write_is_the_tree_write() {
        let aliases = AguiAliases::builtin();
        for body in corpus() {
            let Ok(input) = read_request(body.to_string().as_bytes(), &aliases) else {
                continue;
            };
            let direct = write_request(&input, RequestProfile::default());
            let tree = reshaped(&input, RequestProfile::default());
            assert_eq!(
                String::from_utf8_lossy(&direct),
                String::from_utf8_lossy(&tree),
                "{body}"
            );
        }
    }
}
