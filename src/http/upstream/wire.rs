//! One upstream HTTP/1.1 client connection: a request written whole, its response head parsed
//! (`httparse`), and its body decoded as it arrives (RFC 9112 §6–7: chunked, a length, or
//! until the upstream closes).
//!
//! Written here, not taken from hyper, for two measured needs. hyper's client connection hands
//! its body to the reader one HTTP chunk at a time through a channel (a want signal and an
//! atomic waker per chunk), and the AG-UI SDKs write one event per chunk: on one stream of
//! 100-byte events that hand-over cost more than the translation. And it keeps its own read
//! and write buffers and a dispatch queue for as long as the connection lives, about 25 KiB
//! per open stream. Here one socket read (into a per-thread scratch buffer) becomes one body
//! frame holding every chunk's data that read brought, and between reads a connection keeps
//! only the few bytes of framing a read cut in two.
//!
//! The decoder is strict where the framing is at stake (a chunk size that is not hex or
//! overflows, a missing CRLF, conflicting lengths: [`WireError::Malformed`]) and bounded
//! everywhere: a response head, a chunk-size line and the trailers each have a limit.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Version};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::http::h1::framing::{
    chunked_last, content_length, decode, has_token, poll_read_with, Chunk, Framing, Malformed,
};

/// The largest response head (status line and headers) read.
pub const MAX_HEAD: usize = 64 * 1024;

/// The most response headers read.
const MAX_HEADERS: usize = 128;

/// What one connection keeps between reads beyond which its buffer is let go once empty.
const KEEP_PENDING: usize = 4 * 1024;

/// Why an exchange on a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("upstream connection error")]
    Io(#[from] io::Error),
    #[error("the upstream closed the connection before its response was complete")]
    Closed,
    #[error("the upstream's response is not valid HTTP/1.1: {0}")]
    Malformed(&'static str),
    #[error("the upstream's response head is larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
}

/// An HTTP/1.1 connection to an upstream, one exchange at a time.
pub struct Wire<T> {
    io: T,
    /// Bytes read and not decoded yet: a cut response head, the body bytes that came with the
    /// head, or framing a read cut in two.
    pending: BytesMut,
    framing: Framing,
    /// The connection can carry another exchange once this body is done.
    reusable: bool,
}

impl<T> std::fmt::Debug for Wire<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("framing", &self.framing)
            .field("reusable", &self.reusable)
            .finish_non_exhaustive()
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Wire<T> {
    pub fn new(io: T) -> Wire<T> {
        Wire {
            io,
            pending: BytesMut::new(),
            framing: Framing::Done,
            reusable: true,
        }
    }

    /// Writes `request` (its URI in origin form, `Host` among its headers) and reads the
    /// response head; the body is then read with [`Wire::poll_data`].
    ///
    /// An error from writing means the upstream never got the whole request
    /// ([`Sent::Unsent`]): it may be sent again on another connection.
    pub async fn exchange(&mut self, request: &Request<Bytes>) -> Result<Response<()>, Sent> {
        self.pending.clear();
        self.framing = Framing::Done;
        // Head and body in one write: the gateway's request bodies are small documents, and
        // two writes would be two packets the upstream reads apart.
        let mut whole = encode_request(request);
        whole.extend_from_slice(request.body());
        let written = async {
            self.io.write_all(&whole).await?;
            self.io.flush().await
        };
        if let Err(error) = written.await {
            self.reusable = false;
            return Err(Sent::Unsent(WireError::Io(error)));
        }
        self.reusable = !wants_close(request.headers());
        self.read_head(request.method()).await.map_err(|error| {
            self.reusable = false;
            Sent::Sent(error)
        })
    }

    async fn read_head(&mut self, method: &Method) -> Result<Response<()>, WireError> {
        loop {
            // Nothing to parse before the first read (a parse prepares its header slots first).
            let parsed = if self.pending.is_empty() {
                None
            } else {
                parse_head(&self.pending)?
            };
            if let Some((response, len)) = parsed {
                self.pending.advance(len);
                if response.status().is_informational() {
                    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                        return Err(WireError::Malformed("an unrequested protocol switch"));
                    }
                    continue; // 100 Continue, 103 Early Hints: the answer follows
                }
                self.framing = framing(method, &response)?;
                if self.framing == Framing::Done {
                    self.settle(); // no body: nothing more is read for this exchange
                }
                if response.version() != Version::HTTP_11
                    || wants_close(response.headers())
                    || self.framing == Framing::Close
                {
                    self.reusable = false;
                }
                return Ok(response);
            }
            if self.pending.len() >= MAX_HEAD {
                return Err(WireError::HeadTooLarge);
            }
            let Wire { io, pending, .. } = self;
            let read = std::future::poll_fn(|cx| {
                poll_read_with(io, cx, |read| pending.extend_from_slice(read))
            });
            if read.await?.is_none() {
                return Err(WireError::Closed);
            }
        }
    }

    /// The next part of the response body: all the data one socket read brought, as one
    /// frame. `None` at its end.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, WireError>>> {
        loop {
            if self.framing == Framing::Done {
                return Poll::Ready(None);
            }
            // Body bytes that came with the head go first. What a read cut in two stays here
            // until the next read completes it (decoding it again alone finds nothing).
            if !self.pending.is_empty() {
                let mut out = BytesMut::new();
                match decode(&mut self.framing, &self.pending, &mut out) {
                    Ok(used) => self.pending.advance(used),
                    Err(error) => return Poll::Ready(Some(Err(self.failed(error.into())))),
                }
                self.settle();
                if !out.is_empty() {
                    return Poll::Ready(Some(Ok(out.freeze())));
                }
                if self.framing == Framing::Done {
                    continue;
                }
            }
            let Wire {
                io,
                pending,
                framing,
                ..
            } = self;
            let read = ready!(poll_read_with(io, cx, |read| {
                let mut out = BytesMut::with_capacity(read.len());
                if pending.is_empty() {
                    let used = decode(framing, read, &mut out)?;
                    pending.extend_from_slice(&read[used..]);
                } else {
                    pending.extend_from_slice(read);
                    let used = decode(framing, pending, &mut out)?;
                    pending.advance(used);
                }
                Ok(out)
            }));
            match read {
                Err(error) => return Poll::Ready(Some(Err(self.failed(WireError::Io(error))))),
                Ok(Some(Err(error))) => return Poll::Ready(Some(Err(self.failed(error)))),
                Ok(None) => {
                    // The upstream closed: the end of a body delimited by the close, or a cut.
                    self.reusable = false;
                    if self.framing != Framing::Close {
                        return Poll::Ready(Some(Err(self.failed(WireError::Closed))));
                    }
                    self.framing = Framing::Done;
                    return Poll::Ready(None);
                }
                Ok(Some(Ok(out))) => {
                    self.settle();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out.freeze())));
                    }
                    // Framing only (a cut size line, a chunk's CRLF): read on.
                }
            }
        }
    }

    /// After a decode: bytes past the body's end mean the upstream is out of step; a large
    /// buffer that is empty again is let go, and so is any buffer once the body is done.
    ///
    /// A connection waiting in the pool then holds no buffer, and one reused for thousands of
    /// exchanges keeps none of the capacity its earlier reads grew: under a soak of 10,000
    /// streams the buffers of the upstream connections, each kept, crept up by 650 KiB in
    /// five minutes (heaptrack, `benches/heap_profile.sh`). The next head costs one
    /// allocation.
    fn settle(&mut self) {
        if self.framing == Framing::Done {
            if !self.pending.is_empty() {
                self.reusable = false;
            }
            self.pending = BytesMut::new();
        } else if self.pending.is_empty() && self.pending.capacity() > KEEP_PENDING {
            self.pending = BytesMut::new();
        }
    }

    fn failed(&mut self, error: WireError) -> WireError {
        self.reusable = false;
        self.framing = Framing::Done;
        error
    }

    /// The body was read to its end and the connection can carry another exchange.
    pub fn is_reusable(&self) -> bool {
        self.framing == Framing::Done && self.reusable
    }

    /// The body is over (read to its end, or failed).
    pub fn is_done(&self) -> bool {
        self.framing == Framing::Done
    }

    /// The body bytes still to come, when the upstream said.
    pub fn remaining(&self) -> Option<u64> {
        self.framing.remaining()
    }

    /// Whether an idle connection is still open: one read with nobody to wake. An upstream
    /// that closed it (end of stream, reset) or sent something unasked makes it unusable.
    pub fn still_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut buf),
            Poll::Pending
        )
    }
}

