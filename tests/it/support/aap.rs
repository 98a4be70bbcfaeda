//! An AAP v3 client for the tests (`aap.md` §1–§5), over real TCP through `support::client`.
//!
//! - [`AapClient`]: one method per endpoint of `aap.md` §2, plus a raw [`AapClient::request`] for
//!   malformed input. Every request carries `connection: close`, so a body is always read to the
//!   server's close (a `204` can then be checked to be really empty).
//! - [`Reply`]: status, `content-type`, the JSON body, or — for a streaming turn — the SSE events
//!   as `(event name, data)` pairs, parsed strictly by [`parse_aap_stream`] (§3.2 framing, §3.3
//!   data shapes, one `turn_start` first and one `turn_stop` last).
//! - [`events_to_messages`]: rebuilds the AAP messages of a streamed turn the way the reference
//!   SDK's `sseEventsToMessages` does (§3.3), so a streamed turn can be compared with a
//!   `stream: "none"` turn and with the history.
//! - Message helpers ([`content_text`], [`assistant_text`], [`tool_uses`], [`normalise_call_ids`],
//!   [`assert_no_dangling_tool_use`]) and gateway helpers ([`spawn_gateway`],
//!   [`spawn_gateway_with_env`], [`spawn_with_config`]).
//!
//! Written from the spec, independently of the gateway's AAP codec, so it can catch the codec's
//! mistakes rather than repeat them.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::atomic::{AtomicUsize, Ordering},
};

use serde_json::{json, Map, Value};

use super::{
    client::{BodyEnd, Response},
    send, Gateway, Request,
};

/// The stop reasons of `aap.md` §3.4.
pub const STOP_REASONS: [&str; 5] = ["end_turn", "tool_use", "max_tokens", "refusal", "error"];

/// The gateway's confirm tool (`translation.md` §6.1), declared to the agent after the client
/// tools.
pub const CONFIRM_TOOL: &str = "confirmAction";

/// What an AAP endpoint answered.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    /// The body parsed as JSON; `None` when the body is empty, not JSON, or an event stream.
    pub json: Option<Value>,
    /// The `(event name, data)` pairs of a `200 text/event-stream` body.
    pub events: Option<Vec<(String, Value)>>,
    /// The whole body as text, for failure messages.
    pub text: String,
}

impl Reply {
    /// Reads `response` to its end. A `200 text/event-stream` body must end cleanly and is parsed
    /// strictly (see [`parse_aap_stream`]).
    pub async fn read(mut response: Response) -> Reply {
        let status = response.status;
        let content_type = response.header("content-type").map(str::to_owned);
        let body = response.read_to_end().await.to_vec();
        let text = String::from_utf8_lossy(&body).into_owned();
        let is_sse = content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if status == 200 && is_sse {
            assert_eq!(
                response.body_end(),
                Some(&BodyEnd::Clean),
                "the turn stream must end cleanly after turn_stop; body:\n{text}"
            );
            let events = parse_aap_stream(&body);
            return Reply {
                status,
                content_type,
                json: None,
                events: Some(events),
                text,
            };
        }
        let json = serde_json::from_slice(&body).ok();
        Reply {
            status,
            content_type,
            json,
            events: None,
            text,
        }
    }

    /// Panics unless the status is `status`.
    pub fn expect(&self, status: u16) -> &Reply {
        assert_eq!(
            self.status, status,
            "expected HTTP {status}, got {}: {}",
            self.status, self.text
        );
        self
    }

