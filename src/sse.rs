//! Server-Sent Events: a bounded incremental decoder and an LF-only encoder
//! (`specs/streaming.md` §4, `specs/dialects.md` row 18).
//!
//! The decoder takes bytes as they arrive and yields complete items; the result is the same
//! however the input is split. It accepts LF, CRLF and CR line ends (a CR at the end of a read
//! ends the line, and a following LF is skipped), a UTF-8 BOM at stream start, comments,
//! `event:`/`id:`/`retry:` lines, multi-line `data:` (joined with `\n`), `data:` without the
//! space, and a last event without its blank line (`decode_eof`). `data: [DONE]` is reported
//! as [`SseItem::Done`] so callers can ignore it. Memory is bounded by `max_event_bytes`: the
//! pending line plus the accumulated data of one event; past it the decoder fails with
//! [`SseError::EventTooLarge`] instead of growing.
//!
//! NDJSON bodies (`application/x-ndjson`: one JSON event per line, no `data:` prefix) use the
//! same decoder in [`Framing::Ndjson`] mode, with the same line handling and limits.
//!
//! Allocation: a single-line `data:` value is a zero-copy slice of the read buffer; only
//! multi-line data is joined into a new buffer.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Serialize;

/// Default cap on one decoded event.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// The comment written right after the response headers.
pub const OPENING_COMMENT: &[u8] = b": ok\n\n";
/// The comment written during downstream silence.
pub const HEARTBEAT_COMMENT: &[u8] = b": ping\n\n";

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One decoded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// An event with a non-empty `data` payload.
    Event(SseEvent),
    /// A comment line (`: ping`); it proves the peer is alive.
    Comment,
    /// `data: [DONE]`, an end marker some producers send.
    Done,
}

/// A dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, when the producer sent one.
    pub name: Option<String>,
    /// The data lines joined with `\n`.
    pub data: Bytes,
}

/// Why decoding stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an upstream event exceeded the limit of {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// How events are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// Server-Sent Events.
    #[default]
    Sse,
    /// Newline-delimited JSON: every non-empty line is one event.
    Ndjson,
    /// One JSON document, the whole body (an AAP `none` turn): one event at the end.
    Json,
}

impl Framing {
    /// The framing a response's `Content-Type` announces; anything but NDJSON is read as SSE,
    /// as `@ag-ui/client` does.
    pub fn from_content_type(content_type: &str) -> Framing {
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if essence.eq_ignore_ascii_case("application/x-ndjson")
            || essence.eq_ignore_ascii_case("application/jsonl")
            || essence.eq_ignore_ascii_case("application/ndjson")
        {
            Framing::Ndjson
        } else {
            Framing::Sse
        }
    }
}

/// Incremental SSE decoder; see the module docs.
#[derive(Debug)]
pub struct SseDecoder {
    framing: Framing,
    max_event_bytes: usize,
    /// Where the newline search resumes, so a long line arriving in small reads is scanned once.
    scan_from: usize,
    /// The previous line ended in CR; a leading LF belongs to it.
    skip_lf: bool,
    at_stream_start: bool,
    name: Option<String>,
    /// The first data line, kept as a slice until a second one forces a join.
    data_first: Option<Bytes>,
    data_joined: Option<BytesMut>,
    data_len: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> SseDecoder {
        SseDecoder::with_framing(Framing::Sse, max_event_bytes)
    }

    pub fn with_framing(framing: Framing, max_event_bytes: usize) -> SseDecoder {
        SseDecoder {
            framing,
            max_event_bytes,
            scan_from: 0,
            skip_lf: false,
            at_stream_start: true,
            name: None,
            data_first: None,
            data_joined: None,
            data_len: 0,
        }
    }

    /// Decodes the next item from `buf`, consuming only what it has parsed.
    /// `Ok(None)`: more bytes are needed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<SseItem>, SseError> {
        if self.framing == Framing::Json {
            // Nothing is complete before the end; only the bound applies meanwhile.
            self.check_size(buf.len())?;
            return Ok(None);
        }
        loop {
            if self.at_stream_start {
                let n = buf.len().min(BOM.len());
                if buf[..n] != BOM[..n] || n == BOM.len() {
                    if n == BOM.len() && buf[..n] == *BOM {
                        buf.advance(BOM.len());
                    }
                    self.at_stream_start = false;
                } else {
                    return Ok(None); // a BOM may be split across reads
                }
            }
            if self.skip_lf {
                match buf.first() {
                    None => return Ok(None),
                    Some(b'\n') => buf.advance(1),
                    Some(_) => {}
                }
                self.skip_lf = false;
            }
            let Some(offset) = memchr::memchr2(b'\n', b'\r', &buf[self.scan_from..]) else {
                self.scan_from = buf.len();
                self.check_size(buf.len())?;
                return Ok(None);
            };
            let end = self.scan_from + offset;
            self.scan_from = 0;
            self.check_size(end)?;
            let line = buf.split_to(end).freeze();
            if buf[0] == b'\r' {
                buf.advance(1);
                match buf.first() {
                    Some(b'\n') => buf.advance(1),
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            } else {
                buf.advance(1);
            }
            if let Some(item) = self.line(line)? {
                return Ok(Some(item));
            }
        }
    }

