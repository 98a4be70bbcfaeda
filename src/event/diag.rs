//! What every converter shares: the diagnostics it returns instead of logging ([`Note`], with
//! the repair [`Rule`]s and [`DropKind`]s), the run's ids ([`RunIds`], [`IdMint`]) and the time
//! it is handed ([`Clock`]).
//!
//! These live with the canonical model, below the dialects and the pipeline, so that neither
//! has to import the other to speak of them. Pure: no clock of its own, no logging.

/// Where a writer that must stamp every event (HAI, `hai.md` §6 obligation 10) gets the time.
/// The pipeline reads it once per upstream chunk, never inside a converter, so converters stay
/// deterministic; the wall clock is a function the I/O side passes in (golden tests fix it).
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// Milliseconds since the epoch, from the function the caller supplies.
    Wall(fn() -> i64),
    /// Always this many milliseconds.
    Fixed(i64),
}

impl Clock {
    pub fn now_ms(self) -> i64 {
        match self {
            Clock::Fixed(ms) => ms,
            Clock::Wall(read) => read(),
        }
    }
}

/// The ids of the run a stream answers, taken from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIds {
    pub thread_id: String,
    pub run_id: String,
}

/// Mints deterministic ids `<runId>.<letter><n>` (`translation.md` §2.2): unique per run and kind,
/// counting from 0 per letter.
#[derive(Debug, Clone)]
pub struct IdMint {
    run_id: String,
    counters: [u64; 26],
}

impl IdMint {
    pub fn new(run_id: &str) -> IdMint {
        IdMint {
            run_id: run_id.to_string(),
            counters: [0; 26],
        }
    }

    /// The next id for `letter` (`'m'` text, `'r'` reasoning, `'t'` tool result, …).
    pub fn next(&mut self, letter: char) -> String {
        let slot = (letter as usize).wrapping_sub('a' as usize).min(25);
        let n = self.counters[slot];
        self.counters[slot] += 1;
        format!("{}.{letter}{n}", self.run_id)
    }
}

/// A diagnostic produced while converting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Note {
    /// A dialect or sequence repair was applied.
    Fixup(Rule),
    /// Input was dropped.
    Dropped(DropKind),
}

/// Repairs, named after the rows of `specs/dialects.md`; the label goes into metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    SnakeCaseKeys,
    TypeSpelling,
    RunErrorShape,
    RunIds,
    ObjectToolArgs,
    FieldAlias,
    ToolResultShape,
    NullsAndEmptyIds,
    TextEventGaps,
    ChunkExpansion,
    LegacyThinking,
    StateDeltaShape,
    SnapshotName,
    VendorExtras,
    ActionExecution,
    Timestamps,
    MissingRunStarted,
    UnclosedEntities,
    OutOfOrder,
    SystemException,
    Outcome,
    MultiObjectData,
    /// A `subagentRunId` or parent reference rewritten to satisfy the attribution rules.
    Attribution,
}

impl Rule {
    pub const fn as_str(self) -> &'static str {
        match self {
            Rule::SnakeCaseKeys => "snake_case_keys",
            Rule::TypeSpelling => "type_spelling",
            Rule::RunErrorShape => "run_error_shape",
            Rule::RunIds => "run_ids",
            Rule::ObjectToolArgs => "object_tool_args",
            Rule::FieldAlias => "field_alias",
            Rule::ToolResultShape => "tool_result_shape",
            Rule::NullsAndEmptyIds => "nulls_and_empty_ids",
            Rule::TextEventGaps => "text_event_gaps",
            Rule::ChunkExpansion => "chunk_expansion",
            Rule::LegacyThinking => "legacy_thinking",
            Rule::StateDeltaShape => "state_delta_shape",
            Rule::SnapshotName => "snapshot_name",
            Rule::VendorExtras => "vendor_extras",
            Rule::ActionExecution => "action_execution",
            Rule::Timestamps => "timestamps",
            Rule::MissingRunStarted => "missing_run_started",
            Rule::UnclosedEntities => "unclosed_entities",
            Rule::OutOfOrder => "out_of_order",
            Rule::SystemException => "system_exception",
            Rule::Outcome => "outcome",
            Rule::MultiObjectData => "multi_object_data",
            Rule::Attribution => "attribution",
        }
    }
}

