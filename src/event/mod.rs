//! The canonical model: AG-UI 1.0 events, messages and the run input (`specs/agui.md` §2–3).
//!
//! Every dialect reader produces these types and every writer consumes them, so this module
//! is the one vocabulary the gateway speaks inside. Serialisation follows the 1.0 rules:
//! camelCase keys, optional fields omitted (never `null`), integer millisecond timestamps.
//! Fields a type does not know are kept in `extra` (as their JSON text), so nothing a newer
//! producer adds is lost before a writer decides what to do with it.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

mod delta;
mod diag;
mod entity;
mod history;
mod input;
mod message;
pub mod spare;
mod types;

pub use delta::{DeltaKind, DeltaRef, SourceRef};
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
    /// The JSON the event was read from, while nothing has changed it (see [`Source`]).
    #[serde(skip)]
    pub source: Source,
}

/// The upstream's JSON of an event that is still exactly as it was read: an AG-UI writer
/// forwards these bytes instead of encoding the event again (`benches/codec.rs`: encoding is
/// a sixth of an AG-UI → AG-UI event's cost). Only the AG-UI reader's fast path sets it, on a
/// content delta in one line of JSON that decodes to exactly the event; when the event has
/// unknown fields (its `extra`), the JSON up to the first of them, the object left open, so
/// that the writer adds them as it folds them. Whatever changes such an event must change a
/// field a writer checks before forwarding (its lane, metadata, unknown fields), and `debug`
/// builds check every forwarded event against its encoding.
///
/// Not part of the event's value: it compares equal to any other, and a clone has none, so a
/// copy changed apart from its original never forwards stale bytes, and an event kept for later
/// never keeps an upstream read buffer alive.
#[derive(Default)]
pub struct Source(Option<bytes::Bytes>);

impl Source {
    pub fn new(json: bytes::Bytes) -> Source {
        Source(Some(json))
    }

    /// The JSON, if the event still has it.
    pub fn json(&self) -> Option<&[u8]> {
        self.0.as_deref()
    }
}

impl Clone for Source {
    fn clone(&self) -> Source {
        Source(None)
    }
}

impl PartialEq for Source {
    fn eq(&self, _: &Source) -> bool {
        true
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Source(..)"
        } else {
            "Source(-)"
        })
    }
}

/// An event's unknown fields, kept as the compact JSON text of their members (`"ts":1,"k":"v"`,
/// in the order they came: what serde_json writes for them), so that keeping one costs a single
/// allocation and no tree of values: readers keep them on every event, writers mostly copy or
/// drop them. [`Extra::to_map`] gives them as a [`Map`] where one is needed.
#[derive(Clone, Default)]
pub struct Extra(Option<Box<str>>);

impl Extra {
    /// Fields whose members text is `members`: compact JSON members as serde_json writes them
    /// (`"k":v` joined by `,`), each key once. The caller vouches for that.
    pub(crate) fn from_members(members: &str) -> Extra {
        Extra((!members.is_empty()).then(|| Box::from(members)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The members' JSON text, without braces; empty when there are none.
    pub fn members(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }

    /// The fields as a map.
    pub fn to_map(&self) -> Map<String, Value> {
        let Some(members) = self.0.as_deref() else {
            return Map::new();
        };
        // The text is serde_json's own output for a map: it parses back.
        serde_json::from_str(&format!("{{{members}}}")).unwrap_or_default()
    }

    /// Takes the fields out, leaving none.
    pub fn take(&mut self) -> Map<String, Value> {
        let map = self.to_map();
        self.0 = None;
        map
    }

    /// Sets one field (replacing a field of that key in place, as a map would).
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        let mut map = self.to_map();
        let old = map.insert(key, value);
        *self = Extra::from(map);
        old
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Extra {
        if map.is_empty() {
            return Extra(None);
        }
        // A map of JSON values always serialises; its text is `{members}`.
        let text = serde_json::to_string(&map).unwrap_or_default();
        let members = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or_default();
        Extra::from_members(members)
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extra({{{}}})", self.members())
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        self.members() == other.members() || self.to_map() == other.to_map()
    }
}

impl Serialize for Extra {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
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
