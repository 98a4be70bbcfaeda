//! The reader's fast path: most events of a healthy stream are already strict AG-UI 1.0, and
//! for them the generic JSON tree, the key and value repairs and the second decode are wasted.
//!
//! Content deltas (text, reasoning, tool arguments) arrive by the thousand and carry the same
//! few fields, so they are read by hand (`json::for_each_field`); fields the reader does not
//! know (a vendor's `ts`, a `model`) are kept as their JSON text, as the slow path would keep
//! them, without leaving the fast path. Measured with `benches/codec.rs` (`text-60B+field`):
//! the slow path costs several times the whole pipeline's work for such an event.

use std::sync::Arc;

use bytes::Bytes;

use super::fix;
use super::options::{ReaderOptions, SYSTEM_EXCEPTION};
use crate::event::{
    DeltaKind, DeltaRef, Event, EventBase, Extra, RunFinished, RunStarted, Source, SourceRef,
    TextMessageEnd, TextMessageStart, TextRole,
};
use crate::json::{for_each_field, Cursor, JsonStr, Member, Scalar};
use crate::mapping::AguiAliases;

/// Unknown fields a content event may carry and still take the fast path.
const MAX_UNKNOWN_FIELDS: usize = 8;

/// What the fast path keeps between events: the alias keys of the content types' own fields
/// (`[fields.TEXT_MESSAGE_CONTENT]` …, in the order of [`crate::mapping::DELTA_TYPES`]),
/// found once per alias table rather than by hashing type names per stream or per event, and
/// a buffer for the unknown fields' text.
#[derive(Debug)]
pub(super) struct Scratch {
    aliases: Arc<[Vec<String>; 3]>,
    members: String,
}

impl Scratch {
    pub(super) fn new(aliases: &AguiAliases) -> Scratch {
        Scratch {
            aliases: Arc::clone(aliases.delta_aliases()),
            members: String::new(),
        }
    }
}

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
    scratch: &mut Scratch,
    out: &mut Vec<Event>,
) -> bool {
    // A content event's decoder takes no `null`; nothing else is checked for it first.
    match content_event(data, options, scratch, out) {
        Content::Read => return true,
        Content::Refused => return false,
        Content::Other => {}
    }
    if let Some(event) = lifecycle_event(data, options) {
        out.push(event);
        return true;
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
        Event::ToolCallChunk(e) => e.parent_message_id.as_deref() != Some(""),
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
        // The typed objects these may nest (the input echo, an outcome and its interrupts,
        // token usage) would silently ignore keys the slow path renames or repairs: only a
        // lifecycle event without them fits. Those are what nearly every run sends.
        Event::RunStarted(e) => e.input.is_none() && e.parent_run_id.as_deref() != Some(""),
        Event::RunFinished(e) => e.outcome.is_none() && e.usage.is_none(),
        Event::RunError(e) => e.usage.is_none(),
        _ => true,
    };
    if fits {
        out.push(event);
    }
    fits
}

