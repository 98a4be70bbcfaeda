//! Driving one client × upstream pair through the real gateway, whatever the two dialects: the
//! route a pair needs in a config file, a minimal AAP agent around scripted turns, the request a
//! client of each dialect sends to start a run, and what that client got back.
//!
//! The tests that go over all nine pairs (`fault_matrix`, `robustness`) share these, so that a
//! pair is set up and read the same way in each.

use std::sync::atomic::{AtomicUsize, Ordering};

use dialect_proxy::dialect::Dialect;
use serde_json::{json, Value};

use super::aap::{parse_aap_stream, AapClient};
use super::{send, Gateway, RecordedRequest, Request, Script};

/// One `[[routes]]` entry at `path` with `client` in front of `url`, an upstream of
/// `upstream`'s dialect; `limits` is the body of its `[routes.limits]`. An AAP face is named
/// `support`; an AAP agent upstream is asked for its agent `scripted`.
pub fn route(client: Dialect, upstream: Dialect, path: &str, url: &str, limits: &str) -> String {
    let mut route = format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"{}\"\nupstream = \"{url}\"\n\
         upstream_dialect = \"{}\"\n\n[routes.limits]\n{limits}\n",
        client.as_str(),
        upstream.as_str()
    );
    if client == Dialect::Aap {
        route.push_str("\n[routes.aap]\nname = \"support\"\n");
    }
    if upstream == Dialect::Aap {
        route.push_str("\n[routes.aap_upstream]\nagent = \"scripted\"\n");
    }
    route
}

/// The path an upstream of `dialect` is served at: an AAP agent's base URL, or an agent's
/// endpoint.
pub fn upstream_path(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Aap => "/v1",
        _ => "/agent",
    }
}

/// What a minimal AAP v3 agent answers besides its turns: `GET …/meta` (one agent, `scripted`,
/// streaming `delta` and `message`, taking client tools), `POST …/sessions` (`sess_<n>`, counted
/// in `sessions`), 404 for anything else. `None` for a turn (`POST …/turns`): the caller
/// scripts those.
pub fn aap_agent_besides_turns(
    request: &RecordedRequest,
    sessions: &AtomicUsize,
) -> Option<Script> {
    if request.path.ends_with("/meta") {
        let meta = json!({"version": 3, "agents": [{"name": "scripted", "version": "1.0.0",
            "capabilities": {"stream": {"delta": {}, "message": {}},
                             "application": {"tools": {}}}}]});
        return Some(Script::status_body(
            200,
            "application/json",
            meta.to_string(),
        ));
    }
    if request.method == "POST" && request.path.ends_with("/sessions") {
        let n = sessions.fetch_add(1, Ordering::Relaxed);
        let created = json!({"sessionId": format!("sess_{n}")});
        return Some(Script::status_body(
            201,
            "application/json",
            created.to_string(),
        ));
    }
    if request.method == "POST" && request.path.ends_with("/turns") {
        return None;
    }
    Some(Script::status_body(
        404,
        "application/json",
        r#"{"error":"not found"}"#,
    ))
}

/// The request a client of `dialect` sends to start a run on `route` saying `text` (an AAP turn
/// in `aap_mode`, on a session created first).
pub async fn run_request(
    dialect: Dialect,
    gateway: &Gateway,
    route: &str,
    text: &str,
    aap_mode: &str,
) -> Request {
    let message = json!({"id": "u1", "role": "user", "content": text});
    match dialect {
        Dialect::AgUi => {
            let body = json!({"threadId": "t", "runId": "r", "state": {}, "tools": [],
                "context": [], "forwardedProps": {}, "messages": [message]});
            Request::post_json(route, body.to_string())
        }
        Dialect::Hai => {
            let body = json!({"threadId": "t", "runId": "r", "tools": [], "context": [],
                "forwardedProps": {}, "messages": [message]});
            Request::post_json(route, body.to_string())
        }
        Dialect::Aap => {
            let aap = AapClient::new(gateway.addr, route, None);
            let session = aap.new_session(json!({"agent": {"name": "support"}})).await;
            let turn = json!({"stream": aap_mode,
                "messages": [{"role": "user", "content": text}]});
            aap.turn_request(&session, &turn)
        }
    }
}

/// What a client got for one run, read to its end.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub async fn of(gateway: &Gateway, request: &Request) -> Answer {
        let mut response = send(gateway.addr, request).await;
        let status = response.status;
        let body = response.read_to_end().await.to_vec();
        Answer { status, body }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The code of a JSON error answer: `{"error": {"code": …}}`, or an AAP face's
    /// `{"error": "<CODE>: <message>"}`.
    pub fn error_code(&self) -> Option<String> {
        let error: Value = serde_json::from_slice(&self.body).ok()?;
        match &error["error"] {
            Value::String(text) => text.split(':').next().map(str::to_owned),
            object => object["code"].as_str().map(str::to_owned),
        }
    }

    /// The text a client of `dialect` was shown and how its streamed run ended: the code of a
    /// `RUN_ERROR` (AAP: `"error"` for an `error` stop), `None` for a success. Panics unless the
    /// stream is strictly its dialect's, with one terminal, last.
    pub fn streamed(&self, dialect: Dialect) -> (String, Option<String>) {
        let text = self.text();
        if dialect == Dialect::Aap {
            // Strict: `turn_start` first, one `turn_stop`, last.
            let events = parse_aap_stream(&self.body);
            let said: String = events
                .iter()
                .filter(|(name, _)| name == "text_delta")
                .filter_map(|(_, data)| data["delta"].as_str())
                .collect();
            let stop = &events.last().expect("a turn_stop").1["stopReason"];
            return (said, (stop == "error").then(|| "error".to_owned()));
        }
        let events: Vec<Value> = text
            .split("\n\n")
            .filter_map(|block| block.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
            .collect();
        let is_terminal =
            |e: &Value| matches!(e["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"));
        assert_eq!(
            events.iter().filter(|e| is_terminal(e)).count(),
            1,
            "one terminal event: {text}"
        );
        let last = events.last().expect("events");
        assert!(is_terminal(last), "the terminal is last: {text}");
        let deltas: String = events
            .iter()
            .filter(|e| {
                matches!(
                    e["type"].as_str(),
                    Some("TEXT_MESSAGE_CONTENT" | "BUSINESS_DATA_CONTENT")
                )
            })
            .filter_map(|e| e["delta"].as_str())
            .collect();
        let said = match dialect {
            // Business data: `{"output":{"type":"text","content":…}}` objects, back to back.
            Dialect::Hai => serde_json::Deserializer::from_str(&deltas)
                .into_iter::<Value>()
                .map(|output| output.unwrap_or_else(|e| panic!("{e}: {deltas}")))
                .filter_map(|output| output["output"]["content"].as_str().map(str::to_owned))
                .collect(),
            _ => deltas,
        };
        let error = (last["type"] == "RUN_ERROR")
            .then(|| last["code"].as_str().unwrap_or("<no code>").to_owned());
        (said, error)
    }
}
