//! The gateway as an AAP client: AG-UI and HAI runs in front of an AAP v3 agent
//! (`translation.md` §4.3–4.4, §6.2 A1–A3). The pure decisions (what is new, what diverged,
//! which answers go where) are [`crate::dialect::aap::upstream`]; reading the agent's turns is
//! [`crate::dialect::aap::read`]. This module makes the HTTP requests around them.
//!
//! One run:
//! 1. The response starts at once with `RUN_STARTED` (`aap.early_run_started`); everything
//!    below happens inside the stream, so any failure is a `RUN_ERROR` after it.
//! 2. The thread's record is leased (one run per thread at a time) and the run is planned.
//! 3. `GET /meta` (cached per base URL; refetched when the agent is not listed): version 3 or
//!    `AAP_VERSION_UNSUPPORTED`; the agent; its stream modes and image support.
//! 4. A session is created when the thread has none, or when the history diverged (logged).
//! 5. The first turn: the answers if any, else the user's messages. A 404 (the agent lost the
//!    session) recreates the session from the client's history and retries once.
//! 6. At each stop the [`Driver`] decides: the user's messages after an answers turn that ended
//!    `end_turn`; the gateway's own answers for a client that cannot be asked (A3); or the end.
//! 7. The record is saved after every accepted turn and when the stream ends.

pub mod planner;

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use dashmap::DashMap;
use http::{header, HeaderMap, HeaderValue, Method, Response, Uri};
use http_body_util::{BodyExt, Either, Full};
use serde_json::Value;

use crate::config::aap_client::{StreamChoice, Unconfirmable};
use crate::config::{AapUpstream, Route, Upstream};
use crate::dialect::aap::read::{AapCall, Hitl, ReadOptions};
use crate::dialect::aap::types::{
    AapMessage, AgentConfig, AgentOverrides, CreateSession, StopReason, StreamMode, TurnRequest,
};
use crate::dialect::aap::PROTOCOL_VERSION;
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::event::RunAgentInput;
use crate::pipeline::Pipeline;
use crate::server::{
    read_json, upstream_headers, Continuation, Gateway, Next, OpenFuture, ResponseBody,
    UpstreamBody, UpstreamClient,
};
use crate::session::{PendingCall, ThreadRecord};
use crate::session::{Store, StoreError, ThreadLease};
use crate::sse::Framing;
use planner::{plan, resolve_hitl, ImageCaps, PlanOptions, RunPlan, SessionPlan};

/// The most a `/meta` or `POST /sessions` response may weigh.
const JSON_LIMIT: usize = 1 << 20;
/// Permission turns the gateway answers on its own within one run (A3), at most.
const MAX_AUTO_TURNS: usize = 8;

/// What an AAP agent declares that the gateway needs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEntry {
    pub name: String,
    pub delta: bool,
    pub message: bool,
    pub images: ImageCaps,
}

/// `GET /meta` answers, per base URL.
#[derive(Debug, Default)]
pub struct Directory {
    agents: DashMap<String, Arc<Vec<AgentEntry>>>,
}

/// Reads a `/meta` answer; refuses any version but 3.
fn agents_of(meta: &Value) -> Result<Vec<AgentEntry>, Failure> {
    let version = meta.get("version").and_then(Value::as_u64);
    if version != Some(u64::from(PROTOCOL_VERSION)) {
        let seen = meta
            .get("version")
            .map_or_else(|| "no version".to_owned(), Value::to_string);
        return Err(Failure::new(
            ErrorCode::AapVersionUnsupported,
            format!("the AAP upstream speaks protocol version {seen}; this gateway speaks version {PROTOCOL_VERSION} only"),
        ));
    }
    let flag = |v: &Value, group: &str, key: &str| {
        v.get("capabilities")
            .and_then(|c| c.get(group))
            .and_then(|g| g.get(key))
            .is_some()
    };
    Ok(meta
        .get("agents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| {
            Some(AgentEntry {
                name: a.get("name")?.as_str()?.to_owned(),
                delta: flag(a, "stream", "delta"),
                message: flag(a, "stream", "message"),
                images: ImageCaps {
                    http: flag(a, "image", "http"),
                    data: flag(a, "image", "data"),
                },
            })
        })
        .collect())
}

