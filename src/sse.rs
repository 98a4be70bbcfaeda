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
//! multi-line data is joined into a new buffer. A caller can also look at such an event where
//! it lies ([`SseDecoder::peek`]) and step over it, without splitting it off at all. Lines are
//! read where they lie in the buffer (a blank line needs no search at all), and an `event:`
//! name the stream repeats is handed out again rather than allocated per event: every event of
//! an AAP stream is named.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Serialize;

/// Default cap on one decoded event.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// The comment written right after the response headers.
pub const OPENING_COMMENT: &[u8] = b": ok\n\n";
/// The comment written during downstream silence.
pub const HEARTBEAT_COMMENT: &[u8] = b": ping\n\n";

const BOM: &[u8] = b"\xEF\xBB\xBF";
/// The prefixes of an event's lines that the decoder reads at once (`single_line`).
const NAME: &[u8] = b"event: ";
const DATA: &[u8] = b"data: ";

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
    /// The `event:` name, when the producer sent one. Shared: a stream repeats a handful of
    /// names, and the decoder hands out the one it kept rather than a new string per event.
    pub name: Option<Arc<str>>,
    /// The data lines joined with `\n`.
    pub data: Bytes,
}

/// An event read where it lies in the decoder's buffer ([`SseDecoder::peek`]), or an
/// [`SseEvent`] lent ([`SseEvent::view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    pub name: Option<&'a str>,
    pub data: &'a [u8],
}

impl SseEvent {
    pub fn view(&self) -> SseEventRef<'_> {
        SseEventRef {
            name: self.name.as_deref(),
            data: &self.data,
        }
    }
}

/// What [`SseDecoder::single_line`] found at the start of a buffer.
enum SingleLine {
    /// A whole single-line event: its data's range (the rest follows from it, [`name_range`]).
    Event(Range<usize>),
    /// The first line is a data line still arriving.
    DataArriving,
    /// Anything else: the line by line reading takes it.
    Other,
}

/// Where [`SseDecoder::peek`] found an event (its data's range: the rest follows from it), for
/// [`SseDecoder::skip`] or [`SseDecoder::take`] on the same buffer.
#[derive(Debug)]
pub struct Peeked(Range<usize>);