/// What was dropped, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropKind {
    /// An event type no rule could resolve.
    UnknownType,
    /// A known type whose fields do not fit its 1.0 shape.
    InvalidEvent,
    /// Anything after the terminal event.
    AfterTerminal,
    /// A `*_START` for an id that is already open.
    DuplicateStart,
    /// A continuation or end for an entity that is not open and cannot be synthesised.
    Orphan,
    /// `data: [DONE]` and other end markers.
    EndMarker,
    /// A payload that is JSON but not an object.
    NotAnObject,
    /// Information that could not be carried over intact (a repair that loses detail).
    Lossy,
    /// A JSON Patch operation whose `op` RFC 6902 does not define, removed from its patch; the
    /// other operations are kept (AG-UI 1.1: an unrecognised list element is dropped).
    UnknownPatchOp,
    /// A content part of a type AG-UI does not describe, removed from its message or tool
    /// result; the other parts are kept.
    UnknownContentPart,
    /// A media part whose `source` is of a kind AG-UI does not describe: the source is
    /// required, so the whole part is removed.
    UnknownPartSource,
    /// A message of a role AG-UI does not describe, removed from its snapshot; the other
    /// messages are kept.
    UnknownMessageRole,
    /// A well-formed state patch that does not apply to the state the gateway keeps: skipped,
    /// the prior state kept (AG-UI 1.1, "when a patch does not apply").
    PatchNotApplied,
    /// An event the client's dialect has no place for, left out of what a plain client of that
    /// dialect receives (AAP without the `agui` extension: state, activity, a messages
    /// snapshot, a subagent's failure, `CUSTOM`, `RAW`, an earlier folded run's end).
    NoHome,
}

impl DropKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            DropKind::UnknownType => "unknown_type",
            DropKind::InvalidEvent => "invalid_event",
            DropKind::AfterTerminal => "after_terminal",
            DropKind::DuplicateStart => "duplicate_start",
            DropKind::Orphan => "orphan",
            DropKind::EndMarker => "end_marker",
            DropKind::NotAnObject => "not_an_object",
            DropKind::Lossy => "lossy",
            DropKind::UnknownPatchOp => "unknown_patch_op",
            DropKind::UnknownContentPart => "unknown_content_part",
            DropKind::UnknownPartSource => "unknown_part_source",
            DropKind::UnknownMessageRole => "unknown_message_role",
            DropKind::PatchNotApplied => "patch_not_applied",
            DropKind::NoHome => "no_home",
        }
    }

    /// For a drop that loses content a reader would have seen, what was lost and why, for the
    /// developer (AG-UI 1.1 versioning: a lossy translation must say so); `None` for a drop
    /// that loses nothing (a marker, a duplicate, what came after the end).
    pub const fn lost(self) -> Option<&'static str> {
        Some(match self {
            DropKind::UnknownType => {
                "an upstream event of a type neither AG-UI nor any dialect rule describes was \
                 dropped; an agent speaking a newer protocol needs a gateway that knows it"
            }
            DropKind::InvalidEvent => {
                "an upstream event of a known type whose fields do not fit its shape was \
                 dropped; the agent sends malformed events"
            }
            DropKind::Lossy => {
                "a repaired upstream value could not be carried over intact (a field that did \
                 not fit a terminal event, object tool arguments mixed with text)"
            }
            DropKind::UnknownPatchOp => {
                "a JSON Patch operation whose op RFC 6902 does not define was removed from its \
                 STATE_DELTA or ACTIVITY_DELTA; the patch's other operations were kept"
            }
            DropKind::UnknownContentPart => {
                "a content part of a type AG-UI does not describe was removed from its message \
                 or tool result; the other parts were kept"
            }
            DropKind::UnknownPartSource => {
                "a media part whose source is of a kind AG-UI does not describe (data, url, \
                 file) was removed whole, as its source is required"
            }
            DropKind::UnknownMessageRole => {
                "a message of a role AG-UI does not describe was removed from its \
                 MESSAGES_SNAPSHOT; the other messages were kept"
            }
            DropKind::PatchNotApplied => {
                "a STATE_DELTA that does not apply to the state the gateway keeps for the \
                 session was skipped and the prior state kept; the agent should resynchronise \
                 with a STATE_SNAPSHOT"
            }
            DropKind::NoHome => {
                "an event the client's dialect has no place for was left out (AAP: state, \
                 activity, messages snapshots, subagent failures, CUSTOM, RAW, the end of an \
                 earlier run folded into the turn); a client that sends `x-aap-extensions: agui` \
                 receives them"
            }
            DropKind::AfterTerminal
            | DropKind::DuplicateStart
            | DropKind::Orphan
            | DropKind::EndMarker
            | DropKind::NotAnObject => return None,
        })
    }
}
