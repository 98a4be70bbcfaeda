//! Request heads in, response heads out, for the gateway's own HTTP/1.1 connections: a request
//! head parsed with `httparse` into an [`http::Request`] and the framing of its body (RFC 9112
//! §3, §6), and a response head written with the framing the connection chose for its body.

use bytes::BytesMut;
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, EXPECT, HOST, TRANSFER_ENCODING};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version};

use crate::http::h1::framing::{chunked_last, content_length, has_token, Chunk, Framing};

/// The most request headers read (hyper's default too).
const MAX_HEADERS: usize = 100;

/// A request head that could not be read: the status the connection answers before closing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHead {
    pub status: StatusCode,
    pub why: &'static str,
}

impl BadHead {
    fn bad(why: &'static str) -> BadHead {
        BadHead {
            status: StatusCode::BAD_REQUEST,
            why,
        }
    }
}

/// A parsed request head.
#[derive(Debug)]
pub struct RequestHead {
    pub parts: Parts,
    /// How its body is delimited.
    pub body: Framing,
    /// The client may send another request on this connection after this one.
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before it sends the body.
    pub expects_continue: bool,
}

/// Parses the request head at the start of `buf`: `Ok(None)` while it is incomplete, with its
/// length once complete.
pub fn parse(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, BadHead> {
    // Slots httparse fills as it goes: none of the 4 KiB is written before it is used.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    let len = match request.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(BadHead {
                status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                why: "too many header fields",
            })
        }
        Err(_) => return Err(BadHead::bad("not an HTTP/1.1 request head")),
    };
    let method = request
        .method
        .and_then(|method| Method::from_bytes(method.as_bytes()).ok())
        .ok_or(BadHead::bad("a bad method"))?;
    let uri = request
        .path
        .and_then(|path| Uri::try_from(path).ok())
        .ok_or(BadHead::bad("a bad request target"))?;
    let version = match request.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let mut map = HeaderMap::with_capacity(request.headers.len());
    for header in request.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| BadHead::bad("a bad header name"))?;
        let value = HeaderValue::from_bytes(header.value)
            .map_err(|_| BadHead::bad("a bad header value"))?;
        map.append(name, value);
    }
    check_host(version, &map)?;
    let body = body_framing(&map)?;
    let keep_alive = match version {
        Version::HTTP_11 => !has_token(&map, &CONNECTION, "close"),
        _ => has_token(&map, &CONNECTION, "keep-alive"),
    };
    let expects_continue = version == Version::HTTP_11
        && body != Framing::Done
        && map
            .get(EXPECT)
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = version;
    parts.headers = map;
    Ok(Some((
        RequestHead {
            parts,
            body,
            keep_alive,
            expects_continue,
        },
        len,
    )))
}

/// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one `Host`, any request at most one,
/// and its value is an authority (or empty, for a target without one). Anything else is a
/// 400: a gateway that guessed which host was meant would let a client and an upstream (or
/// a cache before it) disagree about it.
fn check_host(version: Version, headers: &HeaderMap) -> Result<(), BadHead> {
    let mut hosts = headers.get_all(HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(BadHead::bad("more than one Host header"));
    }
    match host {
        None if version == Version::HTTP_11 => Err(BadHead::bad("no Host header")),
        None => Ok(()),
        Some(value) if value.is_empty() => Ok(()),
        Some(value) => match http::uri::Authority::try_from(value.as_bytes()) {
            // An authority with user info is not a host.
            Ok(authority) if !authority.as_str().contains('@') => Ok(()),
            _ => Err(BadHead::bad("a bad Host header")),
        },
    }
}

/// How a request's body is delimited (RFC 9112 §6.3): chunked, a length, or none. A request
/// with both, or with a transfer coding other than chunked last, is refused: its length cannot
/// be known safely.
fn body_framing(headers: &HeaderMap) -> Result<Framing, BadHead> {
    let length = content_length(headers).map_err(|malformed| BadHead::bad(malformed.0))?;
    match (chunked_last(headers), length) {
        (Some(_), Some(_)) => Err(BadHead::bad("both Transfer-Encoding and Content-Length")),
        (Some(true), None) => Ok(Framing::Chunked(Chunk::Size)),
        (Some(false), None) => Err(BadHead::bad("a transfer coding other than chunked last")),
        (None, Some(0) | None) => Ok(Framing::Done),
        (None, Some(n)) => Ok(Framing::Length(n)),
    }
}

/// How a response body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// No body at all (`HEAD`, 1xx, 204, 304).
    None,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (an HTTP/1.0 client and a body of unknown length).
    Close,
}

