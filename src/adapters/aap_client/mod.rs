//! The gateway as an AAP client: AG-UI and HAI runs in front of an AAP v3 agent
//! (`translation.md` §4.3–4.4, §6.2 A1–A3). The pure decisions (what is new, what diverged,
//! which answers go where) are [`planner`]; reading the agent's turns is the AAP dialect's
//! reader (`dialect::aap::read`). This adapter owns the rest: the HTTP requests to the agent
//! ([`link`]), the thread records in the store ([`thread`]), and the run's continuation across
//! turns ([`driver`]).
//!
//! One run:
//! 1. The response starts at once with `RUN_STARTED` (`aap.early_run_started`); everything
//!    below happens inside the stream, so any failure is a `RUN_ERROR` after it.
//! 2. The thread is marked running in the store (one run per thread at a time), its record
//!    read, and the run planned. Records are kept per route, principal (the request's, see
//!    `crate::session::Principal`) and AG-UI thread id ([`thread::key`]): a caller reusing
//!    another's `threadId` starts a thread of its own, never continues theirs.
//! 3. `GET /meta` (cached per base URL; refetched when the agent is not listed): version 3 or
//!    `AAP_VERSION_UNSUPPORTED`; the agent; its stream modes and image support.
//! 4. A session is created when the thread has none, or when the history diverged (logged).
//! 5. The first turn: the answers if any, else the user's messages. A 404 (the agent lost the
//!    session) recreates the session from the client's history and retries once.
//! 6. At each stop the [`Driver`] decides: the user's messages after an answers turn that ended
//!    `end_turn`; the gateway's own answers for a client that cannot be asked (A3); or the end.
//! 7. The record is saved after every accepted turn, and by the thread's committer task when
//!    the stream ends (the stream's last frame waits for it).
//!
//! The same machinery serves the AAP face in front of an AAP agent ([`AapClient::face_turn`]):
//! there the face's session stands for the thread. Its turn lease replaces step 2's mark, and
//! its record travels in the face session (`crate::session::SessionConfig::upstream`), written
//! back with the turn by the face's committer, so one face session maps to exactly one agent
//! session for as long as it lives.

mod driver;
mod link;
pub mod planner;
mod thread;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::config::aap_client::StreamChoice;
use crate::config::{AapUpstream, Route, Upstream};
use crate::dialect::aap::read::ReadOptions;
use crate::dialect::aap::types::{
    AapMessage, AgentConfig, AgentOverrides, CreateSession, StreamMode, TurnRequest,
};
use crate::dialect::aap::AapReader;
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::event::RunAgentInput;
use crate::http::body::{OpenFuture, Source, UpstreamBody};
use crate::http::relay::Relay;
use crate::http::response::{event_stream, ResponseBody};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::session::{Principal, Settling, Store, StoreError, ThreadRecord};
use crate::sse::Framing;
use crate::telemetry::metrics::Metrics;
pub(crate) use driver::Driver;
use driver::{lock, RunState, Shared, Stage};
pub use link::Directory;
use link::Link;
use planner::{plan, resolve_hitl, PlanOptions, RunPlan, SessionPlan};

/// The AAP client's state, shared by its runs: the store of thread records, what the agents
/// said of themselves, and the runs whose thread marks are still being ended.
pub struct AapClient {
    store: Arc<dyn Store>,
    settling: Arc<Settling>,
    directory: Arc<Directory>,
}

impl AapClient {
    pub fn new(store: Arc<dyn Store>, settling: Arc<Settling>) -> AapClient {
        AapClient {
            store,
            settling,
            directory: Arc::default(),
        }
    }

