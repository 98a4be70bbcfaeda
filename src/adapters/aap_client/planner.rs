//! The gateway as an AAP client, the pure part (`translation.md` §4.3, §6.2 A1–A3): what an
//! AG-UI (or HAI) run becomes toward an AAP agent that keeps its own history.
//!
//! AG-UI clients resend the whole conversation on every run; an AAP agent must see each message
//! exactly once. A [`ThreadRecord`] per thread remembers which AG-UI messages the agent has
//! seen (by id, with a [`Fingerprint`] of their content), the tools and options last sent, and
//! the calls the last turn stopped on. [`plan`] compares a run's input with it:
//!
//! - the new input is the user and tool messages after the last message the agent saw;
//! - an edited history (a seen message changed, the latest seen message gone, an assistant
//!   message the agent never wrote) is a divergence: the run starts a new session seeded with
//!   the history ([`SessionPlan::Create`]), or is refused (`aap.history_divergence = reject`);
//! - answers to a `tool_use` stop must all come together: client results as tool messages,
//!   permissions as confirm-call answers (`confirm:perm:<id>`) or `resume` entries
//!   (`perm:<id>`), which become `tool_permission` messages;
//! - answers go first, in one turn; the user's new messages follow in a second turn of the same
//!   run, only if the first ended `end_turn`.
//!
//! The confirm calls and their answers never reach the agent.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::config::aap_client::HitlStyle;
use crate::dialect::aap::fingerprint::{Forwarded, CONFIRM_PREFIX};
use crate::dialect::aap::history::to_aap;
use crate::dialect::aap::read::{Hitl, PERMISSION_CONFIRM_PREFIX, PERMISSION_INTERRUPT_PREFIX};
use crate::dialect::aap::types::{AapMessage, ServerToolRef, ToolSpec};
use crate::dialect::confirm::parse_granted;
use crate::error::{ErrorCode, Failure};
use crate::event::{args_object, remove_calls};
use crate::event::{
    ContentPart, MediaPart, Message, MessageContent, PartSource, ResumeStatus, RunAgentInput, Tool,
};
use crate::session::ThreadRecord;

/// The denial reason when a client edits a call's arguments while approving it.
const EDITED_ARGS: &str = "edited arguments are not supported";

/// Resolves the permission style for one request (`translation.md` §0.1 `hitl.style`).
pub fn resolve_hitl(
    style: HitlStyle,
    confirm_tool: &str,
    input: &RunAgentInput,
    agui: bool,
) -> Hitl {
    let declared = input.tools.iter().any(|t| t.name == confirm_tool);
    let interrupts = agui
        && input.protocol_version.as_deref().is_some_and(|v| {
            v.split('.')
                .next()
                .and_then(|m| m.parse::<u32>().ok())
                .unwrap_or(0)
                >= 1
        });
    match style {
        HitlStyle::ConfirmTool => Hitl::ConfirmTool(confirm_tool.to_owned()),
        HitlStyle::Interrupt => Hitl::Interrupt,
        HitlStyle::Auto if declared => Hitl::ConfirmTool(confirm_tool.to_owned()),
        HitlStyle::Auto if interrupts => Hitl::Interrupt,
        HitlStyle::Auto => Hitl::Unconfirmable,
    }
}

/// What the agent accepts in user content (`capabilities.image`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageCaps {
    pub http: bool,
    pub data: bool,
}

/// The run's policies that shape the requests (`[routes.aap_upstream]`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// The confirm tool's name: never declared to the agent.
    pub confirm_tool: String,
    /// Start a new session on an edited history (`fork`) rather than refuse the run.
    pub fork_on_divergence: bool,
    /// Send the run's `context` as a system message when a session is created.
    pub context_as_system: bool,
    pub images: ImageCaps,
    /// Server tools and options when the run's `forwardedProps.aap` names none.
    pub default_server_tools: Option<Vec<ServerToolRef>>,
    pub default_options: Map<String, Value>,
}

/// Where the run's turns go.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionPlan {
    /// The thread's session.
    Existing,
    /// A new session with this seed; `divergence` says why the old one was left, if any.
    Create {
        seed: Vec<AapMessage>,
        seed_ids: Vec<Forwarded>,
        divergence: Option<String>,
    },
}

