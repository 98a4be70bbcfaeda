//! `AapAgent`: a scripted AAP v3 agent server (`aap.md`) for testing the gateway as an AAP
//! **client** (`translation.md` §4.3–§4.4): a real HTTP/1.1 server on `127.0.0.1:0` that serves
//! the AAP endpoints under a base path (default `/v1`):
//!
//! - `GET /meta` — a configurable document (version, agent name, stream modes, image and history
//!   capabilities, server tools, options; or a whole replacement);
//! - `GET|POST /sessions`, `GET|DELETE /sessions/:id`, `GET /sessions/:id/history?type=` —
//!   sessions `sess_<n>` (n from 1) holding the agent config, client tools and the stored
//!   history (seed + each turn's input + what each turn generated; a `tool_permission` is never
//!   stored, a grant stores the tool's output and a denial `"Tool use denied[: reason]"`, as SDK
//!   0.8.0 does, `aap.md` §4 and §7);
//! - `POST /sessions/:id/turns` — answered by a behaviour: the built-in model (see
//!   [`model_reply`]) or a script `Fn(&TurnCtx) -> TurnReply`, rendered in the mode the body
//!   asks (SSE `delta` / `message`, JSON `none`) with exact §3.2 framing, or with the quirks a
//!   [`TurnReply`] asks for.
//!
//! Every request is recorded in order ([`AapAgent::requests`]). Every body is checked
//! (`validate.rs`): an invalid one gets 400 `{"error": …}`; invalid bodies and the things the
//! gateway must never do (roles other than user/tool/tool_permission in a turn, `confirm:` ids or
//! the confirm tool reaching the agent, a `"***"` secret, an incomplete or misclassified answer
//! to a `tool_use` stop, an undeclared stream mode, use of a `version ≠ 3` agent, …) are
//! collected as *violations* ([`AapAgent::assert_no_violations`]).
//!
//! Bodies of JSON answers carry `content-length`; streams are chunked, one chunk per event.
//! Connections are kept alive unless the request says `connection: close`. If the peer closes a
//! connection while an answer is still being written (or stalled), that is counted as a
//! cancellation ([`AapAgent::wait_for_cancellation`]). Dropping the agent stops the server.
//!
//! Layout: this file holds the public surface (builder, accessors, [`TurnCtx`]);
//! `aap_agent/handle.rs` the state and the endpoints; `http.rs` the HTTP/1.1 wire;
//! `reply.rs` [`TurnReply`] and its rendering per mode; `model.rs` the built-in model;
//! `validate.rs` the body checks.

mod handle;
mod http;
mod model;
mod reply;
mod validate;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use serde_json::{json, Map, Value};
use tokio::{net::TcpListener, sync::watch};

pub use handle::pending_calls;
pub use model::{model_reply, GET_WEATHER, WEB_FETCH};
pub use reply::{frame, Ending, StreamMode, TurnReply};

use handle::{Shared, State};
use validate::agent_specs;

use super::{header_value, header_values};

/// The output of a server tool the agent runs (inline when trusted, or on a granted
/// permission): `web_fetch` → `"Content of <url>"`, any other tool → `"<name> done"`.
pub fn server_tool_output(name: &str, input: &Value) -> String {
    if name == WEB_FETCH {
        format!("Content of {}", input["url"].as_str().unwrap_or_default())
    } else {
        format!("{name} done")
    }
}

/// The `web_fetch` server tool spec of the default `/meta`.
pub fn web_fetch_spec() -> Value {
    json!({
        "name": WEB_FETCH,
        "description": "Fetch a URL and return its content",
        "parameters": {"type": "object",
                       "properties": {"url": {"type": "string"}},
                       "required": ["url"]},
    })
}

// === TurnCtx ===

/// What a turn behaviour sees.
#[derive(Clone, Debug)]
pub struct TurnCtx {
    pub session_id: String,
    /// 0 for the session's first turn that reached the behaviour, then 1, 2, …
    pub turn_index: usize,
    /// The parsed (and valid) request body.
    pub body: Value,
    /// The mode the body asks for.
    pub mode: StreamMode,
    /// The session's stored history before this turn.
    pub history: Vec<Value>,
    /// The calls the previous turn stopped on (`turn_stop: tool_use`): the `tool_use` blocks of
    /// the last assistant message of `history` without a `tool` message. Empty after any other
    /// stop. After creation: the unanswered calls of the seed's last assistant message.
    pub pending: Vec<Value>,
    /// The session's agent config with this turn's overrides applied: `{name, tools?, options?}`.
    pub agent: Value,
    /// The session's client tools with this turn's override applied.
    pub tools: Vec<Value>,
    call_ids: Arc<AtomicUsize>,
}

