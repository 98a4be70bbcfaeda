//! Hand-rolled JSON for the few shapes that make up nearly all of a stream: a flat object of
//! strings and integers in (a text, reasoning or argument delta), and a JSON string out.
//!
//! Everything here is an accelerator in front of serde_json, never a second parser with its
//! own opinions: the reader declines anything outside its narrow grammar (nesting, floats,
//! literals, a key twice) and the caller falls back to serde_json, and a string that needs
//! escaping is written by serde_json itself. What this module accepts, serde_json parses to
//! the same values, and what it writes is byte for byte what serde_json writes (tested).
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).

use std::borrow::Cow;

use bytes::BytesMut;

/// One value of a flat object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<'a> {
    Str(Cow<'a, str>),
    Int(i64),
}

/// Calls `field` for each key and value of a flat JSON object, in order. `None` when `data` is
/// not such an object (or `field` says no): the caller then decodes it the general way.
pub fn for_each_field<'a>(
    data: &'a [u8],
    mut field: impl FnMut(&'a str, Scalar<'a>) -> Option<()>,
) -> Option<()> {
    // Validated once for the whole object; every slice below starts and ends on ASCII bytes,
    // so each is valid UTF-8 too.
    let text = std::str::from_utf8(data).ok()?;
    let mut rest = skip_ws(text).strip_prefix('{')?;
    rest = skip_ws(rest);
    if let Some(after) = rest.strip_prefix('}') {
        return skip_ws(after).is_empty().then_some(());
    }
    loop {
        let (key, after) = string(rest)?;
        let Cow::Borrowed(key) = key else {
            return None; // escaped keys: rare, and not worth a second code path
        };
        rest = skip_ws(skip_ws(after).strip_prefix(':')?);
        let (value, after) = if rest.starts_with('"') {
            let (s, after) = string(rest)?;
            (Scalar::Str(s), after)
        } else {
            let (n, after) = integer(rest)?;
            (Scalar::Int(n), after)
        };
        field(key, value)?;
        rest = skip_ws(after);
        if let Some(after) = rest.strip_prefix(',') {
            rest = skip_ws(after);
        } else {
            let after = rest.strip_prefix('}')?;
            return skip_ws(after).is_empty().then_some(());
        }
    }
}

/// The value of a JSON string literal that is all of `s`.
pub fn str_literal(s: &str) -> Option<Cow<'_, str>> {
    let (value, rest) = string(s)?;
    rest.is_empty().then_some(value)
}

fn skip_ws(s: &str) -> &str {
    s.trim_start_matches([' ', '\t', '\n', '\r'])
}

/// A string token at the start of `s` (which begins with `"`): its value and what follows.
fn string(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let body = s.strip_prefix('"')?;
    let bytes = body.as_bytes();
    // One pass over the short strings of an event; raw control characters are not allowed
    // inside a JSON string.
    let end = plain_len(bytes);
    match *bytes.get(end)? {
        b'"' => return Some((Cow::Borrowed(&body[..end]), &body[end + 1..])),
        b'\\' => {}
        _ => return None,
    }
    // Escapes: the one-letter ones are decoded here, run by run; a `\u` sends the token to
    // serde_json (surrogate pairs and their errors are its business).
    let mut value = String::with_capacity(body.len().min(end + 64));
    let mut i = 0;
    loop {
        let run = plain_len(&bytes[i..]);
        value.push_str(&body[i..i + run]);
        i += run;
        match (bytes.get(i)?, bytes.get(i + 1)) {
            (b'"', _) => return Some((Cow::Owned(value), &body[i + 1..])),
            (b'\\', Some(&escaped)) => {
                value.push(match escaped {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => return unicode_escaped(s),
                    _ => return None,
                });
                i += 2;
            }
            _ => return None, // a control character, or the input ends
        }
    }
}

/// A string token with `\u` escapes at the start of `s`, decoded by serde_json.
fn unicode_escaped(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => {
                let value: String = serde_json::from_str(&s[..=i]).ok()?;
                return Some((Cow::Owned(value), &s[i + 1..]));
            }
            _ => i += 1,
        }
    }
    None
}

/// An integer token at the start of `s`; `None` for anything else (floats, exponents,
/// literals, leading zeros, overflow).
fn integer(s: &str) -> Option<(i64, &str)> {
    let bytes = s.as_bytes();
    let sign = usize::from(bytes.first() == Some(&b'-'));
    let digits = bytes[sign..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = sign + digits;
    if digits == 0 || (digits > 1 && bytes[sign] == b'0') {
        return None;
    }
    if matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let n = s[..end].parse().ok()?;
    Some((n, &s[end..]))
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

/// How many leading bytes a JSON string holds as they are: up to the first `"`, `\` or control
/// character. Eight bytes at a time (the strings of an event are tens of bytes, too short for
/// a vectorised search to pay for its setup).
fn plain_len(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte of `x` is below `n` (n ≤ 0x80) ⇒ its high bit is set in the result; no false
    // negatives, and a false positive only makes the scalar loop below look closer.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS;
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(word);
        let special = below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            | below(x, 0x20);
        if special != 0 {
            break;
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

/// Formats `n` into `buf` (20 bytes hold any i64), returning the digits.
fn format_int(buf: &mut [u8; 20], n: i64) -> &[u8] {
    let mut i = buf.len();
    let negative = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
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
                Scalar::Int(n) => Value::from(n),
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
            r#"["a"]"#,
            "",
        ] {
            assert_eq!(fields(data), None, "{data}");
        }
        assert!(for_each_field(b"{\"a\":\"\xff\"}", |_, _| Some(())).is_none());
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
        for n in [0, 7, -1, 1_700_000_000_000, i64::MAX, i64::MIN] {
            let mut out = BytesMut::new();
            write_int(&mut out, n);
            assert_eq!(&out[..], json!(n).to_string().as_bytes());
        }
    }
}
