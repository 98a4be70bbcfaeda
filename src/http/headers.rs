//! Which request headers travel to the upstream (RFC 9110 §7.6.1), and the response headers of
//! a translated stream (`streaming.md` §1).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

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

/// Headers the gateway sets itself on the upstream request.
const REPLACED: &[HeaderName] = &[
    header::HOST,
    header::CONTENT_LENGTH,
    header::CONTENT_TYPE,
    header::ACCEPT,
    header::ACCEPT_ENCODING,
];

/// The end-to-end headers of a client request, for the upstream request: `Authorization` and
/// custom headers pass; hop-by-hop headers, those named in `Connection`, and the ones the gateway
/// sets itself do not.
pub fn upstream_request_headers(client: &HeaderMap) -> HeaderMap {
    let named_in_connection: Vec<HeaderName> = client
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    let mut out = HeaderMap::with_capacity(client.len() + 3);
    for (name, value) in client {
        let drop = HOP_BY_HOP.contains(name)
            || REPLACED.contains(name)
            || named_in_connection.contains(name)
            || name == "keep-alive"
            || name == "proxy-connection";
        if !drop {
            out.append(name.clone(), value.clone());
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn end_to_end_headers_pass_and_hop_by_hop_do_not() {
        let mut client = HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer k"),
            ("x-trace-id", "abc"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("proxy-authorization", "Basic x"),
            ("host", "gateway:8080"),
            ("content-length", "12"),
            ("accept-encoding", "gzip"),
        ] {
            client.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let out = upstream_request_headers(&client);
        assert_eq!(out["authorization"], "Bearer k");
        assert_eq!(out["x-trace-id"], "abc");
        for gone in [
            "connection",
            "x-drop-me",
            "keep-alive",
            "te",
            "proxy-authorization",
            "host",
            "content-length",
        ] {
            assert!(!out.contains_key(gone), "{gone} must not be forwarded");
        }
        assert_eq!(out["accept-encoding"], "identity");
        assert_eq!(out["accept"], "text/event-stream");
        assert_eq!(out["content-type"], "application/json");
    }
}
