//! HAI test helpers: SSE framing into JSON values, the normal form of `translation.md` §3.6
//! (what a HAI → canonical → HAI round trip must preserve), and a generator of random HAI
//! streams covering every output type, collaboration, state, steps and tool calls.
//!
//! The normal form is written here from the contract, independently of the gateway's HAI codec,
//! so it can catch the codec's mistakes rather than repeat them.

use serde_json::{json, Map, Value};

use super::random::Rng;

/// `data: <json>\n\n` frames → JSON values (comments and blank frames skipped).
pub fn sse_events(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).expect("UTF-8 stream");
    text.split("\n\n")
        .filter_map(|frame| {
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| {
                let joined = data.join("\n");
                serde_json::from_str(&joined).unwrap_or_else(|e| panic!("bad JSON {joined}: {e}"))
            })
        })
        .collect()
}

/// The §3.6 normal form of a HAI stream answering run `run_id`: key order, delta variant,
/// `think`, `from:""`, single-op deltas, added ids/roles, timestamps and tool-argument encoding
/// stop mattering; everything else still does.
pub fn normalise(events: &[Value], run_id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut args: Vec<(String, String)> = Vec::new();
    for event in events {
        let Value::Object(map) = event else {
            out.push(event.clone());
            continue;
        };
        let mut map = map.clone();
        map.remove("timestamp");
        let ty = map
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match ty.as_str() {
            "RUN_STARTED" | "RUN_FINISHED" => {
                // The pending frontend calls the HAI reader derived come back in the `agui`
                // extension member, which a HAI client ignores.
                if map.get("agui").is_some_and(|agui| {
                    agui.as_object().is_some_and(|a| a.len() == 1)
                        && agui["outcome"]["type"] == "success"
                }) {
                    map.remove("agui");
                }
                map.remove("threadId");
                map.remove("runId");
                map.entry("messageId").or_insert_with(|| run_id.into());
                map.entry("role").or_insert_with(|| "assistant".into());
            }
            "BUSINESS_DATA_START" | "BUSINESS_DATA_END" => {
                map.entry("role").or_insert_with(|| "assistant".into());
            }
            "BUSINESS_DATA_CONTENT" => {
                let delta = map.remove("delta").unwrap_or(Value::Null);
                let top: Map<String, Value> = ["layout", "blockId", "style"]
                    .iter()
                    .filter_map(|k| map.remove(*k).map(|v| (k.to_string(), v)))
                    .collect();
                for mut object in business_objects(delta) {
                    for (k, v) in &top {
                        object.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                    let mut piece = map.clone();
                    piece.insert("delta".into(), Value::Object(object));
                    out.push(Value::Object(piece));
                }
                continue;
            }
            "AGENT_COLLABORATIVE_MESSAGE_START"
            | "AGENT_COLLABORATIVE_MESSAGE_CONTENT"
            | "AGENT_COLLABORATIVE_MESSAGE_END" => {
                if let Some(Value::String(text)) = map.get("delta") {
                    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                        map.insert("delta".into(), v);
                    }
                }
            }
            "STATE_DELTA" => {
                let ops = match map.remove("delta") {
                    Some(Value::Array(ops)) => ops,
                    Some(op) => vec![op],
                    None => Vec::new(),
                };
                let ops = ops
                    .into_iter()
                    .map(|mut op| {
                        let keeps_from =
                            matches!(op.get("op").and_then(Value::as_str), Some("move" | "copy"));
                        if let (Value::Object(o), false) = (&mut op, keeps_from) {
                            o.remove("from");
                        }
                        op
                    })
                    .collect();
                map.insert("delta".into(), Value::Array(ops));
            }
            "TOOL_CALL_ARGS" => {
                let id = map["toolCallId"].as_str().unwrap_or_default().to_owned();
                let text = match map.get("delta") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                match args.iter_mut().find(|(i, _)| *i == id) {
                    Some((_, held)) => held.push_str(&text),
                    None => args.push((id, text)),
                }
                continue;
            }
            "TOOL_CALL_END" => {
                let id = map["toolCallId"].as_str().unwrap_or_default().to_owned();
                let text = args
                    .iter()
                    .position(|(i, _)| *i == id)
                    .map(|p| args.remove(p).1)
                    .unwrap_or_default();
                map.insert("args".into(), args_value(&text));
            }
            "TOOL_CALL_RESULT" => {
                map.insert("role".into(), "tool".into());
                let minted = format!("{run_id}.t");
                if map
                    .get("messageId")
                    .and_then(Value::as_str)
                    .is_some_and(|id| id.starts_with(&minted))
                {
                    map.remove("messageId");
                }
            }
            "TOOL_CALL_START"
                if map
                    .get("parentMessageId")
                    .is_some_and(|p| p.is_null() || p == "") =>
            {
                map.remove("parentMessageId");
            }
            "MESSAGE_SNAPSHOT" | "MESSAGES_SNAPSHOT" => {
                map.insert("type".into(), "MESSAGE_SNAPSHOT".into());
                if let Some(Value::Array(messages)) = map.get_mut("messages") {
                    for m in messages.iter_mut().filter_map(Value::as_object_mut) {
                        if m.get("role") == Some(&json!("assistant")) {
                            if let Some(content) = m.remove("content") {
                                let outputs = business_objects(content);
                                m.insert("content".into(), json!(outputs));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        out.push(Value::Object(map));
    }
    out
}

/// A business delta in any variant → its objects (a plain string is one text output).
fn business_objects(delta: Value) -> Vec<Map<String, Value>> {
    let mut objects = match delta {
        Value::String(text) => {
            let parsed: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(&text)
                .into_iter()
                .collect();
            match parsed {
                Ok(values)
                    if !values.is_empty()
                        && values
                            .iter()
                            .all(|v| v.get("output").is_some_and(Value::is_object)) =>
                {
                    values
                        .into_iter()
                        .filter_map(|v| v.as_object().cloned())
                        .collect()
                }
                _ => vec![json!({"output":{"type":"text","content":text}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()],
            }
        }
        Value::Object(o) => vec![o],
        Value::Null => Vec::new(),
        other => panic!("unexpected delta {other}"),
    };
    for object in &mut objects {
        if let Some(ty) = object.get_mut("output").and_then(|o| o.get_mut("type")) {
            if ty == "think" {
                *ty = "thinking".into();
            }
        }
    }
    objects
}

/// `translation.md` §5: argument text → one object.
fn args_value(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        Ok(v) => json!({"_value": v}),
        Err(_) => json!({"_raw": text}),
    }
}

/// How a generated stream spells its business deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Variant 1 where the output allows it (plain text), else variant 3.
    Plain,
    /// Variant 2: objects, `blockId`/`style` at the top level.
    Object,
    /// Variant 3: JSON strings, attributes inside, sometimes several objects in one delta.
    JsonString,
}

/// A random HAI stream (SSE text) answering run `run_id`, with its business deltas in `variant`.
pub fn random_stream(rng: &mut Rng, variant: Variant) -> String {
    let mut events: Vec<Value> = Vec::new();
    let mut ts = 1_700_000_000_000_i64;
    let mut stamp = |rng: &mut Rng, mut e: Value| {
        ts += rng.below(2000) as i64;
        if rng.below(4) != 0 {
            e["timestamp"] = ts.into();
        }
        e
    };
    let run_extra = rng.below(2) == 0;
    let mut start = json!({"type":"RUN_STARTED"});
    if run_extra {
        start["messageId"] = "run-msg".into();
        start["role"] = "assistant".into();
    }
    events.push(stamp(rng, start));
    let texts = [
        "你好",
        "a}{b",
        "{\"x\":1}",
        "line\nbreak",
        "quote \" and \\ slash",
        "HAI 是一套",
        "}}{{",
    ];
    for block in 0..(1 + rng.below(6)) {
        match rng.below(6) {
            0 | 1 => {
                let id = format!("m{block}");
                events.push(stamp(
                    rng,
                    json!({"type":"BUSINESS_DATA_START","messageId":id,"role":"assistant"}),
                ));
                for _ in 0..(1 + rng.below(5)) {
                    let objects: Vec<Value> = (0..(1 + rng.below(2)))
                        .map(|_| random_output(rng, &texts))
                        .collect();
                    for delta in business_deltas(rng, objects, variant) {
                        let mut e = json!({"type":"BUSINESS_DATA_CONTENT","messageId":id});
                        for (k, v) in delta {
                            e[k] = v;
                        }
                        events.push(stamp(rng, e));
                    }
                }
                events.push(stamp(
                    rng,
                    json!({"type":"BUSINESS_DATA_END","messageId":id}),
                ));
            }
            2 => {
                let id = format!("c{block}");
                let task = json!({"task":{"id":format!("task-{block}"),"name":"查询 {x}"}});
                let delta = if variant == Variant::Object {
                    task
                } else {
                    task.to_string().into()
                };
                events.push(stamp(rng, json!({"type":"AGENT_COLLABORATIVE_MESSAGE_START","from":"USER","to":"Agent","messageId":id})));
                events.push(stamp(rng, json!({"type":"AGENT_COLLABORATIVE_MESSAGE_CONTENT","delta":delta,"messageId":id})));
                events.push(stamp(
                    rng,
                    json!({"type":"AGENT_COLLABORATIVE_MESSAGE_END","messageId":id}),
                ));
            }
            3 => {
                let kind = ["add", "replace"][rng.below(2)];
                let op = json!({"op":kind,"path":format!("/items/{block}"),"value":{"status":"running"},"from":""});
                let delta = if rng.below(2) == 0 {
                    op
                } else {
                    json!([op, {"op":"remove","path":"/old","from":""}])
                };
                if rng.below(3) == 0 {
                    events.push(stamp(
                        rng,
                        json!({"type":"STATE_SNAPSHOT","snapshot":{"items":[],"old":1}}),
                    ));
                }
                events.push(stamp(rng, json!({"type":"STATE_DELTA","delta":delta})));
            }
            4 => {
                let name = format!("步骤{block}");
                events.push(json!({"type":"STEP_STARTED","stepName":name}));
                events.push(json!({"type":"STEP_FINISHED","stepName":name}));
            }
            _ => {
                let id = format!("tool-{block}");
                events.push(stamp(rng, json!({"type":"TOOL_CALL_START","toolCallId":id,"toolCallName":"openToolSidePage","parentMessageId":"run-msg"})));
                let args = json!({"id": format!("t{block}"), "note": "x}{y"});
                match rng.below(3) {
                    0 => events.push(json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":args})),
                    1 => events.push(
                        json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":args.to_string()}),
                    ),
                    _ => {
                        let text = args.to_string();
                        let (a, b) = text.split_at(5);
                        events.push(json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":a}));
                        events.push(json!({"type":"TOOL_CALL_ARGS","toolCallId":id,"delta":b}));
                    }
                }
                events.push(json!({"type":"TOOL_CALL_END","toolCallId":id}));
                if rng.below(2) == 0 {
                    events.push(json!({"type":"TOOL_CALL_RESULT","messageId":format!("r{block}"),"toolCallId":id,"content":"done"}));
                }
            }
        }
    }
    let mut end = json!({"type":"RUN_FINISHED"});
    if run_extra {
        end["messageId"] = "run-msg".into();
        end["role"] = "assistant".into();
    }
    events.push(stamp(rng, end));
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

fn random_output(rng: &mut Rng, texts: &[&str]) -> Value {
    let text = texts[rng.below(texts.len())];
    let thinking_type = ["thinking", "think"][rng.below(2)];
    let position = ["start", "end"][rng.below(2)];
    let (elapsed, still_thinking, progress) = (rng.below(9), rng.below(2) == 0, rng.below(100));
    let mut object = match rng.below(9) {
        0..=2 => json!({"output":{"type":"text","content":text}}),
        3 => {
            json!({"output":{"type":thinking_type,"data":{"content":text,"elapsed":elapsed,"thinking":still_thinking,"collapse":true}}})
        }
        4 => {
            json!({"output":{"type":"toolCallShow","id":"tool-1","data":{"title":"查询","icon":"search","tools":[{"id":"tool-1","name":"查询","description":text,"progress":progress}]}}})
        }
        5 => {
            json!({"output":{"type":"fold","data":{"title":text,"fold":false,"position":position}}})
        }
        6 => json!({"output":{"type":"button","data":{"name":text}}}),
        7 => {
            json!({"output":{"type":"icon","data":{"icon":"check","color":"#0a0"}},"style":{"background":true}})
        }
        _ => json!({"output":{"type":"chart","data":{"series":[1,2,3]}}}),
    };
    if rng.below(3) == 0 {
        object["blockId"] = format!("b{}", rng.below(3)).into();
    }
    if rng.below(4) == 0 {
        object["layout"] = json!({"x": 0});
    }
    object
}

/// The fields (`delta`, and for variant 2 `blockId`/`style`) of the CONTENT events carrying
/// `objects`.
fn business_deltas(
    rng: &mut Rng,
    objects: Vec<Value>,
    variant: Variant,
) -> Vec<Vec<(&'static str, Value)>> {
    match variant {
        Variant::JsonString if objects.len() > 1 && rng.below(2) == 0 => {
            let text: String = objects.iter().map(Value::to_string).collect();
            vec![vec![("delta", text.into())]]
        }
        Variant::JsonString => objects
            .into_iter()
            .map(|o| vec![("delta", o.to_string().into())])
            .collect(),
        Variant::Object => objects
            .into_iter()
            .map(|mut o| {
                let mut fields = Vec::new();
                for key in ["blockId", "style"] {
                    if let Some(v) = o.as_object_mut().and_then(|m| m.remove(key)) {
                        fields.push((key, v));
                    }
                }
                fields.push(("delta", o));
                fields
            })
            .collect(),
        Variant::Plain => objects
            .into_iter()
            .map(|o| {
                let plain =
                    o.as_object().is_some_and(|m| m.len() == 1) && o["output"]["type"] == "text";
                if plain {
                    vec![("delta", o["output"]["content"].clone())]
                } else {
                    vec![("delta", o.to_string().into())]
                }
            })
            .collect(),
    }
}
