//! Hand-rolled JSON for the few shapes that make up nearly all of a stream: a flat object of
//! strings and integers in (a text, reasoning or argument delta), and a JSON string out.
//!
//! Everything here is an accelerator in front of serde_json, never a second parser with its
//! own opinions: the reader declines anything outside its narrow grammar (nesting, floats,
//! literals, a key twice) and the caller falls back to serde_json, and a string that needs
//! escaping is written by serde_json itself. What this module accepts, serde_json parses to
//! the same values, and what it writes is byte for byte what serde_json writes (tested).
//!
//! Why by hand: decoding one content delta through serde_json's `Value` and the tagged,
//! flattened event types costs several times the rest of the pipeline (`benches/codec.rs`,
//! `CODEC_PROFILE`). Strings are checked in one pass but decoded only when a reader asks
//! ([`JsonStr`]): a field it ignores costs no allocation, and a HAI delta (JSON inside a JSON
//! string) can be matched as it stands.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

use std::borrow::Cow;

use bytes::BytesMut;

/// One value of a flat object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar<'a> {
    Str(JsonStr<'a>),
    /// An integer and its text (which is what serde_json writes for it: the grammar refuses
    /// leading zeros, `-0`, fractions and exponents).
    Int(i64, &'a str),
}

/// One value of a flat object as [`Cursor::member`] reads it: an integer is checked (it is one
/// [`Scalar::Int`] would hold) but left as its text, which is all its readers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    Str(JsonStr<'a>),
    /// An integer's text, what serde_json writes for its value.
    Int(&'a str),
}

impl Member<'_> {
    /// Appends the value as serde_json writes what it parses from it.
    pub fn write_canonical(self, out: &mut String) {
        match self {
            Member::Str(s) => s.write_canonical(out),
            Member::Int(text) => out.push_str(text),
        }
    }
}

/// A string value as it stands in the JSON text, already checked (escapes, surrogates, control
/// characters) but decoded only when asked: a reader that ignores a field, or that matches
/// the escaped text itself (HAI's JSON-in-a-string deltas), pays nothing for decoding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    /// What stands between the quotes.
    raw: &'a str,
    /// `raw` holds at least one escape.
    escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// What stands between the quotes, escapes as written.
    pub fn raw(self) -> &'a str {
        self.raw
    }

    /// A value that stands in a JSON string as it is (no quote, backslash or control
    /// character), as [`Cursor::plain_run`] reads one; `None` when it needs an escape.
    pub fn from_plain(value: &'a str) -> Option<JsonStr<'a>> {
        (plain_len(value.as_bytes()) == value.len()).then_some(JsonStr {
            raw: value,
            escaped: false,
        })
    }

    /// The value when the text holds no escape (it is then the value itself).
    pub fn plain(self) -> Option<&'a str> {
        (!self.escaped).then_some(self.raw)
    }

    /// The value, escapes undone.
    pub fn decode(self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let mut value = String::with_capacity(self.raw.len());
        let mut rest = self.raw;
        while let Some(at) = memchr::memchr(b'\\', rest.as_bytes()) {
            value.push_str(&rest[..at]);
            let (c, len) = escape(&rest.as_bytes()[at..]).unwrap_or(('\u{fffd}', rest.len() - at));
            value.push(c);
            rest = &rest[at + len..];
        }
        value.push_str(rest);
        Cow::Owned(value)
    }

    /// The value as a `String`.
    pub fn into_owned(self) -> String {
        self.decode().into_owned()
    }

    /// Appends the string as serde_json writes it.
    pub fn write_canonical(self, out: &mut String) {
        match self.plain() {
            // Without escapes the text holds no quote, backslash or control character: it is
            // what serde_json writes for its value.
            Some(plain) => {
                out.push('"');
                out.push_str(plain);
                out.push('"');
            }
            None => {
                // Writing a `str` into a `String` cannot fail.
                if let Ok(literal) = serde_json::to_string(&*self.decode()) {
                    out.push_str(&literal);
                }
            }
        }
    }
}

impl Scalar<'_> {
    /// Appends the value as serde_json writes what it parses from it.
    pub fn write_canonical(self, out: &mut String) {
        match self {
            Scalar::Str(s) => s.write_canonical(out),
            Scalar::Int(_, text) => out.push_str(text),
        }
    }
}

