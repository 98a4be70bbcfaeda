//! dialect-proxy: a streaming gateway that sits in front of AI-agent backends and translates
//! the agent-UI protocols AG-UI, HAI and AAP into each other, event by event, with bounded
//! memory. Everything inside speaks one canonical model (AG-UI events and messages); each
//! dialect has a reader and a writer; the pipeline between them is pure.
//!
//! The modules, in the order a request's data flows through them (each imports only those
//! above it in this list; `tests/it/layering.rs` checks it):
//!
//! - [`error`] — the closed set of gateway error codes, and how each is rendered (HTTP status
//!   before the body, a terminal event after it, a metric label).
//! - [`event`] — the canonical model (events, messages, the run input) and what every converter
//!   shares: diagnostics as notes, run ids, the clock it is handed.
//! - [`sse`] — the bounded incremental SSE decoder and the LF-only encoder.
//! - [`json`] — hand-written JSON for the hot shapes (flat delta objects in, strings out).
//! - [`mapping`] — the data-driven alias and rename tables (`mappings/*.toml`), parsed from
//!   text the caller loaded.
//! - [`dialect`] — the registry of wire dialects: per dialect a folder with its reader
//!   (lenient) and writer (strict) behind the `Reader`/`Writer` traits, and its request
//!   mapping.
//! - [`pipeline`] — decoder → reader → lifecycle guard → writer, for any reader and any writer;
//!   knows no dialect and no session.
//!
//! Everything above is pure: no I/O, clock, logging, tokio or hyper. Below, the I/O side:
//!
//! - [`session`] — the async session store (`Store`) and its in-memory default.
//! - [`telemetry`] — logging, and the Prometheus metrics of finished streams.
//! - [`tls`] — TLS on both sides: PEM files, the upstream client configurations, the
//!   listener's certificate that is re-read when its files change.
//! - [`config`] — file, environment and flags resolved into one validated configuration.
//! - [`auth`] — who may call a route (API keys, JWTs checked against a JWKS) and the
//!   credentials the gateway sends upstream.
//! - [`demo`] — the scripted AG-UI demo agent, in-process or as its own server.
//! - [`http`] — the leaf HTTP layer: the handle faces get (`Relay`), the upstream client, the
//!   translating body, request bodies, response shapes, headers.
//! - [`adapters`] — faces that keep state across requests: the AAP server face (sessions,
//!   turns) and the AAP client (planner, thread records, multi-turn runs).
//! - [`server`] — the server: routing, gateway state, and the one place refusals become
//!   responses.
//! - [`cli`] — `serve`, `translate`, `check`, `demo-agent`.

pub mod error;
pub mod sse;
pub mod json;
pub mod event;
pub mod mapping;
pub mod dialect;
pub mod pipeline;
pub mod session;
pub mod telemetry;
pub mod tls;
pub mod config;
pub mod auth;
pub mod demo;
pub mod http;
pub mod adapters;
pub mod server;
pub mod cli;
