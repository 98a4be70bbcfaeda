//! A checker for the rules `@ag-ui/client` 1.0 enforces on a stream (`agui.md` §1, §5.2), plus
//! the one it does not check itself: exactly one terminal event, last. Tests use it to prove the
//! sequencer's guarantee on any input; it is also handy when debugging a recorded stream.
//!
//! [`verify_stream`] checks a stream of several runs, each with [`verify_run`]. Checked per run:
//! `RUN_STARTED` first; one terminal, last; starts, continuations and ends of text
//! messages, tool calls, reasoning messages and spans, steps (per subagent lane) and subagents;
//! nothing open at `RUN_FINISHED`; no chunks; attribution (an event's `subagentRunId`, when
//! present, matches the owner of the id it refers to, for the whole run); no `subagentRunId` on
//! run-level events; single-use subagent ids and known parents; a tool call's
//! `parentMessageId` naming an assistant message of its lane; valid JSON pointers; timestamps
//! within the JavaScript safe-integer range.

use std::collections::HashMap;

use crate::event::{Event, JsonPatchOp, TextRole};

/// Why a stream is not a legal single 1.0 run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {index}: {problem}")]
pub struct Violation {
    pub index: usize,
    pub problem: String,
}

const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// RFC 6901 as the 1.0 schema writes it: `^(/([^/~]|~[01])*)*$`.
fn valid_pointer(p: &str) -> bool {
    if p.is_empty() {
        return true;
    }
    let b = p.as_bytes();
    b[0] == b'/' && (0..b.len()).all(|i| b[i] != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1')))
}

fn patch_problem(ops: &[JsonPatchOp]) -> Option<String> {
    ops.iter()
        .flat_map(|op| std::iter::once(&op.path).chain(op.from.as_ref()))
        .find(|p| !valid_pointer(p))
        .map(|p| format!("invalid JSON pointer {p:?}"))
}

/// Checks a stream of one or more runs (AG-UI 1.1 "Several runs on one stream"): each run is
/// legal on its own ([`verify_run`]; a `RUN_ERROR` right after a `RUN_FINISHED` is that run's
/// late failure), the next begins with `RUN_STARTED`, and the stream ends with a terminal.
pub fn verify_stream(events: &[Event]) -> Result<(), Violation> {
    let mut start = 0;
    while start < events.len() {
        let Some(end) = events[start..].iter().position(Event::is_terminal) else {
            return Err(Violation {
                index: events.len(),
                problem: "the stream must end with a terminal event".into(),
            });
        };
        let end = start + end;
        verify_run(&events[start..=end]).map_err(|v| Violation {
            index: start + v.index,
            problem: v.problem,
        })?;
        let late = matches!(
            (&events[end], events.get(end + 1)),
            (Event::RunFinished(_), Some(Event::RunError(_)))
        );
        start = end + 1 + usize::from(late);
    }
    if events.is_empty() {
        return Err(Violation {
            index: 0,
            problem: "the first event must be RUN_STARTED".into(),
        });
    }
    Ok(())
}

/// Checks one run; see the module docs.
pub fn verify_run(events: &[Event]) -> Result<(), Violation> {
    let fail = |index: usize, problem: String| Err(Violation { index, problem });
    if !matches!(events.first(), Some(Event::RunStarted(_))) {
        return fail(0, "the first event must be RUN_STARTED".into());
    }
    // Open entities: (kind, id, step lane).
    let mut open: Vec<(&str, &str, Option<&str>)> = Vec::new();
    // Owner lane of every id seen, per kind group, for the whole run.
    let mut owners: HashMap<(&str, &str), Option<&str>> = HashMap::new();
    // Text message ids that are assistant messages.
    let mut assistant: HashMap<&str, bool> = HashMap::new();
    let mut subagents_done: Vec<&str> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if e.is_terminal() != (i + 1 == events.len()) {
            return fail(i, "exactly one terminal event, and it must be last".into());
        }
        let base = e.base();
        let lane = base.subagent_run_id.as_deref();
        if base
            .timestamp
            .is_some_and(|t| !(0..=MAX_SAFE_INTEGER).contains(&t))
        {
            return fail(i, "timestamp outside the safe integer range".into());
        }
        if lane.is_some()
            && matches!(
                e,
                Event::RunStarted(_)
                    | Event::RunFinished(_)
                    | Event::RunError(_)
                    | Event::MessagesSnapshot(_)
            )
        {
            return fail(i, "a run-level event carries subagentRunId".into());
        }
        // (kind, owner group, id, opens?) for entity events.
        let (kind, group, id, opens) = match e {
            Event::TextMessageStart(x) => {
                assistant
                    .entry(&x.message_id)
                    .or_insert(x.role == TextRole::Assistant);
                ("text message", "message", x.message_id.as_str(), Some(true))
            }
            Event::TextMessageEnd(x) => (
                "text message",
                "message",
                x.message_id.as_str(),
                Some(false),
            ),
            Event::TextMessageContent(x) => {
                ("text message", "message", x.message_id.as_str(), None)
            }
            Event::ToolCallStart(x) => {
                if let Some(parent) = x.parent_message_id.as_deref() {
                    if let Some(owner) = owners.get(&("message", parent)) {
                        let is_assistant = assistant.get(parent).copied().unwrap_or(false);
                        // The call's owner: its tag, else the owner of a reused id.
                        let call_lane = lane.or(owners
                            .get(&("tool", x.tool_call_id.as_str()))
                            .copied()
                            .flatten());
                        if !is_assistant || (call_lane.is_some() && *owner != call_lane) {
                            return fail(i, format!("parentMessageId {parent:?} is not an assistant message of this lane"));
                        }
                    }
                }
                ("tool call", "tool", x.tool_call_id.as_str(), Some(true))
            }
            Event::ToolCallEnd(x) => ("tool call", "tool", x.tool_call_id.as_str(), Some(false)),
            Event::ToolCallArgs(x) => ("tool call", "tool", x.tool_call_id.as_str(), None),
            Event::ToolCallResult(x) => {
                owners
                    .entry(("message", x.message_id.as_str()))
                    .or_insert(lane);
                assistant.entry(&x.message_id).or_insert(false);
                continue;
            }
            Event::StepStarted(x) => ("step", "step", x.step_name.as_str(), Some(true)),
            Event::StepFinished(x) => ("step", "step", x.step_name.as_str(), Some(false)),
            Event::ReasoningStart(x) => (
                "reasoning span",
                "reasoning",
                x.message_id.as_str(),
                Some(true),
            ),
            Event::ReasoningEnd(x) => (
                "reasoning span",
                "reasoning",
                x.message_id.as_str(),
                Some(false),
            ),
            Event::ReasoningMessageStart(x) => (
                "reasoning message",
                "reasoning",
                x.message_id.as_str(),
                Some(true),
            ),
            Event::ReasoningMessageEnd(x) => (
                "reasoning message",
                "reasoning",
                x.message_id.as_str(),
                Some(false),
            ),
            Event::ReasoningMessageContent(x) => (
                "reasoning message",
                "reasoning",
                x.message_id.as_str(),
                None,
            ),
            Event::SubagentStarted(x) => {
                if subagents_done.contains(&x.subagent_run_id.as_str()) {
                    return fail(i, format!("subagent {:?} reused", x.subagent_run_id));
                }
                if let Some(parent) = x.parent_subagent_run_id.as_deref() {
                    let known = subagents_done.contains(&parent)
                        || open.contains(&("subagent", parent, None));
                    if !known {
                        return fail(i, format!("unknown parentSubagentRunId {parent:?}"));
                    }
                }
                (
                    "subagent",
                    "subagent",
                    x.subagent_run_id.as_str(),
                    Some(true),
                )
            }
            Event::SubagentFinished(x) => {
                subagents_done.push(&x.subagent_run_id);
                (
                    "subagent",
                    "subagent",
                    x.subagent_run_id.as_str(),
                    Some(false),
                )
            }
            Event::SubagentError(x) => {
                subagents_done.push(&x.subagent_run_id);
                (
                    "subagent",
                    "subagent",
                    x.subagent_run_id.as_str(),
                    Some(false),
                )
            }
            Event::StateDelta(x) => match patch_problem(&x.delta) {
                Some(p) => return fail(i, p),
                None => continue,
            },
            Event::ActivityDelta(x) => match patch_problem(&x.patch) {
                Some(p) => return fail(i, p),
                None => continue,
            },
            Event::RunStarted(_) if i > 0 => return fail(i, "a second RUN_STARTED".into()),
            Event::RunFinished(_) if !open.is_empty() => {
                return fail(i, format!("RUN_FINISHED while still open: {open:?}"))
            }
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => return fail(i, "chunks must be expanded".into()),
            _ => continue,
        };
        // Attribution: a tag, when present, must match the id's first owner (steps are lanes).
        if kind != "step" && kind != "subagent" {
            let owner = *owners.entry((group, id)).or_insert(lane);
            if lane.is_some() && lane != owner {
                return fail(
                    i,
                    format!("{kind} {id:?} belongs to {owner:?}, not {lane:?}"),
                );
            }
        }
        let key = (kind, id, if kind == "step" { lane } else { None });
        match opens {
            Some(true) if open.contains(&key) => {
                return fail(i, format!("{kind} {id:?} is already open"))
            }
            Some(true) => open.push(key),
            Some(false) => match open.iter().position(|k| *k == key) {
                Some(pos) => {
                    open.remove(pos);
                }
                None => return fail(i, format!("{kind} {id:?} is not open")),
            },
            None if !open.contains(&key) => return fail(i, format!("{kind} {id:?} is not open")),
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(vs: Vec<serde_json::Value>) -> Result<(), Violation> {
        let events: Vec<Event> = vs
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();
        verify_run(&events)
    }

    #[test]
    fn legal_and_illegal_runs() {
        let start = json!({"type":"RUN_STARTED","threadId":"t","runId":"r"});
        let finish = json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"});
        let ts = json!({"type":"TEXT_MESSAGE_START","messageId":"m"});
        let te = json!({"type":"TEXT_MESSAGE_END","messageId":"m"});
        assert!(run(vec![start.clone(), ts.clone(), te.clone(), finish.clone()]).is_ok());
        assert!(run(vec![
            start.clone(),
            json!({"type":"RUN_ERROR","message":"x"})
        ])
        .is_ok());
        let bad = [
            vec![ts.clone(), te.clone(), finish.clone()],
            vec![start.clone(), ts.clone(), finish.clone()],
            vec![start.clone(), te.clone(), finish.clone()],
            vec![
                start.clone(),
                ts.clone(),
                ts.clone(),
                te.clone(),
                finish.clone(),
            ],
            vec![start.clone(), finish.clone(), finish.clone()],
            vec![start.clone(), ts.clone(), te.clone()],
            vec![
                start.clone(),
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m"}),
                finish.clone(),
            ],
            vec![
                start.clone(),
                json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
                finish.clone(),
            ],
            // Attribution: content tagged with another lane than its opener.
            vec![
                start.clone(),
                json!({"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"a"}),
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"b"}),
                finish.clone(),
            ],
            vec![
                start.clone(),
                json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/a~b","value":1}]}),
                finish.clone(),
            ],
            vec![
                start.clone(),
                json!({"type":"CUSTOM","name":"n","value":1,"timestamp":9_007_199_254_740_993_i64}),
                finish.clone(),
            ],
            vec![
                json!({"type":"RUN_STARTED","threadId":"t","runId":"r","subagentRunId":"a"}),
                finish.clone(),
            ],
            vec![
                start.clone(),
                json!({"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}),
                json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s"}),
                json!({"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}),
                finish.clone(),
            ],
            vec![
                start.clone(),
                json!({"type":"TEXT_MESSAGE_START","messageId":"u","role":"user"}),
                json!({"type":"TEXT_MESSAGE_END","messageId":"u"}),
                json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"u"}),
                json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
                finish,
            ],
        ];
        for (i, events) in bad.into_iter().enumerate() {
            assert!(run(events).is_err(), "case {i} must be rejected");
        }
    }
}