/// Appends the response head (status line, the handler's headers, `Date`, the framing headers)
/// to `out`. The handler's own framing headers are replaced by the connection's.
pub fn encode_response(
    status: StatusCode,
    headers: &HeaderMap,
    framing: Outgoing,
    length_hint: Option<u64>,
    keep_alive: bool,
    out: &mut BytesMut,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name != CONTENT_LENGTH && name != TRANSFER_ENCODING && name != CONNECTION {
            line(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    if !headers.contains_key(DATE) {
        date::with_now(|now| line(out, b"date", now));
    }
    match framing {
        Outgoing::Length(n) => length_line(out, n),
        // A `HEAD` answer says the length the `GET` would have had, when known.
        Outgoing::None if status != StatusCode::NO_CONTENT && !status.is_informational() => {
            if let Some(n) = length_hint {
                length_line(out, n);
            }
        }
        Outgoing::Chunked => line(out, b"transfer-encoding", b"chunked"),
        Outgoing::None | Outgoing::Close => {}
    }
    if !keep_alive {
        line(out, b"connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
}

/// A whole response with no body and `Connection: close`, for a request head the connection
/// refuses.
pub fn refusal(bad: BadHead) -> BytesMut {
    let mut out = BytesMut::with_capacity(128);
    encode_response(
        bad.status,
        &HeaderMap::new(),
        Outgoing::Length(0),
        None,
        false,
        &mut out,
    );
    out
}

fn length_line(out: &mut BytesMut, n: u64) {
    line(
        out,
        b"content-length",
        itoa::Buffer::new().format(n).as_bytes(),
    );
}

fn line(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `Date` (RFC 9110 §6.6.1), formatted once a second per thread.
mod date {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};

    thread_local! {
        static NOW: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
    }

    pub fn with_now(f: impl FnOnce(&[u8])) {
        let now = SystemTime::now();
        let second = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        NOW.with(|cached| {
            let mut cached = cached.borrow_mut();
            if cached.0 != second || cached.1.is_empty() {
                *cached = (second, httpdate::fmt_http_date(now));
            }
            f(cached.1.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(head: &str) -> Result<Option<(RequestHead, usize)>, BadHead> {
        parse(head.as_bytes())
    }

    #[test]
    fn a_complete_head_parses_with_its_length_and_body_framing() {
        let text = "POST /agent?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n{\"a\":1}";
        let (head, len) = parsed(text).unwrap().unwrap();
        assert_eq!(len, text.len() - 7);
        assert_eq!(head.parts.method, Method::POST);
        assert_eq!(head.parts.uri.path(), "/agent");
        assert_eq!(head.parts.uri.query(), Some("x=1"));
        assert_eq!(head.parts.headers["host"], "a");
        assert_eq!(head.body, Framing::Length(12));
        assert!(head.keep_alive);
        assert!(!head.expects_continue);
    }

    #[test]
    fn a_cut_head_is_incomplete_at_every_boundary() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n\r\n";
        for cut in 0..text.len() {
            assert!(parsed(&text[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        let (head, len) = parsed(text).unwrap().unwrap();
        assert_eq!(len, text.len());
        assert_eq!(head.body, Framing::Done);
    }

    #[test]
    fn framing_keep_alive_and_expect_follow_the_headers() {
        let chunked =
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\nExpect: 100-continue\r\n\r\n";
        let (head, _) = parsed(chunked).unwrap().unwrap();
        assert_eq!(head.body, Framing::Chunked(Chunk::Size));
        assert!(head.expects_continue);
        let close = "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n";
        assert!(!parsed(close).unwrap().unwrap().0.keep_alive);
        let old = "GET / HTTP/1.0\r\n\r\n";
        assert!(!parsed(old).unwrap().unwrap().0.keep_alive);
        let old_kept = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
        assert!(parsed(old_kept).unwrap().unwrap().0.keep_alive);
        let same_lengths =
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(
            parsed(same_lengths).unwrap().unwrap().0.body,
            Framing::Length(3)
        );
    }

    #[test]
    fn heads_whose_body_length_is_unsafe_or_which_are_not_http_are_refused_with_400() {
        for bad in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
            "GET /\u{1} HTTP/1.1\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GARBAGE\r\n\r\n",
        ] {
            let refused = parsed(bad).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad:?}");
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("h{i}: v\r\n")).collect();
        let refused = parsed(&format!("GET / HTTP/1.1\r\n{many}\r\n")).unwrap_err();
        assert_eq!(refused.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn an_http_1_1_head_has_exactly_one_valid_host() {
        for (bad, why) in [
            ("GET / HTTP/1.1\r\n\r\n", "no Host header"),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                "more than one Host header",
            ),
            (
                "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
                "more than one Host header",
            ),
            ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "a bad Host header"),
            ("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", "a bad Host header"),
            ("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", "a bad Host header"),
        ] {
            let refused = parsed(bad).unwrap_err();
            assert_eq!(refused, BadHead::bad(why), "{bad:?}");
        }
        for good in [
            "GET / HTTP/1.1\r\nHost: gateway.example:8080\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            "GET / HTTP/1.1\r\nHOST: 127.0.0.1\r\n\r\n",
            // A target without an authority is sent with an empty Host.
            "OPTIONS * HTTP/1.1\r\nHost:\r\n\r\n",
            // HTTP/1.0 has no Host requirement.
            "GET / HTTP/1.0\r\n\r\n",
        ] {
            assert!(parsed(good).unwrap().is_some(), "{good:?}");
        }
    }

    #[test]
    fn a_response_head_carries_the_connections_framing_not_the_handlers() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("999"));
        let mut out = BytesMut::new();
        encode_response(
            StatusCode::OK,
            &headers,
            Outgoing::Chunked,
            None,
            true,
            &mut out,
        );
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.contains("content-type: text/event-stream\r\n"),
            "{text}"
        );
        assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
        assert!(text.contains("\r\ndate: "), "{text}");
        assert!(!text.contains("content-length"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");

        let refused = refusal(BadHead {
            status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            why: "",
        });
        let text = String::from_utf8(refused.to_vec()).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(text.contains("content-length: 0\r\n") && text.contains("connection: close\r\n"));
    }
}
