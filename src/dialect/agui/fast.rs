//! The reader's fast path: most events of a healthy stream are already strict AG-UI 1.0, and
//! for them the generic JSON tree, the key and value repairs and the second decode are wasted.

use super::fix;
use super::options::{ReaderOptions, SYSTEM_EXCEPTION};
use crate::event::{Event, EventBase, ReasoningMessageContent, TextMessageContent, ToolCallArgs};
use crate::json::{for_each_field, Scalar};

/// The fast path: a content event that is already strict 1.0 — it decodes straight into its
/// type, and nothing the slow path would repair is present (no unknown or snake_case keys, no
/// `null`, no empty optional ids, a plausible integer timestamp, valid patch paths, no vendor
/// signal) — needs no generic JSON tree. `None` sends the event down the slow path, which gives the same
/// result for everything this accepts (tested: `fast_and_slow_paths_agree`).
pub(super) fn canonical_event(data: &[u8], options: ReaderOptions) -> Option<Event> {
    // A content event's decoder takes no `null`; nothing else is checked for it first.
    if let Some(event) = content_event(data) {
        return options
            .timestamps
            .keeps(event.base().timestamp)
            .then_some(event);
    }
    // `null` anywhere may be a null optional field, which the slow path counts as a repair.
    if memchr::memmem::find(data, b"null").is_some() {
        return None;
    }
    let event: Event = serde_json::from_slice(data).ok()?;
    let base = event.base();
    if !base.extra.is_empty() || base.subagent_run_id.as_deref() == Some("") {
        return None;
    }
    if !options.timestamps.keeps(base.timestamp) {
        return None;
    }
    let fits = match &event {
        Event::ToolCallStart(e) => e.parent_message_id.as_deref() != Some(""),
        Event::ToolCallResult(e) => !e.message_id.is_empty(),
        Event::StateDelta(e) => fix::patch_is_canonical(&e.delta),
        Event::ActivityDelta(e) => fix::patch_is_canonical(&e.patch),
        Event::MessagesSnapshot(e) => e.messages.iter().all(|m| m.extra().is_empty()),
        Event::Custom(e) => options.system_exception_passthrough || e.name != SYSTEM_EXCEPTION,
        Event::SubagentStarted(e) => [
            &e.parent_subagent_run_id,
            &e.parent_tool_call_id,
            &e.parent_message_id,
        ]
        .iter()
        .all(|id| id.as_deref() != Some("")),
        // Once per run, and they nest typed objects (outcome, interrupts, the input echo) that
        // would silently ignore keys the slow path renames: always the slow path.
        Event::RunStarted(_) | Event::RunFinished(_) | Event::RunError(_) => false,
        _ => true,
    };
    fits.then_some(event)
}

/// Decodes a text, reasoning or tool-argument delta — the type, one id, the delta and at most a
/// timestamp, as they arrive by the thousand — in one pass straight into its type: the tagged
/// enum would first buffer the whole object to find its `type`, and the flattened base fields
/// buffer it once more. `None`: not such an event, or not in this plain shape (another field,
/// a key twice); the general decoder takes it.
fn content_event(data: &[u8]) -> Option<Event> {
    let (mut ty, mut message_id, mut tool_call_id, mut delta, mut timestamp) =
        (None, None, None, None, None);
    for_each_field(data, |key, value| {
        let slot = match (key, value) {
            ("type", Scalar::Str(s)) => set(&mut ty, s),
            ("messageId", Scalar::Str(s)) => set(&mut message_id, s),
            ("toolCallId", Scalar::Str(s)) => set(&mut tool_call_id, s),
            ("delta", Scalar::Str(s)) => set(&mut delta, s),
            ("timestamp", Scalar::Int(n)) => set(&mut timestamp, n),
            _ => false,
        };
        slot.then_some(())
    })?;
    let base = EventBase {
        timestamp,
        ..EventBase::default()
    };
    let delta = delta?.into_owned();
    match (ty?.as_ref(), message_id, tool_call_id) {
        ("TEXT_MESSAGE_CONTENT", Some(id), None) => {
            Some(Event::TextMessageContent(TextMessageContent {
                message_id: id.into_owned(),
                delta,
                base,
            }))
        }
        ("REASONING_MESSAGE_CONTENT", Some(id), None) => {
            Some(Event::ReasoningMessageContent(ReasoningMessageContent {
                message_id: id.into_owned(),
                delta,
                base,
            }))
        }
        ("TOOL_CALL_ARGS", None, Some(id)) => Some(Event::ToolCallArgs(ToolCallArgs {
            tool_call_id: id.into_owned(),
            delta,
            base,
        })),
        _ => None,
    }
}

/// Fills an empty slot; false when the key came twice.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    slot.replace(value).is_none()
}