/// The requests of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub session: SessionPlan,
    /// Tool results and permissions, in pending order: the first turn, when any.
    pub answers: Vec<AapMessage>,
    /// The user's new messages: a turn of their own, after the answers' turn ended `end_turn`.
    pub users: Vec<AapMessage>,
    /// The AG-UI messages the answers and the user turn carry.
    pub answer_ids: Vec<Forwarded>,
    pub user_ids: Vec<Forwarded>,
    /// The full state the record takes once the turn is accepted.
    pub tools: Vec<ToolSpec>,
    pub server_tools: Vec<ServerToolRef>,
    pub options: Map<String, Value>,
    /// What changed since the record (`None`: send nothing).
    pub tools_changed: bool,
    pub server_tools_changed: bool,
    pub options_changed: Map<String, Value>,
    /// The seed of a replacement session, should the agent have lost this one.
    pub recreate_seed: Vec<AapMessage>,
    pub recreate_ids: Vec<Forwarded>,
}

impl RunPlan {
    /// Nothing to send: the run finishes at once.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty() && self.users.is_empty()
    }
}

/// Client tools as AAP tool specs, the confirm tool left out (`title` from `metadata.aap.title`).
pub fn tool_specs(tools: &[Tool], confirm_tool: &str) -> Vec<ToolSpec> {
    tools
        .iter()
        .filter(|t| t.name != confirm_tool)
        .map(|t| ToolSpec {
            name: t.name.clone(),
            title: t
                .metadata
                .as_ref()
                .and_then(|m| m.get("aap"))
                .and_then(|a| a.get("title"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            description: t.description.clone(),
            parameters: t
                .parameters
                .clone()
                .unwrap_or_else(crate::dialect::aap::types::empty_schema),
        })
        .collect()
}

/// An answer the client gave to a permission.
struct Verdict {
    call_id: String,
    granted: bool,
    reason: Option<String>,
}

/// Plans one run; see the module docs. `record` is the thread's, if the agent has a session.
pub fn plan(
    record: Option<&ThreadRecord>,
    input: &RunAgentInput,
    options: &PlanOptions,
) -> Result<RunPlan, Failure> {
    // The confirm calls leave the history; their answers become verdicts.
    let mut messages = input.messages.clone();
    let mut verdicts: Vec<Verdict> = Vec::new();
    for message in &messages {
        if let Message::Tool(tool) = message {
            if let Some(call_id) = tool.tool_call_id.strip_prefix(PERMISSION_CONFIRM_PREFIX) {
                let verdict = parse_granted(&Value::String(tool.content.text()));
                verdicts.push(Verdict {
                    call_id: call_id.to_owned(),
                    granted: verdict.is_ok(),
                    reason: verdict.err().flatten(),
                });
            }
        }
    }
    let answered_confirms: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(t) if t.tool_call_id.starts_with(CONFIRM_PREFIX) => Some(t.id.clone()),
            _ => None,
        })
        .collect();
    remove_calls(&mut messages, |id| id.starts_with(CONFIRM_PREFIX));
    for entry in input.resume.iter().flatten() {
        if let Some(call_id) = entry.interrupt_id.strip_prefix(PERMISSION_INTERRUPT_PREFIX) {
            let payload = entry.payload.clone().unwrap_or(Value::Null);
            let (granted, reason) = if entry.status == ResumeStatus::Cancelled {
                (false, None)
            } else if payload.get("editedArgs").is_some() {
                (false, Some(EDITED_ARGS.to_owned()))
            } else {
                let verdict = parse_granted(&payload);
                (verdict.is_ok(), verdict.err().flatten())
            };
            verdicts.push(Verdict {
                call_id: call_id.to_owned(),
                granted,
                reason,
            });
        }
    }
    gate_media(&mut messages, options.images);

    // Where the new input starts, and the session it goes to.
    let (session, start) = match record {
        None => (None, trailing_input(&messages)),
        Some(record) => match diverged(record, &messages, input) {
            Ok(start) => (Some(record), start),
            Err(why) if options.fork_on_divergence => {
                return plan_create(input, &messages, verdicts, options, Some(why));
            }
            Err(why) => {
                return Err(Failure::new(
                    ErrorCode::HistoryDiverged,
                    format!("the history differs from what the agent has seen: {why}"),
                ))
            }
        },
    };
    match session {
        None => plan_create(input, &messages, verdicts, options, None),
        Some(record) => {
            let (seed, seed_ids) = seed(input, &messages[..start], false);
            let mut plan = turns(&messages[start..], verdicts, options, input, Some(record))?;
            plan.recreate_seed = seed;
            plan.recreate_ids = seed_ids;
            // Answers of the confirm calls count as seen with the rest of the input.
            for id in answered_confirms {
                if !record.forwarded.iter().any(|f| f.id == id) {
                    // Never checked again: the answers leave the history the agent sees.
                    plan.answer_ids.push(Forwarded::new(id, "tool").optional());
                }
            }
            Ok(plan)
        }
    }
}