    /// Panics unless the status is `status` and the body is a JSON document; returns it.
    pub fn expect_json(&self, status: u16) -> &Value {
        self.expect(status);
        assert!(
            self.content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("application/json")),
            "HTTP {status} must be application/json, got {:?}: {}",
            self.content_type,
            self.text
        );
        self.json
            .as_ref()
            .unwrap_or_else(|| panic!("HTTP {status} body is not JSON: {:?}", self.text))
    }

    /// Panics unless this is an `application/json` error `{"error": "<non-empty text>"}` with
    /// status `status`; returns the error text.
    pub fn expect_error(&self, status: u16) -> String {
        let body = self.expect_json(status);
        let text = body["error"].as_str().unwrap_or_else(|| {
            panic!("HTTP {status} body must be {{\"error\": \"<text>\"}}, got {body}")
        });
        assert!(!text.trim().is_empty(), "empty error text: {body}");
        text.to_owned()
    }

    /// As [`Reply::expect_error`], and the error text must contain `needle`.
    pub fn expect_error_naming(&self, status: u16, needle: &str) -> String {
        let text = self.expect_error(status);
        assert!(
            text.contains(needle),
            "the HTTP {status} error should name {needle:?}; got {text:?}"
        );
        text
    }

    /// The events of a `200 text/event-stream` turn.
    pub fn expect_events(&self) -> &[(String, Value)] {
        self.expect(200);
        self.events.as_deref().unwrap_or_else(|| {
            panic!(
                "expected a text/event-stream turn, got {:?}: {}",
                self.content_type, self.text
            )
        })
    }

    /// The `(stopReason, messages)` of a turn, whichever mode answered it: the JSON body of a
    /// `stream: "none"` turn, or [`events_to_messages`] of a streamed one.
    pub fn turn_messages(&self) -> (String, Vec<Value>) {
        if let Some(events) = &self.events {
            return events_to_messages(events);
        }
        let body = self.expect_json(200);
        let stop = body["stopReason"]
            .as_str()
            .unwrap_or_else(|| panic!("no stopReason in {body}"))
            .to_owned();
        assert!(STOP_REASONS.contains(&stop.as_str()), "stopReason {stop:?}");
        let messages = body["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("no messages array in {body}"))
            .clone();
        (stop, messages)
    }

    /// `sessionId` of a `201` create reply, checked to be `sess_` + 32 lowercase hex.
    pub fn session_id(&self) -> String {
        let body = self.expect_json(201);
        let id = body["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId in {body}"))
            .to_owned();
        let hex = id.strip_prefix("sess_").unwrap_or("");
        assert!(
            hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "sessionId must be sess_ + 32 lowercase hex, got {id:?}"
        );
        id
    }
}

/// An AAP v3 client for one agent endpoint (`http://addr<prefix>`).
#[derive(Clone, Debug)]
pub struct AapClient {
    pub addr: SocketAddr,
    pub prefix: String,
    pub api_key: Option<String>,
}

impl AapClient {
    /// `prefix` is the route path (`""` or `"/"` for the root, `"/v1"`); with `api_key` every
    /// request carries `Authorization: Bearer <key>`.
    pub fn new(addr: SocketAddr, prefix: &str, api_key: Option<&str>) -> AapClient {
        AapClient {
            addr,
            prefix: prefix.trim_end_matches('/').to_owned(),
            api_key: api_key.map(str::to_owned),
        }
    }

    /// The same endpoint with another key (or none).
    pub fn with_key(&self, api_key: Option<&str>) -> AapClient {
        AapClient::new(self.addr, &self.prefix, api_key)
    }

    /// The request for `method path` (path relative to the prefix) with `body`.
    pub fn build(&self, method: &str, path: &str, body: &[u8]) -> Request {
        let mut request =
            Request::new(method, &format!("{}{path}", self.prefix)).header("connection", "close");
        if let Some(key) = &self.api_key {
            request = request.header("authorization", &format!("Bearer {key}"));
        }
        if !body.is_empty() {
            request = request
                .header("content-type", "application/json")
                .body(body.to_vec());
        }
        request
    }

    /// Any request, e.g. malformed JSON or an unsupported method.
    pub async fn request(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        Reply::read(send(self.addr, &self.build(method, path, body)).await).await
    }

    async fn json_request(&self, method: &str, path: &str, body: &Value) -> Reply {
        self.request(method, path, body.to_string().as_bytes())
            .await
    }

    pub async fn meta(&self) -> Reply {
        self.request("GET", "/meta", b"").await
    }

    pub async fn list_sessions(&self, after: Option<&str>) -> Reply {
        let path = match after {
            Some(cursor) => format!("/sessions?after={cursor}"),
            None => "/sessions".to_owned(),
        };
        self.request("GET", &path, b"").await
    }

    pub async fn create_session(&self, body: Value) -> Reply {
        self.json_request("POST", "/sessions", &body).await
    }

    /// Creates a session and returns its id (panics unless `201`).
    pub async fn new_session(&self, body: Value) -> String {
        self.create_session(body).await.session_id()
    }

    pub async fn get_session(&self, id: &str) -> Reply {
        self.request("GET", &format!("/sessions/{id}"), b"").await
    }

    pub async fn delete_session(&self, id: &str) -> Reply {
        self.request("DELETE", &format!("/sessions/{id}"), b"")
            .await
    }

    /// `GET /sessions/:id/history`, with `?type=` only when `type_` is given.
    pub async fn history(&self, id: &str, type_: Option<&str>) -> Reply {
        let path = match type_ {
            Some(t) => format!("/sessions/{id}/history?type={t}"),
            None => format!("/sessions/{id}/history"),
        };
        self.request("GET", &path, b"").await
    }

