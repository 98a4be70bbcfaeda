//! HAI (ZTE's Human Agent Interaction protocol) over SSE: the tolerant reader (`read`), the
//! request adapters (`request`, with the message-history codec in `history`) and the writer
//! that produces what `hai-client` accepts (`write`). The business-data `delta` codec both sides
//! share lives in `business`. `specs/hai.md`, `specs/translation.md` §3.
//!
//! HAI is an AG-UI derivative: the events it shares with AG-UI (tool calls, state, steps, errors,
//! `RAW`, `CUSTOM`) go through the AG-UI reader with all its dialect repairs; this module owns
//! only what HAI adds (business data, collaboration, run-event extras, the singular snapshot).
//! What has no AG-UI meaning travels as `CUSTOM hai.*` events and `metadata.hai` (§3.5), so a
//! HAI stream survives an AG-UI hop intact.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

mod business;
mod extension;
mod history;
mod read;
mod request;
mod write;

pub use business::escape_braces_in_strings;
pub use read::{Collaboration, HaiReader};
pub use request::{read_request, read_request_lenient, write_request, HistoryContent};
pub use write::HaiWriter;

use std::str::FromStr;

/// The key under which HAI-only information rides in canonical `metadata` (§3.5).
pub const METADATA_KEY: &str = "hai";

/// `CUSTOM` names of the `hai.*` vocabulary inside canonical AG-UI (§3.5).
pub mod custom {
    /// A business output with no AG-UI event (toolCallShow, fold, button, icon, unknown).
    pub const BUSINESS_DATA: &str = "hai.business_data";
    /// One `AGENT_COLLABORATIVE_MESSAGE_*` event.
    pub const COLLABORATIVE: &str = "hai.agent_collaborative_message";
    /// A HAI event of a type the catalogue does not know, verbatim.
    pub const EVENT: &str = "hai.event";
    /// A HAI `CUSTOM` whose own name starts with `hai.`.
    pub const CUSTOM: &str = "hai.custom";
    /// A boundary between two runs of one upstream stream, folded into the one run a HAI
    /// stream carries: `{finished?: RUN_FINISHED, started: RUN_STARTED}` (AG-UI events). A
    /// HAI client ignores it; the gateway's HAI reader restores both events.
    pub const RUN: &str = "hai.run";
}

/// How a business `delta` is written (`hai.md` §9, `hai.delta_encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeltaEncoding {
    /// Variant 3: one compact JSON object per delta, as a string (what `hai-client` parses).
    #[default]
    JsonString,
    /// Variant 2: the object itself, `blockId`/`style` at the event's top level.
    Object,
    /// Variant 1: text outputs as raw strings; other outputs as HAI `CUSTOM` events.
    PlainText,
}

/// How tool-call arguments are written (`hai.tool_args`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolArgsEncoding {
    /// One `TOOL_CALL_ARGS` per call whose delta is the JSON text of the whole object.
    #[default]
    WholeJsonString,
    /// One `TOOL_CALL_ARGS` per call whose delta is the object.
    Object,
    /// The fragments as they come.
    Stream,
}

/// What an AG-UI subagent becomes for a HAI client (`hai.subagents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Subagents {
    /// `AGENT_COLLABORATIVE_MESSAGE_*`.
    #[default]
    Collaborative,
    /// HAI `CUSTOM agui.SUBAGENT_*` events.
    Custom,
}

/// The HAI writer's profile (`hai.md` §9, `translation.md` §0.1 "HAI down").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    pub delta_encoding: DeltaEncoding,
    pub tool_args: ToolArgsEncoding,
    /// `MESSAGE_SNAPSHOT` (HAI's spelling) or `MESSAGES_SNAPSHOT`.
    pub snapshot_name: SnapshotName,
    /// `threadId`/`runId` on `RUN_*` (harmless extras for `hai-client`).
    pub run_ids: bool,
    /// A last `{content:"", thinking:false}` chunk when the thinking flags were synthesised.
    pub thinking_final_chunk: bool,
    pub subagents: Subagents,
    /// A one-output business message with the error text before `RUN_ERROR`.
    pub error_notice: bool,
    /// Name of the confirm tool an AG-UI interrupt becomes (`hitl.confirm_tool.name`).
    pub confirm_tool: String,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            delta_encoding: DeltaEncoding::default(),
            tool_args: ToolArgsEncoding::default(),
            snapshot_name: SnapshotName::default(),
            run_ids: true,
            thinking_final_chunk: true,
            subagents: Subagents::default(),
            error_notice: false,
            confirm_tool: crate::dialect::confirm::DEFAULT_TOOL.to_owned(),
        }
    }
}

/// Spelling of the message snapshot event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotName {
    #[default]
    Singular,
    Plural,
}

impl SnapshotName {
    pub const fn as_str(self) -> &'static str {
        match self {
            SnapshotName::Singular => "MESSAGE_SNAPSHOT",
            SnapshotName::Plural => "MESSAGES_SNAPSHOT",
        }
    }
}

/// The route options of HAI on either side, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HaiOptions {
    pub writer: WriterOptions,
    /// `hai.collaboration`: how a HAI upstream's collaboration events are read.
    pub collaboration: Collaboration,
    /// `hai.history_content`: how assistant history in business-object form is read.
    pub history_content: HistoryContent,
}

/// An option value that names none of the choices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {value:?} (expected {expected})")]
pub struct UnknownChoice {
    pub value: String,
    pub expected: &'static str,
}

/// `FromStr` for the option enums, spelled as in `translation.md` §0.1.
macro_rules! choices {
    ($ty:ty { $($text:literal => $variant:expr,)* }) => {
        impl FromStr for $ty {
            type Err = UnknownChoice;
            fn from_str(s: &str) -> Result<Self, UnknownChoice> {
                match s {
                    $($text => Ok($variant),)*
                    _ => Err(UnknownChoice {
                        value: s.to_owned(),
                        expected: concat!($($text, " "),*),
                    }),
                }
            }
        }
    };
}

choices!(DeltaEncoding {
    "json_string" => DeltaEncoding::JsonString,
    "object" => DeltaEncoding::Object,
    "plain_text" => DeltaEncoding::PlainText,
});
choices!(ToolArgsEncoding {
    "whole_json_string" => ToolArgsEncoding::WholeJsonString,
    "object" => ToolArgsEncoding::Object,
    "stream" => ToolArgsEncoding::Stream,
});
choices!(SnapshotName {
    "MESSAGE_SNAPSHOT" => SnapshotName::Singular,
    "MESSAGES_SNAPSHOT" => SnapshotName::Plural,
});
choices!(Subagents {
    "collaborative" => Subagents::Collaborative,
    "custom" => Subagents::Custom,
});
choices!(Collaboration {
    "custom" => Collaboration::Custom,
    "subagent" => Collaboration::Subagent,
});
choices!(HistoryContent {
    "decode" => HistoryContent::Decode,
    "verbatim" => HistoryContent::Verbatim,
});
