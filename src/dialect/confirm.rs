//! The confirm tool (`translation.md` §6): how a client that has no interrupts (HAI) answers an
//! AG-UI interrupt (flow C1). The run's interrupts become calls of a frontend confirm tool with
//! self-describing ids `confirm:intr:<interruptId>`; the client answers each with a tool message,
//! which the next request turns back into the upstream's `resume`. No table is needed: the id
//! says which interrupt an answer belongs to.

use serde_json::{json, Map, Value};

use crate::event::{
    Event, EventBase, Interrupt, Message, ResumeEntry, ResumeStatus, RunAgentInput, ToolCallArgs,
    ToolCallEnd, ToolCallStart,
};

/// `hitl.confirm_tool.name`'s default.
pub const DEFAULT_TOOL: &str = "confirmAction";

/// Prefix of a synthetic confirm call answering an AG-UI interrupt.
pub const INTERRUPT_PREFIX: &str = "confirm:intr:";

/// The id of the confirm call standing for `interrupt`.
pub fn call_id(interrupt: &Interrupt) -> String {
    format!("{INTERRUPT_PREFIX}{}", interrupt.id)
}

/// The confirm call for one interrupt: START, one ARGS holding `{"action", "importance"}`, END.
pub fn confirm_call(interrupt: &Interrupt, tool: &str, out: &mut Vec<Event>) {
    let id = call_id(interrupt);
    let action = interrupt
        .message
        .clone()
        .unwrap_or_else(|| interrupt.reason.clone());
    out.push(Event::ToolCallStart(ToolCallStart {
        tool_call_id: id.clone(),
        tool_call_name: tool.to_owned(),
        parent_message_id: None,
        base: EventBase::default(),
    }));
    out.push(Event::ToolCallArgs(ToolCallArgs {
        tool_call_id: id.clone(),
        delta: json!({"action": action, "importance": "high"}).to_string(),
        base: EventBase::default(),
    }));
    out.push(Event::ToolCallEnd(ToolCallEnd {
        tool_call_id: id,
        base: EventBase::default(),
    }));
}

/// The verdict of a confirm answer (§6.1, fail closed): granted, or denied with a reason.
pub fn parse_granted(content: &Value) -> Result<(), Option<String>> {
    let value = match content {
        Value::String(text) => {
            let text = text.trim();
            if text == "true" || text == "confirmed" {
                return Ok(());
            }
            match serde_json::from_str::<Value>(text) {
                Ok(Value::String(inner)) if inner == "true" || inner == "confirmed" => {
                    return Ok(())
                }
                Ok(v) => v,
                Err(_) => return Err(None),
            }
        }
        other => other.clone(),
    };
    match value {
        Value::Bool(true) => Ok(()),
        Value::Object(o) => {
            if ["confirmed", "granted", "approved"]
                .iter()
                .any(|k| o.get(*k) == Some(&Value::Bool(true)))
            {
                Ok(())
            } else {
                Err(o.get("reason").and_then(Value::as_str).map(str::to_owned))
            }
        }
        _ => Err(None),
    }
}

/// What the gateway writes into a confirm tool's result (`hitl.confirm_tool.result_encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultEncoding {
    /// `{"confirmed":true}` / `{"confirmed":false,"reason":"…"}`.
    #[default]
    Object,
    /// `true` / `false`.
    Boolean,
    /// `confirmed` / `denied`.
    Word,
}

impl ResultEncoding {
    pub fn encode(self, granted: bool, reason: Option<&str>) -> String {
        match (self, granted) {
            (ResultEncoding::Object, true) => json!({"confirmed": true}).to_string(),
            (ResultEncoding::Object, false) => match reason {
                Some(reason) => json!({"confirmed": false, "reason": reason}).to_string(),
                None => json!({"confirmed": false}).to_string(),
            },
            (ResultEncoding::Boolean, g) => g.to_string(),
            (ResultEncoding::Word, true) => "confirmed".into(),
            (ResultEncoding::Word, false) => "denied".into(),
        }
    }
}

impl std::str::FromStr for ResultEncoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "object" => Ok(ResultEncoding::Object),
            "boolean" => Ok(ResultEncoding::Boolean),
            "word" => Ok(ResultEncoding::Word),
            other => Err(format!(
                "unknown value {other:?} (expected object, boolean or word)"
            )),
        }
    }
}

/// How a denied permission reaches an upstream that asked with an interrupt
/// (`hitl.denial_as`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DenialAs {
    /// `status: "resolved"` with `payload.approved = false`.
    #[default]
    Resolved,
    /// `status: "cancelled"`.
    Cancelled,
}

impl std::str::FromStr for DenialAs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "resolved" => Ok(DenialAs::Resolved),
            "cancelled" => Ok(DenialAs::Cancelled),
            other => Err(format!(
                "unknown value {other:?} (expected resolved or cancelled)"
            )),
        }
    }
}