impl TurnCtx {
    /// The turn's input messages.
    pub fn input(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The text of the last user message of the input, if any.
    pub fn user_text(&self) -> Option<String> {
        self.input()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| super::aap::content_text(&m["content"]))
    }

    /// True if the session has the client tool `name`.
    pub fn has_client_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t["name"] == name)
    }

    /// True if `agent.tools` enables the server tool `name` with `trust: true`.
    pub fn server_tool_trusted(&self, name: &str) -> bool {
        self.agent["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["name"] == name && t["trust"] == true)
    }

    /// The pending `tool_use` block with this id.
    pub fn pending_call(&self, id: &str) -> Option<&Value> {
        self.pending.iter().find(|c| c["toolCallId"] == id)
    }

    /// A fresh tool call id, `call_<n>`, unique across the agent's sessions.
    pub fn new_call_id(&self) -> String {
        format!("call_{}", self.call_ids.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

type Script = dyn Fn(&TurnCtx) -> TurnReply + Send + Sync;

enum Behaviour {
    Model,
    Script(Box<Script>),
}

// === recording ===

/// A request as the agent received it, with the status it answered.
#[derive(Clone, Debug)]
pub struct AapRequest {
    pub method: String,
    /// The request target as sent (base path and query included).
    pub path: String,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body parsed as JSON (`None` if empty or not JSON).
    pub json: Option<Value>,
    /// The status the agent answered (200 also for a stream it then cut).
    pub status: u16,
    /// The session the path names, if any.
    pub session: Option<String>,
}

impl AapRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        header_values(&self.headers, name)
    }

    /// The parsed body (panics if it was not JSON).
    pub fn body_json(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| {
            panic!(
                "{} {}: body is not JSON: {:?}",
                self.method,
                self.path,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// True for `POST …/sessions/:id/turns`.
    pub fn is_turn(&self) -> bool {
        self.method == "POST"
            && self
                .path
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with("/turns")
    }
}

/// A session created with `201`.
#[derive(Clone, Debug)]
pub struct CreatedSession {
    pub session_id: String,
    /// The `POST /sessions` body.
    pub body: Value,
}

/// A snapshot of a live session.
#[derive(Clone, Debug)]
pub struct SessionState {
    pub session_id: String,
    /// `{name, tools?, options?}` with every override applied, secrets in clear.
    pub agent: Value,
    /// The client tools (`None` if never sent).
    pub tools: Option<Vec<Value>>,
    pub history: Vec<Value>,
    /// Turns that reached the behaviour.
    pub turns: usize,
}

// === builder ===

/// Configures an [`AapAgent`]; [`AapAgentBuilder::start`] runs it.
pub struct AapAgentBuilder {
    base: String,
    version: Value,
    agent_name: String,
    stream_modes: Option<Vec<String>>,
    image_http: bool,
    image_data: bool,
    history_types: Vec<String>,
    client_tools: bool,
    server_tools: Vec<Value>,
    options: Vec<Value>,
    meta: Option<Value>,
    bearer: Option<String>,
    confirm_tools: Vec<String>,
    behaviour: Behaviour,
}

impl Default for AapAgentBuilder {
    fn default() -> Self {
        AapAgentBuilder {
            base: "/v1".to_owned(),
            version: json!(3),
            agent_name: "scripted".to_owned(),
            stream_modes: Some(vec!["delta".into(), "message".into(), "none".into()]),
            image_http: false,
            image_data: false,
            history_types: vec!["full".into(), "compacted".into()],
            client_tools: true,
            server_tools: vec![web_fetch_spec()],
            options: vec![
                json!({"type": "text", "name": "model", "default": "fast"}),
                json!({"type": "secret", "name": "apiKey", "default": ""}),
            ],
            meta: None,
            bearer: None,
            confirm_tools: vec![super::aap::CONFIRM_TOOL.to_owned()],
            behaviour: Behaviour::Model,
        }
    }
}

impl AapAgentBuilder {
    /// The base path (default `/v1`; `""` for the root).
    pub fn base(mut self, base: &str) -> Self {
        self.base = base.trim_end_matches('/').to_owned();
        self
    }

    /// `meta.version` (default 3).
    pub fn version(mut self, version: u64) -> Self {
        self.version = json!(version);
        self
    }

    /// The agent's name (default `scripted`).
    pub fn agent_name(mut self, name: &str) -> Self {
        self.agent_name = name.to_owned();
        self
    }

    /// The declared stream modes; an empty list drops the `stream` key (⇒ `none` only).
    pub fn stream_modes(mut self, modes: &[&str]) -> Self {
        self.stream_modes = if modes.is_empty() {
            None
        } else {
            Some(modes.iter().map(|m| m.to_string()).collect())
        };
        self
    }

    /// Declares `capabilities.image.http` / `.data`.
    pub fn image(mut self, http: bool, data: bool) -> Self {
        self.image_http = http;
        self.image_data = data;
        self
    }

    /// The declared history types (default `full`, `compacted`).
    pub fn history_types(mut self, types: &[&str]) -> Self {
        self.history_types = types.iter().map(|t| t.to_string()).collect();
        self
    }

    /// Drops `capabilities.application.tools`.
    pub fn no_client_tools(mut self) -> Self {
        self.client_tools = false;
        self
    }

    /// The exposed server tools (default: `web_fetch`).
    pub fn server_tools(mut self, tools: Vec<Value>) -> Self {
        self.server_tools = tools;
        self
    }

    /// The agent's options (default: text `model` = `fast`, secret `apiKey` = `""`).
    pub fn options(mut self, options: Vec<Value>) -> Self {
        self.options = options;
        self
    }

    /// Serves exactly this `/meta` document (the other meta settings are then ignored).
    pub fn meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Every endpoint answers 401 `{"error":"Unauthorized"}` without
    /// `Authorization: Bearer <key>`.
    pub fn require_bearer(mut self, key: &str) -> Self {
        self.bearer = Some(key.to_owned());
        self
    }

    /// Another tool name that must never reach the agent (default: `confirmAction`).
    pub fn confirm_tool(mut self, name: &str) -> Self {
        self.confirm_tools.push(name.to_owned());
        self
    }

    /// Turns are answered by `script` instead of the built-in model.
    pub fn script<F>(mut self, script: F) -> Self
    where
        F: Fn(&TurnCtx) -> TurnReply + Send + Sync + 'static,
    {
        self.behaviour = Behaviour::Script(Box::new(script));
        self
    }

    /// The `/meta` document these settings give.
    pub fn meta_document(&self) -> Value {
        if let Some(meta) = &self.meta {
            return meta.clone();
        }
        let mut capabilities = Map::new();
        if let Some(modes) = &self.stream_modes {
            let modes: Map<String, Value> = modes.iter().map(|m| (m.clone(), json!({}))).collect();
            capabilities.insert("stream".into(), Value::Object(modes));
        }
        if self.client_tools {
            capabilities.insert("application".into(), json!({"tools": {}}));
        }
        let history: Map<String, Value> = self
            .history_types
            .iter()
            .map(|t| (t.clone(), json!({})))
            .collect();
        if !history.is_empty() {
            capabilities.insert("history".into(), Value::Object(history));
        }
        let mut image = Map::new();
        if self.image_http {
            image.insert("http".into(), json!({}));
        }
        if self.image_data {
            image.insert("data".into(), json!({}));
        }
        if !image.is_empty() {
            capabilities.insert("image".into(), Value::Object(image));
        }
        json!({
            "version": self.version,
            "agents": [{
                "name": self.agent_name,
                "version": "1.0.0",
                "tools": self.server_tools,
                "options": self.options,
                "capabilities": capabilities,
            }],
        })
    }

    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn start(self) -> AapAgent {
        let meta = self.meta_document();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the AAP agent");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            base: self.base,
            specs: agent_specs(&meta),
            meta,
            bearer: self.bearer,
            confirm_tools: self.confirm_tools,
            behaviour: self.behaviour,
            call_ids: Arc::new(AtomicUsize::new(0)),
            state: Mutex::new(State::default()),
            request_count: watch::channel(0).0,
            cancellations: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
        });
        let accept_shared = shared.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let conn = tokio::spawn(http::serve_connection(stream, accept_shared.clone()));
                accept_shared
                    .tasks
                    .lock()
                    .unwrap()
                    .push(conn.abort_handle());
            }
        });
        shared.tasks.lock().unwrap().push(accept.abort_handle());
        AapAgent { addr, shared }
    }
}

