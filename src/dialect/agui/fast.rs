//! The reader's fast path: most events of a healthy stream are already strict AG-UI 1.0, and
//! for them the generic JSON tree, the key and value repairs and the second decode are wasted.
//!
//! Content deltas (text, reasoning, tool arguments) arrive by the thousand and carry the same
//! few fields, so they are read by hand (`json::for_each_field`); fields the reader does not
//! know (a vendor's `ts`, a `model`) are kept as their JSON text, as the slow path would keep
//! them, without leaving the fast path. Measured with `benches/codec.rs` (`text-60B+field`):
//! the slow path costs several times the whole pipeline's work for such an event.

use bytes::Bytes;

use super::fix;
use super::options::{ReaderOptions, SYSTEM_EXCEPTION};
use crate::event::{
    Event, EventBase, EventType, Extra, ReasoningMessageContent, Source, TextMessageContent,
    ToolCallArgs,
};
use crate::json::{for_each_field, Scalar};
use crate::mapping::AguiAliases;

/// Unknown fields a content event may carry and still take the fast path.
const MAX_UNKNOWN_FIELDS: usize = 8;

/// The fast path: an event that is already strict 1.0 — it decodes straight into its type, and
/// nothing the slow path would repair is present (no snake_case or alias keys, no `null`, no
/// empty optional ids, a plausible integer timestamp, valid patch paths, no vendor signal) —
/// needs no generic JSON tree. Pushes it onto `out` (no copy of the event on the way: events
/// are large, and this runs for nearly every one). False sends the event down the slow path,
/// which gives the same result for everything this accepts (tested:
/// `fast_and_slow_paths_agree`).
///
/// A content delta without unknown fields keeps `data` as its [`Source`], so an AG-UI writer
/// can forward it as it came.
pub(super) fn read(
    data: &Bytes,
    options: ReaderOptions,
    aliases: &AguiAliases,
    out: &mut Vec<Event>,
) -> bool {
    // A content event's decoder takes no `null`; nothing else is checked for it first.
    match content_event(data, options, aliases, out) {
        Content::Read => return true,
        Content::Refused => return false,
        Content::Other => {}
    }
    // `null` anywhere may be a null optional field, which the slow path counts as a repair.
    if memchr::memmem::find(data, b"null").is_some() {
        return false;
    }
    let Ok(event) = serde_json::from_slice::<Event>(data) else {
        return false;
    };
    let base = event.base();
    if !base.extra.is_empty() || base.subagent_run_id.as_deref() == Some("") {
        return false;
    }
    if !options.timestamps.keeps(base.timestamp) {
        return false;
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
    if fits {
        out.push(event);
    }
    fits
}

/// What [`content_event`] made of an event.
enum Content {
    /// A content delta, pushed.
    Read,
    /// A content delta the slow path must read.
    Refused,
    /// Not a content delta in the plain shape: another decoder may take it.
    Other,
}

/// Decodes a text, reasoning or tool-argument delta — the type, one id, the delta, at most a
/// timestamp and a few fields the model does not know, as they arrive by the thousand — in one
/// pass straight into its type: the tagged enum would first buffer the whole object to find its
/// `type`, and the flattened base fields buffer it once more. Not such an event, or not in this
/// plain shape (a field the slow path would repair or rename, a nested value, a key twice):
/// the general decoder takes it.
fn content_event(
    data: &Bytes,
    options: ReaderOptions,
    aliases: &AguiAliases,
    out: &mut Vec<Event>,
) -> Content {
    let (mut ty, mut message_id, mut tool_call_id, mut delta, mut timestamp) =
        (None, None, None, None, None);
    // Unknown fields: their keys (to refuse one twice) and their members text.
    let mut unknown_keys = [""; MAX_UNKNOWN_FIELDS];
    let mut unknown = 0;
    let mut members = String::new();
    let flat = for_each_field(data, |key, value| {
        let fresh = match (key, value) {
            ("type", Scalar::Str(s)) => set(&mut ty, s),
            ("messageId", Scalar::Str(s)) => set(&mut message_id, s),
            ("toolCallId", Scalar::Str(s)) => set(&mut tool_call_id, s),
            ("delta", Scalar::Str(s)) => set(&mut delta, s),
            ("timestamp", Scalar::Int(n)) => set(&mut timestamp, n),
            _ if !is_plain_unknown(key) => false,
            _ => {
                if unknown == MAX_UNKNOWN_FIELDS || unknown_keys[..unknown].contains(&key) {
                    return None;
                }
                unknown_keys[unknown] = key;
                unknown += 1;
                if !members.is_empty() {
                    members.push(',');
                }
                members.push('"');
                members.push_str(key);
                members.push_str("\":");
                value.write_canonical(&mut members);
                true
            }
        };
        fresh.then_some(())
    });
    let Some(compact) = flat else {
        return Content::Other;
    };
    let ty = match ty.and_then(|ty| ty.plain()) {
        Some("TEXT_MESSAGE_CONTENT") => EventType::TextMessageContent,
        Some("REASONING_MESSAGE_CONTENT") => EventType::ReasoningMessageContent,
        Some("TOOL_CALL_ARGS") => EventType::ToolCallArgs,
        _ => return Content::Other,
    };
    // An alias of this type's own fields is renamed by the slow path, not kept.
    let aliased = unknown > 0
        && aliases.fields.get(ty.as_str()).is_some_and(|pairs| {
            pairs
                .iter()
                .any(|(alias, _)| unknown_keys[..unknown].contains(&alias.as_str()))
        });
    let (Some(delta), false, true) = (delta, aliased, options.timestamps.keeps(timestamp)) else {
        return Content::Refused;
    };
    let source = if unknown == 0 && (compact || memchr::memchr(b'\n', data).is_none()) {
        // One line of JSON (several `data:` lines join with LF), exactly the event.
        Source::new(data.clone())
    } else {
        Source::default()
    };
    let base = EventBase {
        timestamp,
        extra: Extra::from_members(members),
        source,
        ..EventBase::default()
    };
    let delta = delta.into_owned();
    out.push(match (ty, message_id, tool_call_id) {
        (EventType::TextMessageContent, Some(id), None) => {
            Event::TextMessageContent(TextMessageContent {
                message_id: id.into_owned(),
                delta,
                base,
            })
        }
        (EventType::ReasoningMessageContent, Some(id), None) => {
            Event::ReasoningMessageContent(ReasoningMessageContent {
                message_id: id.into_owned(),
                delta,
                base,
            })
        }
        (EventType::ToolCallArgs, None, Some(id)) => Event::ToolCallArgs(ToolCallArgs {
            tool_call_id: id.into_owned(),
            delta,
            base,
        }),
        _ => return Content::Refused,
    });
    Content::Read
}

/// Whether the slow path keeps this field of a content event as it is, among the event's
/// unknown fields: not one of the model's own fields (those take only their own type), not a
/// snake_case key (renamed), not an optional id (dropped when empty).
fn is_plain_unknown(key: &str) -> bool {
    const MODEL_KEYS: &[&str] = &[
        "type",
        "messageId",
        "toolCallId",
        "delta",
        "timestamp",
        "rawEvent",
        "metadata",
        "subagentRunId",
        "parentMessageId",
        "parentRunId",
        "parentSubagentRunId",
        "parentToolCallId",
    ];
    !key.contains('_') && !MODEL_KEYS.contains(&key)
}

/// Fills an empty slot; false when the key came twice.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    slot.replace(value).is_none()
}
