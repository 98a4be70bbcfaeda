//! `POST /sessions/:id/turns` (`translation.md` §4.1–4.2, §6.2 B1–B4).
//!
//! 1. Read the body; take the session's turn lease (404 unknown or another principal's, 409
//!    busy).
//! 2. Apply the overrides: `tools` and `agent.tools` replace, `agent.options` merge.
//! 3. Check the answers against the calls the last turn left pending: each answered exactly
//!    once, with the right kind of message (400 naming the ids otherwise).
//! 4. Build the run: the whole history plus the new input (answers first, in pending order,
//!    then user messages), the client tools plus the confirm tool, the stored state,
//!    `forwardedProps.aap`, and `resume` for interrupts. The history with the input must fit
//!    `max_history_bytes` (413), and the input is charged to the gateway's byte budget (507
//!    `SESSION_STORAGE_FULL` when it would pass `max_total_bytes`; `crate::session`). What the
//!    run may add is what `max_history_bytes` leaves.
//! 5. Run the upstream through the pipeline with the AAP writer; stream (`delta`, `message`) or
//!    answer JSON (`none`). An agent that speaks AAP itself is run by the AAP client on the
//!    session's own agent session (`super::relayed`); it gets no confirm tool, since it asks
//!    its permissions itself.
//! 6. Commit when the stream ends, however it ends, by a task the turn's reporter spawns then
//!    (`super::commit`); the reporter holds the session's running mark from step 1 on.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use crate::http::client_body::ClientBody;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Map, Value};

use super::commit::{self, Committed, Ended, Reporter, TurnOwner};
use super::relayed;
use super::sessions::{client_tools, merge_options, server_tools};
use super::{invalid, parse_body, store_failure, Face};
use crate::config::{AapAgent, Route};
use crate::dialect::aap::history::{content_from_aap, tool_message};
use crate::dialect::aap::transcript::Transcript;
use crate::dialect::aap::types::{AapMessage, OptionKind, StreamMode, TurnRequest};
use crate::dialect::aap::{
    ext, is_synthetic, AapWriter, Pending, PendingKind, TurnOptions, TURN_START_FRAME,
};
use crate::dialect::confirm::permission_resume;
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::event::IdMint;
use crate::event::{history_bytes, remove_calls};
use crate::event::{
    Message, MessageContent, ResumeEntry, RunAgentInput, Tool, UserMessage, PROTOCOL_VERSION,
};
use crate::http::body::Source;
use crate::http::relay::Relay;
use crate::http::request_body::read_body;
use crate::http::response::{event_stream, full, ResponseBody};
use crate::pipeline::Pipeline;
use crate::session::{Principal, Session, SessionConfig, StoreError};

/// The confirm tool the gateway declares to the agent (`translation.md` §6.1), with the two
/// optional fields that let the agent name the tool it asks about.
fn confirm_tool(name: &str) -> Tool {
    Tool {
        name: name.to_owned(),
        description: CONFIRM_DESCRIPTION.into(),
        parameters: Some(CONFIRM_PARAMETERS.clone()),
        metadata: None,
    }
}

const CONFIRM_DESCRIPTION: &str = "Ask the user to confirm an action before it is performed. Call it before running a server tool that is not trusted, naming the tool and its arguments.";

/// The confirm tool's schema, built once: every turn declares it, and building it with `json!`
/// converted each of its strings on every turn.
static CONFIRM_PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "What needs confirmation"},
            "importance": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            "tool": {"type": "string", "description": "The tool that will run once confirmed"},
            "arguments": {"type": "object", "description": "The arguments it will run with"}
        },
        "required": ["action"]
    })
});

pub(super) async fn turn(
    relay: &Relay,
    face: &Face<'_>,
    owner: &Principal,
    id: &str,
    request: Request<ClientBody>,
) -> Result<Response<ResponseBody>, Failure> {
    let (parts, body) = request.into_parts();
    let config = face.session_config(id, owner).await?;
    let (route, agent) = face.agent(&config.agent).ok_or_else(|| {
        Failure::new(
            ErrorCode::NotFound,
            format!(
                "the agent {:?} of this session is no longer served",
                config.agent
            ),
        )
    })?;
    let body = read_body(body, route.limits.max_request_bytes, face.budget).await?;
    let turn: TurnRequest = parse_body(&body)?;
    drop(body);
    if turn.messages.is_empty() {
        return Err(invalid("messages", "a turn needs at least one message"));
    }
    let session = match face.store.begin_turn(id, owner).await {
        // The turn holding the mark may be over and only its write-back pending (its client
        // left): wait for that, then try once more.
        Err(StoreError::Busy) => {
            face.settling.settled(id).await;
            face.store.begin_turn(id, owner).await
        }
        begun => begun,
    }
    .map_err(store_failure)?;
    // From here on the reporter owns the session's running mark: a refusal below closes it
    // and waits for the mark to be ended with the session unchanged.
    let (reporter, committed) = commit::begin(
        Arc::clone(face.store),
        id.to_owned(),
        Arc::clone(relay.metrics()),
        face.settling,
    );
    let mode = StreamMode::from_wire(turn.stream.as_deref());
    let run_id = uuid::Uuid::new_v4().to_string();
    let max_history_bytes = face.store.limits().max_history_bytes;
    let relayed_agent;
    let agent = if route.upstream_dialect == Dialect::Aap {
        relayed_agent = relayed::agent(agent);
        &relayed_agent
    } else {
        agent
    };
    let prepared = match prepare(agent, session, turn, &run_id, max_history_bytes) {
        Ok(mut prepared) => {
            let asked = parts.headers.get_all(ext::REQUEST_HEADER);
            prepared.extension |= ext::requested(asked.iter().map(|v| v.as_bytes()));
            prepared
        }
        Err(failure) => {
            reporter.close(committed).await;
            return Err(failure);
        }
    };
    // Before the run starts: the input counts against the gateway's byte budget until the
    // turn is written back.
    if let Err(error) = face.store.charge_input(id, prepared.input_bytes).await {
        reporter.close(committed).await;
        return Err(store_failure(error));
    }
    let span = tracing::info_span!(
        "turn",
        session_id = %id,
        agent = %agent.name,
        run_id = %run_id,
        stream = mode.as_str(),
    );
    let turn = Turn {
        prepared,
        reporter,
        committed,
        mode,
    };
    let headers = relay.upstream_headers(route, &parts);
    run(relay, face, route, headers, turn, span).await
}