/// The requests of one route toward its AAP agent.
#[derive(Clone)]
struct Link {
    client: UpstreamClient,
    base: String,
    headers: HeaderMap,
    headers_timeout: std::time::Duration,
    directory: Arc<Directory>,
}

impl Link {
    fn uri(&self, path: &str) -> Result<Uri, Failure> {
        format!("{}{path}", self.base).parse().map_err(|e| {
            Failure::new(
                ErrorCode::UpstreamUnavailable,
                format!("{}{path} is not a valid URL: {e}", self.base),
            )
        })
    }

    async fn json(&self, method: Method, path: &str, body: Vec<u8>) -> Result<Value, Failure> {
        let mut headers = self.headers.clone();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let response = self
            .client
            .send(
                method,
                &self.uri(path)?,
                headers,
                body,
                self.headers_timeout,
            )
            .await?;
        read_json(response.into_body(), JSON_LIMIT, self.headers_timeout, path).await
    }

    /// The agents the upstream lists; fetched on first use, and again when `wanted` is not
    /// among them.
    async fn agents(&self, wanted: Option<&str>) -> Result<Arc<Vec<AgentEntry>>, Failure> {
        if let Some(known) = self.directory.agents.get(&self.base) {
            if wanted.is_none_or(|w| known.iter().any(|a| a.name == w)) {
                return Ok(Arc::clone(&known));
            }
        }
        let meta = self.json(Method::GET, "/meta", Vec::new()).await?;
        let agents = Arc::new(agents_of(&meta)?);
        tracing::debug!(agents = agents.len(), "AAP upstream described itself");
        self.directory
            .agents
            .insert(self.base.clone(), Arc::clone(&agents));
        Ok(agents)
    }

    async fn create_session(&self, create: &CreateSession) -> Result<String, Failure> {
        let body = serde_json::to_vec(create).unwrap_or_default();
        let answer = self.json(Method::POST, "/sessions", body).await?;
        answer
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::UpstreamMalformed,
                    "the AAP upstream created a session without a sessionId",
                )
            })
    }

    async fn turn(
        &self,
        session_id: &str,
        turn: &TurnRequest,
    ) -> Result<(UpstreamBody, Framing), Failure> {
        let mut headers = self.headers.clone();
        if turn.stream.as_deref() == Some("none") {
            headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        }
        let uri = self.uri(&format!("/sessions/{session_id}/turns"))?;
        let body = serde_json::to_vec(turn).unwrap_or_default();
        let response = self
            .client
            .send(Method::POST, &uri, headers, body, self.headers_timeout)
            .await?;
        let json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
        let body = response
            .into_body()
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            .boxed_unsync();
        Ok((body, if json { Framing::Json } else { Framing::Sse }))
    }
}

/// Which turn of the run is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Tool results and permissions (or, without any, the user's messages).
    First,
    /// The user's messages after the answers' turn.
    Users,
    /// Permissions the gateway answered itself.
    Auto(usize),
}

/// One run's state, shared by the request that opens the first turn and the [`Driver`].
struct RunState {
    key: String,
    config: AapUpstream,
    input: RunAgentInput,
    lease: Option<ThreadLease>,
    record: ThreadRecord,
    plan: Option<RunPlan>,
    stage: Stage,
    mode: StreamMode,
    /// Permissions answered for the client, kept for its next run when it also has results
    /// to give (A3 with a mixed stop).
    held: Vec<(String, bool)>,
}