    /// The `full` history of a session (panics unless `200`).
    pub async fn full_history(&self, id: &str) -> Vec<Value> {
        let reply = self.history(id, Some("full")).await;
        let body = reply.expect_json(200);
        body["history"]["full"]
            .as_array()
            .unwrap_or_else(|| panic!("no history.full array in {body}"))
            .clone()
    }

    /// The request of a turn; streaming turns also send `Accept: text/event-stream`, as the
    /// reference client does.
    pub fn turn_request(&self, id: &str, body: &Value) -> Request {
        let mut request = self.build(
            "POST",
            &format!("/sessions/{id}/turns"),
            body.to_string().as_bytes(),
        );
        if matches!(body["stream"].as_str(), Some("delta" | "message")) {
            request = request.header("accept", "text/event-stream");
        }
        request
    }

    /// Posts a turn and reads the whole reply.
    pub async fn turn(&self, id: &str, body: Value) -> Reply {
        Reply::read(self.open_turn(id, &body).await).await
    }

    /// Posts a turn and returns once the response head has arrived, for reading a stream while
    /// the turn is still running ([`wait_for_event`], then [`Reply::read`]).
    pub async fn open_turn(&self, id: &str, body: &Value) -> Response {
        send(self.addr, &self.turn_request(id, body)).await
    }
}

/// `{"stream": mode, "messages": [{"role": "user", "content": text}]}`.
pub fn user_turn(mode: &str, text: &str) -> Value {
    json!({"stream": mode, "messages": [{"role": "user", "content": text}]})
}

/// Reads `response` until an `event: <name>` line has arrived (panics if the body ends first).
pub async fn wait_for_event(response: &mut Response, name: &str) {
    let line = format!("event: {name}\n");
    loop {
        let received = String::from_utf8_lossy(response.raw_body()).replace("\r\n", "\n");
        if received.starts_with(&line) || received.contains(&format!("\n{line}")) {
            return;
        }
        assert!(
            response.read_more().await,
            "the stream ended before an {name:?} event:\n{received}"
        );
    }
}

/// Parses an AAP turn stream strictly (`aap.md` §3.2, §3.3) and returns its `(event, data)`
/// pairs. Panics, showing the body, unless:
///
/// - every event block has exactly one `event: <name>` line and exactly one `data:` line and no
///   other field; comment lines (`: …`) are allowed anywhere and skipped; a block of comments
///   only is a heartbeat;
/// - every `data:` is compact (no whitespace outside strings) JSON, an object without an
///   `"event"` key, with the fields §3.3 gives the event name;
/// - `turn_start` comes first, and there is exactly one `turn_stop`, the last event.
pub fn parse_aap_stream(body: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(body)
        .unwrap_or_else(|e| panic!("the turn stream is not UTF-8 ({e})"))
        .replace("\r\n", "\n");
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name: Option<&str> = None;
        let mut data: Option<&str> = None;
        for line in block.split('\n').filter(|l| !l.is_empty()) {
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            let slot = match field {
                "event" => &mut name,
                "data" => &mut data,
                other => bad_stream(&text, format!("field {other:?} in block {block:?}")),
            };
            if slot.replace(value).is_some() {
                bad_stream(&text, format!("repeated {field:?} line in block {block:?}"));
            }
        }
        match (name, data) {
            (None, None) => {}
            (Some(name), Some(data)) => events.push(parse_event(name, data, &text)),
            _ => bad_stream(
                &text,
                format!("block {block:?} needs one event: and one data: line"),
            ),
        }
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    if names.first() != Some(&"turn_start") {
        bad_stream(&text, format!("turn_start must come first; got {names:?}"));
    }
    let stops = names.iter().filter(|n| **n == "turn_stop").count();
    if stops != 1 || names.last() != Some(&"turn_stop") {
        bad_stream(&text, format!("exactly one turn_stop, last; got {names:?}"));
    }
    if names.iter().filter(|n| **n == "turn_start").count() != 1 {
        bad_stream(&text, format!("exactly one turn_start; got {names:?}"));
    }
    events
}

fn bad_stream(body: &str, why: String) -> ! {
    panic!("bad AAP stream: {why}\n--- body ---\n{body}")
}

