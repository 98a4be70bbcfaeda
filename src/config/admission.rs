//! Admission limits: what the gateway lets in at once, so that hostile or merely numerous
//! clients cannot take its memory or its file descriptors.
//!
//! Server-wide, in `[limits]` only (or the flags `--max-streams`,
//! `--max-buffered-request-bytes`, `--request-header-timeout`, `--max-connections`,
//! `--max-request-head-bytes`, `--max-requests-per-connection`):
//!
//! - `max_streams` (default 10,000): requests being answered at once, streams included; one
//!   more is refused with 503 `OVERLOADED` and `Retry-After`.
//! - `max_buffered_request_bytes` (default 64 MiB): bytes of all request bodies being read at
//!   once; a body that would pass it is refused with 503 `OVERLOADED` and `Retry-After`.
//! - `request_header_timeout` (default 10 s): a connection that sends no complete request
//!   head within it (from accept, or from the end of the previous response) is closed.
//! - `max_connections` (default 10,000): client connections open at once; more wait in the
//!   listen backlog until one closes. 10,000 keeps a gateway with one upstream connection per
//!   client connection (20,000 descriptors) inside the usual container limit of 65,536
//!   descriptors or more, while being far above what one instance streams on a few cores.
//! - `max_request_head_bytes` (default 8 KiB, at least 8 KiB): the largest HTTP/1.1 request
//!   head (request line and headers); a larger one is refused with 431. A head is held only
//!   while it arrives (reads go through one per-thread buffer), so the limit costs no memory
//!   per open stream. 8 KiB is the request-head limit of Tomcat and Jetty; a deployment whose
//!   clients send larger heads (long tokens, many cookies) raises it.
//! - `max_requests_per_connection` (default 1,000; 0: no limit): requests one client
//!   connection may carry. After the last one an HTTP/1.1 response says `Connection: close`
//!   and an HTTP/2 connection is sent GOAWAY, its open streams finishing first; clients open a
//!   new connection, as they do after any GOAWAY. A long-lived connection otherwise keeps what
//!   it grew for as long as it lives (hyper's HTTP/2 state grows by about 4 KiB per connection
//!   after some 1,400 requests, `benches/ALLOCATOR.md`), and after a rollout its clients never
//!   spread over the new replicas. 1,000 is nginx's `keepalive_requests`; Envoy calls the same
//!   bound `max_requests_per_connection`.
//!
//! Per route, in `[routes.limits]`: `max_streams` only (default: no cap beyond the global
//! one); the server-wide keys there are a problem, reported at their place.

use std::num::NonZeroU64;
use std::time::Duration;

use toml::Spanned;

use super::limits::{parse_duration, RawLimits};
use super::problems::{Keys, Problems};

pub const DEFAULT_MAX_STREAMS: usize = 10_000;
pub const DEFAULT_MAX_BUFFERED_REQUEST_BYTES: usize = 64 << 20;
pub const DEFAULT_REQUEST_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
pub const DEFAULT_MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
pub const DEFAULT_MAX_REQUESTS_PER_CONNECTION: u64 = 1_000;

/// The smallest `max_request_head_bytes`: below it, ordinary browser requests (a few KiB of
/// cookies and headers) would be refused.
const MIN_REQUEST_HEAD_BYTES: u64 = 8 * 1024;

/// The largest `max_request_head_bytes` taken: past it a head is a denial of service.
const MAX_REQUEST_HEAD_BYTES: u64 = 1 << 20;

/// The largest `max_buffered_request_bytes`: the budget is a semaphore counted in `u32`.
const MAX_BUFFERED_REQUEST_BYTES: u64 = u32::MAX as u64;

/// The server-wide admission limits, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Requests being answered at once, over all routes.
    pub max_streams: usize,
    /// Bytes of all request bodies being read at once.
    pub max_buffered_request_bytes: usize,
    /// From accept (or the end of the previous response) to a complete request head.
    pub request_header_timeout: Duration,
    /// Client connections open at once.
    pub max_connections: usize,
    /// The largest HTTP/1.1 request head, and the read buffer of every HTTP/1.1 connection.
    pub max_request_head_bytes: usize,
    /// Requests one client connection may carry; `None`: no limit.
    pub max_requests_per_connection: Option<NonZeroU64>,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            max_streams: DEFAULT_MAX_STREAMS,
            max_buffered_request_bytes: DEFAULT_MAX_BUFFERED_REQUEST_BYTES,
            request_header_timeout: DEFAULT_REQUEST_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_request_head_bytes: DEFAULT_MAX_REQUEST_HEAD_BYTES,
            max_requests_per_connection: NonZeroU64::new(DEFAULT_MAX_REQUESTS_PER_CONNECTION),
        }
    }
}

