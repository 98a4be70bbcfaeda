//! The canonical model: AG-UI 1.0 events, messages and the run input (`specs/agui.md` §2–3).
//!
//! Every dialect reader produces these types and every writer consumes them, so this module
//! is the one vocabulary the gateway speaks inside. Serialisation follows the 1.0 rules:
//! camelCase keys, optional fields omitted (never `null`), integer millisecond timestamps.
//! Fields a type does not know are kept in an `extra` map, so nothing a newer producer adds
//! is lost before a writer decides what to do with it.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

mod diag;
mod entity;
mod history;
mod input;
mod message;
mod types;

pub use diag::{Clock, DropKind, IdMint, Note, Rule, RunIds};
pub use entity::Entity;
pub use history::{args_object, content_len, history_bytes, remove_calls};
pub use input::{Context, Interrupt, ResumeEntry, ResumeStatus, RunAgentInput, Tool};
pub use message::{
    ActivityMessage, AssistantMessage, ContentPart, FunctionCall, FunctionKind, MediaPart, Message,
    MessageContent, PartSource, ReasoningMessage, TextMessage, TextPart, ToolCall, ToolMessage,
    UserMessage,
};
pub use types::*;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Protocol version the gateway speaks and announces.
pub const PROTOCOL_VERSION: &str = "1.0";

/// Fields every event may carry (`agui.md` §2.1), plus whatever the model does not know.
///
/// The JSON-valued fields are boxed: they are absent from nearly every event, and events are
/// moved by value through the pipeline several times each, so their size is paid per event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventBase {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_event: Option<Box<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<Map<String, Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Unknown fields, kept verbatim. A strict writer folds them into `metadata`.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An event's unknown fields: a JSON object that allocates only when it holds something.
/// Reads as a [`Map`] (an empty one when nothing is held).
#[derive(Debug, Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// Takes the fields out, leaving none.
    pub fn take(&mut self) -> Map<String, Value> {
        self.0.take().map(|map| *map).unwrap_or_default()
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Extra {
        Extra((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl std::ops::Deref for Extra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.0
            .as_deref()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }
}

impl std::ops::DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        **self == **other
    }
}

impl Serialize for Extra {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Extra, D::Error> {
        Map::deserialize(deserializer).map(Extra::from)
    }
}

/// Declares the event enum, its fieldless `EventType` twin and the wire names in one place,
/// so the 31 names can never drift apart.
macro_rules! events {
    ($($variant:ident($payload:ident) = $wire:literal,)*) => {
        /// One AG-UI 1.0 event, tagged by `type`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        pub enum Event {
            $(#[serde(rename = $wire)] $variant($payload),)*
        }

        /// The `type` of an event, without its payload.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventType { $($variant,)* }

        impl EventType {
            /// Every 1.0 event type, in declaration order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            /// The wire name (`"TEXT_MESSAGE_START"`).
            pub const fn as_str(self) -> &'static str {
                match self { $(EventType::$variant => $wire,)* }
            }

            /// Parses an exact 1.0 wire name.
            pub fn from_wire(name: &str) -> Option<EventType> {
                match name { $($wire => Some(EventType::$variant),)* _ => None }
            }
        }

        impl Event {
            /// The event's type.
            pub fn event_type(&self) -> EventType {
                match self { $(Event::$variant(_) => EventType::$variant,)* }
            }

            /// The base fields (timestamp, metadata, …).
            pub fn base(&self) -> &EventBase {
                match self { $(Event::$variant(e) => &e.base,)* }
            }

            /// Decodes the payload of a known type (the object without its `type` key); faster than
            /// going through the tagged enum, which buffers the whole object first.
            pub fn from_payload(ty: EventType, payload: Value) -> Result<Event, serde_json::Error> {
                match ty { $(EventType::$variant => serde_json::from_value(payload).map(Event::$variant),)* }
            }

            /// The base fields, mutably.
            pub fn base_mut(&mut self) -> &mut EventBase {
                match self { $(Event::$variant(e) => &mut e.base,)* }
            }
        }

        $(impl From<$payload> for Event {
            fn from(e: $payload) -> Event { Event::$variant(e) }
        })*
    };
}

events! {
    RunStarted(RunStarted) = "RUN_STARTED",
    RunFinished(RunFinished) = "RUN_FINISHED",
    RunError(RunError) = "RUN_ERROR",
    StepStarted(StepStarted) = "STEP_STARTED",
    StepFinished(StepFinished) = "STEP_FINISHED",
    TextMessageStart(TextMessageStart) = "TEXT_MESSAGE_START",
    TextMessageContent(TextMessageContent) = "TEXT_MESSAGE_CONTENT",
    TextMessageEnd(TextMessageEnd) = "TEXT_MESSAGE_END",
    TextMessageChunk(TextMessageChunk) = "TEXT_MESSAGE_CHUNK",
    ToolCallStart(ToolCallStart) = "TOOL_CALL_START",
    ToolCallArgs(ToolCallArgs) = "TOOL_CALL_ARGS",
    ToolCallEnd(ToolCallEnd) = "TOOL_CALL_END",
    ToolCallChunk(ToolCallChunk) = "TOOL_CALL_CHUNK",
    ToolCallResult(ToolCallResult) = "TOOL_CALL_RESULT",
    StateSnapshot(StateSnapshot) = "STATE_SNAPSHOT",
    StateDelta(StateDelta) = "STATE_DELTA",
    MessagesSnapshot(MessagesSnapshot) = "MESSAGES_SNAPSHOT",
    ActivitySnapshot(ActivitySnapshot) = "ACTIVITY_SNAPSHOT",
    ActivityDelta(ActivityDelta) = "ACTIVITY_DELTA",
    ReasoningStart(ReasoningStart) = "REASONING_START",
    ReasoningMessageStart(ReasoningMessageStart) = "REASONING_MESSAGE_START",
    ReasoningMessageContent(ReasoningMessageContent) = "REASONING_MESSAGE_CONTENT",
    ReasoningMessageEnd(ReasoningMessageEnd) = "REASONING_MESSAGE_END",
    ReasoningMessageChunk(ReasoningMessageChunk) = "REASONING_MESSAGE_CHUNK",
    ReasoningEnd(ReasoningEnd) = "REASONING_END",
    ReasoningEncryptedValue(ReasoningEncryptedValue) = "REASONING_ENCRYPTED_VALUE",
    SubagentStarted(SubagentStarted) = "SUBAGENT_STARTED",
    SubagentFinished(SubagentFinished) = "SUBAGENT_FINISHED",
    SubagentError(SubagentError) = "SUBAGENT_ERROR",
    Raw(Raw) = "RAW",
    Custom(Custom) = "CUSTOM",
}

impl Event {
    /// `RUN_FINISHED` or `RUN_ERROR`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Event::RunFinished(_) | Event::RunError(_))
    }
}

#[cfg(test)]
mod tests;