/// Where the `event:` value of a single-line event lies, given its data's range: `event:
/// <name>\n` comes before `data: ` when the data does not start the buffer.
fn name_range(data: &Range<usize>) -> Option<Range<usize>> {
    (data.start > DATA.len()).then(|| NAME.len()..data.start - DATA.len() - 1)
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
    name: Option<Arc<str>>,
    /// The last name decoded, handed out again while the stream repeats it.
    last_name: Option<Arc<str>>,
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
            last_name: None,
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
            if let Some(item) = self.single_line_event(buf)? {
                return Ok(Some(item));
            }
            if buf.first() == Some(&b'\n') {
                // A blank line (nearly always the end of an event, right after its data line):
                // no search needed.
                let item = self.line(buf, 0);
                buf.advance(1);
                match item? {
                    Some(item) => return Ok(Some(item)),
                    None => continue,
                }
            }
            let Some(offset) = memchr::memchr2(b'\n', b'\r', &buf[self.scan_from..]) else {
                self.scan_from = buf.len();
                self.check_size(buf.len())?;
                return Ok(None);
            };
            let end = self.scan_from + offset;
            self.scan_from = 0;
            self.check_size(end)?;
            // The line's end: LF, CRLF or CR (a CR at the end of the read may have its LF in
            // the next one).
            let eol = match (buf[end], buf.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                (b'\r', None) => {
                    self.skip_lf = true;
                    1
                }
                _ => 1,
            };
            let item = self.line(buf, end);
            buf.advance(eol);
            if let Some(item) = item? {
                return Ok(Some(item));
            }
        }
    }

    /// The event nearly every producer sends, read at once: maybe an `event: ` line, then
    /// `data: ` and one line, then the blank line (LF line ends), with nothing pending. `None`:
    /// anything else, which the line by line reading takes.
    fn single_line_event(&mut self, buf: &mut BytesMut) -> Result<Option<SseItem>, SseError> {
        let data = match self.single_line(buf)? {
            SingleLine::Event(data) => data,
            SingleLine::DataArriving => {
                // Searched once: the search resumes where this one stopped.
                self.scan_from = buf.len();
                return Ok(None);
            }
            SingleLine::Other => return Ok(None),
        };
        if buf[data.clone()] == *b"[DONE]" {
            buf.advance(data.end + 2);
            return Ok(Some(SseItem::Done));
        }
        Ok(Some(SseItem::Event(self.take(buf, Peeked(data)))))
    }

    /// The next event where it lies at the start of `buf`, when it is one that
    /// [`Self::decode`] reads at once (see `single_line_event`) and that would come out as an
    /// [`SseItem::Event`]; with it, where it lies, for [`Self::skip`] or [`Self::take`]. A
    /// caller done with the event before the buffer's next read skips it, without splitting
    /// it off the buffer (so without a shared buffer's reference count to take and give back).
    /// `None`: call [`Self::decode`].
    pub fn peek<'a>(&self, buf: &'a [u8]) -> Option<(SseEventRef<'a>, Peeked)> {
        if self.at_stream_start || self.skip_lf {
            return None;
        }
        let Ok(SingleLine::Event(range)) = self.single_line(buf) else {
            return None;
        };
        let data = &buf[range.clone()];
        if data == b"[DONE]" {
            return None;
        }
        let name = match name_range(&range) {
            // Decoding would replace what is not UTF-8: that event takes the decoder's way.
            Some(name) => Some(std::str::from_utf8(&buf[name]).ok()?),
            None => None,
        };
        Some((SseEventRef { name, data }, Peeked(range)))
    }

    /// Steps over the event [`Self::peek`] found at the start of `buf`: buffer and decoder
    /// are as after decoding it.
    pub fn skip(&mut self, buf: &mut BytesMut, peeked: Peeked) {
        buf.advance(peeked.0.end + 2);
    }

    /// The event [`Self::peek`] found at the start of `buf`, as [`Self::decode`] would give it,
    /// without looking for it again.
    pub fn take(&mut self, buf: &mut BytesMut, peeked: Peeked) -> SseEvent {
        let data = peeked.0;
        let name = name_range(&data).map(|name| self.event_name(name.start, name.end, buf));
        buf.advance(data.start);
        let data = buf.split_to(data.len()).freeze();
        buf.advance(2);
        SseEvent { name, data }
    }

    /// Where a single-line event lies at the start of `buf`, when nothing is pending.
    fn single_line(&self, buf: &[u8]) -> Result<SingleLine, SseError> {
        // A line already searched in part (a long event arriving in several reads) is left to
        // the line by line reading, which resumes its search instead of starting over.
        if self.framing != Framing::Sse
            || self.scan_from != 0
            || self.name.is_some()
            || self.data_first.is_some()
            || self.data_joined.is_some()
        {
            return Ok(SingleLine::Other);
        }
        // The name's line, when there is one.
        let mut at = 0;
        if buf.starts_with(NAME) {
            let Some(len) = memchr::memchr2(b'\n', b'\r', &buf[NAME.len()..]) else {
                return Ok(SingleLine::Other);
            };
            let end = NAME.len() + len;
            if buf[end] != b'\n' {
                return Ok(SingleLine::Other);
            }
            self.check_size(end)?;
            at = end + 1;
        }
        if !buf[at..].starts_with(DATA) {
            return Ok(SingleLine::Other);
        }
        let start = at + DATA.len();
        let Some(len) = memchr::memchr2(b'\n', b'\r', &buf[start..]) else {
            // The data line is still arriving; when it is the first line, it was searched once.
            return Ok(if at == 0 {
                SingleLine::DataArriving
            } else {
                SingleLine::Other
            });
        };
        let end = start + len;
        if len == 0 || buf[end] != b'\n' || buf.get(end + 1) != Some(&b'\n') {
            return Ok(SingleLine::Other);
        }
        self.check_size(end - at)?;
        Ok(SingleLine::Event(start..end))
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
            let len = buf.len();
            if let Some(item) = self.line(buf, len)? {
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

    /// Interprets the complete line that starts `buf` and is `len` bytes long (its end not
    /// included), consuming it. Only a `data` value is split off the buffer (shared, not
    /// copied); the rest of the line is read in place.
    fn line(&mut self, buf: &mut BytesMut, len: usize) -> Result<Option<SseItem>, SseError> {
        if self.framing == Framing::Ndjson {
            if buf[..len].iter().all(u8::is_ascii_whitespace) {
                buf.advance(len);
                return Ok(None);
            }
            self.data_first = Some(buf.split_to(len).freeze());
            return Ok(self.dispatch());
        }
        if len == 0 {
            return Ok(self.dispatch());
        }
        let line = &buf[..len];
        if line[0] == b':' {
            buf.advance(len);
            return Ok(Some(SseItem::Comment));
        }
        let colon = if line.starts_with(b"data:") {
            Some(4)
        } else {
            memchr::memchr(b':', line)
        };
        let (field, value_at) = match colon {
            Some(i) => (i, i + if line.get(i + 1) == Some(&b' ') { 2 } else { 1 }),
            None => (len, len),
        };
        match &line[..field] {
            b"data" => {
                buf.advance(value_at);
                let value = buf.split_to(len - value_at).freeze();
                self.push_data(value)?;
            }
            b"event" => {
                let name = self.event_name(value_at, len, buf);
                self.name = Some(name);
                buf.advance(len);
            }
            // `id`, `retry` and unknown fields carry nothing for us.
            _ => buf.advance(len),
        }
        Ok(None)
    }

    /// The `event:` name in `buf[from..to]`: the last one again when it repeats.
    fn event_name(&mut self, from: usize, to: usize, buf: &BytesMut) -> Arc<str> {
        let value = &buf[from..to];
        if let Some(last) = &self.last_name {
            if last.as_bytes() == value {
                return Arc::clone(last);
            }
        }
        let name: Arc<str> = String::from_utf8_lossy(value).into();
        self.last_name = Some(Arc::clone(&name));
        name
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
