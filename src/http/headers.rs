//! Which request headers travel to the upstream (RFC 9110 §7.6.1), the forwarding headers the
//! gateway adds (RFC 7239 `Forwarded`, `X-Forwarded-*`), and the response headers of a
//! translated stream (`streaming.md` §1).
//!
//! A client's headers pass through [`upstream_request_headers`] under a [`ForwardPolicy`]:
//! 1. never forwarded: hop-by-hop headers and those `Connection` names, `Expect`,
//!    `Max-Forwards`, and the ones the gateway sets itself (`Host`, `Content-Length`,
//!    `Content-Type`, `Accept`, `Accept-Encoding`);
//! 2. `Cookie` only with the route's `forward_cookies = true`;
//! 3. when the route has a `forward_headers` list, only the headers it names; otherwise every
//!    other end-to-end header (`Authorization` included);
//! 4. forwarding headers (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`): a trusted proxy's are kept
//!    as they came, anyone else's dropped; then the peer is appended to `X-Forwarded-For`
//!    (its address) and `Forwarded` (`for="addr:port";proto=…`, IPv6 as `"[addr]:port"`), and
//!    `X-Forwarded-Proto` and `X-Forwarded-Host` (the `Host` the client addressed, which the
//!    upstream request replaces) are set unless a trusted proxy already did.
//!
//! Steps after this one (what a route does with `Authorization`) take the result as it is.

use std::net::{IpAddr, SocketAddr};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::config::Forwarding;

/// Hop-by-hop headers: they describe one connection and never cross a proxy.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Headers addressed to the gateway itself: `Expect: 100-continue` is answered (or not) here,
/// `Max-Forwards` concerns `TRACE` and `OPTIONS` hops.
const FOR_THE_GATEWAY: &[HeaderName] = &[header::EXPECT, header::MAX_FORWARDS];

/// Headers the gateway sets itself on the upstream request.
const REPLACED: &[HeaderName] = &[
    header::HOST,
    header::CONTENT_LENGTH,
    header::CONTENT_TYPE,
    header::ACCEPT,
    header::ACCEPT_ENCODING,
];

const X_FORWARDED_FOR: &str = "x-forwarded-for";
const X_FORWARDED_PROTO: &str = "x-forwarded-proto";
const X_FORWARDED_HOST: &str = "x-forwarded-host";

/// The scheme a client used to reach the gateway. A TLS listener's accept loop inserts
/// `Proto::Https` into each request's extensions; a request without it came over plain HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Proto {
    #[default]
    Http,
    Https,
}

impl Proto {
    pub const fn as_str(self) -> &'static str {
        match self {
            Proto::Http => "http",
            Proto::Https => "https",
        }
    }
}

/// Everything besides the client's headers that decides the upstream request's headers.
#[derive(Debug, Clone, Copy)]
pub struct ForwardPolicy<'a> {
    /// The address of the connection the request came on; `None` when unknown (nothing is
    /// appended for it).
    pub peer: Option<SocketAddr>,
    /// The peer is one of the configured `trusted_proxies`: its forwarding headers are kept.
    pub trusted_peer: bool,
    /// The scheme the client used.
    pub proto: Proto,
    /// The host the client addressed (its `Host`, or the authority of an HTTP/2 request).
    pub host: Option<&'a str>,
    /// The route's `forward_cookies` and `forward_headers`.
    pub route: &'a Forwarding,
}