/// One event's data, checked against its name (`aap.md` §3.3); `body` is the whole stream, for
/// the failure message.
fn parse_event(name: &str, data: &str, body: &str) -> (String, Value) {
    if !super::is_compact_json(data) {
        bad_stream(body, format!("{name}: data is not compact JSON: {data}"));
    }
    let value: Value = serde_json::from_str(data)
        .unwrap_or_else(|e| bad_stream(body, format!("{name}: data is not JSON ({e}): {data}")));
    let Some(object) = value.as_object() else {
        bad_stream(body, format!("{name}: data is not an object: {data}"));
    };
    if object.contains_key("event") {
        bad_stream(body, format!("{name}: data repeats the event name: {data}"));
    }
    let string = |key: &str| object.get(key).and_then(Value::as_str);
    let ok = match name {
        "turn_start" => object.is_empty(),
        "text_delta" | "thinking_delta" => string("delta").is_some_and(|d| !d.is_empty()),
        "text" => string("text").is_some(),
        "thinking" => string("thinking").is_some(),
        "tool_call" => {
            string("toolCallId").is_some_and(|id| !id.is_empty())
                && string("name").is_some_and(|n| !n.is_empty())
                && object.get("input").is_some_and(Value::is_object)
        }
        "tool_result" => {
            string("toolCallId").is_some_and(|id| !id.is_empty())
                && object
                    .get("content")
                    .is_some_and(|c| c.is_string() || c.is_array())
        }
        "turn_stop" => string("stopReason").is_some_and(|s| STOP_REASONS.contains(&s)),
        other => bad_stream(body, format!("unknown event {other:?}: {data}")),
    };
    if !ok {
        bad_stream(
            body,
            format!("{name}: data does not have the fields of aap.md §3.3: {data}"),
        );
    }
    (name.to_owned(), value)
}

/// Rebuilds `(stopReason, messages)` from a turn's events as the reference SDK's
/// `sseEventsToMessages` does (`aap.md` §3.3): `text_delta`/`thinking_delta` accumulate and are
/// flushed into a block at every non-delta event; `text`/`thinking` are whole blocks; `tool_call`
/// adds a `tool_use` block; `tool_result` closes the assistant message and adds a `tool` message;
/// `turn_stop` closes the assistant message and gives the stop reason (`"error"` without one).
///
/// One deliberate difference (SDK deviation 5 of `aap.md` §7): a switch between thinking and
/// text deltas also flushes, so blocks keep their stream order instead of text-before-thinking.
pub fn events_to_messages(events: &[(String, Value)]) -> (String, Vec<Value>) {
    let mut messages = Vec::new();
    let mut blocks: Vec<Value> = Vec::new();
    let mut pending: Option<(&'static str, String)> = None;
    let mut stop = "error".to_owned();
    let flush = |pending: &mut Option<(&'static str, String)>, blocks: &mut Vec<Value>| {
        if let Some((kind, text)) = pending.take() {
            if !text.is_empty() {
                blocks.push(json!({"type": kind, kind: text}));
            }
        }
    };
    let close = |blocks: &mut Vec<Value>, messages: &mut Vec<Value>| {
        if !blocks.is_empty() {
            messages.push(json!({"role": "assistant", "content": std::mem::take(blocks)}));
        }
    };
    for (name, data) in events {
        let delta_kind = match name.as_str() {
            "text_delta" => Some("text"),
            "thinking_delta" => Some("thinking"),
            _ => None,
        };
        if pending.as_ref().map(|(kind, _)| Some(*kind)) != Some(delta_kind) {
            flush(&mut pending, &mut blocks);
        }
        match name.as_str() {
            "text_delta" | "thinking_delta" => {
                let kind = delta_kind.unwrap();
                let delta = data["delta"].as_str().unwrap_or_default();
                pending
                    .get_or_insert_with(|| (kind, String::new()))
                    .1
                    .push_str(delta);
            }
            "text" => blocks.push(json!({"type": "text", "text": data["text"]})),
            "thinking" => blocks.push(json!({"type": "thinking", "thinking": data["thinking"]})),
            "tool_call" => blocks.push(json!({
                "type": "tool_use",
                "toolCallId": data["toolCallId"],
                "name": data["name"],
                "input": data["input"],
            })),
            "tool_result" => {
                close(&mut blocks, &mut messages);
                messages.push(json!({
                    "role": "tool",
                    "toolCallId": data["toolCallId"],
                    "content": data["content"],
                }));
            }
            "turn_stop" => {
                stop = data["stopReason"].as_str().unwrap_or("error").to_owned();
                close(&mut blocks, &mut messages);
                break;
            }
            _ => {}
        }
    }
    (stop, messages)
}

/// The event names of a turn, in order.
pub fn event_names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

/// The `stopReason` of the `turn_stop` event.
pub fn stop_reason(events: &[(String, Value)]) -> &str {
    events
        .iter()
        .find(|(name, _)| name == "turn_stop")
        .and_then(|(_, data)| data["stopReason"].as_str())
        .expect("a turn_stop event")
}

/// The text of a message `content`: the string itself, or its text blocks joined by newlines.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of every assistant message, joined by newlines.
pub fn assistant_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| content_text(&m["content"]))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `tool_use` block of the assistant messages, in order.
pub fn tool_uses(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .cloned()
        .collect()
}

