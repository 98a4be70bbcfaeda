//! Legacy thinking (`dialects.md` row 12): `THINKING_START`/`THINKING_END` and
//! `THINKING_TEXT_MESSAGE_*` (or `THINKING_CONTENT`) become `REASONING_*`; a reasoning message
//! without an enclosing span gets a synthetic one with the message's id; missing ids are minted
//! (`<runId>.r<n>`), a span's id naming only its first message. `title` and other legacy extras
//! are dropped. The reader never emits `THINKING_*`.

use serde_json::{Map, Value};

use super::fix;
use crate::event::{DropKind, IdMint, Note, Rule};
use crate::event::{
    Event, EventBase, ReasoningEnd, ReasoningMessageContent, ReasoningMessageEnd,
    ReasoningMessageStart, ReasoningStart,
};

/// Legacy `THINKING_*` state (row 12).
#[derive(Debug, Default)]
pub(super) struct Thinking {
    /// The open span and whether the reader synthesised it.
    span: Option<(String, bool)>,
    /// The span's id already names one of its messages; later ones get fresh ids.
    span_id_used: bool,
    message: Option<String>,
}

impl Thinking {
    /// Row 12: legacy `THINKING_*` → `REASONING_*`, with a synthetic span around messages that
    /// have none; `title` and other legacy extras are dropped.
    pub(super) fn read(
        &mut self,
        spelled: &str,
        map: Map<String, Value>,
        mint: &mut IdMint,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        notes.push(Note::Fixup(Rule::LegacyThinking));
        let given_id = map
            .get("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let base = EventBase {
            timestamp: map.get("timestamp").and_then(Value::as_i64),
            raw_event: map.get("rawEvent").cloned().map(Box::new),
            metadata: map
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .map(Box::new),
            subagent_run_id: map
                .get("subagentRunId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..EventBase::default()
        };
        match spelled {
            "THINKING_START" => {
                if self.span.is_some() {
                    notes.push(Note::Dropped(DropKind::DuplicateStart));
                    return;
                }
                let id = given_id.unwrap_or_else(|| mint.next('r'));
                self.span = Some((id.clone(), false));
                self.span_id_used = false;
                out.push(Event::ReasoningStart(ReasoningStart {
                    message_id: id,
                    base,
                }));
            }
            "THINKING_END" => {
                self.close_message(EventBase::default(), out);
                match self.span.take() {
                    Some((id, _)) => out.push(Event::ReasoningEnd(ReasoningEnd {
                        message_id: id,
                        base,
                    })),
                    None => notes.push(Note::Dropped(DropKind::Orphan)),
                }
            }
            "THINKING_TEXT_MESSAGE_START" => {
                self.close_message(EventBase::default(), out);
                self.open_message(given_id, base, mint, out);
            }
            "THINKING_TEXT_MESSAGE_CONTENT" | "THINKING_CONTENT" => {
                if self.message.is_none() {
                    // The synthesised start belongs to the same subagent as the content.
                    let start_base = EventBase {
                        subagent_run_id: base.subagent_run_id.clone(),
                        ..EventBase::default()
                    };
                    self.open_message(given_id, start_base, mint, out);
                }
                let delta = match map.get("delta") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) if !v.is_null() => fix::compact(v),
                    _ => String::new(),
                };
                if let Some(id) = self.message.clone() {
                    out.push(Event::ReasoningMessageContent(ReasoningMessageContent {
                        message_id: id,
                        delta,
                        base,
                    }));
                }
            }
            "THINKING_TEXT_MESSAGE_END" => {
                if self.message.is_none() {
                    notes.push(Note::Dropped(DropKind::Orphan));
                    return;
                }
                self.close_message(base, out);
            }
            _ => notes.push(Note::Dropped(DropKind::UnknownType)),
        }
    }

    fn open_message(
        &mut self,
        given: Option<String>,
        base: EventBase,
        mint: &mut IdMint,
        out: &mut Vec<Event>,
    ) {
        let id = match (&self.span, given) {
            (_, Some(id)) => id,
            (Some((span, _)), None) if !self.span_id_used => span.clone(),
            _ => mint.next('r'),
        };
        if self.span.as_ref().is_some_and(|(span, _)| *span == id) {
            self.span_id_used = true;
        }
        if self.span.is_none() {
            self.span = Some((id.clone(), true));
            self.span_id_used = true;
            out.push(Event::ReasoningStart(ReasoningStart {
                message_id: id.clone(),
                base: EventBase {
                    subagent_run_id: base.subagent_run_id.clone(),
                    ..EventBase::default()
                },
            }));
        }
        self.message = Some(id.clone());
        out.push(Event::ReasoningMessageStart(ReasoningMessageStart {
            message_id: id,
            role: Default::default(),
            base,
        }));
    }

    fn close_message(&mut self, base: EventBase, out: &mut Vec<Event>) {
        let Some(id) = self.message.take() else {
            return;
        };
        out.push(Event::ReasoningMessageEnd(ReasoningMessageEnd {
            message_id: id,
            base,
        }));
        if let Some((span, true)) = &self.span {
            out.push(Event::ReasoningEnd(ReasoningEnd {
                message_id: span.clone(),
                base: EventBase::default(),
            }));
            self.span = None;
        }
    }
}
