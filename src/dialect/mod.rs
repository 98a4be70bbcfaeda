//! The dialect registry: one folder per wire format, each with a reader (wire → canonical) and
//! a writer (canonical → wire) implementing the traits of [`codec`]. Three readers and three
//! writers give every client × upstream pair without pairwise translators (DESIGN.md
//! principle 1). This file is the only place that names every dialect: the [`Dialect`] enum,
//! the per-route options of each ([`CodecOptions`]), and how each builds its reader, writer and
//! requests. The pipeline composes any [`Reader`] with any [`Writer`] and knows none of them.
//!
//! Pure: must not import the pipeline, the I/O side (`http`, `server`, `adapters`, `session`),
//! hyper, tokio or tracing.

pub mod aap;
pub mod agui;
pub mod codec;
pub mod confirm;
pub mod field_error;
pub mod hai;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bytes::BytesMut;

use crate::error::Failure;
use crate::event::{DeltaRef, Event, Note, RunAgentInput, RunIds};
use crate::mapping::Mappings;
use crate::sse::{Framing, SseEvent, SseEventRef};

pub use codec::{Reader, Runs, Writer};

/// Every dialect's per-route options, by dialect, plus what all readers share. What a route
/// configures; the defaults are the specs' defaults.
#[derive(Debug, Clone, Default)]
pub struct CodecOptions {
    /// The data-driven alias and rename tables (`mappings/*.toml`), loaded by the caller.
    pub mappings: Mappings,
    /// Names of the frontend tools the run's request declared.
    pub tools: Vec<String>,
    pub agui: agui::AguiOptions,
    pub hai: hai::HaiOptions,
    pub aap: aap::AapOptions,
}

/// Declares the dialects: the [`Dialect`] enum with its wire names, and the [`AnyReader`] and
/// [`AnyWriter`] enums that dispatch to each dialect's reader and writer (enum dispatch: no
/// virtual call per event, measured in `benches/codec.rs`).
macro_rules! dialects {
    ($($variant:ident = $name:literal $(| $alias:literal)* => $reader:ty, $writer:ty;)+) => {
        /// A wire protocol the gateway speaks.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Dialect {
            $($variant,)+
        }

        impl Dialect {
            pub const ALL: &'static [Dialect] = &[$(Dialect::$variant,)+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Dialect::$variant => $name,)+
                }
            }

            fn parse(s: &str) -> Option<Dialect> {
                match s {
                    $($name $(| $alias)* => Some(Dialect::$variant),)+
                    _ => None,
                }
            }
        }

        /// The reader of any dialect.
        pub enum AnyReader {
            $($variant(Box<$reader>),)+
        }

        /// The writer of any dialect.
        pub enum AnyWriter {
            $($variant(Box<$writer>),)+
        }

        impl Reader for AnyReader {
            fn start(&mut self, out: &mut Vec<Event>) {
                match self {
                    $(AnyReader::$variant(r) => r.start(out),)+
                }
            }

            fn read(
                &mut self,
                event: &SseEvent,
                out: &mut Vec<Event>,
                notes: &mut Vec<Note>,
            ) -> Result<(), Failure> {
                match self {
                    $(AnyReader::$variant(r) => Reader::read(&mut **r, event, out, notes),)+
                }
            }

            fn read_delta<'a>(&'a mut self, event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
                match self {
                    $(AnyReader::$variant(r) => Reader::read_delta(&mut **r, event),)+
                }
            }

            fn finish(&mut self, out: &mut Vec<Event>) {
                match self {
                    $(AnyReader::$variant(r) => Reader::finish(&mut **r, out),)+
                }
            }

            fn at_handover(&self) -> bool {
                match self {
                    $(AnyReader::$variant(r) => r.at_handover(),)+
                }
            }

            fn next_response(&mut self, framing: Framing) {
                match self {
                    $(AnyReader::$variant(r) => r.next_response(framing),)+
                }
            }
        }

        impl Writer for AnyWriter {
            fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
                match self {
                    $(AnyWriter::$variant(w) => Writer::write(&mut **w, event, out),)+
                }
            }

            fn write_delta(
                &mut self,
                delta: &DeltaRef<'_>,
                out: &mut BytesMut,
            ) -> Option<Result<(), Failure>> {
                match self {
                    $(AnyWriter::$variant(w) => Writer::write_delta(&mut **w, delta, out),)+
                }
            }

            fn opening(&self) -> Option<&'static [u8]> {
                match self {
                    $(AnyWriter::$variant(w) => Writer::opening(&**w),)+
                }
            }

            fn is_stream(&self) -> bool {
                match self {
                    $(AnyWriter::$variant(w) => w.is_stream(),)+
                }
            }

            fn wants_clock(&self) -> bool {
                match self {
                    $(AnyWriter::$variant(w) => w.wants_clock(),)+
                }
            }

            fn set_now(&mut self, now_ms: i64) {
                match self {
                    $(AnyWriter::$variant(w) => Writer::set_now(&mut **w, now_ms),)+
                }
            }

            fn runs(&self) -> Runs {
                match self {
                    $(AnyWriter::$variant(w) => w.runs(),)+
                }
            }

            fn take_notes(&mut self, notes: &mut Vec<Note>) {
                match self {
                    $(AnyWriter::$variant(w) => Writer::take_notes(&mut **w, notes),)+
                }
            }
        }
    };
}

