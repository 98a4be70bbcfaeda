//! dialect-proxy: a streaming gateway that sits in front of AI-agent backends and translates
//! the agent-UI protocols AG-UI, HAI and AAP into each other, event by event, with bounded
//! memory.

pub mod adapters;
pub mod cli;
pub mod config;
pub mod demo;
pub mod dialect;
pub mod error;
pub mod event;
pub mod http;
pub mod json;
pub mod mapping;
pub mod pipeline;
pub mod server;
pub mod session;
pub mod sse;
pub mod telemetry;
