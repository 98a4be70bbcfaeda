//! A content delta read in place: the one event a stream carries by the thousand, borrowed
//! from the upstream's bytes instead of built as an [`Event`].
//!
//! Building the event costs two allocations (its id and its text), moves of a 280-byte enum
//! through the pipeline's buffers and a drop, which together were a quarter of a delta's cost
//! in `benches/codec.rs` (`CODEC_PROFILE`, perf). A reader that recognises a delta in its
//! plainest shape hands a [`DeltaRef`]; the pipeline passes it to the writer when the delta
//! continues an open message or call without a lane, and a writer that can write it from the
//! borrowed text does; anything else turns it into the event ([`DeltaRef::into_event`]) and
//! takes the general path, with the same result.

use bytes::Bytes;

use super::{
    Event, EventBase, Extra, ReasoningMessageContent, Source, TextMessageContent, ToolCallArgs,
};
use crate::json::JsonStr;

/// Which content delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    /// `TEXT_MESSAGE_CONTENT`.
    Text,
    /// `REASONING_MESSAGE_CONTENT`.
    Reasoning,
    /// `TOOL_CALL_ARGS`.
    ToolArgs,
}

impl DeltaKind {
    /// The delta of this kind for message or call `id`.
    pub fn event(self, id: String, delta: String, base: EventBase) -> Event {
        match self {
            DeltaKind::Text => Event::TextMessageContent(TextMessageContent {
                message_id: id,
                delta,
                base,
            }),
            DeltaKind::Reasoning => Event::ReasoningMessageContent(ReasoningMessageContent {
                message_id: id,
                delta,
                base,
            }),
            DeltaKind::ToolArgs => Event::ToolCallArgs(ToolCallArgs {
                tool_call_id: id,
                delta,
                base,
            }),
        }
    }
}

/// A content delta without `rawEvent`, `metadata` or a lane (`subagentRunId`): its type, the
/// id of its message or call (without escapes), its text as it stands in the JSON, and what
/// else it carried.
#[derive(Debug, Clone, Copy)]
pub struct DeltaRef<'a> {
    pub kind: DeltaKind,
    pub id: &'a str,
    pub delta: JsonStr<'a>,
    pub timestamp: Option<i64>,
    /// The unknown fields' members text, as [`Extra`] keeps it (empty: none).
    pub extra: &'a str,
    /// The AG-UI JSON it was read from, when it can stand for the event (see [`Source`]).
    pub source: Option<SourceRef<'a>>,
}

/// The part of an event's data that stands for it: all of it, or, when it has unknown fields,
/// the text up to the first of them. Borrowed from where the event was read (a lent event is
/// not split off the read buffer: `SseDecoder::peek`).
#[derive(Debug, Clone, Copy)]
pub struct SourceRef<'a> {
    json: &'a [u8],
}

impl<'a> SourceRef<'a> {
    /// The first `len` bytes of `data` (all of them when `len` is beyond it).
    pub fn new(data: &'a [u8], len: usize) -> SourceRef<'a> {
        SourceRef {
            json: &data[..len.min(data.len())],
        }
    }

    pub fn json(self) -> &'a [u8] {
        self.json
    }

    /// The event's [`Source`]: a copy, made only when a lent delta becomes an event (the
    /// guard has something to say about it, or the writer wants the event).
    pub fn to_source(self) -> Source {
        Source::new(Bytes::copy_from_slice(self.json))
    }
}

impl DeltaRef<'_> {
    /// The event it stands for, as the reader's general path would have made it.
    pub fn into_event(self) -> Event {
        let base = EventBase {
            timestamp: self.timestamp,
            extra: Extra::from_members(self.extra),
            source: self.source.map(SourceRef::to_source).unwrap_or_default(),
            ..EventBase::default()
        };
        self.kind
            .event(self.id.to_owned(), self.delta.into_owned(), base)
    }
}