/// Calls `field` for each key and value of a flat JSON object, in order. `None` when `data` is
/// not such an object (or `field` says no): the caller then decodes it the general way.
/// `Some(true)` when the object is compact: no whitespace anywhere between its tokens (as
/// every SDK writes events), so it is one line.
pub fn for_each_field<'a>(
    data: &'a [u8],
    mut field: impl FnMut(&'a str, Scalar<'a>) -> Option<()>,
) -> Option<bool> {
    // Validated once for the whole object; every slice below starts and ends on ASCII bytes,
    // so each is valid UTF-8 too.
    let text = std::str::from_utf8(data).ok()?;
    let bytes = text.as_bytes();
    let mut spaces = 0;
    let mut at = skip_ws(text, 0, &mut spaces);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(text, at + 1, &mut spaces);
    if bytes.get(at) == Some(&b'}') {
        return (skip_ws(text, at + 1, &mut spaces) == text.len()).then_some(spaces == 0);
    }
    loop {
        let (key, after) = string(text, at)?;
        // Escaped keys: rare, and not worth a second code path.
        let key = key.plain()?;
        at = skip_ws(text, after, &mut spaces);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(text, at + 1, &mut spaces);
        let (value, after) = if bytes.get(at) == Some(&b'"') {
            let (s, after) = string(text, at)?;
            (Scalar::Str(s), after)
        } else {
            let (n, after) = integer(bytes, at)?;
            (Scalar::Int(n, &text[at..after]), after)
        };
        field(key, value)?;
        at = skip_ws(text, after, &mut spaces);
        match bytes.get(at)? {
            b',' => at = skip_ws(text, at + 1, &mut spaces),
            b'}' => {
                return (skip_ws(text, at + 1, &mut spaces) == text.len()).then_some(spaces == 0)
            }
            _ => return None,
        }
    }
}

/// The value of a JSON string literal that is all of `s`.
pub fn str_literal(s: &str) -> Option<Cow<'_, str>> {
    let (value, end) = string(s, 0)?;
    (end == s.len()).then(|| value.decode())
}

/// The first byte at or after `at` that is not JSON whitespace; counts what it skipped.
#[inline]
fn skip_ws(text: &str, mut at: usize, skipped: &mut usize) -> usize {
    let bytes = text.as_bytes();
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
        *skipped += 1;
    }
    at
}

/// The string token starting at `text[at]` (a `"`), checked as serde_json checks it, and the
/// index just past it.
#[inline]
fn string(text: &str, at: usize) -> Option<(JsonStr<'_>, usize)> {
    if text.as_bytes().get(at) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(text.as_bytes(), at + 1)?;
    let raw = &text[at + 1..end];
    Some((JsonStr { raw, escaped }, end + 1))
}

/// Where the string whose body starts at `bytes[start]` ends (its closing quote), checked as
/// serde_json checks it (UTF-8 aside), and whether it holds an escape.
#[inline]
fn string_end(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut i = start;
    let mut escaped = false;
    loop {
        i += plain_len(&bytes[i..]);
        match bytes.get(i)? {
            b'"' => return Some((i, escaped)),
            b'\\' => {
                let (_, len) = escape(&bytes[i..])?;
                escaped = true;
                i += len;
            }
            // A control character: not allowed raw inside a string.
            _ => return None,
        }
    }
}

