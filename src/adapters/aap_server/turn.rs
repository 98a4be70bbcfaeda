//! `POST /sessions/:id/turns` (`translation.md` §4.1–4.2, §6.2 B1–B4).
//!
//! 1. Read the body; take the session's turn lease (404 unknown, 409 busy).
//! 2. Apply the overrides: `tools` and `agent.tools` replace, `agent.options` merge.
//! 3. Check the answers against the calls the last turn left pending: each answered exactly
//!    once, with the right kind of message (400 naming the ids otherwise).
//! 4. Build the run: the whole history plus the new input (answers first, in pending order,
//!    then user messages), the client tools plus the confirm tool, the stored state,
//!    `forwardedProps.aap`, and `resume` for interrupts.
//! 5. Run the upstream through the pipeline with the AAP writer; stream (`delta`, `message`) or
//!    answer JSON (`none`).
//! 6. Commit when the stream ends, however it ends (see [`commit`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use super::sessions::{client_tools, merge_options, server_tools, store_failure};
use super::{error_response, invalid, parse_body, Face};
use crate::config::{AapAgent, Route};
use crate::dialect::aap::history::{content_from_aap, tool_message};
use crate::dialect::aap::types::{AapMessage, OptionKind, StopReason, StreamMode, TurnRequest};
use crate::dialect::aap::{is_synthetic, Pending, PendingKind, TurnOptions, TURN_START_FRAME};
use crate::dialect::confirm::permission_resume;
use crate::error::{ErrorCode, Failure};
use crate::event::IdMint;
use crate::event::{history_bytes, remove_calls};
use crate::event::{
    Message, MessageContent, ResumeEntry, RunAgentInput, Tool, UserMessage, PROTOCOL_VERSION,
};
use crate::pipeline::AapTurn;
use crate::pipeline::Pipeline;
use crate::server::{Gateway, ResponseBody};
use crate::session::{Session, SessionConfig, TurnCommit, TurnLease};

/// The confirm tool the gateway declares to the agent (`translation.md` §6.1), with the two
/// optional fields that let the agent name the tool it asks about.
fn confirm_tool(name: &str) -> Tool {
    Tool {
        name: name.to_owned(),
        description: "Ask the user to confirm an action before it is performed. Call it before running a server tool that is not trusted, naming the tool and its arguments.".into(),
        parameters: Some(json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "What needs confirmation"},
                "importance": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
                "tool": {"type": "string", "description": "The tool that will run once confirmed"},
                "arguments": {"type": "object", "description": "The arguments it will run with"}
            },
            "required": ["action"]
        })),
        metadata: None,
    }
}

pub(super) async fn turn(
    gateway: &Gateway,
    face: &Face<'_>,
    id: &str,
    request: Request<Incoming>,
) -> Result<Response<ResponseBody>, Failure> {
    let (parts, body) = request.into_parts();
    let config = face.session_config(id)?;
    let (route, agent) = face.agent(&config.agent).ok_or_else(|| {
        Failure::new(
            ErrorCode::NotFound,
            format!(
                "the agent {:?} of this session is no longer served",
                config.agent
            ),
        )
    })?;
    let body = crate::server::read_body(body, route.limits.max_request_bytes).await?;
    let turn: TurnRequest = parse_body(&body)?;
    if turn.messages.is_empty() {
        return Err(invalid("messages", "a turn needs at least one message"));
    }
    let (lease, session) = TurnLease::begin(Arc::clone(face.store), id).map_err(store_failure)?;
    let mode = StreamMode::from_wire(turn.stream.as_deref());
    let run_id = uuid::Uuid::new_v4().to_string();
    let prepared = prepare(
        agent,
        session,
        turn,
        &run_id,
        face.store.limits().max_history_bytes,
    )?;
    let span = tracing::info_span!(
        "turn",
        session_id = %id,
        agent = %agent.name,
        run_id = %run_id,
        stream = mode.as_str(),
    );
    run(gateway, route, &parts.headers, prepared, lease, mode, span).await
}

/// A turn ready to run.
struct Prepared {
    input: RunAgentInput,
    /// The history the transcript continues, when it is not the input's messages (it holds
    /// synthetic calls the upstream does not see).
    history: Option<Vec<Message>>,
    config: SessionConfig,
    client_tools: Vec<String>,
    confirm_tool: String,
    budget: usize,
}