    /// After the last chunk: decodes what is left, including a final line without its end
    /// and a final event without its blank line. Call until it returns `Ok(None)`.
    pub fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<SseItem>, SseError> {
        if self.framing == Framing::Json {
            self.check_size(buf.len())?;
            let body = buf.split().freeze();
            let blank = body.iter().all(u8::is_ascii_whitespace);
            return Ok((!blank).then_some(SseItem::Event(SseEvent {
                name: None,
                data: body,
            })));
        }
        if let Some(item) = self.decode(buf)? {
            return Ok(Some(item));
        }
        if !buf.is_empty() {
            self.at_stream_start = false;
            self.scan_from = 0;
            let line = buf.split().freeze();
            if let Some(item) = self.line(line)? {
                return Ok(Some(item));
            }
        }
        Ok(self.dispatch())
    }

    fn check_size(&self, pending_line: usize) -> Result<(), SseError> {
        if self.data_len + pending_line > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    /// Interprets one complete line.
    fn line(&mut self, line: Bytes) -> Result<Option<SseItem>, SseError> {
        if self.framing == Framing::Ndjson {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(None);
            }
            self.data_first = Some(line);
            return Ok(self.dispatch());
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line[0] == b':' {
            return Ok(Some(SseItem::Comment));
        }
        let (field, value) = match memchr::memchr(b':', &line) {
            Some(i) => {
                let skip = if line.get(i + 1) == Some(&b' ') { 2 } else { 1 };
                (&line[..i], line.slice(i + skip..))
            }
            None => (&line[..], Bytes::new()),
        };
        match field {
            b"data" => self.push_data(value)?,
            b"event" => self.name = Some(String::from_utf8_lossy(&value).into_owned()),
            _ => {} // `id`, `retry` and unknown fields carry nothing for us
        }
        Ok(None)
    }

    fn push_data(&mut self, value: Bytes) -> Result<(), SseError> {
        let joined_len = if self.data_first.is_some() || self.data_joined.is_some() {
            self.data_len + 1 + value.len()
        } else {
            value.len()
        };
        if joined_len > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        self.data_len = joined_len;
        if let Some(joined) = self.data_joined.as_mut() {
            joined.put_u8(b'\n');
            joined.extend_from_slice(&value);
        } else if let Some(first) = self.data_first.take() {
            let mut joined = BytesMut::with_capacity(first.len() + 1 + value.len());
            joined.extend_from_slice(&first);
            joined.put_u8(b'\n');
            joined.extend_from_slice(&value);
            self.data_joined = Some(joined);
        } else {
            self.data_first = Some(value);
        }
        Ok(())
    }

    /// Ends the event in progress (blank line or end of stream).
    fn dispatch(&mut self) -> Option<SseItem> {
        let name = self.name.take();
        self.data_len = 0;
        let data = match (self.data_first.take(), self.data_joined.take()) {
            (_, Some(joined)) => joined.freeze(),
            (Some(first), None) => first,
            (None, None) => return None,
        };
        if data.is_empty() {
            return None;
        }
        if &data[..] == b"[DONE]" {
            return Some(SseItem::Done);
        }
        Some(SseItem::Event(SseEvent { name, data }))
    }
}

/// Appends `data: <compact JSON>\n\n`, preceded by `event: <name>\n` when a name is given.
/// Compact serde_json output never contains a raw newline, so one `data:` line always suffices.
pub fn encode_json<T: Serialize + ?Sized>(
    out: &mut BytesMut,
    name: Option<&str>,
    value: &T,
) -> Result<(), serde_json::Error> {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.put_u8(b'\n');
    }
    out.extend_from_slice(b"data: ");
    write_json(out, value)?;
    out.extend_from_slice(b"\n\n");
    Ok(())
}

/// Appends a value's compact JSON.
pub fn write_json<T: Serialize + ?Sized>(
    out: &mut BytesMut,
    value: &T,
) -> Result<(), serde_json::Error> {
    serde_json::to_writer(Append(out), value)
}

/// `io::Write` straight into a `BytesMut`. serde_json writes a value in many small pieces (a
/// quote, a key, a run of unescaped bytes); `bytes`' own writer goes through `BufMut::put_slice`
/// for each, which showed up as a tenth of the codec's time.
struct Append<'a>(&'a mut BytesMut);

impl std::io::Write for Append<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