/// Reads a JSON object laid out exactly as the caller expects — nearly every event of a stream
/// comes from the same code and has the same keys in the same order, without whitespace — at
/// the cost of comparing bytes: the layout's fixed text is compared whole, only its strings
/// and integers are scanned. Any difference gives `None`, and the caller reads the event the
/// general way ([`for_each_field`]). Strings are checked as [`for_each_field`] checks them;
/// the fixed text is the caller's, who keeps it valid JSON.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// `bytes` as text, checked once when the first string or number is read (a fixed text
    /// that does not match costs no check): one pass instead of one per short string.
    text: Option<&'a str>,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor {
            bytes: data,
            at: 0,
            text: None,
        }
    }

    /// The text from `start` to `end`, positions the cursor has been at (quotes, digits,
    /// commas: on character boundaries). `None` when the data is not UTF-8, or either
    /// position is not on a boundary.
    pub fn text_between(&mut self, start: usize, end: usize) -> Option<&'a str> {
        let text = match self.text {
            Some(text) => text,
            None => *self
                .text
                .insert(simdutf8::basic::from_utf8(self.bytes).ok()?),
        };
        text.get(start..end)
    }

    /// Steps over `text`, which must come next.
    #[inline]
    pub fn expect(&mut self, text: &[u8]) -> Option<()> {
        self.accept(text).then_some(())
    }

    /// Steps over `text` if it comes next.
    #[inline]
    pub fn accept(&mut self, text: &[u8]) -> bool {
        let next = self.bytes[self.at..].starts_with(text);
        if next {
            self.at += text.len();
        }
        next
    }

    /// The rest of a string whose opening quote the cursor just stepped over, and its closing
    /// quote.
    pub fn string_rest(&mut self) -> Option<JsonStr<'a>> {
        let (end, escaped) = string_end(self.bytes, self.at)?;
        let raw = self.text_between(self.at, end)?;
        self.at = end + 1;
        Some(JsonStr { raw, escaped })
    }

    /// Inside a string: the text up to the first byte that is escaped or ends it, which stays
    /// next.
    pub fn plain_run(&mut self) -> Option<&'a str> {
        let len = plain_len(&self.bytes[self.at..]);
        // Ends before a quote, a backslash or a control character, or at the end.
        let run = self.text_between(self.at, self.at + len)?;
        self.at += len;
        Some(run)
    }

    /// An integer, as [`for_each_field`] reads one.
    pub fn integer(&mut self) -> Option<i64> {
        let (n, end) = integer(self.bytes, self.at)?;
        self.at = end;
        Some(n)
    }

    /// One more member of a flat object, `,"key":value` (a string or an integer), as
    /// [`for_each_field`] accepts it: its key (without escapes) and value. `None` when the
    /// object does not go on so.
    pub fn member(&mut self) -> Option<(&'a str, Member<'a>)> {
        let start = self.at;
        let member = self.member_at();
        if member.is_none() {
            self.at = start;
        }
        member
    }

    fn member_at(&mut self) -> Option<(&'a str, Member<'a>)> {
        self.expect(b",\"")?;
        let key = self.string_rest()?.plain()?;
        self.expect(b":")?;
        if self.accept(b"\"") {
            return Some((key, Member::Str(self.string_rest()?)));
        }
        let end = integer_end(self.bytes, self.at)?;
        let text = self.text_between(self.at, end)?;
        self.at = end;
        Some((key, Member::Int(text)))
    }

    /// How much of the text the cursor has read.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Whether the text ends here.
    pub fn at_end(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// The escape at the start of `bytes` (a backslash): the character it stands for and its
/// length. `None` where serde_json refuses it: an unknown letter, a short `\u`, a lone
/// surrogate.
fn escape(bytes: &[u8]) -> Option<(char, usize)> {
    let c = match *bytes.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let first = hex4(bytes.get(2..6)?)?;
            return match first {
                0xD800..=0xDBFF => {
                    if bytes.get(6..8)? != b"\\u" {
                        return None;
                    }
                    let second = hex4(bytes.get(8..12)?)?;
                    if !(0xDC00..=0xDFFF).contains(&second) {
                        return None;
                    }
                    let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    Some((char::from_u32(code)?, 12))
                }
                0xDC00..=0xDFFF => None,
                _ => Some((char::from_u32(first)?, 6)),
            };
        }
        _ => return None,
    };
    Some((c, 2))
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

