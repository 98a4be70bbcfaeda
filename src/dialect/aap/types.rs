//! The AAP v3 wire types (`specs/aap.md` §2.1, §3.3, §5), shared by the AAP face (the gateway as
//! an AAP server) and the AAP upstream (the gateway as an AAP client).
//!
//! Readers are lenient where the reference SDK is (unknown fields ignored); the gateway's own
//! checks (names, option values, roles) live with the endpoints, where they can name the field.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `GET /meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub version: u32,
    pub agents: Vec<AgentInfo>,
}

/// One agent in `/meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Exposed server tools.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub options: Vec<AgentOption>,
    #[serde(default)]
    pub capabilities: Capabilities,
}

/// One configurable option of an agent; every value is a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentOption {
    #[serde(rename = "type")]
    pub kind: OptionKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values of a `select` option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    pub default: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionKind {
    Text,
    Secret,
    Select,
}

/// Presence flags; each value is `{}` on the wire.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Map<String, Value>>,
}

/// A tool as AAP describes it (client tools, exposed server tools).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    #[serde(default = "empty_schema")]
    pub parameters: Value,
}

/// The schema of a tool that takes no arguments.
pub fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A server tool enabled for a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerToolRef {
    pub name: String,
    #[serde(default)]
    pub trust: bool,
}

/// The agent part of `POST /sessions` and of `SessionInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ServerToolRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

/// The agent part of a turn: overrides, no name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ServerToolRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub agent: AgentConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateSession {
    pub agent: AgentConfig,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<AapMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

/// How a turn's answer is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    Delta,
    Message,
    /// One JSON body when the turn is over (the default).
    #[default]
    None,
}

impl StreamMode {
    /// `"delta"`, `"message"`; anything else (absent included) is `none`, as the reference SDK
    /// answers it (`translation.md` §4.1 step 6).
    pub fn from_wire(value: Option<&str>) -> StreamMode {
        match value {
            Some("delta") => StreamMode::Delta,
            Some("message") => StreamMode::Message,
            _ => StreamMode::None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            StreamMode::Delta => "delta",
            StreamMode::Message => "message",
            StreamMode::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentOverrides>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub messages: Vec<AapMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    Error,
}

impl StopReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Refusal => "refusal",
            StopReason::Error => "error",
        }
    }

    /// `max_tokens` and `refusal` by their wire names; other stops have canonical events.
    pub fn limit(name: &str) -> Option<StopReason> {
        match name {
            "max_tokens" => Some(StopReason::MaxTokens),
            "refusal" => Some(StopReason::Refusal),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnResponse {
    pub stop_reason: StopReason,
    pub messages: Vec<AapMessage>,
}

/// Any AAP message: history (`system`, `user`, `assistant`, `tool`) and input
/// (`tool_permission`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum AapMessage {
    System {
        content: String,
    },
    User {
        content: Content,
    },
    Assistant {
        content: Content,
    },
    #[serde(rename_all = "camelCase")]
    Tool {
        tool_call_id: String,
        content: Content,
    },
    #[serde(rename_all = "camelCase")]
    ToolPermission {
        tool_call_id: String,
        granted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl AapMessage {
    pub const fn role(&self) -> &'static str {
        match self {
            AapMessage::System { .. } => "system",
            AapMessage::User { .. } => "user",
            AapMessage::Assistant { .. } => "assistant",
            AapMessage::Tool { .. } => "tool",
            AapMessage::ToolPermission { .. } => "tool_permission",
        }
    }
}

/// A string (one text block) or blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolUse {
        tool_call_id: String,
        name: String,
        input: Map<String, Value>,
    },
    /// An `https://` URL or a `data:` URI.
    Image {
        url: String,
    },
}

/// The names of the turn events (`aap.md` §3.3).
pub mod event {
    pub const TURN_START: &str = "turn_start";
    pub const TEXT_DELTA: &str = "text_delta";
    pub const THINKING_DELTA: &str = "thinking_delta";
    pub const TEXT: &str = "text";
    pub const THINKING: &str = "thinking";
    pub const TOOL_CALL: &str = "tool_call";
    pub const TOOL_RESULT: &str = "tool_result";
    pub const TURN_STOP: &str = "turn_stop";
}