/// The headers of the upstream request for a client request with `client` headers; see the
/// module docs for the steps.
pub fn upstream_request_headers(client: &HeaderMap, policy: &ForwardPolicy<'_>) -> HeaderMap {
    let named_in_connection: Vec<HeaderName> = client
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    let listed = |name: &HeaderName| {
        policy
            .route
            .forward_headers
            .as_ref()
            .is_none_or(|list| list.contains(name))
    };
    let mut out = HeaderMap::with_capacity(client.len() + 6);
    for (name, value) in client {
        let pass = if HOP_BY_HOP.contains(name)
            || FOR_THE_GATEWAY.contains(name)
            || REPLACED.contains(name)
            || named_in_connection.contains(name)
            || name == "keep-alive"
            || name == "proxy-connection"
        {
            false
        } else if is_forwarding(name) {
            policy.trusted_peer
        } else if name == header::COOKIE {
            policy.route.forward_cookies
        } else {
            listed(name)
        };
        if pass {
            out.append(name.clone(), value.clone());
        }
    }
    add_forwarding(&mut out, policy);
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    // The gateway parses the stream: a compressed upstream body would hold events back.
    out.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    out
}

/// Headers that say who the client is and how it came: believed only from a trusted proxy.
fn is_forwarding(name: &HeaderName) -> bool {
    name == header::FORWARDED || name == "x-real-ip" || name.as_str().starts_with("x-forwarded-")
}

/// Appends the peer to `X-Forwarded-For` and `Forwarded` (which hold a trusted proxy's values,
/// or nothing), and sets `X-Forwarded-Proto` and `X-Forwarded-Host` unless already there.
fn add_forwarding(out: &mut HeaderMap, policy: &ForwardPolicy<'_>) {
    if let Some(peer) = policy.peer {
        let ip = peer.ip().to_canonical();
        let mut addr = String::with_capacity(48);
        push_ip(&mut addr, ip);
        append_list(out, HeaderName::from_static(X_FORWARDED_FOR), &addr);
        // `for="a.b.c.d:port";proto=…`, `for="[v6]:port";proto=…` for IPv6.
        let mut element = String::with_capacity(addr.len() + 32);
        element.push_str("for=\"");
        match ip {
            IpAddr::V4(_) => element.push_str(&addr),
            IpAddr::V6(_) => {
                element.push('[');
                element.push_str(&addr);
                element.push(']');
            }
        }
        element.push(':');
        element.push_str(itoa::Buffer::new().format(peer.port()));
        element.push_str("\";proto=");
        element.push_str(policy.proto.as_str());
        append_list(out, header::FORWARDED, &element);
    }
    let proto = HeaderName::from_static(X_FORWARDED_PROTO);
    if !out.contains_key(&proto) {
        out.insert(proto, HeaderValue::from_static(policy.proto.as_str()));
    }
    let host = HeaderName::from_static(X_FORWARDED_HOST);
    if !out.contains_key(&host) {
        if let Some(value) = policy.host.and_then(|h| HeaderValue::from_str(h).ok()) {
            out.insert(host, value);
        }
    }
}

/// Appends `ip` as its `Display` writes it. An IPv4 address is every request's (a peer on
/// this host or a pod network): its octets go through `itoa` rather than `core::fmt`, whose
/// four padded integers and two `format!`s here cost about 5,000 instructions of a request's
/// 148,000 under callgrind. IPv6 keeps `Display` and its zero-run compression.
fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(itoa::Buffer::new().format(octet));
            }
        }
        IpAddr::V6(v6) => {
            use std::fmt::Write as _;
            // Writing to a `String` cannot fail.
            let _ = write!(out, "{v6}");
        }
    }
}

/// Joins the values of the comma-separated list `name` in `out` into one and appends `item`.
fn append_list(out: &mut HeaderMap, name: HeaderName, item: &str) {
    let mut joined: Vec<u8> = Vec::new();
    for value in out.get_all(&name) {
        let value = value.as_bytes().trim_ascii();
        if !value.is_empty() {
            joined.extend_from_slice(value);
            joined.extend_from_slice(b", ");
        }
    }
    joined.extend_from_slice(item.as_bytes());
    // Joined from valid values and an address: still a valid value.
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        out.insert(name, value);
    }
}

/// Headers of every translated SSE response.
pub fn sse_response_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

#[cfg(test)]
#[path = "headers_tests.rs"]
mod tests;
