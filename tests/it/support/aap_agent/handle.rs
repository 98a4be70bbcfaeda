//! The agent's state and the answer to each request: routing under the base path, bearer auth,
//! `/meta`, sessions, history, and turns (validation, the batch rule for answers to a
//! `tool_use` stop, overrides, the behaviour, what is stored). Everything is decided while the
//! state is locked; `http.rs` writes the answer afterwards.

use std::sync::{atomic::AtomicUsize, Arc, Mutex};

use serde_json::{json, Value};
use tokio::{sync::watch, task::AbortHandle};

use super::{
    super::header_value,
    model_reply,
    reply::{Ending, Planned, StreamMode},
    server_tool_output,
    validate::{check_create, check_turn, AgentSpec, Problems},
    AapRequest, Behaviour, CreatedSession, TurnCtx,
};

pub(super) struct Session {
    pub(super) id: String,
    /// `{name, tools?, options?}`.
    pub(super) agent: Value,
    pub(super) tools: Option<Vec<Value>>,
    pub(super) history: Vec<Value>,
    pub(super) turns: usize,
    /// True after a turn that stopped on `tool_use` (and after creation, for a seed ending in
    /// unanswered calls): only then are calls pending.
    pub(super) awaiting_answers: bool,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) requests: Vec<AapRequest>,
    pub(super) sessions: Vec<Session>,
    pub(super) sessions_made: usize,
    pub(super) created: Vec<CreatedSession>,
    pub(super) violations: Vec<String>,
    pub(super) meta_calls: usize,
}

impl State {
    pub(super) fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == id)
    }

    fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }
}

pub(super) struct Shared {
    pub(super) base: String,
    pub(super) meta: Value,
    pub(super) specs: Vec<AgentSpec>,
    pub(super) bearer: Option<String>,
    pub(super) confirm_tools: Vec<String>,
    pub(super) behaviour: Behaviour,
    pub(super) call_ids: Arc<AtomicUsize>,
    pub(super) state: Mutex<State>,
    pub(super) request_count: watch::Sender<usize>,
    pub(super) cancellations: watch::Sender<usize>,
    pub(super) tasks: Mutex<Vec<AbortHandle>>,
}

/// A request off the wire.
pub(super) struct Incoming {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

/// One request being handled: its violations are prefixed with its method and path.
struct Exchange<'a> {
    incoming: &'a Incoming,
    violations: Vec<String>,
}

impl Exchange<'_> {
    fn violation(&mut self, problem: impl std::fmt::Display) {
        self.violations.push(format!(
            "{} {}: {problem}",
            self.incoming.method, self.incoming.target
        ));
    }

    /// Records `problems`; the first fatal one becomes a 400.
    fn problems(&mut self, problems: Problems) -> Option<Planned> {
        for p in problems.fatal.iter().chain(&problems.strict) {
            self.violation(p);
        }
        problems.fatal.first().map(|p| Planned::error(400, p))
    }

    /// The JSON body; a 400 (and a violation) if it is missing or not JSON.
    fn json_body(&mut self) -> Result<Value, Planned> {
        let incoming = self.incoming;
        let content_type = header_value(&incoming.headers, "content-type").unwrap_or("");
        if !content_type.starts_with("application/json") {
            self.violation(format!(
                "content-type {content_type:?} instead of application/json"
            ));
        }
        serde_json::from_slice(&incoming.body).map_err(|e| {
            self.violation(format!("the body is not JSON ({e})"));
            Planned::error(400, &format!("invalid JSON body: {e}"))
        })
    }
}

impl Shared {
    fn spec(&self, agent_name: &str) -> Option<&AgentSpec> {
        self.specs.iter().find(|s| s.name == agent_name)
    }

    /// Decides the answer to `incoming` and records it.
    pub(super) fn handle(&self, incoming: Incoming) -> Planned {
        let mut state = self.state.lock().unwrap();
        let mut ex = Exchange {
            incoming: &incoming,
            violations: Vec::new(),
        };
        let (path, query) = incoming
            .target
            .split_once('?')
            .unwrap_or((&incoming.target, ""));
        let route = path
            .strip_prefix(self.base.as_str())
            .filter(|r| r.starts_with('/'));
        let segments: Vec<&str> = route
            .map(|r| r.trim_start_matches('/').split('/').collect())
            .unwrap_or_default();
        let session = match segments.as_slice() {
            ["sessions", id, ..] => Some(id.to_string()),
            _ => None,
        };
        let planned = self.route(&mut state, &mut ex, route.is_some(), &segments, query);
        let violations = ex.violations;
        state.violations.extend(violations);
        state.requests.push(AapRequest {
            method: incoming.method.clone(),
            path: incoming.target.clone(),
            headers: incoming.headers.clone(),
            json: serde_json::from_slice(&incoming.body).ok(),
            body: incoming.body,
            status: planned.status,
            session,
        });
        planned
    }

