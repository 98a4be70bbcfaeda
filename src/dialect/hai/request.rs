//! The run request on both sides (`translation.md` §3.1, §3.2): a HAI client's body read into a
//! canonical [`RunAgentInput`], and a canonical input written as a HAI upstream's body.

use serde_json::{Map, Value};

pub use super::history::HistoryContent;
use super::history::{self, AssistantContent, HAI_MESSAGE_KEYS};
use super::METADATA_KEY;
use crate::dialect::agui::request::{input_from_map, request_object, strict_decode};
use crate::error::{ErrorCode, Failure};
use crate::event::IdMint;
use crate::event::{Message, RunAgentInput, PROTOCOL_VERSION};
use crate::mapping::Mappings;

/// Reads a HAI client's body. `new_id` supplies a thread or run id the body lacks, or leaves
/// `null` or empty (the proxy passes UUID v4s); an id of another type is refused, not replaced
/// (a client that sent one would otherwise never see its run under the id it named). Errors
/// are `INVALID_REQUEST` naming the field.
pub fn read_request(
    body: &[u8],
    mappings: &Mappings,
    history_content: HistoryContent,
    new_id: &mut dyn FnMut() -> String,
) -> Result<RunAgentInput, Failure> {
    match strict_request(body, history_content) {
        Some(input) => Ok(input),
        None => read_request_lenient(body, mappings, history_content, new_id),
    }
}

/// The fast path, as the AG-UI reader has one: a body with nothing for the lenient reading
/// to repair decodes straight into the canonical types. Building a JSON tree, rewriting it and
/// decoding it again cost about 40,000 instructions for a one-message request, a sixth of the
/// gateway's work per HAI run (callgrind, `benches/request_instructions.sh --client hai`).
///
/// Taken when both ids are there and say something, nothing top-level is unknown (snake_case
/// ids, `initialState`), the context is empty (an item with a key beyond AG-UI's two is
/// wrapped by the lenient reading, and the types cannot show it), every message has an id and
/// no unknown key but HAI's own `timestamp` and `extra`, and no assistant message needs its
/// business objects decoded. What the lenient reading then does is done here on the types:
/// `timestamp` and `extra` move into `metadata.hai`, `protocolVersion` becomes 1.0, and
/// `forwardedProps` defaults to `{}`. Tested to agree with the lenient reading:
/// `strict_and_lenient_readings_agree`, and the `requests` fuzz target.
fn strict_request(body: &[u8], history_content: HistoryContent) -> Option<RunAgentInput> {
    let mut input = strict_decode(body)?;
    let plain = input.extra.is_empty()
        && !input.thread_id.is_empty()
        && !input.run_id.is_empty()
        && input.context.is_empty();
    if !plain {
        return None;
    }
    for message in &mut input.messages {
        let decoded =
            history_content == HistoryContent::Decode && matches!(message, Message::Assistant(_));
        if decoded || message.id().is_empty() {
            return None;
        }
        let (extra, metadata) = message.extra_and_metadata();
        if extra.is_empty() {
            continue;
        }
        let mut hai = Map::new();
        // The lenient reading's order: `timestamp`, then `extra`.
        for key in HAI_MESSAGE_KEYS {
            if let Some(value) = extra.remove(key) {
                hai.insert(key.into(), value);
            }
        }
        if !extra.is_empty() {
            return None;
        }
        metadata
            .get_or_insert_with(Map::new)
            .insert(METADATA_KEY.into(), Value::Object(hai));
    }
    input.protocol_version = Some(PROTOCOL_VERSION.into());
    input
        .forwarded_props
        .get_or_insert_with(|| Value::Object(Map::new()));
    Some(input)
}

