//! HTTP/1.1 message bodies as they arrive (RFC 9112 §6–7): the framing a message declared
//! (chunked, a length, until the close) and the decoder that turns the bytes one socket read
//! brought into body data. Shared by the upstream client ([`crate::http::upstream`]) and the
//! server's own HTTP/1.1 connections (`server::h1`).
//!
//! Every socket read goes into one per-thread scratch buffer ([`poll_read_with`]), so an open
//! connection holds no read buffer of its own between reads: only framing a read cut in two.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::BytesMut;
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName};
use tokio::io::{AsyncRead, ReadBuf};

/// Why a message body's framing could not be read: what was wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub &'static str);

/// The longest chunk-size line (size and extensions).
pub const MAX_SIZE_LINE: usize = 4 * 1024;

/// The most trailer bytes read after the last chunk (they are read and dropped).
pub const MAX_TRAILERS: usize = 16 * 1024;

/// The per-thread buffer every socket read goes into.
pub const SCRATCH: usize = 64 * 1024;

thread_local! {
    static SCRATCH_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; SCRATCH].into_boxed_slice());
}

/// How a message body is delimited, and how far it has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunk),
    /// `Content-Length`: the bytes still to come.
    Length(u64),
    /// Until the peer closes the connection (responses only).
    Close,
    /// The body is over.
    Done,
}

impl Framing {
    /// The body bytes still to come, when the message said.
    pub fn remaining(self) -> Option<u64> {
        match self {
            Framing::Length(n) => Some(n),
            Framing::Done => Some(0),
            Framing::Chunked(_) | Framing::Close => None,
        }
    }
}

/// Where the chunked decoder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data: the bytes still to come.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one; the trailer bytes seen so far.
    Trailers(usize),
}

/// Reads what the socket has into the per-thread scratch buffer and hands it to `f`; `None`
/// at the end of the stream.
pub fn poll_read_with<T: AsyncRead + Unpin, R>(
    io: &mut T,
    cx: &mut Context<'_>,
    f: impl FnOnce(&[u8]) -> R,
) -> Poll<io::Result<Option<R>>> {
    with_scratch(|scratch| {
        let mut buf = ReadBuf::new(scratch);
        ready!(Pin::new(io).poll_read(cx, &mut buf))?;
        let read = buf.filled();
        Poll::Ready(Ok((!read.is_empty()).then(|| f(read))))
    })
}

pub fn with_scratch<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH_BUF.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        // Never nested in practice; a fresh buffer keeps it correct if it were.
        Err(_) => f(&mut vec![0; SCRATCH]),
    })
}

/// Decodes what of `input` the framing can, appending body data to `out`; returns how many
/// bytes were used. What is left is an incomplete framing token (to be completed by the next
/// read), or bytes past the body's end.
pub fn decode(framing: &mut Framing, input: &[u8], out: &mut BytesMut) -> Result<usize, Malformed> {
    match framing {
        Framing::Done => Ok(0),
        Framing::Close => {
            out.extend_from_slice(input);
            Ok(input.len())
        }
        Framing::Length(remaining) => {
            let n = clamp(*remaining, input.len());
            out.extend_from_slice(&input[..n]);
            *remaining -= n as u64;
            if *remaining == 0 {
                *framing = Framing::Done;
            }
            Ok(n)
        }
        Framing::Chunked(chunk) => {
            let (used, done) = decode_chunked(chunk, input, out)?;
            if done {
                *framing = Framing::Done;
            }
            Ok(used)
        }
    }
}