/// Steps 2–4 of the module docs.
fn prepare(
    agent: &AapAgent,
    session: Session,
    turn: TurnRequest,
    run_id: &str,
    max_history_bytes: usize,
) -> Result<Prepared, Failure> {
    let mut config = session.config;
    if let Some(tools) = &turn.tools {
        config.client_tools = client_tools(agent, tools, "tools")?;
    }
    if let Some(overrides) = &turn.agent {
        if let Some(tools) = &overrides.tools {
            config.server_tools = server_tools(agent, tools, "agent.tools")?;
        }
        if let Some(options) = &overrides.options {
            merge_options(agent, &mut config.options, options, "agent.options")?;
        }
    }
    let mut ids = IdMint::new(run_id);
    let (new, resume) = input_messages(agent, &session.pending, &turn.messages, &mut ids)?;
    let mut history = session.history;
    history.extend(new);
    let used = history_bytes(&history);
    if used > max_history_bytes {
        return Err(Failure::new(
            ErrorCode::HistoryLimitExceeded,
            format!("the session history would hold {used} bytes, over max_history_bytes ({max_history_bytes}); start a new session"),
        ));
    }
    let client_names: Vec<String> = config.client_tools.iter().map(|t| t.name.clone()).collect();
    let mut tools: Vec<Tool> = config
        .client_tools
        .iter()
        .map(|t| Tool {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: Some(t.parameters.clone()),
            metadata: t
                .title
                .as_ref()
                .map(|title| Map::from_iter([("aap".into(), json!({ "title": title }))])),
        })
        .collect();
    if agent.inject_confirm_tool && !client_names.contains(&agent.confirm_tool) {
        tools.push(confirm_tool(&agent.confirm_tool));
    }
    let options: Map<String, Value> = config
        .options
        .iter()
        .filter(|(k, _)| {
            agent.forward_secret_options
                || !agent
                    .options
                    .iter()
                    .any(|o| o.name == **k && o.kind == OptionKind::Secret)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (messages, history) = match for_upstream(&history) {
        Some(filtered) => (filtered, Some(history)),
        None => (history, None),
    };
    let input = RunAgentInput {
        thread_id: session.id,
        run_id: run_id.to_owned(),
        messages,
        tools,
        context: Vec::new(),
        protocol_version: Some(PROTOCOL_VERSION.into()),
        parent_run_id: None,
        state: session.state,
        forwarded_props: Some(json!({"aap": {
            "agent": agent.name,
            "options": options,
            "tools": config.server_tools,
        }})),
        resume: (!resume.is_empty()).then_some(resume),
        extra: Map::new(),
    };
    Ok(Prepared {
        input,
        history,
        config,
        client_tools: client_names,
        confirm_tool: agent.confirm_tool.clone(),
        budget: max_history_bytes - used,
    })
}

/// The turn's messages as canonical input (step 3): answers in pending order, then user
/// messages; `resume` entries for interrupts.
fn input_messages(
    agent: &AapAgent,
    pending: &[Pending],
    messages: &[AapMessage],
    ids: &mut IdMint,
) -> Result<(Vec<Message>, Vec<ResumeEntry>), Failure> {
    let mut answers: Vec<Option<Message>> = vec![None; pending.len()];
    let mut answered = vec![false; pending.len()];
    let mut resume = Vec::new();
    let mut users = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let (call, granted) = match message {
            AapMessage::User { content } => {
                users.push(Message::User(UserMessage {
                    id: ids.next('i'),
                    content: content_from_aap(content, &format!("{at}.content"), agent.image)
                        .map_err(|e| invalid(e.field, e.problem))?,
                    name: None,
                    encrypted_value: None,
                    metadata: None,
                    subagent_run_id: None,
                    extra: Map::new(),
                }));
                continue;
            }
            AapMessage::Tool { tool_call_id, .. } => (tool_call_id, None),
            AapMessage::ToolPermission {
                tool_call_id,
                granted,
                reason,
            } => (tool_call_id, Some((*granted, reason.as_deref()))),
            other => {
                return Err(invalid(
                    format!("{at}.role"),
                    format!(
                        "{:?} is not input; a turn takes user, tool and tool_permission messages",
                        other.role()
                    ),
                ))
            }
        };
        let Some(slot) = pending.iter().position(|p| p.tool_call_id == *call) else {
            return Err(Failure::new(
                ErrorCode::UnknownToolCall,
                format!("{at}.toolCallId: {call:?} is not a pending tool call of this session"),
            ));
        };
        if std::mem::replace(&mut answered[slot], true) {
            return Err(invalid(
                format!("{at}.toolCallId"),
                format!("{call:?} is answered twice"),
            ));
        }
        let p = &pending[slot];
        answers[slot] = match (&p.kind, message, granted) {
            (PendingKind::ClientTool, AapMessage::Tool { content, .. }, _) => Some(tool_message(
                ids.next('i'),
                call.clone(),
                content_from_aap(content, &format!("{at}.content"), agent.image)
                    .map_err(|e| invalid(e.field, e.problem))?,
            )),
            (PendingKind::Permission, _, Some((granted, reason))) => Some(tool_message(
                ids.next('i'),
                call.clone(),
                MessageContent::Text(agent.result_encoding.encode(granted, reason)),
            )),
            (
                PendingKind::Interrupt {
                    interrupt_id,
                    synthetic,
                },
                _,
                Some((granted, reason)),
            ) => {
                resume.push(permission_resume(
                    interrupt_id,
                    granted,
                    reason,
                    agent.denial_as,
                ));
                // A synthetic call is resolved in the history the client reads back; the
                // upstream never sees it (`for_upstream`).
                synthetic.then(|| {
                    tool_message(
                        ids.next('i'),
                        call.clone(),
                        MessageContent::Text(if granted {
                            "granted".into()
                        } else {
                            format!(
                                "denied{}",
                                reason.map(|r| format!(": {r}")).unwrap_or_default()
                            )
                        }),
                    )
                })
            }
            (PendingKind::ClientTool, _, _) => {
                return Err(invalid(
                    format!("{at}.role"),
                    format!(
                        "{call:?} is a call of the client tool {:?}: answer it with a tool message",
                        p.name
                    ),
                ))
            }
            (_, _, None) => {
                return Err(invalid(
                    format!("{at}.role"),
                    format!(
                        "{call:?} asks permission to run {:?}: answer it with tool_permission",
                        p.name
                    ),
                ))
            }
        };
    }
    let missing: Vec<&str> = pending
        .iter()
        .zip(&answered)
        .filter(|(_, done)| !**done)
        .map(|(p, _)| p.tool_call_id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Failure::new(
            ErrorCode::IncompleteToolResults,
            format!(
                "messages: the last turn stopped on tool_use; answer every pending call in this turn (missing: {})",
                missing.join(", ")
            ),
        ));
    }
    let mut new: Vec<Message> = answers.into_iter().flatten().collect();
    new.extend(users);
    Ok((new, resume))
}