dialects! {
    AgUi = "ag-ui" | "agui" => agui::AguiReader, agui::AguiWriter;
    Hai = "hai" => hai::HaiReader, hai::HaiWriter;
    Aap = "aap" => aap::AapReader, aap::AapWriter;
}

impl Dialect {
    /// The reader of an upstream speaking this dialect, for the run `ids`.
    pub fn reader(self, ids: &RunIds, framing: Framing, options: &CodecOptions) -> AnyReader {
        match self {
            Dialect::AgUi => AnyReader::AgUi(Box::new(agui::AguiReader::new(
                ids,
                Arc::clone(&options.mappings.agui),
                options.agui.reader,
            ))),
            Dialect::Hai => AnyReader::Hai(Box::new(hai::HaiReader::new(
                ids,
                &options.mappings,
                options.agui.reader,
                &options.hai,
                options.tools.iter().cloned(),
            ))),
            Dialect::Aap => {
                let mut reader = aap::AapReader::new(ids, options.aap.read.clone());
                reader.set_json(framing == Framing::Json);
                AnyReader::Aap(Box::new(reader))
            }
        }
    }

    /// The writer of a client speaking this dialect.
    pub fn writer(self, options: &CodecOptions) -> AnyWriter {
        match self {
            Dialect::AgUi => AnyWriter::AgUi(Box::new(
                agui::AguiWriter::new(options.agui.unknown_fields)
                    .with_version(options.agui.protocol_version),
            )),
            Dialect::Hai => {
                AnyWriter::Hai(Box::new(hai::HaiWriter::new(options.hai.writer.clone())))
            }
            Dialect::Aap => AnyWriter::Aap(Box::new(aap::AapWriter::new(
                options.aap.turn.clone(),
                aap::transcript::Transcript::new(Vec::new(), None, aap::DEFAULT_TURN_BUDGET),
            ))),
        }
    }
}

/// Reads a client's request body in `dialect` into the canonical run input. `new_id` supplies
/// ids a dialect may leave out (HAI's thread and run ids). AAP clients speak REST sessions,
/// served by the AAP face; their turns never come through here, so AAP reads as AG-UI.
pub fn read_request(
    dialect: Dialect,
    body: &[u8],
    options: &CodecOptions,
    new_id: &mut dyn FnMut() -> String,
) -> Result<RunAgentInput, Failure> {
    match dialect {
        Dialect::Hai => {
            hai::read_request(body, &options.mappings, options.hai.history_content, new_id)
        }
        Dialect::AgUi | Dialect::Aap => agui::read_request(body, &options.mappings.agui),
    }
}

/// The body an upstream speaking `dialect` receives for `input`. AAP agents are driven by the
/// AAP client adapter with requests of their own; AG-UI stands in here.
pub fn write_request(dialect: Dialect, input: &RunAgentInput, options: &CodecOptions) -> Vec<u8> {
    match dialect {
        Dialect::Hai => hai::write_request(input),
        Dialect::AgUi | Dialect::Aap => agui::write_request(input, options.agui.request_profile),
    }
}

/// A dialect pair the build cannot translate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("translating {from} to {to} is not supported by this build")]
pub struct Unsupported {
    pub from: Dialect,
    pub to: Dialect,
}

/// Whether the build translates `upstream` to `client`: the one place a pair would be refused.
/// Every pair of the three dialects translates, AAP to AAP included: an AAP agent's turns are
/// read into the canonical run and written back as the AAP client's turn, so that pair gets
/// the gateway's guarantees (one `turn_stop`, limits) like any other rather than passing bytes
/// through.
pub fn check_pair(_upstream: Dialect, _client: Dialect) -> Result<(), Unsupported> {
    Ok(())
}

/// Shapes a client's canonical input for an upstream of another dialect: top-level extras only
/// travel to an upstream of the client's own dialect (`translation.md` §3.1), and a client
/// without interrupts answers them through confirm calls, which become `resume` (§6, C1).
pub fn input_for_upstream(client: Dialect, upstream: Dialect, input: &mut RunAgentInput) {
    if client != upstream {
        input.extra.clear();
    }
    if client == Dialect::Hai && upstream == Dialect::AgUi {
        confirm::answers_to_resume(input);
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown dialect name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dialect {0:?} (expected ag-ui, hai or aap)")]
pub struct UnknownDialect(pub String);

impl FromStr for Dialect {
    type Err = UnknownDialect;

    fn from_str(s: &str) -> Result<Dialect, UnknownDialect> {
        Dialect::parse(&s.to_ascii_lowercase()).ok_or_else(|| UnknownDialect(s.to_string()))
    }
}
