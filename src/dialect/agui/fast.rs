//! The reader's fast path: most events of a healthy stream are already strict AG-UI 1.0, and
//! for them the generic JSON tree, the key and value repairs and the second decode are wasted.

use super::fix::{self, Timestamps};
use super::read::{ReaderOptions, SYSTEM_EXCEPTION};
use crate::event::Event;
use serde_json::Value;

/// The fast path: a content event that is already strict 1.0 — it decodes straight into its
/// type, and nothing the slow path would repair is present (no unknown or snake_case keys, no
/// `null`, no empty optional ids, a plausible integer timestamp, valid patch paths, no vendor
/// signal) — needs no generic JSON tree. `None` sends the event down the slow path, which gives the same
/// result for everything this accepts (tested: `fast_and_slow_paths_agree`).
pub(super) fn canonical_event(data: &[u8], options: ReaderOptions) -> Option<Event> {
    // `null` anywhere may be a null optional field, which the slow path counts as a repair.
    if memchr::memmem::find(data, b"null").is_some() {
        return None;
    }
    let event: Event = serde_json::from_slice(data).ok()?;
    let base = event.base();
    if !base.extra.is_empty() || base.subagent_run_id.as_deref() == Some("") {
        return None;
    }
    if let Some(ts) = base.timestamp {
        let keep = match options.timestamps {
            Timestamps::Normalise => fix::timestamp_ms(&Value::from(ts)) == Some(Value::from(ts)),
            Timestamps::Drop => false,
            Timestamps::Passthrough => true,
        };
        if !keep {
            return None;
        }
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
