//! Payloads of the 31 AG-UI 1.0 events (`specs/agui.md` §2.2–2.8).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{EventBase, Interrupt, Message, RunAgentInput};
use crate::event::message::MessageContent;

// === Lifecycle ===

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    pub thread_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Box<RunAgentInput>>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFinished {
    pub thread_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Vec<TokenUsage>>,
    #[serde(flatten)]
    pub base: EventBase,
}

/// How a run ended (`agui.md` §2.2); absent means success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunOutcome {
    #[serde(rename_all = "camelCase")]
    Success {
        /// Frontend tool calls left for the client.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending_tool_call_ids: Option<Vec<String>>,
    },
    /// At least one interrupt; an empty list is not a valid interrupt outcome.
    Interrupt {
        interrupts: Vec<Interrupt>,
    },
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Vec<TokenUsage>>,
    #[serde(flatten)]
    pub base: EventBase,
}

/// Token accounting attached to terminal events.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStarted {
    pub step_name: String,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFinished {
    pub step_name: String,
    #[serde(flatten)]
    pub base: EventBase,
}

// === Text messages ===

/// Roles a `TEXT_MESSAGE_START` may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextRole {
    Developer,
    System,
    #[default]
    Assistant,
    User,
}

impl TextRole {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TextRole::Developer => "developer",
            TextRole::System => "system",
            TextRole::Assistant => "assistant",
            TextRole::User => "user",
        }
    }

    /// Parses an exact wire name.
    pub fn from_wire(s: &str) -> Option<TextRole> {
        match s {
            "developer" => Some(TextRole::Developer),
            "system" => Some(TextRole::System),
            "assistant" => Some(TextRole::Assistant),
            "user" => Some(TextRole::User),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageStart {
    pub message_id: String,
    /// Always written: 1.0 defaults it to `assistant`, stricter consumers require it.
    #[serde(default)]
    pub role: TextRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageContent {
    pub message_id: String,
    pub delta: String,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageEnd {
    pub message_id: String,
    #[serde(flatten)]
    pub base: EventBase,
}

/// Read on ingress only: readers expand chunks (`agui.md` §4), writers never see one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageChunk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<TextRole>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

// === Tool calls ===

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallStart {
    pub tool_call_id: String,
    pub tool_call_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallArgs {
    pub tool_call_id: String,
    /// A fragment of the argument JSON text; fragments concatenate, never validated.
    pub delta: String,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEnd {
    pub tool_call_id: String,
    #[serde(flatten)]
    pub base: EventBase,
}

/// Read on ingress only, like [`TextMessageChunk`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallChunk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

/// The literal role `"tool"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    #[default]
    Tool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// Id of the new tool message this result creates.
    pub message_id: String,
    pub tool_call_id: String,
    pub content: MessageContent,
    #[serde(default)]
    pub role: ToolRole,
    #[serde(flatten)]
    pub base: EventBase,
}

// === State, messages, activity ===

/// Operation names of RFC 6902.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchOpKind {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

/// One JSON-Patch operation; `path`/`from` are JSON pointers.
///
/// Open, as RFC 6902 §4 makes it (and AG-UI 1.1 with it): a member the operation does not
/// define is not unrecognised material but part of a valid patch, so it is kept in `extra` and
/// written back as it came. `from` is read only where it is defined (`move`, `copy`); on any
/// other operation it is such a member, whatever its type. `value` is kept whenever present
/// (a `remove` with a leftover `value` arrives whole).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonPatchOp {
    pub op: PatchOpKind,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `null` is a legal value and is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Members RFC 6902 does not define for this operation.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for JsonPatchOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JsonPatchOp, D::Error> {
        use serde::de::Error;
        let mut extra = Map::<String, Value>::deserialize(d)?;
        let op = extra
            .remove("op")
            .ok_or_else(|| D::Error::missing_field("op"))?;
        let op = PatchOpKind::deserialize(op).map_err(D::Error::custom)?;
        let path = match extra.remove("path") {
            Some(Value::String(path)) => path,
            Some(_) => return Err(D::Error::custom("path: expected a JSON pointer string")),
            None => return Err(D::Error::missing_field("path")),
        };
        let from = match op {
            PatchOpKind::Move | PatchOpKind::Copy => match extra.remove("from") {
                Some(Value::String(from)) => Some(from),
                Some(_) => return Err(D::Error::custom("from: expected a JSON pointer string")),
                None => None,
            },
            _ => None,
        };
        let value = extra.remove("value");
        Ok(JsonPatchOp {
            op,
            path,
            from,
            value,
            extra,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateSnapshot {
    /// Any JSON, `null` included; never missing.
    pub snapshot: Value,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateDelta {
    pub delta: Vec<JsonPatchOp>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessagesSnapshot {
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivitySnapshot {
    pub message_id: String,
    pub activity_type: String,
    pub content: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityDelta {
    pub message_id: String,
    pub activity_type: String,
    pub patch: Vec<JsonPatchOp>,
    #[serde(flatten)]
    pub base: EventBase,
}

// === Reasoning ===

/// The literal role `"reasoning"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    #[default]
    Reasoning,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningStart {
    /// The span id.
    pub message_id: String,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageStart {
    pub message_id: String,
    #[serde(default)]
    pub role: ReasoningRole,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageContent {
    pub message_id: String,
    pub delta: String,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageEnd {
    pub message_id: String,
    #[serde(flatten)]
    pub base: EventBase,
}

/// Read on ingress only, like [`TextMessageChunk`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageChunk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEnd {
    /// The span id.
    pub message_id: String,
    #[serde(flatten)]
    pub base: EventBase,
}

/// What an encrypted reasoning value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EncryptedSubtype {
    ToolCall,
    Message,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEncryptedValue {
    pub subtype: EncryptedSubtype,
    pub entity_id: String,
    pub encrypted_value: String,
    #[serde(flatten)]
    pub base: EventBase,
}

// === Subagents ===
// `subagentRunId` is a required field of its own here; `base.subagent_run_id` stays empty.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStarted {
    pub subagent_run_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_subagent_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

/// How a subagent ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SubagentOutcome {
    Success,
    #[serde(rename_all = "camelCase")]
    Suspended {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupt_ids: Option<Vec<String>>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentFinished {
    pub subagent_run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SubagentOutcome>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentError {
    pub subagent_run_id: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

// === Escape hatches ===

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Raw {
    /// Any JSON; must be present.
    pub event: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(flatten)]
    pub base: EventBase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Custom {
    pub name: String,
    /// Any JSON; must be present.
    pub value: Value,
    #[serde(flatten)]
    pub base: EventBase,
}