/// The chunked decoder; see [`decode`]. True once the last chunk and its trailers are read.
fn decode_chunked(
    state: &mut Chunk,
    input: &[u8],
    out: &mut BytesMut,
) -> Result<(usize, bool), Malformed> {
    let mut at = 0;
    loop {
        let rest = &input[at..];
        match *state {
            Chunk::Data(remaining) => {
                if rest.is_empty() {
                    return Ok((at, false));
                }
                let n = clamp(remaining, rest.len());
                out.extend_from_slice(&rest[..n]);
                at += n;
                *state = if remaining == n as u64 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(remaining - n as u64)
                };
            }
            Chunk::DataEnd => match rest {
                [b'\r', b'\n', ..] => {
                    at += 2;
                    *state = Chunk::Size;
                }
                [] | [b'\r'] => return Ok((at, false)),
                _ => return Err(Malformed("a chunk not followed by CRLF")),
            },
            Chunk::Size => {
                let Some(end) = memchr::memchr(b'\n', rest) else {
                    if rest.len() > MAX_SIZE_LINE {
                        return Err(Malformed("a chunk-size line too long"));
                    }
                    return Ok((at, false));
                };
                if end > MAX_SIZE_LINE {
                    return Err(Malformed("a chunk-size line too long"));
                }
                let size = chunk_size(&rest[..end])?;
                at += end + 1;
                *state = if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Trailers(seen) => {
                let Some(end) = memchr::memchr(b'\n', rest) else {
                    if seen + rest.len() > MAX_TRAILERS {
                        return Err(Malformed("trailers too long"));
                    }
                    return Ok((at, false));
                };
                let line = &rest[..end];
                at += end + 1;
                if line.is_empty() || line == b"\r" {
                    return Ok((at, true));
                }
                if seen + end + 1 > MAX_TRAILERS {
                    return Err(Malformed("trailers too long"));
                }
                *state = Chunk::Trailers(seen + end + 1);
            }
        }
    }
}

/// The size on a chunk-size line (without its LF): hex digits, then optional extensions
/// (ignored), then CR.
fn chunk_size(line: &[u8]) -> Result<u64, Malformed> {
    let line = line
        .strip_suffix(b"\r")
        .ok_or(Malformed("a chunk-size line without CRLF"))?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(Malformed("a chunk size that is not hex"));
    }
    // Extensions may follow, after optional blanks (RFC 9112 §7.1.1); nothing else may.
    let after = line[digits..].trim_ascii_start();
    if !(after.is_empty() || after[0] == b';') {
        return Err(Malformed("a chunk size that is not hex"));
    }
    let mut size: u64 = 0;
    for &digit in &line[..digits] {
        let value = (digit as char).to_digit(16).unwrap_or(0) as u64;
        size = size
            .checked_mul(16)
            .and_then(|size| size.checked_add(value))
            .ok_or(Malformed("a chunk size too large"))?;
    }
    Ok(size)
}

/// `remaining` bytes still due, capped by `available`.
pub fn clamp(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |remaining| remaining.min(available))
}

/// The comma-separated tokens of every `name` header, trimmed, empty ones skipped
/// (`Connection`, `Transfer-Encoding`: RFC 9110 §5.6.1).
pub fn tokens<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// Whether a `name` header lists `token` (case-insensitively).
pub fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    tokens(headers, name).any(|listed| listed.eq_ignore_ascii_case(token))
}

/// What `Transfer-Encoding` says, when present: whether `chunked` is its last coding (the only
/// one a message's length can be read from).
pub fn chunked_last(headers: &HeaderMap) -> Option<bool> {
    if !headers.contains_key(TRANSFER_ENCODING) {
        return None;
    }
    let last = tokens(headers, &TRANSFER_ENCODING).last();
    Some(last.is_some_and(|coding| coding.eq_ignore_ascii_case("chunked")))
}

/// The `Content-Length`, when given: every value (and every comma-separated part) must be the
/// same decimal number.
pub fn content_length(headers: &HeaderMap) -> Result<Option<u64>, Malformed> {
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for part in value.as_bytes().split(|&b| b == b',') {
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                return Err(Malformed("a bad Content-Length"));
            }
            let n = part
                .iter()
                .fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
            if length.is_some_and(|seen| seen != n) {
                return Err(Malformed("conflicting Content-Length values"));
            }
            length = Some(n);
        }
    }
    Ok(length)
}