/// [`read_request`] without its fast path: what every body would get. The differential tests
/// and the `requests` fuzz target hold the two to the same answer.
pub fn read_request_lenient(
    body: &[u8],
    mappings: &Mappings,
    history_content: HistoryContent,
    new_id: &mut dyn FnMut() -> String,
) -> Result<RunAgentInput, Failure> {
    let mut map = request_object(body)?;
    for (snake, camel) in [("thread_id", "threadId"), ("run_id", "runId")] {
        if let Some(v) = map.shift_remove(snake) {
            map.entry(camel).or_insert(v);
        }
        match map.get(camel) {
            None | Some(Value::Null) => {}
            Some(Value::String(id)) if id.is_empty() => {}
            Some(Value::String(_)) => continue,
            Some(_) => {
                return Err(Failure::new(
                    ErrorCode::InvalidRequest,
                    format!("{camel}: must be a string"),
                ))
            }
        }
        map.insert(camel.into(), new_id().into());
    }
    let run_id = map
        .get("runId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match map.shift_remove("messages") {
        Some(Value::Array(messages)) => {
            let mut mint = IdMint::new(&run_id);
            let decoded = history::decode(messages, history_content, &mappings.hai, &mut mint);
            map.insert("messages".into(), Value::Array(decoded));
        }
        Some(Value::Null) | None => {
            map.insert("messages".into(), Value::Array(Vec::new()));
        }
        // Left for the shared reader to report with its path.
        Some(other) => {
            map.insert("messages".into(), other);
        }
    }
    if let Some(Value::Array(items)) = map.get_mut("context") {
        for item in items.iter_mut() {
            if !is_agui_context(item) {
                let value = item.to_string();
                *item = serde_json::json!({"description": "hai.context", "value": value});
            }
        }
    }
    if let Some(initial) = map.shift_remove("initialState") {
        if map.get("state").is_none_or(Value::is_null) {
            map.insert("state".into(), initial);
        }
    }
    map.insert("protocolVersion".into(), PROTOCOL_VERSION.into());
    if map.get("forwardedProps").is_none_or(Value::is_null) {
        map.insert("forwardedProps".into(), Value::Object(Map::new()));
    }
    input_from_map(map, &mappings.agui)
}

fn is_agui_context(item: &Value) -> bool {
    item.as_object().is_some_and(|o| {
        o.len() == 2
            && o.get("description").is_some_and(Value::is_string)
            && o.get("value").is_some_and(Value::is_string)
    })
}