// === AapAgent ===

/// The scripted AAP v3 agent (see the module docs). Dropping it stops the server.
pub struct AapAgent {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl AapAgent {
    pub fn builder() -> AapAgentBuilder {
        AapAgentBuilder::default()
    }

    /// The default agent: built-in model, default `/meta`, base `/v1`.
    pub async fn start() -> AapAgent {
        AapAgent::builder().start().await
    }

    /// The default agent with turns answered by `script`.
    pub async fn scripted<F>(script: F) -> AapAgent
    where
        F: Fn(&TurnCtx) -> TurnReply + Send + Sync + 'static,
    {
        AapAgent::builder().script(script).start().await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base path, e.g. `/v1`.
    pub fn base(&self) -> &str {
        &self.shared.base
    }

    /// `http://127.0.0.1:PORT/v1`: what the gateway's `--upstream` should be.
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.addr, self.shared.base)
    }

    /// The `/meta` document served.
    pub fn meta(&self) -> Value {
        self.shared.meta.clone()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<AapRequest> {
        self.state().requests.clone()
    }

    /// How many `GET /meta` requests arrived.
    pub fn meta_calls(&self) -> usize {
        self.state().meta_calls
    }

    /// Every `POST /sessions` answered 201, in order.
    pub fn sessions_created(&self) -> Vec<CreatedSession> {
        self.state().created.clone()
    }

    /// The `messages` of every turn the agent received, in order.
    pub fn turn_messages(&self) -> Vec<Value> {
        self.all_turns()
            .iter()
            .map(|t| t.body_json()["messages"].clone())
            .collect()
    }

    /// Every turn request (any session, any status), in order.
    pub fn all_turns(&self) -> Vec<AapRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_turn())
            .collect()
    }

    /// The turn requests to `session` (any status), in order.
    pub fn turn_requests(&self, session: &str) -> Vec<AapRequest> {
        self.all_turns()
            .into_iter()
            .filter(|r| r.session.as_deref() == Some(session))
            .collect()
    }

    /// The bodies of the turn requests to `session` (`Null` for a body that was not JSON).
    pub fn turns(&self, session: &str) -> Vec<Value> {
        self.turn_requests(session)
            .into_iter()
            .map(|r| r.json.unwrap_or(Value::Null))
            .collect()
    }

    /// The ids of the live sessions, in creation order.
    pub fn session_ids(&self) -> Vec<String> {
        self.state().sessions.iter().map(|s| s.id.clone()).collect()
    }

    /// A snapshot of a live session.
    pub fn session(&self, id: &str) -> Option<SessionState> {
        self.state().session(id).map(|s| SessionState {
            session_id: s.id.clone(),
            agent: s.agent.clone(),
            tools: s.tools.clone(),
            history: s.history.clone(),
            turns: s.turns,
        })
    }

    /// The stored (full) history of a live session.
    pub fn history(&self, id: &str) -> Option<Vec<Value>> {
        self.state().session(id).map(|s| s.history.clone())
    }

    /// Forgets a session, as an agent restart would: its next turn gets 404. Returns whether it
    /// existed.
    pub fn lose_session(&self, id: &str) -> bool {
        let mut state = self.state();
        let before = state.sessions.len();
        state.sessions.retain(|s| s.id != id);
        state.sessions.len() != before
    }

    /// Everything the gateway did that it never should (see the module docs).
    pub fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }

    /// One session was created, each turn carried exactly one new user message, saying
    /// `said[i]` (nothing the agent had seen came again), and nothing broke the rules.
    pub fn assert_one_session_saw_each_once(&self, said: &[&str]) {
        assert_eq!(self.sessions_created().len(), 1);
        let expected: Vec<Value> = said
            .iter()
            .map(|text| json!([{"role": "user", "content": text}]))
            .collect();
        assert_eq!(self.turn_messages(), expected);
        self.assert_no_violations();
    }

    /// Panics with the violations and the requests if there are any.
    pub fn assert_no_violations(&self) {
        let state = self.state();
        if state.violations.is_empty() {
            return;
        }
        let requests: Vec<String> = state
            .requests
            .iter()
            .map(|r| {
                format!(
                    "  {} {} → {} {}",
                    r.method,
                    r.path,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                )
            })
            .collect();
        panic!(
            "the AAP agent saw {} protocol violation(s):\n  {}\nrequests:\n{}",
            state.violations.len(),
            state.violations.join("\n  "),
            requests.join("\n")
        );
    }

    /// How many times the peer closed a connection while an answer was still being written.
    pub fn cancellations(&self) -> usize {
        *self.shared.cancellations.borrow()
    }

    /// Waits until the peer has closed a connection mid-answer; false on timeout.
    pub async fn wait_for_cancellation(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.cancellations.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|c| *c >= 1)).await;
        waited.is_ok_and(|r| r.is_ok())
    }

    /// Waits until at least `n` requests have been handled; returns the `n`-th.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> AapRequest {
        let mut rx = self.shared.request_count.subscribe();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok());
        let count = *self.shared.request_count.borrow();
        assert!(
            reached,
            "AAP agent: expected {n} request(s) within {timeout:?}, got {count}"
        );
        self.state().requests[n - 1].clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap()
    }
}

impl Drop for AapAgent {
    fn drop(&mut self) {
        for task in self.shared.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}