    /// Serves one AG-UI or HAI run on `route`, whose upstream speaks AAP, for `principal`;
    /// `headers` are the upstream requests' ([`Relay::upstream_headers`]), the route's API key
    /// added here.
    pub(crate) fn run(
        &self,
        relay: &Relay,
        route: &Route,
        headers: HeaderMap,
        principal: &Principal,
        input: RunAgentInput,
        span: tracing::Span,
    ) -> Result<Response<ResponseBody>, Failure> {
        let (link, config) = self.link(relay, route, headers)?;
        let hitl = resolve_hitl(
            config.hitl,
            &config.confirm_tool,
            &input,
            route.client == Dialect::AgUi,
        );
        let options = relay.pipeline_options(route, &input, Framing::Sse);
        let reader = AapReader::new(
            &options.ids,
            ReadOptions {
                client_tools: input
                    .tools
                    .iter()
                    .map(|t| t.name.clone())
                    .filter(|n| *n != config.confirm_tool)
                    .collect(),
                hitl,
                limit_stops: config.limit_stops,
            },
        );
        let writer = route.client.writer(&relay.codecs(route, &input.tools));
        let pipeline = Pipeline::from_parts(reader, writer, options);
        let key = thread::key(&route.path, principal, &input.thread_id);
        let state = RunState::shared(key, principal.clone(), config, input);
        let open: OpenFuture = Box::pin(first_turn(
            link.clone(),
            Arc::clone(&self.store),
            Arc::clone(&self.settling),
            Arc::clone(relay.metrics()),
            Arc::clone(&state),
        ));
        let driver = Driver { link, state };
        let body = relay.body(route, Source::Opening(open), pipeline, driver, span);
        Ok(event_stream(body))
    }

    /// A turn of an AAP face whose route's upstream is an AAP agent (the AAP client in front of
    /// an AAP agent): `input` is the face's canonical run of the turn (its whole session
    /// history, the client tools, `forwardedProps.aap`), `record` the face session's agent
    /// session, if it has one. The agent's turns are read into the run as for any AAP client,
    /// but the record lives in the face's session, not in a thread record: the face's own turn
    /// lease serialises its turns, and the caller takes the record back from the [`Driver`]
    /// when the stream ends ([`Driver::record`]).
    ///
    /// The client's tools are its own (none is a confirm tool), and a permission the agent asks
    /// for reaches the run as an interrupt on the agent's own call
    /// ([`ReadOptions::for_aap_client`]), which the AAP writer shows the client as that call
    /// awaiting `tool_permission`; the answer comes back as `resume` and goes to the agent as
    /// `tool_permission` again.
    pub(crate) fn face_turn(
        &self,
        relay: &Relay,
        route: &Route,
        headers: HeaderMap,
        input: RunAgentInput,
        record: Option<ThreadRecord>,
    ) -> Result<FaceTurn, Failure> {
        let (link, mut config) = self.link(relay, route, headers)?;
        // An AAP client declares no confirm tool: every tool it names is the agent's to see.
        config.confirm_tool = String::new();
        let options = relay.pipeline_options(route, &input, Framing::Sse);
        let client_tools = input.tools.iter().map(|t| t.name.clone()).collect();
        let reader = AapReader::new(
            &options.ids,
            ReadOptions::for_aap_client(client_tools, config.limit_stops),
        );
        // No thread record: the key and its owner name the face session, for nothing more
        // than the state's completeness (the face checked the caller already).
        let key = input.thread_id.clone();
        let state = RunState::shared(key, Principal::anonymous(), config, input);
        let open: OpenFuture = Box::pin(open_first(link.clone(), Arc::clone(&state), record));
        Ok(FaceTurn {
            reader,
            source: Source::Opening(open),
            driver: Driver { link, state },
            options,
        })
    }

    /// Deletes the agent session `session_id` on `route`'s agent, for a face session deleted
    /// by its client. Best effort: the face session is gone whatever the agent answers; a
    /// failure is logged, and the agent's own retention decides.
    pub(crate) async fn delete_session(
        &self,
        relay: &Relay,
        route: &Route,
        headers: HeaderMap,
        session_id: &str,
    ) {
        let link = match self.link(relay, route, headers) {
            Ok((link, _)) => link,
            Err(failure) => {
                tracing::warn!(code = %failure.code, "cannot reach the AAP agent to delete its session");
                return;
            }
        };
        link.delete_session(session_id).await;
    }

    /// The requests toward `route`'s AAP agent, with `headers` and the route's API key, and the
    /// route's AAP client settings.
    fn link(
        &self,
        relay: &Relay,
        route: &Route,
        mut headers: HeaderMap,
    ) -> Result<(Link, AapUpstream), Failure> {
        let config = route.aap_upstream.clone().unwrap_or_default();
        let Upstream::Url(base) = &route.upstream else {
            return Err(Failure::new(
                ErrorCode::NotImplemented,
                "the built-in demo agent speaks AG-UI, not AAP",
            ));
        };
        let outbound = relay.outbound(route);
        if let Some(key) = &config.api_key {
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}")) {
                headers.insert(header::AUTHORIZATION, value);
            }
        }
        let link = Link {
            client: relay.client(route),
            base: base.to_string().trim_end_matches('/').to_owned(),
            headers,
            outbound,
            headers_timeout: route.limits.headers_timeout,
            directory: Arc::clone(&self.directory),
        };
        Ok((link, config))
    }
}