/// A content delta in the SDKs' layout ([`sdk_layout`]), borrowed rather than built (see
/// [`DeltaRef`]): what [`read`] would push for it, without allocating. `None` when the event is
/// not one, or is one only the event can carry (an escaped id, a timestamp the options
/// refuse, a field the slow path renames); [`read`] then decides.
pub(super) fn delta<'a>(
    data: &'a [u8],
    options: ReaderOptions,
    scratch: &'a mut Scratch,
) -> Option<DeltaRef<'a>> {
    let Layout::Read {
        kind,
        id,
        delta,
        timestamp,
        members,
        known,
    } = sdk_layout(data, scratch)
    else {
        return None;
    };
    if !options.timestamps.keeps(timestamp) {
        return None;
    }
    Some(DeltaRef {
        kind,
        id: id.plain()?,
        delta,
        timestamp,
        extra: members.text(scratch),
        source: Some(SourceRef::new(data, known)),
    })
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
    scratch: &mut Scratch,
    out: &mut Vec<Event>,
) -> Content {
    match sdk_layout(data, scratch) {
        Layout::Read {
            kind,
            id,
            delta,
            timestamp,
            members,
            known,
        } => {
            if !options.timestamps.keeps(timestamp) {
                return Content::Refused;
            }
            let base = EventBase {
                timestamp,
                extra: Extra::from_members(members.text(scratch)),
                source: Source::new(if known < data.len() {
                    data.slice(..known)
                } else {
                    data.clone()
                }),
                ..EventBase::default()
            };
            out.push(kind.event(id.into_owned(), delta.into_owned(), base));
            return Content::Read;
        }
        Layout::Refused => return Content::Refused,
        // No pass over the fields here: the lifecycle decoder makes its own.
        Layout::NotContent => return Content::Other,
        Layout::Other => {}
    }
    let (mut ty, mut message_id, mut tool_call_id, mut delta, mut timestamp) =
        (None, None, None, None, None);
    // Unknown fields: their keys (to refuse one twice) and their members text.
    let mut unknown_keys = [""; MAX_UNKNOWN_FIELDS];
    let mut unknown = 0;
    let members = &mut scratch.members;
    members.clear();
    let flat = for_each_field(data, |key, value| {
        let fresh = match (key, value) {
            ("type", Scalar::Str(s)) => set(&mut ty, s),
            ("messageId", Scalar::Str(s)) => set(&mut message_id, s),
            ("toolCallId", Scalar::Str(s)) => set(&mut tool_call_id, s),
            ("delta", Scalar::Str(s)) => set(&mut delta, s),
            ("timestamp", Scalar::Int(n, _)) => set(&mut timestamp, n),
            _ if !is_plain_unknown(key) => false,
            _ => {
                if unknown == MAX_UNKNOWN_FIELDS || unknown_keys[..unknown].contains(&key) {
                    return None;
                }
                unknown_keys[unknown] = key;
                unknown += 1;
                open_member(members, key);
                value.write_canonical(members);
                true
            }
        };
        fresh.then_some(())
    });
    let Some(compact) = flat else {
        return Content::Other;
    };
    let (kind, aliases) = match ty.and_then(|ty| ty.plain()) {
        Some("TEXT_MESSAGE_CONTENT") => (DeltaKind::Text, &scratch.aliases[0]),
        Some("REASONING_MESSAGE_CONTENT") => (DeltaKind::Reasoning, &scratch.aliases[1]),
        Some("TOOL_CALL_ARGS") => (DeltaKind::ToolArgs, &scratch.aliases[2]),
        _ => return Content::Other,
    };
    // An alias of this type's own fields is renamed by the slow path, not kept.
    let aliased = unknown_keys[..unknown]
        .iter()
        .any(|key| aliases.iter().any(|alias| alias == key));
    let id = match (kind, message_id, tool_call_id) {
        (DeltaKind::ToolArgs, None, Some(id)) => id,
        (DeltaKind::ToolArgs, ..) | (_, None, _) | (_, _, Some(_)) => return Content::Refused,
        (_, Some(id), None) => id,
    };
    let (Some(delta), false, true) = (delta, aliased, options.timestamps.keeps(timestamp)) else {
        return Content::Refused;
    };
    let source = if unknown == 0 && compact {
        // Compact JSON, exactly the event: the gateway writes nothing else (an upstream's
        // spaces or line breaks are not forwarded).
        Source::new(data.clone())
    } else {
        Source::default()
    };
    let base = EventBase {
        timestamp,
        extra: Extra::from_members(&scratch.members),
        source,
        ..EventBase::default()
    };
    out.push(kind.event(id.into_owned(), delta.into_owned(), base));
    Content::Read
}

/// The events that open and close a run and a message, as nearly every run sends them — only
/// their ids (plain strings), an assistant role, at most a timestamp — decoded by hand: the
/// tagged enum would buffer the object to find its type, and these come once per message or
/// run, when the code for them is cold (the run's last read is where a stream's last content
/// waits). Anything more (an input echo, an outcome, a name, a field the model does not know,
/// an escape, a key twice) is left to the general decoder.
pub(super) fn lifecycle_event(data: &[u8], options: ReaderOptions) -> Option<Event> {
    let (mut ty, mut message_id, mut thread_id, mut run_id, mut role, mut timestamp) =
        (None, None, None, None, None, None);
    for_each_field(data, |key, value| {
        let fresh = match (key, value) {
            ("timestamp", Scalar::Int(n, _)) => set(&mut timestamp, n),
            (key, Scalar::Str(s)) => {
                let slot = match key {
                    "type" => &mut ty,
                    "messageId" => &mut message_id,
                    "threadId" => &mut thread_id,
                    "runId" => &mut run_id,
                    "role" => &mut role,
                    _ => return None,
                };
                set(slot, s.plain()?)
            }
            _ => false,
        };
        fresh.then_some(())
    })?;
    if !options.timestamps.keeps(timestamp) {
        return None;
    }
    let base = EventBase {
        timestamp,
        ..EventBase::default()
    };
    let event = match (ty?, message_id, thread_id, run_id, role) {
        ("TEXT_MESSAGE_START", Some(id), None, None, Some("assistant")) => {
            Event::TextMessageStart(TextMessageStart {
                message_id: id.to_owned(),
                role: TextRole::Assistant,
                name: None,
                base,
            })
        }
        ("TEXT_MESSAGE_END", Some(id), None, None, None) => Event::TextMessageEnd(TextMessageEnd {
            message_id: id.to_owned(),
            base,
        }),
        ("RUN_STARTED", None, Some(thread_id), Some(run_id), None) => {
            Event::RunStarted(RunStarted {
                thread_id: thread_id.to_owned(),
                run_id: run_id.to_owned(),
                protocol_version: None,
                parent_run_id: None,
                input: None,
                base,
            })
        }
        ("RUN_FINISHED", None, Some(thread_id), Some(run_id), None) => {
            Event::RunFinished(RunFinished {
                thread_id: thread_id.to_owned(),
                run_id: run_id.to_owned(),
                result: None,
                outcome: None,
                usage: None,
                base,
            })
        }
        _ => return None,
    };
    Some(event)
}