/// A run that starts a session: the history before the trailing input is the seed.
fn plan_create(
    input: &RunAgentInput,
    messages: &[Message],
    verdicts: Vec<Verdict>,
    options: &PlanOptions,
    divergence: Option<String>,
) -> Result<RunPlan, Failure> {
    let start = trailing_input(messages);
    let (seed, seed_ids) = seed(input, &messages[..start], options.context_as_system);
    let mut plan = turns(&messages[start..], verdicts, options, input, None)?;
    plan.recreate_seed = seed.clone();
    plan.recreate_ids = seed_ids.clone();
    plan.session = SessionPlan::Create {
        seed,
        seed_ids,
        divergence,
    };
    Ok(plan)
}

/// The index where the trailing run of user and tool messages starts.
fn trailing_input(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| !matches!(m, Message::User(_) | Message::Tool(_)))
        .map_or(0, |i| i + 1)
}

/// A session's seed: the history as AAP messages, with the run's context first when asked.
fn seed(
    input: &RunAgentInput,
    history: &[Message],
    with_context: bool,
) -> (Vec<AapMessage>, Vec<Forwarded>) {
    let mut seed = Vec::new();
    if with_context && !input.context.is_empty() {
        let lines: Vec<String> = input
            .context
            .iter()
            .map(|c| format!("{}: {}", c.description, c.value))
            .collect();
        seed.push(AapMessage::System {
            content: lines.join("\n"),
        });
    }
    seed.extend(to_agent(history));
    (seed, history.iter().map(Forwarded::of).collect())
}

/// Canonical messages as the agent receives them: calls show their own name and input.
fn to_agent(messages: &[Message]) -> Vec<AapMessage> {
    to_aap(messages, &|call| {
        (
            call.function.name.clone(),
            args_object(&call.function.arguments),
        )
    })
}

/// Checks the history against what the agent has seen; the index where the new input starts,
/// or why it diverged.
fn diverged(
    record: &ThreadRecord,
    messages: &[Message],
    input: &RunAgentInput,
) -> Result<usize, String> {
    if let Some(parent) = &input.parent_run_id {
        return Err(format!("the run branches from run {parent}"));
    }
    let seen: HashMap<&str, &Forwarded> = record
        .forwarded
        .iter()
        .map(|f| (f.id.as_str(), f))
        .collect();
    let last_seen = messages.iter().rposition(|m| seen.contains_key(m.id()));
    if let Some(latest) = record.forwarded.iter().rev().find(|f| !f.is_optional()) {
        if !messages.iter().any(|m| m.id() == latest.id) {
            return Err(format!(
                "the latest message the agent saw ({}) is gone",
                latest.id
            ));
        }
    }
    let start = last_seen.map_or(0, |i| i + 1);
    for message in &messages[..start] {
        match seen.get(message.id()) {
            None => {
                return Err(format!(
                    "message {} was inserted into the history",
                    message.id()
                ))
            }
            Some(f) if !f.matches(message) => {
                return Err(format!("message {} was edited", message.id()))
            }
            Some(_) => {}
        }
    }
    if let Some(m) = messages[start..]
        .iter()
        .find(|m| !matches!(m, Message::User(_) | Message::Tool(_)))
    {
        return Err(format!(
            "the {} message {} was not written by the agent",
            m.role(),
            m.id()
        ));
    }
    Ok(start)
}