    fn route(
        &self,
        state: &mut State,
        ex: &mut Exchange,
        under_base: bool,
        segments: &[&str],
        query: &str,
    ) -> Planned {
        if let Some(key) = &self.bearer {
            let expected = format!("Bearer {key}");
            if header_value(&ex.incoming.headers, "authorization") != Some(expected.as_str()) {
                return Planned::error(401, "Unauthorized");
            }
        }
        if !under_base {
            ex.violation(format!("not under the base path {:?}", self.base));
            return Planned::error(404, "Not found");
        }
        let version = &self.meta["version"];
        if segments != ["meta"] && *version != json!(3) {
            ex.violation(format!(
                "the agent announced meta.version {version}; a v3 client must not use it"
            ));
        }
        let method = ex.incoming.method.as_str();
        match (method, segments) {
            ("GET", ["meta"]) => {
                state.meta_calls += 1;
                Planned::json(200, &self.meta)
            }
            ("GET", ["sessions"]) => {
                let sessions: Vec<Value> = state
                    .sessions
                    .iter()
                    .map(|s| self.session_info(s))
                    .collect();
                Planned::json(200, &json!({ "sessions": sessions }))
            }
            ("POST", ["sessions"]) => self.create(state, ex),
            ("GET", ["sessions", id]) => match state.session(id) {
                Some(s) => Planned::json(200, &self.session_info(s)),
                None => Planned::error(404, "Session not found"),
            },
            ("DELETE", ["sessions", id]) => {
                let before = state.sessions.len();
                state.sessions.retain(|s| s.id != *id);
                if state.sessions.len() == before {
                    Planned::error(404, "Session not found")
                } else {
                    Planned::no_content()
                }
            }
            ("GET", ["sessions", id, "history"]) => self.history(state, id, query),
            ("POST", ["sessions", id, "turns"]) => self.turn(state, ex, id),
            (
                _,
                ["meta"] | ["sessions"] | ["sessions", _] | ["sessions", _, "history" | "turns"],
            ) => {
                ex.violation("method not allowed");
                Planned::error(405, "Method not allowed")
            }
            _ => {
                ex.violation("no such endpoint");
                Planned::error(404, "Not found")
            }
        }
    }

    /// `SessionInfo` with secret option values redacted as `"***"`.
    fn session_info(&self, session: &Session) -> Value {
        let mut agent = session.agent.clone();
        let name = agent["name"].as_str().unwrap_or_default().to_owned();
        if let (Some(spec), Some(options)) = (
            self.spec(&name),
            agent.get_mut("options").and_then(Value::as_object_mut),
        ) {
            for (key, value) in options.iter_mut() {
                let secret = spec.options.iter().any(|(n, t)| n == key && t == "secret");
                if secret {
                    *value = json!("***");
                }
            }
        }
        let mut info = json!({"sessionId": session.id, "agent": agent});
        if let Some(tools) = &session.tools {
            info["tools"] = json!(tools);
        }
        info
    }

    fn history(&self, state: &State, id: &str, query: &str) -> Planned {
        let kind = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("type="))
            .unwrap_or("");
        if !matches!(kind, "full" | "compacted") {
            return Planned::error(400, "type must be \"compacted\" or \"full\"");
        }
        let Some(session) = state.session(id) else {
            return Planned::error(404, "Session not found");
        };
        let name = session.agent["name"].as_str().unwrap_or_default();
        let declared = self.meta["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["name"] == name)
            .is_some_and(|a| a["capabilities"]["history"][kind].is_object());
        if !declared {
            return Planned::error(404, "Specified history not found");
        }
        Planned::json(200, &json!({"history": { kind: session.history }}))
    }

    fn create(&self, state: &mut State, ex: &mut Exchange) -> Planned {
        let body = match ex.json_body() {
            Ok(body) => body,
            Err(planned) => return planned,
        };
        if let Some(bad) = ex.problems(check_create(&body, &self.specs, &self.confirm_tools)) {
            return bad;
        }
        state.sessions_made += 1;
        let id = format!("sess_{}", state.sessions_made);
        state.sessions.push(Session {
            id: id.clone(),
            agent: body["agent"].clone(),
            tools: body["tools"].as_array().cloned(),
            history: body["messages"].as_array().cloned().unwrap_or_default(),
            turns: 0,
            awaiting_answers: true,
        });
        state.created.push(CreatedSession {
            session_id: id.clone(),
            body,
        });
        Planned::json(201, &json!({ "sessionId": id }))
    }