type Shared = Arc<Mutex<RunState>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, RunState> {
    // A panic elsewhere cannot leave the state half-written in a way that matters more than
    // ending the run; keep going with what is there.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves one AG-UI or HAI run on `route`, whose upstream speaks AAP.
pub(crate) async fn run(
    gateway: &Gateway,
    route: &Route,
    client_headers: &HeaderMap,
    input: RunAgentInput,
    span: tracing::Span,
) -> Result<Response<ResponseBody>, Failure> {
    let config = route.aap_upstream.clone().unwrap_or_default();
    let Upstream::Url(base) = &route.upstream else {
        return Err(Failure::new(
            ErrorCode::NotImplemented,
            "the built-in demo agent speaks AG-UI, not AAP",
        ));
    };
    let mut headers = upstream_headers(client_headers);
    if let Some(key) = &config.api_key {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}")) {
            headers.insert(header::AUTHORIZATION, value);
        }
    }
    let link = Link {
        client: gateway.client(route),
        base: base.to_string().trim_end_matches('/').to_owned(),
        headers,
        headers_timeout: route.limits.headers_timeout,
        directory: Arc::clone(gateway.aap_directory()),
    };
    let hitl = resolve_hitl(
        config.hitl,
        &config.confirm_tool,
        &input,
        route.client == Dialect::AgUi,
    );
    let mut spec = gateway.pipeline_spec(route, &input, Framing::Sse);
    spec.aap_read = ReadOptions {
        client_tools: input
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| *n != config.confirm_tool)
            .collect(),
        hitl,
        limit_stops: config.limit_stops,
    };
    let pipeline =
        Pipeline::new(spec).map_err(|e| Failure::new(ErrorCode::NotImplemented, e.to_string()))?;
    let state: Shared = Arc::new(Mutex::new(RunState {
        key: format!("{}\u{1f}{}", route.path, input.thread_id),
        config,
        input,
        lease: None,
        record: ThreadRecord::default(),
        plan: None,
        stage: Stage::First,
        mode: StreamMode::None,
        held: Vec::new(),
    }));
    let open: OpenFuture = Box::pin(first_turn(
        link.clone(),
        Arc::clone(gateway.store()),
        Arc::clone(&state),
    ));
    let driver = Box::new(Driver { link, state });
    let body = gateway.deferred_body(route, open, driver, pipeline, span);
    let mut response = Response::new(Either::Left(body));
    crate::server::sse_headers(response.headers_mut());
    Ok(response)
}

