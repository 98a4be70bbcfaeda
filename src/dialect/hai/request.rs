//! The run request on both sides (`translation.md` §3.1, §3.2): a HAI client's body read into a
//! canonical [`RunAgentInput`], and a canonical input written as a HAI upstream's body.

use serde_json::{Map, Value};

pub use super::history::HistoryContent;
use super::history::{self, AssistantContent};
use crate::dialect::agui::request::{input_from_map, request_object};
use crate::error::{ErrorCode, Failure};
use crate::event::IdMint;
use crate::event::{RunAgentInput, PROTOCOL_VERSION};
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