/// What [`sdk_layout`] found.
enum Layout<'a> {
    /// The event and its unknown fields' members text; `known`: the length of the text up
    /// to them (all of it when there are none).
    Read {
        kind: DeltaKind,
        id: JsonStr<'a>,
        delta: JsonStr<'a>,
        timestamp: Option<i64>,
        members: Members<'a>,
        known: usize,
    },
    /// A content delta in this layout that the slow path must read (a field it renames).
    Refused,
    /// Not this layout.
    Other,
    /// Another type, named first (unescaped) as nearly every producer names it: not a content
    /// delta whatever follows (a second `type` member is a key twice, which no decoder here
    /// takes).
    NotContent,
}

/// A content delta as the SDKs write it — `{"type":…,"messageId":…,"delta":…}` (`toolCallId`
/// for arguments), a timestamp after the type (Python) or after the delta (TypeScript, this
/// gateway), then any fields the model does not know, no whitespace — read by comparing its
/// fixed text ([`Cursor`]): what [`for_each_field`] would read from it, at a fraction of the
/// cost.
fn sdk_layout<'a>(data: &'a [u8], scratch: &mut Scratch) -> Layout<'a> {
    let mut c = Cursor::new(data);
    if !c.accept(br#"{"type":""#) {
        return Layout::Other;
    }
    let (kind, id_key, aliases) = if c.accept(br#"TEXT_MESSAGE_CONTENT""#) {
        (
            DeltaKind::Text,
            &br#","messageId":""#[..],
            &scratch.aliases[0],
        )
    } else if c.accept(br#"REASONING_MESSAGE_CONTENT""#) {
        (
            DeltaKind::Reasoning,
            &br#","messageId":""#[..],
            &scratch.aliases[1],
        )
    } else if c.accept(br#"TOOL_CALL_ARGS""#) {
        (
            DeltaKind::ToolArgs,
            &br#","toolCallId":""#[..],
            &scratch.aliases[2],
        )
    } else if c.plain_run().is_some() && c.accept(b"\"") {
        return Layout::NotContent;
    } else {
        return Layout::Other;
    };
    let Some((id, delta, timestamp)) = (|| {
        let mut timestamp = None;
        if c.accept(br#","timestamp":"#) {
            timestamp = Some(c.integer()?);
        }
        c.expect(id_key)?;
        let id = c.string_rest()?;
        c.expect(br#","delta":""#)?;
        let delta = c.string_rest()?;
        if timestamp.is_none() && c.accept(br#","timestamp":"#) {
            timestamp = Some(c.integer()?);
        }
        Some((id, delta, timestamp))
    })() else {
        return Layout::Other;
    };
    let known = c.position();
    let mut fields = [("", None); MAX_UNKNOWN_FIELDS];
    let mut unknown = 0;
    while let Some((key, value)) = c.member() {
        if !is_plain_unknown(key)
            || unknown == MAX_UNKNOWN_FIELDS
            || fields[..unknown].iter().any(|(k, _)| *k == key)
        {
            return Layout::Other;
        }
        if aliases.iter().any(|alias| alias == key) {
            return Layout::Refused;
        }
        fields[unknown] = (key, Some(value));
        unknown += 1;
    }
    let end = c.position();
    if !c.accept(b"}") || !c.at_end() {
        return Layout::Other;
    }
    let fields = &fields[..unknown];
    // Integers and strings without escapes stand as serde_json writes them: the members text
    // is then the event's own, between the known fields and the closing brace.
    let canonical = fields.iter().all(|(_, value)| match value {
        Some(Member::Str(s)) => s.plain().is_some(),
        _ => true,
    });
    let members = match c.text_between(known + 1, end) {
        Some(text) if canonical && unknown > 0 => Members::Own(text),
        _ => {
            let members = &mut scratch.members;
            members.clear();
            for (key, value) in fields {
                open_member(members, key);
                if let Some(value) = value {
                    value.write_canonical(members);
                }
            }
            Members::Scratch
        }
    };
    Layout::Read {
        kind,
        id,
        delta,
        timestamp,
        members,
        known: if unknown > 0 { known } else { data.len() },
    }
}

/// Where [`sdk_layout`] left an event's unknown fields' members text.
enum Members<'a> {
    /// In the event's own text.
    Own(&'a str),
    /// In the scratch buffer (when there are none, it is empty).
    Scratch,
}

impl<'a> Members<'a> {
    fn text(self, scratch: &'a Scratch) -> &'a str {
        match self {
            Members::Own(text) => text,
            Members::Scratch => &scratch.members,
        }
    }
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

/// Starts the member `key` of the unknown fields' JSON text (after a comma, unless first); its
/// value follows.
fn open_member(members: &mut String, key: &str) {
    if !members.is_empty() {
        members.push(',');
    }
    members.push('"');
    members.push_str(key);
    members.push_str("\":");
}
