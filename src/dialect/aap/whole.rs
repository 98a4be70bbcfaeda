//! AAP `message` mode's one event per message (`text` or `thinking`), built as the message's
//! deltas arrive.
//!
//! The event is the message's whole text, escaped as JSON. Escaped and copied out of the
//! transcript when `TEXT_MESSAGE_END` arrived, that work fell on the one event the client waits
//! for, at the end of the run when both the code and the text had gone cold: 3.7 µs p50 of the
//! read that ends a 6 KB message (a probe build under `benches/` scenario a). Built delta by
//! delta instead, each piece is escaped while it is at hand, and the end only closes the event
//! and hands it over: moved into the output, not copied, when nothing else waits there.
//!
//! The price is a second copy of the live message's text (the transcript keeps the first for
//! the session's history) for as long as the message is open.

use bytes::BytesMut;

/// The event of one live message so far.
#[derive(Debug)]
pub(super) struct Whole {
    event: &'static str,
    key: &'static str,
    /// `event: <name>\ndata: {"<key>":"` and the text escaped so far; empty while the text is.
    frame: BytesMut,
    /// How many bytes of text (unescaped) it holds.
    len: usize,
}

impl Whole {
    /// The event `event` carrying the text under `key`, starting from the message's text so far
    /// (a message id used again continues its text).
    pub(super) fn begin(event: &'static str, key: &'static str, text: &str) -> Whole {
        let mut whole = Whole {
            event,
            key,
            frame: BytesMut::new(),
            len: 0,
        };
        whole.push(text);
        whole
    }

    /// How many bytes of text it holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends a piece of the text.
    pub(super) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.frame.is_empty() {
            write_head(&mut self.frame, self.event, self.key, text.len());
            self.frame.extend_from_slice(b"\"");
        }
        crate::json::write_str_contents(&mut self.frame, text);
        self.len += text.len();
    }

    /// Closes the event and writes it to `out`; nothing for a message without text (as the
    /// transcript's copy would be written).
    pub(super) fn finish(mut self, out: &mut BytesMut) {
        if self.frame.is_empty() {
            return;
        }
        self.frame.extend_from_slice(b"\"}\n\n");
        if out.is_empty() {
            // Usually so: in this mode a message's deltas write nothing.
            *out = self.frame;
        } else {
            out.extend_from_slice(&self.frame);
        }
    }
}

/// `event: <event>\ndata: {"<key>":`, with room for `len` bytes of value after it: the start of
/// every AAP event whose data is one text member (a delta, a whole message).
pub(super) fn write_head(out: &mut BytesMut, event: &str, key: &str, len: usize) {
    out.reserve(32 + event.len() + key.len() + len);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: {\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event as serde_json writes `{"text": …}` for the whole text, whatever the pieces.
    #[test]
    fn pieces_make_the_event_json_writes_for_the_whole_text() {
        let pieces = [
            "",
            "say \"hi\"",
            "\n\tto ",
            "é and \u{1}",
            "",
            "\u{2028}\\ end",
        ];
        let whole_text: String = pieces.concat();
        let expected = format!(
            "event: text\ndata: {}\n\n",
            serde_json::json!({ "text": whole_text })
        );
        for split in 0..pieces.len() {
            let mut whole = Whole::begin("text", "text", &pieces[..split].concat());
            for piece in &pieces[split..] {
                whole.push(piece);
            }
            assert_eq!(whole.len(), whole_text.len());
            // Into an empty output (moved) and after what is already there (copied).
            let mut empty = BytesMut::new();
            let mut after = BytesMut::from(&b"before\n\n"[..]);
            let copy = Whole::begin("text", "text", &whole_text);
            whole.finish(&mut empty);
            copy.finish(&mut after);
            assert_eq!(String::from_utf8_lossy(&empty), expected);
            assert_eq!(
                String::from_utf8_lossy(&after),
                format!("before\n\n{expected}")
            );
        }
    }

    #[test]
    fn a_message_without_text_writes_nothing() {
        let mut out = BytesMut::from(&b"kept"[..]);
        let mut whole = Whole::begin("thinking", "thinking", "");
        whole.push("");
        assert_eq!(whole.len(), 0);
        whole.finish(&mut out);
        assert_eq!(&out[..], b"kept");
    }
}