/// A turn whose session is marked running, with the reporter that will end the mark.
struct Turn {
    prepared: Prepared,
    reporter: Reporter,
    committed: Committed,
    mode: StreamMode,
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
    /// Streamed turns carry the `agui` extension.
    extension: bool,
    /// Content bytes of the turn's input.
    input_bytes: usize,
    /// Messages of the session's stored history (the transcript's first ones).
    stored: usize,
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
    let input_bytes = history_bytes(&new);
    let mut history = session.history;
    let stored = history.len();
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
        extension: agent.agui_extension,
        input_bytes,
        stored,
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
    relay: &Relay,
    face: &Face<'_>,
    route: &Route,
    headers: http::HeaderMap,
    turn: Turn,
    span: tracing::Span,
) -> Result<Response<ResponseBody>, Failure> {
    let Turn {
        prepared,
        reporter,
        committed,
        mode,
    } = turn;
    let Prepared {
        mut input,
        history,
        config,
        client_tools,
        confirm_tool,
        extension,
        input_bytes: _,
        stored,
        budget,
    } = prepared;
    // The gateway's own API key is not the agent's business: `Relay::upstream_headers` and the
    // relay's outbound rules keep it from the agent (the face's keys are its route's `auth`).
    span.in_scope(|| tracing::debug!(messages = input.messages.len(), "turn starts"));
    let writer_options = TurnOptions {
        mode,
        client_tools,
        confirm_tool,
        extension,
    };
    if route.upstream_dialect == Dialect::Aap {
        // The agent keeps its own history: the AAP client sends it only what it has not seen,
        // and the whole history stays the transcript's.
        let history = history.unwrap_or_else(|| input.messages.clone());
        let state = input.state.take();
        let record = config.upstream.clone();
        let agent = match face
            .aap_client
            .face_turn(relay, route, headers, input, record)
        {
            Ok(agent) => agent,
            Err(failure) => {
                reporter.close(committed).await;
                return Err(failure);
            }
        };
        let writer = AapWriter::new(writer_options, Transcript::new(history, state, budget));
        let pipeline = Pipeline::from_parts(agent.reader, writer, agent.options);
        let turn = TurnOwner::new(reporter, config, stored);
        let owner = relayed::Owner::new(agent.driver, turn);
        let body = relay.body(route, agent.source, pipeline, owner, span);
        return respond(body, mode, committed).await;
    }
    let opened = relay.open(route, headers, &input).await;
    let (upstream, framing) = match opened {
        Ok(opened) => opened,
        Err(failure) => {
            // Nothing ran: the session is left as it was (the reporter closes), so the client
            // may send the same turn again.
            let _entered = span.enter();
            tracing::warn!(code = %failure.code, message = %failure.message, "upstream refused the turn");
            drop(_entered);
            reporter.close(committed).await;
            return match mode {
                StreamMode::None => Err(Failure::new(failure.code, failure.message)),
                _ => Ok(failed_stream()),
            };
        }
    };
    let codecs = relay.codecs(route, &input.tools);
    let options = relay.pipeline_options(route, &input, framing);
    let reader = route
        .upstream_dialect
        .reader(&options.ids, framing, &codecs);
    let history = history.unwrap_or_else(|| std::mem::take(&mut input.messages));
    let writer = AapWriter::new(
        writer_options,
        Transcript::new(history, input.state.take(), budget),
    );
    let pipeline = Pipeline::from_parts(reader, writer, options);
    let owner = TurnOwner::new(reporter, config, stored);
    let body = relay.body(route, Source::Body(upstream), pipeline, owner, span);
    respond(body, mode, committed).await
}

/// The turn's response: the stream, or (`none`) its JSON once the turn is written back.
async fn respond<B>(
    body: B,
    mode: StreamMode,
    committed: Committed,
) -> Result<Response<ResponseBody>, Failure>
where
    B: http_body::Body<Data = bytes::Bytes, Error = std::convert::Infallible> + Send + 'static,
{
    if mode != StreamMode::None {
        return Ok(event_stream(body));
    }
    // Collected from the heap: inline, the body would sit in this future twice (as the argument
    // and inside the collector), and every turn's future is as large as its largest state.
    let collected = Box::pin(body).collect().await;
    let bytes = match collected {
        Ok(c) => c.to_bytes(),
        Err(never) => match never {},
    };
    // The answer waits for the write, so the session holds the turn once the client has it.
    match committed.ended().await {
        Ended::NothingRan(failure) => Err(failure),
        _ => Ok(full(StatusCode::OK, Some("application/json"), bytes)),
    }
}

/// A stream that failed before the upstream produced anything: `turn_start`, `turn_stop error`.
fn failed_stream() -> Response<ResponseBody> {
    let mut body = bytes::BytesMut::from(TURN_START_FRAME);
    body.extend_from_slice(b"event: turn_stop\ndata: {\"stopReason\":\"error\"}\n\n");
    event_stream(Full::new(body.freeze()))
}
