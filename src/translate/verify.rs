//! A checker for the sequence rules of `@ag-ui/client` 1.0 (`agui.md` §5.2) plus the rule the
//! client does not check itself: exactly one terminal event, last. Used by tests to prove the
//! sequencer's guarantee on any input, and handy when debugging a recorded stream.

use crate::event::Event;

/// Why a stream is not a legal single 1.0 run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {index}: {problem}")]
pub struct Violation {
    pub index: usize,
    pub problem: String,
}

/// Checks one run: `RUN_STARTED` first, one terminal event last, every entity opened before it
/// is continued or closed and closed before `RUN_FINISHED`, no duplicate starts, no chunks.
pub fn verify_run(events: &[Event]) -> Result<(), Violation> {
    let fail = |index: usize, problem: String| Err(Violation { index, problem });
    if !matches!(events.first(), Some(Event::RunStarted(_))) {
        return fail(0, "the first event must be RUN_STARTED".into());
    }
    // (kind, id, lane): the 1.0 client keys steps by subagent lane, everything else globally.
    let mut open: Vec<(&str, &str, Option<&str>)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if e.is_terminal() != (i + 1 == events.len()) {
            return fail(i, "exactly one terminal event, and it must be last".into());
        }
        let (kind, id, opens) = match e {
            Event::TextMessageStart(x) => ("text message", x.message_id.as_str(), Some(true)),
            Event::TextMessageEnd(x) => ("text message", x.message_id.as_str(), Some(false)),
            Event::TextMessageContent(x) => ("text message", x.message_id.as_str(), None),
            Event::ToolCallStart(x) => ("tool call", x.tool_call_id.as_str(), Some(true)),
            Event::ToolCallEnd(x) => ("tool call", x.tool_call_id.as_str(), Some(false)),
            Event::ToolCallArgs(x) => ("tool call", x.tool_call_id.as_str(), None),
            Event::StepStarted(x) => ("step", x.step_name.as_str(), Some(true)),
            Event::StepFinished(x) => ("step", x.step_name.as_str(), Some(false)),
            Event::ReasoningStart(x) => ("reasoning span", x.message_id.as_str(), Some(true)),
            Event::ReasoningEnd(x) => ("reasoning span", x.message_id.as_str(), Some(false)),
            Event::ReasoningMessageStart(x) => {
                ("reasoning message", x.message_id.as_str(), Some(true))
            }
            Event::ReasoningMessageEnd(x) => {
                ("reasoning message", x.message_id.as_str(), Some(false))
            }
            Event::ReasoningMessageContent(x) => ("reasoning message", x.message_id.as_str(), None),
            Event::SubagentStarted(x) => ("subagent", x.subagent_run_id.as_str(), Some(true)),
            Event::SubagentFinished(x) => ("subagent", x.subagent_run_id.as_str(), Some(false)),
            Event::SubagentError(x) => ("subagent", x.subagent_run_id.as_str(), Some(false)),
            Event::RunStarted(_) if i > 0 => return fail(i, "a second RUN_STARTED".into()),
            Event::RunFinished(_) if !open.is_empty() => {
                return fail(i, format!("RUN_FINISHED while still open: {open:?}"))
            }
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => return fail(i, "chunks must be expanded".into()),
            _ => continue,
        };
        let lane = if kind == "step" {
            e.base().subagent_run_id.as_deref()
        } else {
            None
        };
        let key = (kind, id, lane);
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
                finish,
            ],
        ];
        for (i, events) in bad.into_iter().enumerate() {
            assert!(run(events).is_err(), "case {i} must be rejected");
        }
    }
}