/// An integer token at `bytes[at]` and the index past it; `None` for anything serde_json would
/// not read as the same `i64` (floats, exponents, literals, leading zeros, `-0`, overflow).
fn integer(bytes: &[u8], at: usize) -> Option<(i64, usize)> {
    let negative = bytes.get(at) == Some(&b'-');
    let first = at + usize::from(negative);
    let mut i = first;
    // Nineteen digits always fit a u64; the sign and the i64 range are checked once after.
    let mut magnitude: u64 = 0;
    // Eight digits at a time while they last (timestamps have thirteen or nineteen).
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let Some(eight) = eight_digits(u64::from_le_bytes(word)) else {
            break;
        };
        if i - first + 8 > 19 {
            return None;
        }
        magnitude = magnitude * 100_000_000 + eight;
        i += 8;
    }
    while let Some(&d @ b'0'..=b'9') = bytes.get(i) {
        if i - first == 19 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(d - b'0');
        i += 1;
    }
    let digits = i - first;
    if digits == 0 || (digits > 1 && bytes[first] == b'0') || (negative && magnitude == 0) {
        return None;
    }
    if matches!(bytes.get(i), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let n = if negative {
        0i64.checked_sub_unsigned(magnitude)?
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some((n, i))
}

/// Where the integer token at `bytes[at]` ends, for exactly the tokens [`integer`] reads, without
/// computing its value (an unknown field's value is kept as its text): digits are only
/// counted, eight at a time, and a nineteen-digit one is compared with the `i64` bound as text.
fn integer_end(bytes: &[u8], at: usize) -> Option<usize> {
    let negative = bytes.get(at) == Some(&b'-');
    let first = at + usize::from(negative);
    let mut i = first;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        if !all_digits(u64::from_le_bytes(word)) {
            break;
        }
        i += 8;
    }
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let digits = &bytes[first..i];
    let fits = match digits.len() {
        0 => false,
        1..=18 => true,
        // Below 9·10¹⁸ (nanosecond timestamps until 2255): no comparison needed.
        19 if digits[0] < b'9' => true,
        // Equal lengths: the order of the texts is the order of the numbers.
        19 if negative => digits <= b"9223372036854775808".as_slice(),
        19 => digits <= b"9223372036854775807".as_slice(),
        _ => false,
    };
    if !fits
        || (digits.len() > 1 && digits[0] == b'0')
        || (negative && digits == b"0")
        || matches!(bytes.get(i), Some(b'.' | b'e' | b'E'))
    {
        return None;
    }
    Some(i)
}

/// Whether the eight bytes of `x` are all ASCII digits: each byte's high nibble is 3, and still
/// 3 after adding 6 (so the byte is at most '9'); a carry out of a byte only happens when its
/// own nibble is not 3.
#[inline]
fn all_digits(x: u64) -> bool {
    const NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    x & NIBBLES == 0x3030_3030_3030_3030
        && x.wrapping_add(0x0606_0606_0606_0606) & NIBBLES == 0x3030_3030_3030_3030
}

/// The value of eight ASCII digits loaded little-endian (the first digit in the lowest byte);
/// `None` unless all eight are digits.
fn eight_digits(x: u64) -> Option<u64> {
    if !all_digits(x) {
        return None;
    }
    let x = x - 0x3030_3030_3030_3030;
    let x = (x * 10 + (x >> 8)) & 0x00FF_00FF_00FF_00FF;
    let x = (x * 100 + (x >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((x * 10_000 + (x >> 32)) & 0xFFFF_FFFF)
}

/// Appends `s` as a JSON string, exactly as serde_json writes it.
pub fn write_str(out: &mut BytesMut, s: &str) {
    if plain_len(s.as_bytes()) == s.len() {
        out.reserve(s.len() + 2);
        out.extend_from_slice(b"\"");
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\"");
    } else {
        // Writing a `str` cannot fail; the fallback keeps escaping serde_json's own.
        let _ = crate::sse::write_json(out, s);
    }
}

/// Appends what stands between the quotes of `s` as a JSON string, as [`write_str`] writes it:
/// for a string built from pieces.
pub fn write_str_contents(out: &mut BytesMut, s: &str) {
    let plain = plain_len(s.as_bytes());
    out.extend_from_slice(&s.as_bytes()[..plain]);
    let rest = &s[plain..];
    if !rest.is_empty() {
        // The rest starts with a byte to escape: written quoted, and the opening quote is
        // overwritten (a piece of text is short; the move is a few bytes).
        let at = out.len();
        write_str(out, rest);
        let end = out.len() - 1;
        out.copy_within(at + 1..end, at);
        out.truncate(end - 1);
    }
}

const ONES: u64 = u64::from_le_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);

/// A byte of `x` is below `n` (n ≤ 0x80) ⇒ its high bit is set in the result. A borrow can flag
/// a byte above a flagged one too, never below: the lowest flag is the first such byte.
#[inline]
fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS
}