    fn turn(&self, state: &mut State, ex: &mut Exchange, id: &str) -> Planned {
        let Some(session) = state.session_mut(id) else {
            return Planned::error(404, "Session not found");
        };
        let body = match ex.json_body() {
            Ok(body) => body,
            Err(planned) => return planned,
        };
        let name = session.agent["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let spec = self.spec(&name);
        if let Some(bad) = ex.problems(check_turn(&body, spec, &self.confirm_tools)) {
            return bad;
        }
        // Overrides persist (`aap.md` §6.3): tools and agent.tools replace, options merge.
        if let Some(tools) = body["tools"].as_array() {
            session.tools = Some(tools.clone());
        }
        if let Some(tools) = body["agent"].get("tools") {
            session.agent["tools"] = tools.clone();
        }
        if let Some(options) = body["agent"]["options"].as_object() {
            if !session.agent["options"].is_object() {
                session.agent["options"] = json!({});
            }
            let stored = session.agent["options"].as_object_mut().unwrap();
            stored.extend(options.clone());
        }
        let pending = if session.awaiting_answers {
            pending_calls(&session.history)
        } else {
            Vec::new()
        };
        let tools = session.tools.clone().unwrap_or_default();
        check_answers(ex, &body, &pending, &tools);

        let ctx = TurnCtx {
            session_id: id.to_owned(),
            turn_index: session.turns,
            mode: StreamMode::of_request(&body),
            history: session.history.clone(),
            pending,
            agent: session.agent.clone(),
            tools,
            body,
            call_ids: self.call_ids.clone(),
        };
        session.turns += 1;
        let reply = match &self.behaviour {
            Behaviour::Model => model_reply(&ctx),
            Behaviour::Script(script) => script(&ctx),
        };
        if !reply.is_raw() {
            session.history.extend(stored_input(&ctx));
            session.history.extend(reply.messages());
            session.awaiting_answers =
                reply.stop_reason() == "tool_use" && reply.ending() == Ending::Stop;
        }
        reply.plan(ctx.mode)
    }
}

/// The `tool_use` blocks of the last assistant message of `history` that have no `tool`
/// message after it (`resolvePendingToolUse`, `aap.md` §4).
pub fn pending_calls(history: &[Value]) -> Vec<Value> {
    let Some(last) = history.iter().rposition(|m| m["role"] == "assistant") else {
        return Vec::new();
    };
    let answered = |id: &Value| {
        history[last + 1..]
            .iter()
            .any(|m| m["role"] == "tool" && m["toolCallId"] == *id)
    };
    history[last]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use" && !answered(&b["toolCallId"]))
        .cloned()
        .collect()
}

/// The batch rule (`aap.md` §4, `translation.md` §4.3 step 3–4): a turn after a `tool_use` stop
/// answers every pending call exactly once, client calls with `tool`, server calls with
/// `tool_permission`, and carries no user message; answers without pending calls are wrong too.
fn check_answers(ex: &mut Exchange, body: &Value, pending: &[Value], client_tools: &[Value]) {
    let input = body["messages"].as_array().cloned().unwrap_or_default();
    let answers: Vec<&Value> = input
        .iter()
        .filter(|m| matches!(m["role"].as_str(), Some("tool" | "tool_permission")))
        .collect();
    for answer in &answers {
        let id = &answer["toolCallId"];
        let Some(call) = pending.iter().find(|c| c["toolCallId"] == *id) else {
            ex.violation(format!(
                "{} answers {id}, which is not pending",
                answer["role"]
            ));
            continue;
        };
        let client = client_tools.iter().any(|t| t["name"] == call["name"]);
        let expected = if client { "tool" } else { "tool_permission" };
        if answer["role"] != expected {
            ex.violation(format!(
                "the pending call {id} ({}) needs a {expected} message, got {}",
                call["name"], answer["role"]
            ));
        }
    }
    for call in pending {
        let id = &call["toolCallId"];
        match answers.iter().filter(|a| a["toolCallId"] == *id).count() {
            1 => {}
            0 => ex.violation(format!(
                "the pending call {id} ({}) is not answered in this turn",
                call["name"]
            )),
            n => ex.violation(format!("the pending call {id} is answered {n} times")),
        }
    }
    if !pending.is_empty() && input.iter().any(|m| m["role"] == "user") {
        ex.violation("a user message in the turn that answers pending tool calls");
    }
}

/// What the turn's input adds to the history: user and tool messages as they are; a granted
/// permission → the tool's output; a denial → `"Tool use denied[: reason]"` (SDK 0.8.0).
fn stored_input(ctx: &TurnCtx) -> Vec<Value> {
    ctx.input()
        .iter()
        .filter_map(|m| match m["role"].as_str() {
            Some("tool_permission") => {
                let id = m["toolCallId"].as_str().unwrap_or_default();
                let content = if m["granted"] == true {
                    let call = ctx.pending_call(id)?;
                    server_tool_output(call["name"].as_str().unwrap_or_default(), &call["input"])
                } else {
                    match m["reason"].as_str() {
                        Some(reason) => format!("Tool use denied: {reason}"),
                        None => "Tool use denied".to_owned(),
                    }
                };
                Some(json!({"role": "tool", "toolCallId": id, "content": content}))
            }
            _ => Some(m.clone()),
        })
        .collect()
}