/// The body sent to a HAI upstream: AG-UI's shape without what HAI does not know
/// (`protocolVersion`, `parentRunId`, `resume`, reasoning and activity messages), messages in
/// HAI form, and the top-level extras a HAI client sent.
pub fn write_request(input: &RunAgentInput) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("threadId".into(), input.thread_id.clone().into());
    body.insert("runId".into(), input.run_id.clone().into());
    body.insert(
        "messages".into(),
        Value::Array(history::encode(&input.messages, AssistantContent::Plain)),
    );
    // Serialising the canonical types cannot fail: every map key is a string.
    body.insert(
        "tools".into(),
        serde_json::to_value(&input.tools).unwrap_or_default(),
    );
    body.insert(
        "context".into(),
        serde_json::to_value(&input.context).unwrap_or_default(),
    );
    if let Some(state) = &input.state {
        body.insert("state".into(), state.clone());
    }
    body.insert(
        "forwardedProps".into(),
        input
            .forwarded_props
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new())),
    );
    for (k, v) in &input.extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<RunAgentInput, Failure> {
        let mut n = 0;
        let mut ids = || {
            n += 1;
            format!("gen-{n}")
        };
        read_request(
            v.to_string().as_bytes(),
            &Mappings::builtin(),
            HistoryContent::Decode,
            &mut ids,
        )
    }

    #[test]
    fn the_spec_request_reads() {
        // hai.md §1, seed 004 §3.3.1.
        let input = read(json!({"threadId":"thread_12345","runId":"run_67890",
            "messages":[{"id":"msg_1","role":"user","content":"介绍下HAI"}],
            "context":[],"tools":[],"forwardedProps":{}}))
        .unwrap();
        assert_eq!(input.thread_id, "thread_12345");
        assert_eq!(input.protocol_version.as_deref(), Some("1.0"));
        assert_eq!(input.messages.len(), 1);
        assert!(input.extra.is_empty());
    }

    #[test]
    fn demo_quirks_are_absorbed() {
        let input = read(json!({
            "messages":[{"role":"user","content":"hi","timestamp":1,"extra":null},
                        {"id":"a","role":"assistant","content":"{\"output\":{\"type\":\"text\",\"content\":\"yo\"}}"}],
            "context":[{"id":"m0","role":"user","content":"earlier"},{"description":"d","value":"v"}],
            "initialState":{"n":1},
            "agentName":"x"}))
        .unwrap();
        assert_eq!(input.thread_id, "gen-1");
        assert_eq!(input.run_id, "gen-2");
        assert_eq!(input.state, Some(json!({"n":1})));
        assert_eq!(input.context[0].description, "hai.context");
        assert_eq!(
            serde_json::from_str::<Value>(&input.context[0].value).unwrap(),
            json!({"id":"m0","role":"user","content":"earlier"})
        );
        assert_eq!(input.context[1].value, "v");
        assert_eq!(input.extra.get("agentName"), Some(&json!("x")));
        let body: Value = serde_json::from_slice(&write_request(&input)).unwrap();
        assert_eq!(body["messages"][0]["id"], "gen-2.h0");
        assert_eq!(body["messages"][0]["timestamp"], 1);
        // The business-object content goes back as the client wrote it.
        assert_eq!(
            body["messages"][1]["content"],
            "{\"output\":{\"type\":\"text\",\"content\":\"yo\"}}"
        );
        assert_eq!(body["agentName"], "x");
        assert_eq!(body["state"], json!({"n":1}));
        assert!(body.get("protocolVersion").is_none());
    }

    /// HAI bodies for the differential test: what the fast path takes, then what only the
    /// lenient reading takes, repairs or refuses.
    fn corpus() -> Vec<Value> {
        let user = json!({"id":"u1","role":"user","content":"hi","timestamp":1760000000000_u64});
        vec![
            // Taken by the fast path.
            json!({"threadId":"t","runId":"r","messages":[user],"context":[],"tools":[]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x"}]}),
            json!({"threadId":"t","runId":"r","protocolVersion":"0.9","state":{"n":[1,2.5]},
                "forwardedProps":{"k":"v"},"parentRunId":"p",
                "tools":[{"name":"f","description":"d","parameters":{"type":"object"}}],
                "messages":[
                    {"id":"s","role":"system","content":"be brief","extra":{"a":1}},
                    {"id":"u","role":"user","content":"hi","extra":"e","timestamp":3,
                        "metadata":{"other":true,"hai":{"old":1}}},
                    {"id":"t1","role":"tool","toolCallId":"c","content":"ok","timestamp":4},
                    {"id":"u2","role":"user","content":[{"type":"text","text":"see"}]}]}),
            // An empty id is the lenient reading's to mint, and so is a message's.
            json!({"threadId":"","runId":"r","messages":[user]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"","role":"user","content":"x"}]}),
            // Assistant history: decoded by the lenient reading (Decode), or kept (Verbatim).
            json!({"threadId":"t","runId":"r","messages":[user,
                {"id":"a","role":"assistant","content":"{\"output\":{\"type\":\"text\",\"content\":\"yo\"}}"}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","content":"plain"}]}),
            // Only the lenient reading takes or repairs these.
            json!({"thread_id":"t","run_id":"r","messages":[user]}),
            json!({"runId":"r","messages":[user]}),
            json!({"threadId":null,"runId":"r","messages":[user]}),
            json!({"threadId":"t","runId":"r"}),
            json!({"threadId":"t","runId":"r","messages":[user],"initialState":{"n":1}}),
            json!({"threadId":"t","runId":"r","messages":[user],"agentName":"x"}),
            json!({"threadId":"t","runId":"r","messages":[user],"context":[{"description":"d","value":"v"}]}),
            json!({"threadId":"t","runId":"r","messages":[user],"context":[{"description":"d","value":"v","x":1}]}),
            json!({"threadId":"t","runId":"r","messages":[{"role":"user","content":"no id"}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x","vendor":1}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x","timestamp":null}]}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"b","role":"tool","tool_call_id":"c","content":"ok"}]}),
            // Refused by both.
            json!({"threadId":5,"runId":"r","messages":[]}),
            json!({"threadId":"t","runId":"r","messages":"hi"}),
            json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"alien"}]}),
            json!(["not", "an", "object"]),
        ]
    }

    #[test]
    fn strict_and_lenient_readings_agree() {
        let mappings = Mappings::builtin();
        let mut strict = 0;
        // Repeated keys cannot be written with `json!`: the tree keeps the last, the types refuse
        // a repeated field they know, so these must leave the fast path or agree with the tree.
        let repeated = [
            r#"{"threadId":"a","threadId":"b","runId":"r","messages":[]}"#,
            r#"{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"x","timestamp":1,"timestamp":2}]}"#,
            r#"{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","role":"system","content":"x"}]}"#,
        ];
        let bodies: Vec<String> = corpus()
            .iter()
            .map(Value::to_string)
            .chain(repeated.iter().map(|b| b.to_string()))
            .collect();
        for content in [HistoryContent::Decode, HistoryContent::Verbatim] {
            for body in &bodies {
                let bytes = body.as_bytes();
                let ids = || {
                    let mut n = 0;
                    move || {
                        n += 1;
                        format!("gen-{n}")
                    }
                };
                let read = read_request(bytes, &mappings, content, &mut ids());
                let lenient = read_request_lenient(bytes, &mappings, content, &mut ids());
                match (&read, &lenient) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a, b, "{content:?} {body}");
                        // The upstream sees the same bytes: the metadata's members in order.
                        assert_eq!(
                            serde_json::to_string(a).unwrap(),
                            serde_json::to_string(b).unwrap(),
                            "{content:?} {body}"
                        );
                    }
                    (Err(a), Err(b)) => assert_eq!(a.message, b.message, "{body}"),
                    _ => panic!("{content:?} {body}: {read:?} against {lenient:?}"),
                }
                strict += usize::from(strict_request(bytes, content).is_some());
            }
        }
        // The three canonical bodies and the repeated `timestamp` (the last one wins both ways)
        // in both modes, and the two with assistant history when it is kept verbatim; nothing
        // the lenient reading repairs.
        assert_eq!(strict, 10);
    }

    #[test]
    fn the_fast_path_keeps_hai_fields_in_the_metadata() {
        let body = json!({"threadId":"t","runId":"r","messages":[
            {"id":"u","role":"user","content":"hi","extra":{"k":1},"timestamp":7}]});
        let input = strict_request(body.to_string().as_bytes(), HistoryContent::Decode).unwrap();
        let Message::User(user) = &input.messages[0] else {
            panic!("{:?}", input.messages[0]);
        };
        assert!(user.extra.is_empty());
        assert_eq!(
            Value::Object(user.metadata.clone().unwrap()),
            json!({"hai":{"timestamp":7,"extra":{"k":1}}})
        );
        assert_eq!(input.protocol_version.as_deref(), Some("1.0"));
        assert_eq!(input.forwarded_props, Some(json!({})));
    }

    #[test]
    fn errors_name_the_field() {
        let err = read(json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"alien"}]}))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains("messages[0]"), "{}", err.message);
        let err = read(json!({"threadId":"t","messages":"x"})).unwrap_err();
        assert!(err.message.contains("messages"), "{}", err.message);
    }

    #[test]
    fn ids_are_minted_when_absent_null_or_empty_and_refused_when_of_another_type() {
        let input = read(json!({"threadId":null,"run_id":"","messages":[]})).unwrap();
        assert_eq!(
            (input.thread_id.as_str(), input.run_id.as_str()),
            ("gen-1", "gen-2")
        );
        let input = read(json!({"thread_id":"t","runId":"r","messages":[]})).unwrap();
        assert_eq!(
            (input.thread_id.as_str(), input.run_id.as_str()),
            ("t", "r")
        );
        for (body, field) in [
            (json!({"threadId":123,"runId":"r"}), "threadId"),
            (json!({"threadId":"t","runId":["r"]}), "runId"),
            (json!({"thread_id":{"id":"t"}}), "threadId"),
            (json!({"threadId":"t","runId":false}), "runId"),
        ] {
            let err = read(body.clone()).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest, "{body}");
            assert_eq!(err.message, format!("{field}: must be a string"), "{body}");
        }
    }
}