/// What a face's turn on an AAP agent runs with ([`AapClient::face_turn`]): the reader of the
/// agent's turns, where its bytes come from (the first turn, opened inside the stream), the
/// driver that decides what follows each stop and keeps the record, and the pipeline's options.
pub(crate) struct FaceTurn {
    pub(crate) reader: AapReader,
    pub(crate) source: Source,
    pub(crate) driver: Driver,
    pub(crate) options: PipelineOptions,
}

/// Steps 2–5 of the module docs, for a thread of an AG-UI or HAI client.
async fn first_turn(
    link: Link,
    store: Arc<dyn Store>,
    settling: Arc<Settling>,
    metrics: Arc<Metrics>,
    state: Shared,
) -> Result<(UpstreamBody, Framing), Failure> {
    let (key, owner) = {
        let state = lock(&state);
        (state.key.clone(), state.owner.clone())
    };
    let begun = match store.begin_thread(&key, &owner).await {
        // The run holding the thread may be over and only its record pending (its client
        // left): wait for that, then try once more.
        Err(StoreError::Busy) => {
            settling.settled(&key).await;
            store.begin_thread(&key, &owner).await
        }
        begun => begun,
    };
    let record = begun.map_err(|e| match e {
        StoreError::Busy => Failure::new(
            ErrorCode::TurnInProgress,
            "another run of this thread is still talking to the agent; retry when it ends",
        ),
        StoreError::Full(_) | StoreError::NotFound => {
            Failure::new(ErrorCode::SessionLimit, e.to_string())
        }
        StoreError::PrincipalFull(_) | StoreError::PrincipalOutOfSpace { .. } => {
            Failure::new(ErrorCode::PrincipalSessionLimit, e.to_string())
        }
        StoreError::OutOfSpace { .. } => Failure::new(ErrorCode::SessionStorageFull, e.to_string()),
        StoreError::Timeout(_) | StoreError::Unavailable(_) => {
            tracing::warn!(error = %e, "the session store failed");
            Failure::new(
                ErrorCode::StoreUnavailable,
                "the session store is unavailable; retry later",
            )
        }
    })?;
    // From here on the reporter owns the end of the thread's mark; the stream reports to it.
    lock(&state).thread = Some(thread::begin(
        Arc::clone(&store),
        key.clone(),
        Arc::clone(&metrics),
        &settling,
    ));
    let opened = open_first(link, Arc::clone(&state), record).await?;
    let record = lock(&state).record.clone();
    if !record.session_id.is_empty() {
        thread::save(store.as_ref(), &key, record, &metrics).await;
    }
    Ok(opened)
}

/// Steps 3–5 of the module docs: the agent, the plan, the session, the first turn. `record` is
/// what the agent has seen of this conversation so far, if anything; once the agent accepts
/// the turn, the run's state holds the record as it now stands.
async fn open_first(
    link: Link,
    state: Shared,
    record: Option<ThreadRecord>,
) -> Result<(UpstreamBody, Framing), Failure> {
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
        tracing::warn!(
            wanted = wanted.as_deref().unwrap_or(""),
            listed = %listed.join(", "),
            "the AAP upstream does not list the agent (name one with --agent-name or [routes.aap_upstream] agent)"
        );
        Failure::new(
            ErrorCode::AapAgentNotFound,
            match &wanted {
                Some(name) => format!("the AAP upstream lists no agent {name:?}"),
                None => "the AAP upstream lists several agents and the run names none".to_owned(),
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
        {
            let mut s = lock(&state);
            s.created = Some(id.clone());
            if divergence.is_some() && !record.session_id.is_empty() {
                s.replaced = Some(record.session_id.clone());
            }
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
            lock(&state).created = Some(id.clone());
            record.session_id = id;
            record.forwarded = plan.recreate_ids.clone();
            turn.agent = None;
            turn.tools = None;
            link.turn(&record.session_id, &turn).await
        }
        Err(f) if f.code == ErrorCode::UpstreamHttp(404) => {
            tracing::warn!(
                session_id = %record.session_id,
                "the AAP agent no longer knows the session (on_session_lost = \"error\")"
            );
            Err(Failure::new(
                ErrorCode::AapSessionNotFound,
                "the AAP agent no longer knows this thread's session",
            ))
        }
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
    let mut s = lock(&state);
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