/// The `resume` entry answering interrupt `interrupt_id` with a permission decision.
pub fn permission_resume(
    interrupt_id: &str,
    granted: bool,
    reason: Option<&str>,
    denial: DenialAs,
) -> ResumeEntry {
    let mut payload = Map::new();
    payload.insert("approved".into(), granted.into());
    if let (false, Some(reason)) = (granted, reason) {
        payload.insert("reason".into(), reason.into());
    }
    ResumeEntry {
        interrupt_id: interrupt_id.to_owned(),
        status: if !granted && denial == DenialAs::Cancelled {
            ResumeStatus::Cancelled
        } else {
            ResumeStatus::Resolved
        },
        payload: Some(Value::Object(payload)),
        metadata: None,
    }
}

/// Turns the answers to synthetic confirm calls in `input` into `resume` entries and removes the
/// calls and answers from the history the upstream sees. True when anything was converted.
pub fn answers_to_resume(input: &mut RunAgentInput) -> bool {
    let mut resume: Vec<ResumeEntry> = Vec::new();
    input.messages.retain(|message| {
        let Message::Tool(tool) = message else {
            return true;
        };
        let Some(interrupt_id) = tool.tool_call_id.strip_prefix(INTERRUPT_PREFIX) else {
            return true;
        };
        let content = Value::String(tool.content.text());
        let verdict = parse_granted(&content);
        let reason = verdict.clone().err().flatten();
        resume.push(permission_resume(
            interrupt_id,
            verdict.is_ok(),
            reason.as_deref(),
            DenialAs::Resolved,
        ));
        false
    });
    if resume.is_empty() {
        return false;
    }
    // The synthetic calls leave too, with any assistant message that only carried them.
    crate::event::remove_calls(&mut input.messages, |id| id.starts_with(INTERRUPT_PREFIX));
    input.resume.get_or_insert_with(Vec::new).extend(resume);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_granted_table_of_the_contract() {
        for yes in [
            json!(true),
            json!("true"),
            json!("confirmed"),
            json!({"confirmed":true}),
            json!({"granted":true}),
            json!({"approved":true}),
            json!("\"confirmed\""),
            json!("{\"confirmed\":true}"),
            json!(" true "),
        ] {
            assert_eq!(parse_granted(&yes), Ok(()), "{yes}");
        }
        for no in [
            json!("True"),
            json!("yes"),
            json!("false"),
            json!({"confirmed":"true"}),
            json!(""),
            json!(null),
        ] {
            assert_eq!(parse_granted(&no), Err(None), "{no}");
        }
        assert_eq!(
            parse_granted(&json!({"approved":false,"reason":"no"})),
            Err(Some("no".into()))
        );
    }

    #[test]
    fn result_encodings() {
        assert_eq!(
            ResultEncoding::Object.encode(true, None),
            r#"{"confirmed":true}"#
        );
        assert_eq!(
            ResultEncoding::Object.encode(false, Some("not now")),
            r#"{"confirmed":false,"reason":"not now"}"#
        );
        assert_eq!(ResultEncoding::Boolean.encode(false, Some("x")), "false");
        assert_eq!(ResultEncoding::Word.encode(true, None), "confirmed");
        // What the gateway writes, its own parser reads back the same way.
        for e in [
            ResultEncoding::Object,
            ResultEncoding::Boolean,
            ResultEncoding::Word,
        ] {
            assert_eq!(parse_granted(&Value::String(e.encode(true, None))), Ok(()));
            assert!(parse_granted(&Value::String(e.encode(false, None))).is_err());
        }
        let denied = permission_resume("i", false, Some("no"), DenialAs::Cancelled);
        assert_eq!(denied.status, ResumeStatus::Cancelled);
        assert_eq!(
            denied.payload,
            Some(json!({"approved": false, "reason": "no"}))
        );
    }

    #[test]
    fn answers_become_resume_and_leave_the_history() {
        let mut input: RunAgentInput = serde_json::from_value(json!({
            "threadId":"t","runId":"r2","messages":[
                {"id":"u","role":"user","content":"deploy"},
                {"id":"a","role":"assistant","toolCalls":[{"id":"confirm:intr:i1","type":"function","function":{"name":"confirmAction","arguments":"{}"}}]},
                {"id":"m","role":"tool","toolCallId":"confirm:intr:i1","content":"true"},
                {"id":"m2","role":"tool","toolCallId":"confirm:intr:i2","content":"{\"confirmed\":false,\"reason\":\"later\"}"},
                {"id":"m3","role":"tool","toolCallId":"c9","content":"ok"}]}))
        .unwrap();
        assert!(answers_to_resume(&mut input));
        let ids: Vec<Value> = input
            .messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap()["id"].clone())
            .collect();
        assert_eq!(ids, ["u", "m3"]);
        assert_eq!(
            serde_json::to_value(&input.resume).unwrap(),
            json!([{"interruptId":"i1","status":"resolved","payload":{"approved":true}},
                   {"interruptId":"i2","status":"resolved","payload":{"approved":false,"reason":"later"}}])
        );
    }
}
