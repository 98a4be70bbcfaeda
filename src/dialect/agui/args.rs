//! Tool-call arguments the AG-UI reader holds back (`dialects.md` rows 6 and 7): object deltas,
//! shallow-merged until the call ends, and `args` objects on START or END, used only when no
//! `TOOL_CALL_ARGS` arrived. Bounded: at most [`MAX_HELD_CALLS`] calls at once and
//! [`MAX_HELD_ARGS_BYTES`] of merged objects per call.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::fix;
use crate::event::{DropKind, Note};
use crate::event::{Event, EventBase, ToolCallArgs};

/// Tool calls whose arguments may be held at once; beyond, object deltas pass on as text.
pub(super) const MAX_HELD_CALLS: usize = 1024;
/// Object arguments held for one call (`translation.md` §5: the tool-argument buffer).
pub(super) const MAX_HELD_ARGS_BYTES: usize = 1 << 20;

/// Arguments held back for one open tool call (rows 6 and 7).
#[derive(Debug, Default)]
pub(super) struct HeldArgs {
    /// A string `TOOL_CALL_ARGS` has been emitted for the call.
    pub(super) saw_string: bool,
    /// Object deltas, shallow-merged, emitted as one ARGS before the END.
    pub(super) merged: Option<Map<String, Value>>,
    /// Compact size of the object deltas merged so far.
    pub(super) merged_bytes: usize,
    /// Base fields of the first object delta, carried by the merged ARGS.
    pub(super) merged_base: Option<EventBase>,
    /// An `args` object on START or END, used only when no ARGS arrived at all.
    pub(super) fallback: Option<Value>,
}

/// Every call with something held, by tool call id.
#[derive(Debug, Default)]
pub(super) struct ToolArgs {
    held: HashMap<String, HeldArgs>,
}

impl ToolArgs {
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.held.clear();
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut HeldArgs> {
        self.held.get_mut(id)
    }

    /// The held state of a call, created on demand; `None` when too many calls are held.
    pub(super) fn hold(&mut self, id: String, notes: &mut Vec<Note>) -> Option<&mut HeldArgs> {
        if self.held.len() >= MAX_HELD_CALLS && !self.held.contains_key(&id) {
            notes.push(Note::Dropped(DropKind::Lossy));
            return None;
        }
        Some(self.held.entry(id).or_default())
    }

    /// Emits what a call's ARGS never carried, just before its END or RESULT.
    pub(super) fn flush(&mut self, id: &str, out: &mut Vec<Event>) {
        let Some(held) = self.held.remove(id) else {
            return;
        };
        if let Some(merged) = held.merged {
            let mut event = args_event(id.to_owned(), fix::compact(&Value::Object(merged)));
            *event.base_mut() = held.merged_base.unwrap_or_default();
            out.push(event);
        } else if let (false, Some(fallback)) = (held.saw_string, held.fallback) {
            let text = match fallback {
                Value::String(s) => s,
                other => fix::compact(&other),
            };
            out.push(args_event(id.to_owned(), text));
        }
    }

    pub(super) fn flush_all(&mut self, out: &mut Vec<Event>) {
        let mut ids: Vec<String> = self.held.keys().cloned().collect();
        ids.sort();
        for id in ids {
            self.flush(&id, out);
        }
    }
}

pub(super) fn args_event(tool_call_id: String, delta: String) -> Event {
    Event::ToolCallArgs(ToolCallArgs {
        tool_call_id,
        delta,
        base: EventBase::default(),
    })
}
