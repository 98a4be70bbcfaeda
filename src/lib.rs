//! dialect-proxy: a streaming gateway that translates agent-UI protocols event by event.
pub mod error;
pub mod event;
pub mod sse;
pub mod translate;