/// Steps 2–5 of the module docs.
async fn first_turn(
    link: Link,
    store: Arc<dyn Store>,
    state: Shared,
) -> Result<(UpstreamBody, Framing), Failure> {
    let key = lock(&state).key.clone();
    let (lease, record) = ThreadLease::begin(store, key).map_err(|e| match e {
        StoreError::Busy => Failure::new(
            ErrorCode::TurnInProgress,
            "another run of this thread is still talking to the agent; retry when it ends",
        ),
        StoreError::Full(_) | StoreError::NotFound => {
            Failure::new(ErrorCode::SessionLimit, e.to_string())
        }
    })?;
    let (config, input) = {
        let s = lock(&state);
        (s.config.clone(), s.input.clone())
    };
    let wanted = config
        .agent
        .clone()
        .or_else(|| {
            input
                .forwarded_props
                .as_ref()
                .and_then(|p| p.pointer("/aap/agent"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .or_else(|| record.as_ref().map(|r| r.agent.clone()));
    let agents = link.agents(wanted.as_deref()).await?;
    let agent = match &wanted {
        Some(name) => agents.iter().find(|a| a.name == *name),
        None if agents.len() == 1 => agents.first(),
        None => None,
    }
    .cloned()
    .ok_or_else(|| {
        let listed: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        Failure::new(
            ErrorCode::AapAgentNotFound,
            match &wanted {
                Some(name) => format!("the AAP upstream lists no agent {name:?} (it lists: {})", listed.join(", ")),
                None => format!("the AAP upstream lists {} agents; name one with --agent-name or [routes.aap_upstream] agent", listed.len()),
            },
        )
    })?;
    // A session belongs to one agent: another agent starts another session.
    let record = record.filter(|r| r.agent == agent.name);
    let options = PlanOptions {
        confirm_tool: config.confirm_tool.clone(),
        fork_on_divergence: config.fork_on_divergence,
        context_as_system: config.context_as_system,
        images: agent.images,
        default_server_tools: config.tools.clone(),
        default_options: config.options.clone(),
    };
    let plan = plan(record.as_ref(), &input, &options)?;
    let mode = match config.stream_mode {
        StreamChoice::Fixed(mode) => mode,
        StreamChoice::Auto if agent.delta => StreamMode::Delta,
        StreamChoice::Auto if agent.message => StreamMode::Message,
        StreamChoice::Auto => StreamMode::None,
    };
    let mut record = record.unwrap_or_default();
    record.agent = agent.name.clone();
    if plan.is_empty() {
        // Nothing the agent has not seen: the run ends at once, with nothing asked.
        tracing::debug!("no new input for the agent; the run finishes without a turn");
        let stop = Bytes::from_static(b"event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n");
        let body = Full::new(stop)
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut s = lock(&state);
        s.lease = Some(lease);
        return Ok((body, Framing::Sse));
    }
    let create = |seed: Vec<AapMessage>| CreateSession {
        agent: AgentConfig {
            name: agent.name.clone(),
            tools: (!plan.server_tools.is_empty() || config.tools.is_some())
                .then(|| plan.server_tools.clone()),
            options: (!plan.options.is_empty()).then(|| plan.options.clone()),
        },
        messages: seed,
        tools: (!plan.tools.is_empty()).then(|| plan.tools.clone()),
    };
    let mut fresh = false;
    if let SessionPlan::Create {
        seed,
        seed_ids,
        divergence,
    } = &plan.session
    {
        let id = link.create_session(&create(seed.clone())).await?;
        match divergence {
            Some(why) => tracing::info!(
                old_session_id = %record.session_id,
                session_id = %id,
                reason = %why,
                "the client's history diverged from the agent's session; continuing in a new session seeded with it"
            ),
            None => tracing::debug!(session_id = %id, seeded = seed.len(), "AAP session created"),
        }
        record.session_id = id;
        record.forwarded = seed_ids.clone();
        record.pending.clear();
        fresh = true;
    }
    let messages = if plan.answers.is_empty() {
        plan.users.clone()
    } else {
        plan.answers.clone()
    };
    let users_now = plan.answers.is_empty();
    let mut turn = TurnRequest {
        agent: None,
        stream: Some(mode.as_str().to_owned()),
        messages,
        tools: None,
    };
    if !fresh {
        changes(&plan, &mut turn);
    }
    let opened = match link.turn(&record.session_id, &turn).await {
        Err(f) if f.code == ErrorCode::UpstreamHttp(404) && config.recreate_lost_sessions => {
            let id = link
                .create_session(&create(plan.recreate_seed.clone()))
                .await?;
            tracing::warn!(
                lost_session_id = %record.session_id,
                session_id = %id,
                "the AAP agent lost the session; recreated it from the client's history"
            );
            record.session_id = id;
            record.forwarded = plan.recreate_ids.clone();
            turn.agent = None;
            turn.tools = None;
            link.turn(&record.session_id, &turn).await
        }
        Err(f) if f.code == ErrorCode::UpstreamHttp(404) => Err(Failure::new(
            ErrorCode::AapSessionNotFound,
            format!(
                "the AAP agent no longer knows session {} (on_session_lost = \"error\")",
                record.session_id
            ),
        )),
        other => other,
    }?;
    // Accepted: the agent has the input now.
    record.forwarded.extend(plan.answer_ids.iter().cloned());
    if users_now {
        record.forwarded.extend(plan.user_ids.iter().cloned());
    }
    record.tools = plan.tools.clone();
    record.server_tools = plan.server_tools.clone();
    record.options = plan.options.clone();
    record.pending.clear();
    if let Err(e) = lease.save(record.clone()) {
        tracing::warn!(error = %e, "could not save the thread's record");
    }
    let mut s = lock(&state);
    s.lease = Some(lease);
    s.record = record;
    s.stage = if users_now {
        Stage::Users
    } else {
        Stage::First
    };
    s.mode = mode;
    s.plan = Some(plan);
    Ok(opened)
}

/// The tools, server tools and options that changed since the record, onto a turn.
fn changes(plan: &RunPlan, turn: &mut TurnRequest) {
    if plan.tools_changed {
        turn.tools = Some(plan.tools.clone());
    }
    let agent = AgentOverrides {
        tools: plan.server_tools_changed.then(|| plan.server_tools.clone()),
        options: (!plan.options_changed.is_empty()).then(|| plan.options_changed.clone()),
    };
    if agent.tools.is_some() || agent.options.is_some() {
        turn.agent = Some(agent);
    }
}

/// Decides what follows each turn, and saves the record when the run ends.
struct Driver {
    link: Link,
    state: Shared,
}

impl Driver {
    /// A further turn on the run's session.
    fn follow(&self, messages: Vec<AapMessage>) -> Next {
        let (session_id, mode) = {
            let s = lock(&self.state);
            (s.record.session_id.clone(), s.mode)
        };
        let link = self.link.clone();
        let turn = TurnRequest {
            agent: None,
            stream: Some(mode.as_str().to_owned()),
            messages,
            tools: None,
        };
        Next::Open(Box::pin(async move {
            link.turn(&session_id, &turn).await.map_err(|f| {
                if f.code == ErrorCode::UpstreamHttp(404) {
                    Failure::new(
                        ErrorCode::AapSessionNotFound,
                        format!("the AAP agent lost session {session_id} in the middle of a run"),
                    )
                } else {
                    f
                }
            })
        }))
    }
}

impl Continuation for Driver {
    fn after_turn(&mut self, pipeline: &mut Pipeline) -> Next {
        let Some(stop) = pipeline.turn_stop().cloned() else {
            return Next::End;
        };
        let options = pipeline
            .aap_reader()
            .map(|r| r.options().clone())
            .unwrap_or_default();
        let mut s = lock(&self.state);
        if stop.reason == StopReason::EndTurn && s.stage == Stage::First {
            let users = s.plan.as_ref().map(|p| p.users.clone()).unwrap_or_default();
            if !users.is_empty() {
                let ids = s
                    .plan
                    .as_ref()
                    .map(|p| p.user_ids.clone())
                    .unwrap_or_default();
                s.record.forwarded.extend(ids);
                s.stage = Stage::Users;
                drop(s);
                return self.follow(users);
            }
        }
        if stop.reason != StopReason::ToolUse || options.hitl != Hitl::Unconfirmable {
            return Next::End;
        }
        let (permissions, client): (Vec<&AapCall>, Vec<&AapCall>) =
            stop.unresolved.iter().partition(|c| !c.is_client(&options));
        if permissions.is_empty() {
            return Next::End;
        }
        let granted = match s.config.unconfirmable {
            Unconfirmable::Error => {
                let names: Vec<&str> = permissions.iter().map(|c| c.name.as_str()).collect();
                return Next::Fail(Failure::new(
                    ErrorCode::ConfirmationUnavailable,
                    format!(
                        "the agent needs permission to run {} and this client cannot be asked (declare the confirm tool, or send protocolVersion 1.0 for interrupts)",
                        names.join(", ")
                    ),
                ));
            }
            Unconfirmable::Deny => false,
            Unconfirmable::Grant => true,
        };
        let auto = match s.stage {
            Stage::Auto(n) => n + 1,
            _ => 1,
        };
        if !client.is_empty() || auto > MAX_AUTO_TURNS {
            // The client still owes results: the verdicts wait for them.
            s.held = permissions
                .iter()
                .map(|c| (c.id.clone(), granted))
                .collect();
            return Next::End;
        }
        tracing::info!(
            granted,
            calls = permissions.len(),
            "the client cannot be asked for permission; the gateway answers (unconfirmable)"
        );
        let answers = permissions
            .iter()
            .map(|c| AapMessage::ToolPermission {
                tool_call_id: c.id.clone(),
                granted,
                reason: (!granted).then(|| "the user could not be asked for permission".to_owned()),
            })
            .collect();
        s.stage = Stage::Auto(auto);
        drop(s);
        self.follow(answers)
    }

    fn ended(&mut self, pipeline: &mut Pipeline) {
        let mut s = lock(&self.state);
        let Some(lease) = s.lease.take() else {
            return;
        };
        let Some(reader) = pipeline.aap_reader() else {
            return;
        };
        // What the agent produced counts as seen once its turn stopped; a cut turn leaves the
        // record as the accepted input made it.
        if let Some(stop) = reader.final_stop() {
            let options = reader.options().clone();
            s.record.forwarded.extend(reader.outputs().iter().cloned());
            s.record.pending = if stop.reason == StopReason::ToolUse {
                stop.unresolved
                    .iter()
                    .map(|c| PendingCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        client: c.is_client(&options),
                        held: s
                            .held
                            .iter()
                            .find(|(id, _)| *id == c.id)
                            .map(|(_, g)| (*g, None)),
                    })
                    .collect()
            } else {
                Vec::new()
            };
        }
        if !s.record.session_id.is_empty() {
            if let Err(e) = lease.save(s.record.clone()) {
                tracing::warn!(error = %e, "could not save the thread's record");
            }
        }
    }
}