/// The `tool` message answering `call_id`, if any.
pub fn tool_message<'a>(messages: &'a [Value], call_id: &str) -> Option<&'a Value> {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["toolCallId"] == call_id)
}

/// The block types of each assistant message, e.g. `[["thinking","text","tool_use"],["text"]]`.
pub fn block_types(messages: &[Value]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| match &m["content"] {
            Value::String(_) => vec!["text".to_owned()],
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| b["type"].as_str().unwrap_or("?").to_owned())
                .collect(),
            _ => vec![],
        })
        .collect()
}

/// `messages` with every `toolCallId` replaced by `call#<n>` in order of first appearance, and
/// string contents turned into one text block, so that turns of different sessions and modes
/// compare equal when they say the same thing.
pub fn normalise_call_ids(messages: &[Value]) -> Vec<Value> {
    fn walk(value: &mut Value, ids: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(id)) = map.get_mut("toolCallId") {
                    let n = match ids.iter().position(|known| known == id) {
                        Some(n) => n,
                        None => {
                            ids.push(id.clone());
                            ids.len() - 1
                        }
                    };
                    *id = format!("call#{n}");
                }
                if map.get("role").is_some_and(|r| r == "assistant") {
                    if let Some(Value::String(text)) = map.get("content") {
                        let block = json!([{"type": "text", "text": text}]);
                        map.insert("content".into(), block);
                    }
                }
                map.values_mut().for_each(|v| walk(v, ids));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, ids)),
            _ => {}
        }
    }
    let mut ids = Vec::new();
    let mut out = messages.to_vec();
    out.iter_mut().for_each(|m| walk(m, &mut ids));
    out
}

/// Every `tool_use` block in `history` is answered by a later `tool` message.
pub fn assert_no_dangling_tool_use(history: &[Value]) {
    for (i, message) in history.iter().enumerate() {
        for call in tool_uses(std::slice::from_ref(message)) {
            let id = call["toolCallId"].as_str().unwrap_or_default();
            assert!(
                tool_message(&history[i + 1..], id).is_some(),
                "tool_use {call} has no tool message after it in the history:\n{}",
                Value::Array(history.to_vec())
            );
        }
    }
}

/// The roles of `messages`, in order.
pub fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("<no role>"))
        .collect()
}

/// `{"name": name, "description": description, "parameters": {"type":"object","properties":{}}}`.
pub fn tool_spec(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description,
           "parameters": {"type": "object", "properties": {}}})
}

/// [`Gateway::spawn`]; the gateway helper of the AAP tests.
pub fn spawn_gateway(args: &[&str]) -> Gateway {
    Gateway::spawn(args)
}

/// [`Gateway::spawn`] with the environment variable `name` set to `value` for the child only:
/// the environment of the test process, which every test shares, is never changed.
pub fn spawn_gateway_with_env(args: &[&str], name: &str, value: &str) -> Gateway {
    Gateway::spawn_with_env(args, &[(name, value)])
}

/// Writes `toml` to a fresh file, runs `dialect-proxy serve --config <file>`, and removes the
/// file once the gateway listens (it reads the file only at startup).
pub fn spawn_with_config(toml: &str) -> Gateway {
    let config = super::ConfigFile::new("aap", toml);
    spawn_gateway(&["--config", config.arg()])
}

/// A config with one AAP route at `/v1`, agent `support`, in front of the AG-UI agent at
/// `upstream`, and `sessions` as the body of its `[sessions]` table.
pub fn face_config(upstream: &str, sessions: &str) -> String {
    format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{upstream}"

[routes.aap]
name = "support"

[sessions]
{sessions}
"#
    )
}

/// The object `value` as a map (panics otherwise).
pub fn object(value: &Value) -> &Map<String, Value> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("expected a JSON object, got {value}"))
}

/// `(role, text)` of each AG-UI message (string content, or its text parts joined).
pub fn agui_texts(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap_or_else(|| panic!("AG-UI messages must be an array: {messages}"))
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect()
}
