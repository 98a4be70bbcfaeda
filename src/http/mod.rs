//! The leaf HTTP layer: everything a face needs to talk HTTP, and nothing that routes. It
//! imports the pipeline, the dialect registry, config and telemetry below it, and never the
//! server or the adapters above it.
//!
//! - [`relay`]: the handle faces get — open a route's upstream, build its pipeline and body.
//! - [`upstream`]: the pooled upstream client and its failures before the body; a response
//!   body drives its own connection.
//! - [`body`]: [`body::TranslatingBody`], the only async piece of a translated stream.
//! - [`deferred`]: the work an owner does once its stream ends, as a task spawned then.
//! - [`request_body`]: client request bodies, bounded in size and time, and the gateway-wide
//!   budget of buffered request bytes.
//! - [`response`]: the response body type, success shapes, and [`response::Refusal`].
//! - [`request_id`]: the `x-request-id` each request is known by, kept from the client or made
//!   up.
//! - [`headers`]: which client headers reach the upstream (hop-by-hop filtering, cookies, a
//!   route's allowlist, the forwarding headers), and the SSE response headers.
//! - [`stall`]: the guard that gives up a client whose writes stay blocked.
//! - [`clock`]: the wall clock handed to the pure converters.
//! - [`deadline`]: the idle and heartbeat timers, cheap to move for every event.
//! - [`drain_deadline`]: the drain deadline every open stream ends at, cheap to check on every
//!   poll.

pub mod body;
pub mod client_body;
pub mod clock;
pub mod deadline;
pub mod deferred;
pub mod drain_deadline;
pub mod h1;
pub mod headers;
pub mod relay;
pub mod request_id;
pub mod request_body;
pub mod response;
pub mod stall;
pub mod upstream;

use std::net::SocketAddr;

/// The address of the client connection a request came on: the server attaches it to every
/// request as an extension, for logs and the forwarding headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);
