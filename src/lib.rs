//! dialect-proxy: a streaming gateway that translates agent-UI protocols event by event.
pub mod dialect;
pub mod error;
pub mod event;
pub mod mapping;
pub mod sse;
pub mod translate;
