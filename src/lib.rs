//! dialect-proxy: a streaming gateway that sits in front of AI-agent backends and translates
//! the agent-UI protocols AG-UI, HAI and AAP into each other, event by event, with bounded
//! memory. Everything inside speaks one canonical model (AG-UI 1.0); each dialect has a reader
//! and a writer; the converters between them are pure. Data flows one way:
//! `proxy → dialect reader → translate → dialect writer → proxy`.
//!
//! - [`event`] — the canonical model — the 31 AG-UI 1.0 events, messages, the run input.
//! - [`sse`] — the bounded incremental SSE decoder and the LF-only encoder.
//! - [`json`] — hand-rolled JSON for the hot shapes (flat delta objects in, strings out).
//! - [`dialect`] — one module per wire format with its reader (lenient) and writer (strict).
//! - [`mapping`] — the data-driven alias and rename tables the readers use (`mappings/*.toml`).
//! - [`translate`] — pure converters — chunk expansion, the run lifecycle guard — and the
//!   pipeline that chains decoder, reader, sequencer and writer.
//! - [`error`] — the closed set of gateway error codes and how each is rendered.
//! - [`config`] — file, environment and flags resolved into one validated configuration.
//! - [`proxy`] — the hyper server, the upstream client and the pull-based translating body.
//! - [`demo`] — the scripted AG-UI 1.0 demo agent, in-process or as its own server.
//! - [`telemetry`] — logging, and the Prometheus metrics of finished streams.
//!
//! `event`, `sse`, `dialect`, `mapping` and `translate` never import `proxy` or hyper; a test
//! (`tests/layering.rs`) keeps that true.

pub mod aap;
pub mod cli;
pub mod config;
pub mod demo;
pub mod dialect;
pub mod error;
pub mod event;
pub mod json;
pub mod mapping;
pub mod proxy;
pub mod session;
pub mod sse;
pub mod telemetry;
pub mod translate;