/// Whether a request was written before its exchange failed.
#[derive(Debug)]
pub enum Sent {
    /// Not (wholly) written: nothing of it can have been acted on.
    Unsent(WireError),
    /// Written; the failure came after.
    Sent(WireError),
}

impl Sent {
    pub fn into_error(self) -> WireError {
        match self {
            Sent::Unsent(error) | Sent::Sent(error) => error,
        }
    }
}

/// The request head: request line, `Host` first, the other headers, and the body's length
/// (the gateway's requests are whole; a caller's own framing headers are replaced).
fn encode_request(request: &Request<Bytes>) -> Vec<u8> {
    let target = request
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str())
        .filter(|pq| !pq.is_empty())
        .unwrap_or("/");
    let headers = request.headers();
    let mut head = Vec::with_capacity(256 + request.body().len());
    head.extend_from_slice(request.method().as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    let mut line = |name: &[u8], value: &[u8]| {
        head.extend_from_slice(name);
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    };
    for value in headers.get_all(HOST) {
        line(b"host", value.as_bytes());
    }
    for (name, value) in headers {
        if name != HOST && name != CONTENT_LENGTH && name != TRANSFER_ENCODING {
            line(name.as_str().as_bytes(), value.as_bytes());
        }
    }
    let body = request.body().len();
    if body > 0
        || !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::DELETE
        )
    {
        line(b"content-length", body.to_string().as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// A response head at the start of `buf`, and its length; `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<(Response<()>, usize)>, WireError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(WireError::Malformed("too many response headers"))
        }
        Err(_) => return Err(WireError::Malformed("a bad response head")),
    };
    let status = parsed
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or(WireError::Malformed("a bad status code"))?;
    let version = match parsed.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    for header in parsed.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| WireError::Malformed("a bad header name"))?;
        let value = HeaderValue::from_bytes(header.value)
            .map_err(|_| WireError::Malformed("a bad header value"))?;
        headers.append(name, value);
    }
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.version_mut() = version;
    *response.headers_mut() = headers;
    Ok(Some((response, len)))
}

/// How the body of `response` (to a `method` request) is delimited (RFC 9112 §6.3).
fn framing(method: &Method, response: &Response<()>) -> Result<Framing, WireError> {
    let status = response.status();
    if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Done);
    }
    let headers = response.headers();
    if let Some(chunked) = chunked_last(headers) {
        // Chunked must be the last coding; any other last coding runs to the close.
        return Ok(if chunked {
            Framing::Chunked(Chunk::Size)
        } else {
            Framing::Close
        });
    }
    Ok(match content_length(headers)? {
        Some(0) => Framing::Done,
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    })
}

/// Whether `headers` carry `Connection: close`.
fn wants_close(headers: &HeaderMap) -> bool {
    has_token(headers, &CONNECTION, "close")
}

impl From<Malformed> for WireError {
    fn from(Malformed(what): Malformed) -> WireError {
        WireError::Malformed(what)
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