/// The history the upstream sees, when it differs from the session's: without the synthetic
/// calls that stand for interrupts (and their records), which the upstream never made.
fn for_upstream(history: &[Message]) -> Option<Vec<Message>> {
    let made_up: HashSet<&str> = history
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => a.tool_calls.as_ref(),
            _ => None,
        })
        .flatten()
        .filter(|c| is_synthetic(c))
        .map(|c| c.id.as_str())
        .collect();
    if made_up.is_empty() {
        return None;
    }
    let mut filtered = history.to_vec();
    remove_calls(&mut filtered, |id| made_up.contains(id));
    Some(filtered)
}

/// Step 5: the upstream, the pipeline, the response.
async fn run(
    gateway: &Gateway,
    route: &Route,
    client_headers: &http::HeaderMap,
    prepared: Prepared,
    lease: TurnLease,
    mode: StreamMode,
    span: tracing::Span,
) -> Result<Response<ResponseBody>, Failure> {
    let Prepared {
        mut input,
        history,
        config,
        client_tools,
        confirm_tool,
        budget,
    } = prepared;
    // The gateway's own API key is not the agent's business.
    let mut headers = client_headers.clone();
    if route.aap.as_ref().is_some_and(|a| !a.api_keys.is_empty()) {
        headers.remove(header::AUTHORIZATION);
    }
    span.in_scope(|| tracing::debug!(messages = input.messages.len(), "turn starts"));
    let opened = gateway.open_upstream(route, &headers, &input).await;
    let (upstream, framing) = match opened {
        Ok(opened) => opened,
        Err(failure) => {
            // Nothing ran: the session is left as it was (the lease drops), so the client may
            // send the same turn again.
            let _entered = span.enter();
            tracing::warn!(code = %failure.code, message = %failure.message, "upstream refused the turn");
            return match mode {
                StreamMode::None => Err(Failure::new(failure.code, failure.message)),
                _ => Ok(failed_stream()),
            };
        }
    };
    let mut spec = gateway.pipeline_spec(route, &input, framing);
    let history = history.unwrap_or_else(|| std::mem::take(&mut input.messages));
    spec.aap = AapTurn {
        options: TurnOptions {
            mode,
            client_tools,
            confirm_tool,
        },
        history,
        state: input.state.take(),
        budget,
    };
    let pipeline =
        Pipeline::new(spec).map_err(|e| Failure::new(ErrorCode::NotImplemented, e.to_string()))?;
    let outcome = Arc::new(Mutex::new(None));
    let hook_outcome = Arc::clone(&outcome);
    let hook_span = span.clone();
    let body = gateway
        .translating_body(route, upstream, pipeline, span)
        .on_end(Box::new(move |pipeline| {
            let _entered = hook_span.enter();
            let ended = commit(pipeline, lease, config);
            if let Ok(mut slot) = hook_outcome.lock() {
                *slot = Some(ended);
            }
        }));
    if mode != StreamMode::None {
        let mut response = Response::new(Either::Left(body));
        crate::server::sse_headers(response.headers_mut());
        return Ok(response);
    }
    let collected = body.quiet().collect().await;
    let bytes = match collected {
        Ok(c) => c.to_bytes(),
        Err(never) => match never {},
    };
    let ended = outcome.lock().ok().and_then(|mut o| o.take());
    match ended {
        Some(Ended::NothingRan(failure)) => Ok(error_response(&failure)),
        _ => {
            let mut response = Response::new(Either::Right(Full::new(bytes)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            *response.status_mut() = StatusCode::OK;
            Ok(response)
        }
    }
}

/// A stream that failed before the upstream produced anything: `turn_start`, `turn_stop error`.
fn failed_stream() -> Response<ResponseBody> {
    let mut body = bytes::BytesMut::from(TURN_START_FRAME);
    body.extend_from_slice(b"event: turn_stop\ndata: {\"stopReason\":\"error\"}\n\n");
    let body = body.freeze();
    let mut response = Response::new(Either::Right(Full::new(body)));
    crate::server::sse_headers(response.headers_mut());
    response
}

/// How a turn ended, for the `none` response.
enum Ended {
    Committed,
    /// The upstream failed before its first event; nothing was committed.
    NothingRan(Failure),
}

/// Step 6: writes the turn back to the session.
///
/// - `tool_use`: everything the run produced, with the pending calls.
/// - `end_turn`, `max_tokens`, `refusal`: everything, less calls left without a result.
/// - an error, a cut stream or a client that left: the input and the completed tool rounds;
///   the assistant step the failure interrupted is dropped, so the history never holds half an
///   answer or a call without its stop, and the session takes the next turn.
/// - a failure before the upstream's first event: nothing (the turn may be sent again).
fn commit(pipeline: &mut Pipeline, lease: TurnLease, config: SessionConfig) -> Ended {
    let events_in = pipeline.stats().events_in;
    let failure = pipeline.failure();
    let Some(writer) = pipeline.aap_mut() else {
        return Ended::Committed;
    };
    let (mut transcript, stop) = writer.take();
    let reason = stop.as_ref().map(|s| s.reason);
    if events_in == 0 && reason.is_none_or(|r| r == StopReason::Error) {
        let code = failure.unwrap_or(ErrorCode::UpstreamTruncated);
        tracing::warn!(code = %code, "the upstream failed before its first event; the session is unchanged");
        return Ended::NothingRan(Failure::new(
            code,
            format!("the agent failed before answering ({code}); the session is unchanged, the turn may be sent again"),
        ));
    }
    let pending = match stop {
        Some(stop) if stop.reason == StopReason::ToolUse => stop.pending,
        Some(stop) if stop.reason != StopReason::Error => {
            transcript.drop_unresolved_calls();
            Vec::new()
        }
        _ => {
            transcript.truncate_to_last_tool_round();
            Vec::new()
        }
    };
    tracing::info!(
        stop = reason.map_or("none", StopReason::as_str),
        pending = pending.len(),
        "turn committed"
    );
    let (history, state) = transcript.into_parts();
    lease.commit(TurnCommit {
        config,
        history,
        state,
        pending,
    });
    Ended::Committed
}