/// The zero bytes of `x`, flagged as [`below`] flags.
#[inline]
fn zero_byte(x: u64) -> u64 {
    below(x, 1)
}

/// The bytes of `x` a JSON string must escape (`"`, `\`, control characters), flagged as
/// [`below`] flags.
#[inline]
fn special(x: u64) -> u64 {
    zero_byte(x ^ (ONES * u64::from(b'"')))
        | zero_byte(x ^ (ONES * u64::from(b'\\')))
        | below(x, 0x20)
}

/// How many leading bytes a JSON string holds as they are: up to the first `"`, `\` or control
/// character. Eight bytes at a time (the strings of an event are tens of bytes, too short for
/// a vectorised search to pay for its setup).
#[inline]
fn plain_len(bytes: &[u8]) -> usize {
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let flags = special(u64::from_le_bytes(word));
        if flags != 0 {
            // Little-endian: the lowest flag is the first byte.
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + bytes[i..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(bytes.len() - i)
}

/// Appends an integer as JSON.
pub fn write_int(out: &mut BytesMut, n: i64) {
    let mut buf = [0; 20];
    out.extend_from_slice(format_int(&mut buf, n));
}

/// Whether `s` is written as a JSON string without any escape and holds neither `a` nor `b`:
/// one pass for what a writer of JSON inside JSON must look for (HAI's braces).
pub fn is_plain_without(s: &str, a: u8, b: u8) -> bool {
    let bytes = s.as_bytes();
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        if special(x) | zero_byte(x ^ (ONES * u64::from(a))) | zero_byte(x ^ (ONES * u64::from(b)))
            != 0
        {
            return false;
        }
        i += 8;
    }
    bytes[i..]
        .iter()
        .all(|&c| c != b'"' && c != b'\\' && c >= 0x20 && c != a && c != b)
}

/// The digits of the last integer written, kept for the next: the events of one upstream read
/// share the clock's reading, so a writer that stamps every event formats it once per read.
#[derive(Debug, Clone, Default)]
pub struct IntText {
    value: Option<i64>,
    digits: [u8; 20],
    start: usize,
}

impl IntText {
    /// Appends `n` as JSON, formatting it only when it differs from the last.
    pub fn write(&mut self, out: &mut BytesMut, n: i64) {
        if self.value != Some(n) {
            let mut buf = [0; 20];
            let len = format_int(&mut buf, n).len();
            self.start = 20 - len;
            self.digits = buf;
            self.value = Some(n);
        }
        out.extend_from_slice(&self.digits[self.start..]);
    }
}

/// Formats `n` into `buf` (20 bytes hold any i64), returning the digits: two at a time, as
/// every event of a HAI or timestamped stream carries one.
fn format_int(buf: &mut [u8; 20], n: i64) -> &[u8] {
    const PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn fields(data: &str) -> Option<Vec<(String, Value)>> {
        let mut out = Vec::new();
        for_each_field(data.as_bytes(), |k, v| {
            let v = match v {
                Scalar::Str(s) => Value::from(s.into_owned()),
                Scalar::Int(n, _) => Value::from(n),
            };
            out.push((k.to_owned(), v));
            Some(())
        })?;
        Some(out)
    }

    #[test]
    fn flat_objects_read_as_serde_json_reads_them() {
        for data in [
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"héllo 世界"}"#,
            r#" { "a" : "x" , "b":-12 ,"c":0, "d":"q\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00" } "#,
            r#"{"timestamp":1700000000000,"delta":""}"#,
            r#"{"e":"1\"2\\3\/4\b5\f6\n7\r8\t9 é","f":"\\","g":"\u007b\n"}"#,
            r#"{"h":"\u0000\uFFFF\uD834\uDD1E","i":-9223372036854775808,"j":9223372036854775807}"#,
            r#"{}"#,
        ] {
            let ours = fields(data).unwrap_or_else(|| panic!("declined {data}"));
            let Value::Object(theirs) = serde_json::from_str::<Value>(data).unwrap() else {
                panic!()
            };
            let theirs: Vec<(String, Value)> = theirs.into_iter().collect();
            assert_eq!(ours, theirs, "{data}");
        }
    }

    #[test]
    fn long_integers_read_as_serde_json_reads_them() {
        for n in [
            "0",
            "12345678",
            "123456789",
            "1732460000000000000",
            "9223372036854775807",
            "-9223372036854775808",
            "1760000000000",
            "-12345678901234567",
        ] {
            let data = format!(r#"{{"n":{n},"s":"12345678"}}"#);
            assert_eq!(
                fields(&data).unwrap()[0].1,
                serde_json::from_str::<Value>(n).unwrap()
            );
        }
        for n in [
            "9223372036854775808",
            "12345678901234567890",
            "123456789012345678901234",
        ] {
            assert_eq!(fields(&format!(r#"{{"n":{n}}}"#)), None, "{n}");
        }
        assert_eq!(eight_digits(u64::from_le_bytes(*b"1234567:")), None);
        assert_eq!(eight_digits(u64::from_le_bytes(*b"/1234567")), None);
        assert_eq!(
            eight_digits(u64::from_le_bytes(*b"90000001")),
            Some(90_000_001)
        );
    }

    #[test]
    fn plain_text_without_two_bytes_is_told_apart() {
        for (s, plain) in [
            ("", true),
            ("plain text, héllo 世界 and more after eight", true),
            ("a brace { here", false),
            ("a brace here at the end of a long text }", false),
            ("quote \" in the middle of a long text", false),
            ("tab\tin", false),
        ] {
            assert_eq!(is_plain_without(s, b'{', b'}'), plain, "{s:?}");
        }
    }

    #[test]
    fn compact_objects_are_told_apart() {
        let read = |data: &str| for_each_field(data.as_bytes(), |_, _| Some(()));
        assert_eq!(read(r#"{"a":"x y","b":1}"#), Some(true));
        assert_eq!(read(r#"{}"#), Some(true));
        for spaced in [r#"{"a": "x"}"#, "{\"a\":1\n}", " {}", "{}\t", "{\r\"a\":1}"] {
            assert_eq!(read(spaced), Some(false), "{spaced:?}");
        }
    }

    #[test]
    fn a_cursor_reads_what_for_each_field_reads_in_the_layout_it_expects() {
        let data = br#"{"type":"T","n":-7,"s":"a\"b","x":{}}"#;
        let mut c = Cursor::new(data);
        c.expect(br#"{"type":""#).unwrap();
        assert_eq!(c.plain_run(), Some("T"));
        c.expect(b"\"").unwrap();
        assert!(matches!(c.member(), Some(("n", Member::Int("-7")))));
        let Some(("s", Member::Str(s))) = c.member() else {
            panic!()
        };
        assert_eq!(s.decode(), "a\"b");
        // Not a flat member: nothing is consumed.
        assert!(c.member().is_none());
        assert!(c.accept(br#","x":{}}"#) && c.at_end());
        for bad in [
            &br#"{"a":"x"#[..],
            br#"{"a":"\q"}"#,
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\x01\"}",
        ] {
            let mut c = Cursor::new(bad);
            c.expect(br#"{"a":""#).unwrap();
            assert!(c.string_rest().is_none(), "{bad:?}");
        }
    }

    #[test]
    fn an_integer_is_checked_without_its_value_exactly_as_it_is_read() {
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "00",
            "01",
            "-01",
            "7",
            "-7",
            "1.5",
            "1e3",
            "1E3",
            "-",
            "",
            "x",
            "12345678",
            "123456789",
            "1234567890123456789",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "10000000000000000000",
            "1761000000000000000,",
            "17610000000000000001",
            "12345678}",
            "123a",
            "1234567a9",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every length around the eight-digit steps and the bound, with what may follow.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 22) as usize;
            let mut text: String = (0..len)
                .map(|k| char::from(b'0' + ((seed >> (k % 16 * 4)) % 10) as u8))
                .collect();
            if seed & 0x10_0000 != 0 {
                text.insert(0, '-');
            }
            text.push(['}', ',', '.', 'e', '5'][(seed >> 40) as usize % 5]);
            cases.push(text);
        }
        for case in &cases {
            let bytes = case.as_bytes();
            assert_eq!(
                integer_end(bytes, 0),
                integer(bytes, 0).map(|(_, end)| end),
                "{case:?}"
            );
        }
    }

    #[test]
    fn anything_outside_the_grammar_is_declined() {
        for data in [
            r#"{"a":{"b":1}}"#,
            r#"{"a":[1]}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":true}"#,
            r#"{"a":null}"#,
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":99999999999999999999}"#,
            r#"{"a":"x"} x"#,
            r#"{"a":"x",}"#,
            r#"{"a":"x""#,
            r#"{"a" "x"}"#,
            "{\"a\":\"raw\u{1}control\"}",
            r#"{"a\u0062":"x"}"#,
            r#"{"a":"bad \x escape"}"#,
            r#"{"a":"tab\	raw"}"#,
            r#"{"a":"ends \"#,
            r#"{"a":-0}"#,
            r#"{"a":-9223372036854775809}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u12g4"}"#,
            r#"["a"]"#,
            "",
        ] {
            assert_eq!(fields(data), None, "{data}");
        }
        assert!(for_each_field(b"{\"a\":\"\xff\"}", |_, _| Some(())).is_none());
    }

    #[test]
    fn strings_are_decoded_only_when_asked_and_written_back_as_serde_json_writes_them() {
        let data = r#"{"plain":"héllo","esc":"a\"b\u00e9\/","n":-12}"#;
        let mut seen = Vec::new();
        for_each_field(data.as_bytes(), |key, value| {
            seen.push((key, value));
            Some(())
        })
        .unwrap();
        let Scalar::Str(plain) = seen[0].1 else {
            panic!()
        };
        assert_eq!((plain.raw(), plain.plain()), ("héllo", Some("héllo")));
        assert!(matches!(plain.decode(), Cow::Borrowed("héllo")));
        let Scalar::Str(esc) = seen[1].1 else {
            panic!()
        };
        assert_eq!((esc.raw(), esc.plain()), (r#"a\"b\u00e9\/"#, None));
        assert_eq!(esc.decode(), "a\"bé/");
        let Value::Object(theirs) = serde_json::from_str::<Value>(data).unwrap() else {
            panic!()
        };
        for ((key, value), (their_key, their_value)) in seen.into_iter().zip(theirs) {
            let mut ours = String::new();
            value.write_canonical(&mut ours);
            assert_eq!(key, their_key);
            assert_eq!(ours, their_value.to_string());
        }
    }

    #[test]
    fn plain_len_stops_at_the_first_byte_a_string_must_escape() {
        for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = special;
                // Bytes just beside the special ones must not stop it.
                bytes
                    .iter_mut()
                    .skip(at + 1)
                    .step_by(3)
                    .for_each(|b| *b = 0x20);
                assert_eq!(plain_len(&bytes), at, "{special:#x} at {at}");
                // Nor bytes a borrow could flag, after it: another special, a 0x01, a 0x21.
                for after in [0x00, 0x01, 0x21, b'"' + 1, b'\\' + 1] {
                    let mut bytes = bytes.clone();
                    bytes[(at + 1).min(19)..].fill(after);
                    bytes[at] = special;
                    assert_eq!(
                        plain_len(&bytes),
                        at,
                        "{special:#x} at {at}, then {after:#x}"
                    );
                }
            }
        }
        let text = "héllo 世界 \u{7f}~!#[]{}".repeat(3);
        assert_eq!(plain_len(text.as_bytes()), text.len());
        assert_eq!(plain_len(b""), 0);
    }

    #[test]
    fn strings_and_integers_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "plain ascii",
            "héllo 世界 🌍",
            "q\"b\\s/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}",
        ] {
            let mut out = BytesMut::new();
            write_str(&mut out, s);
            assert_eq!(&out[..], serde_json::to_string(s).unwrap().as_bytes());
        }
        let mut cached = IntText::default();
        for n in [
            0,
            7,
            7,
            -1,
            1_700_000_000_000,
            i64::MAX,
            i64::MAX,
            i64::MIN,
            0,
        ] {
            let mut out = BytesMut::new();
            write_int(&mut out, n);
            assert_eq!(&out[..], json!(n).to_string().as_bytes());
            out.clear();
            cached.write(&mut out, n);
            assert_eq!(&out[..], json!(n).to_string().as_bytes());
        }
    }
}