/// The turns of the new input: answers (checked against the pending calls), then users; and
/// the tools and options to send.
fn turns(
    new: &[Message],
    mut verdicts: Vec<Verdict>,
    options: &PlanOptions,
    input: &RunAgentInput,
    record: Option<&ThreadRecord>,
) -> Result<RunPlan, Failure> {
    let pending = record.map_or(&[][..], |r| &r.pending);
    let mut results: Vec<(&str, &Message)> = Vec::new();
    let mut users: Vec<&Message> = Vec::new();
    for message in new {
        match message {
            Message::Tool(t) => results.push((t.tool_call_id.as_str(), message)),
            _ => users.push(message),
        }
    }
    let mut answers: Vec<AapMessage> = Vec::new();
    let mut answer_ids: Vec<Forwarded> = Vec::new();
    if !pending.is_empty() {
        let mut missing = Vec::new();
        for call in pending {
            if call.client {
                match results.iter().position(|(id, _)| *id == call.id) {
                    Some(at) => {
                        let (_, message) = results.remove(at);
                        answers.extend(to_agent(std::slice::from_ref(message)));
                        answer_ids.push(Forwarded::of(message));
                    }
                    None => missing.push(call.id.clone()),
                }
            } else if let Some(at) = verdicts.iter().position(|v| v.call_id == call.id) {
                let v = verdicts.remove(at);
                answers.push(permission(v.call_id, v.granted, v.reason));
            } else if let Some((granted, reason)) = &call.held {
                answers.push(permission(call.id.clone(), *granted, reason.clone()));
            } else {
                missing.push(call.id.clone());
            }
        }
        if !missing.is_empty() {
            return Err(Failure::new(
                ErrorCode::IncompleteToolResults,
                format!(
                    "the agent waits for every result and permission of its last stop at once; missing: {}",
                    missing.join(", ")
                ),
            ));
        }
    }
    if let Some(v) = verdicts.first() {
        if record.is_some() {
            return Err(Failure::new(
                ErrorCode::UnknownToolCall,
                format!("no permission request {} is pending", v.call_id),
            ));
        }
    }
    // Without a pending table (a first contact), answers go as they are.
    for v in verdicts {
        answers.push(permission(v.call_id, v.granted, v.reason));
    }
    for (_, message) in results {
        answers.extend(to_agent(std::slice::from_ref(message)));
        answer_ids.push(Forwarded::of(message));
    }
    // User messages are never merged with one another, so one at a time converts the same.
    let user_messages = users
        .iter()
        .flat_map(|m| to_agent(std::slice::from_ref(*m)))
        .collect();
    let user_ids = users.iter().map(|m| Forwarded::of(m)).collect();

    let tools = tool_specs(&input.tools, &options.confirm_tool);
    let aap = input
        .forwarded_props
        .as_ref()
        .and_then(|p| p.get("aap"))
        .cloned()
        .unwrap_or(Value::Null);
    let server_tools = aap
        .get("tools")
        .and_then(|t| serde_json::from_value::<Vec<ServerToolRef>>(t.clone()).ok())
        .or_else(|| options.default_server_tools.clone())
        .unwrap_or_default();
    let mut all_options = options.default_options.clone();
    if let Some(Value::Object(given)) = aap.get("options") {
        for (k, v) in given {
            let v = match v {
                Value::String(s) => Value::String(s.clone()),
                other => Value::String(other.to_string()),
            };
            all_options.insert(k.clone(), v);
        }
    }
    // A redacted value read back from a session listing is never a value to send.
    all_options.retain(|_, v| v.as_str() != Some(crate::dialect::aap::REDACTED));
    let (tools_changed, server_tools_changed, options_changed) = match record {
        Some(r) => (
            r.tools != tools,
            r.server_tools != server_tools,
            all_options
                .iter()
                .filter(|(k, v)| r.options.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => (true, true, all_options.clone()),
    };
    Ok(RunPlan {
        session: SessionPlan::Existing,
        answers,
        users: user_messages,
        answer_ids,
        user_ids,
        tools,
        server_tools,
        options: all_options,
        tools_changed,
        server_tools_changed,
        options_changed,
        recreate_seed: Vec::new(),
        recreate_ids: Vec::new(),
    })
}

fn permission(call_id: String, granted: bool, reason: Option<String>) -> AapMessage {
    AapMessage::ToolPermission {
        tool_call_id: call_id,
        granted,
        reason: if granted { None } else { reason },
    }
}

/// Brings a record in line with the history a gateway that owns the conversation (the AAP face)
/// commits: the agent has seen exactly the messages it was sent or wrote that the history
/// keeps, each as the history keeps it. Messages the history dropped (the step a failure
/// interrupted) leave the record, so the next turn continues after what the history shows;
/// the agent may remember more than the history does, never less.
pub fn reconcile(record: &mut ThreadRecord, history: &[Message]) {
    let kept: HashMap<&str, &Message> = history.iter().map(|m| (m.id(), m)).collect();
    let mut seen = HashSet::new();
    record.forwarded = record
        .forwarded
        .iter()
        .filter(|f| seen.insert(f.id.clone()))
        .filter_map(|f| kept.get(f.id.as_str()).map(|m| Forwarded::of(m)))
        .collect();
}

/// Drops the media the agent cannot take from user and tool content (`capabilities.image`;
/// audio, video, documents and `file` sources always).
fn gate_media(messages: &mut [Message], images: ImageCaps) {
    let keep = |part: &ContentPart| match part {
        ContentPart::Text(_) => true,
        ContentPart::Image(MediaPart { source, .. }) => match source {
            PartSource::Url { value, .. } => images.http && value.starts_with("https://"),
            PartSource::Data { .. } => images.data,
            _ => false,
        },
        _ => false,
    };
    for message in messages {
        let content = match message {
            Message::User(m) => &mut m.content,
            Message::Tool(m) => &mut m.content,
            _ => continue,
        };
        if let MessageContent::Parts(parts) = content {
            parts.retain(keep);
            if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
                *content = MessageContent::Text(content.text());
            }
        }
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