/// The admission limits one origin gives (`[limits]`, or the flags); `None`: not given, or a
/// problem.
#[derive(Default)]
struct Given {
    max_streams: Option<usize>,
    max_buffered_request_bytes: Option<usize>,
    request_header_timeout: Option<Duration>,
    max_connections: Option<usize>,
    max_request_head_bytes: Option<usize>,
    /// `Some(None)`: given as 0, no limit.
    max_requests_per_connection: Option<Option<NonZeroU64>>,
}

fn given(p: &mut Problems, keys: &Keys, raw: &RawLimits) -> Given {
    Given {
        max_streams: count(p, keys, "max_streams", &raw.max_streams),
        max_buffered_request_bytes: raw.max_buffered_request_bytes.as_ref().and_then(|v| {
            match usize::try_from(*v.get_ref()) {
                Ok(n) if (64..=MAX_BUFFERED_REQUEST_BYTES).contains(v.get_ref()) => Some(n),
                _ => {
                    p.at(
                        v.span(),
                        &keys.key("max_buffered_request_bytes"),
                        format!("must be between 64 and {MAX_BUFFERED_REQUEST_BYTES} bytes"),
                    );
                    None
                }
            }
        }),
        request_header_timeout: raw.request_header_timeout.as_ref().and_then(|v| {
            parse_duration(v.get_ref())
                .map_err(|e| p.at(v.span(), &keys.key("request_header_timeout"), e))
                .ok()
        }),
        max_connections: count(p, keys, "max_connections", &raw.max_connections),
        max_request_head_bytes: raw.max_request_head_bytes.as_ref().and_then(|v| {
            match usize::try_from(*v.get_ref()) {
                Ok(n) if (MIN_REQUEST_HEAD_BYTES..=MAX_REQUEST_HEAD_BYTES).contains(v.get_ref()) => {
                    Some(n)
                }
                _ => {
                    p.at(
                        v.span(),
                        &keys.key("max_request_head_bytes"),
                        format!(
                            "must be between {MIN_REQUEST_HEAD_BYTES} and {MAX_REQUEST_HEAD_BYTES} bytes"
                        ),
                    );
                    None
                }
            }
        }),
        max_requests_per_connection: raw
            .max_requests_per_connection
            .as_ref()
            .map(|v| NonZeroU64::new(*v.get_ref())),
    }
}

/// A count of at least 1.
fn count(p: &mut Problems, keys: &Keys, name: &str, value: &Option<Spanned<u64>>) -> Option<usize> {
    let v = value.as_ref()?;
    match usize::try_from(*v.get_ref()) {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            p.at(v.span(), &keys.key(name), "must be at least 1".into());
            None
        }
    }
}

/// The flags over `[limits]` over the defaults.
pub(super) fn admission(
    file: &mut Problems,
    flags: &mut Problems,
    file_limits: &RawLimits,
    flag_limits: &RawLimits,
) -> Admission {
    let from_file = given(file, &Keys::file("limits."), file_limits);
    let from_flags = given(flags, &Keys::flags(), flag_limits);
    let d = Admission::default();
    Admission {
        max_streams: from_flags
            .max_streams
            .or(from_file.max_streams)
            .unwrap_or(d.max_streams),
        max_buffered_request_bytes: from_flags
            .max_buffered_request_bytes
            .or(from_file.max_buffered_request_bytes)
            .unwrap_or(d.max_buffered_request_bytes),
        request_header_timeout: from_flags
            .request_header_timeout
            .or(from_file.request_header_timeout)
            .unwrap_or(d.request_header_timeout),
        max_connections: from_flags
            .max_connections
            .or(from_file.max_connections)
            .unwrap_or(d.max_connections),
        max_request_head_bytes: from_flags
            .max_request_head_bytes
            .or(from_file.max_request_head_bytes)
            .unwrap_or(d.max_request_head_bytes),
        max_requests_per_connection: from_flags
            .max_requests_per_connection
            .or(from_file.max_requests_per_connection)
            .unwrap_or(d.max_requests_per_connection),
    }
}

/// A route's own `max_streams` (`[routes.limits]`, whose `keys` are given); the server-wide
/// keys written there are reported.
pub(super) fn route_max_streams(p: &mut Problems, keys: &Keys, raw: &RawLimits) -> Option<usize> {
    let server_wide = [
        (
            "max_buffered_request_bytes",
            raw.max_buffered_request_bytes.as_ref().map(Spanned::span),
        ),
        (
            "request_header_timeout",
            raw.request_header_timeout.as_ref().map(Spanned::span),
        ),
        (
            "max_connections",
            raw.max_connections.as_ref().map(Spanned::span),
        ),
        (
            "max_request_head_bytes",
            raw.max_request_head_bytes.as_ref().map(Spanned::span),
        ),
        (
            "max_requests_per_connection",
            raw.max_requests_per_connection.as_ref().map(Spanned::span),
        ),
    ];
    for (name, span) in server_wide {
        if let Some(span) = span {
            p.at(
                span,
                &keys.key(name),
                "is server-wide: set it in [limits], not in a route's limits".into(),
            );
        }
    }
    count(p, keys, "max_streams", &raw.max_streams)
}
