//! What an AAP client remembers of a message the agent has seen: its id and a [`Fingerprint`]
//! of its content, so the next run can tell whether the client edited it. The reader feeds
//! fingerprints while the agent's messages stream; the planner compares them with the client's
//! history.

use crate::event::Message;

/// Every synthetic confirm call's id starts so (`confirm:perm:`, `confirm:intr:`); such calls
/// are the gateway's own and never part of what the agent saw.
pub const CONFIRM_PREFIX: &str = "confirm:";

/// A message's content as a fingerprint sees it: role, text, then each tool call (synthetic
/// confirm calls left out), with the separators between them. Both fingerprints hash exactly
/// these bytes, so the one fed while a message streams equals the one of the whole message.
fn content_of(message: &Message, mut feed: impl FnMut(&[u8])) {
    let text = match message {
        Message::User(m) => m.content.text(),
        Message::Assistant(m) => m.content.clone().unwrap_or_default(),
        Message::System(m) | Message::Developer(m) => m.content.clone(),
        Message::Tool(m) => m.content.text(),
        Message::Reasoning(m) => m.content.clone(),
        Message::Activity(_) => String::new(),
    };
    feed(message.role().as_bytes());
    feed(&[0xff]);
    feed(text.as_bytes());
    if let Message::Assistant(m) = message {
        for call in m.tool_calls.iter().flatten() {
            if !call.id.starts_with(CONFIRM_PREFIX) {
                tool_call_bytes(
                    &call.id,
                    &call.function.name,
                    &call.function.arguments,
                    &mut feed,
                );
            }
        }
    }
}

fn tool_call_bytes(id: &str, name: &str, arguments: &str, feed: &mut impl FnMut(&[u8])) {
    feed(&[0xfe]);
    feed(id.as_bytes());
    feed(&[0xff]);
    feed(name.as_bytes());
    feed(&[0xff]);
    feed(arguments.as_bytes());
}

/// A CRC-32C of a message's role, text and tool calls, fed incrementally so the reader can
/// fingerprint a message while it streams (a CRC's register is its whole state: any split of
/// the text gives the same value). It only tells an edited message from the one the agent saw,
/// where 32 bits leave one edit in four billion unnoticed. Why CRC-32C: the processor computes
/// it eight bytes per instruction, where FNV-1a (the fingerprint of earlier records, still
/// read: [`Forwarded`]) took a multiplication per byte — a third of an AAP delta's translation
/// (`benches/codec.rs`, `CODEC_PROFILE=text-60B/aap-to-hai`, perf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(u32);

impl Fingerprint {
    pub fn new(role: &str) -> Fingerprint {
        let mut f = Fingerprint(0);
        f.bytes(role.as_bytes());
        f.bytes(&[0xff]);
        f
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0 = crc32c::crc32c_append(self.0, bytes);
    }

    /// More of the message's text.
    pub fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    /// One of the message's tool calls (after all its text).
    pub fn tool_call(&mut self, id: &str, name: &str, arguments: &str) {
        tool_call_bytes(id, name, arguments, &mut |bytes| self.bytes(bytes));
    }

    /// The fingerprint of a whole message; synthetic confirm calls do not count.
    pub fn of(message: &Message) -> Fingerprint {
        let mut f = Fingerprint(0);
        content_of(message, |bytes| f.bytes(bytes));
        f
    }
}

/// The 64-bit FNV-1a fingerprint records written before [`Fingerprint`] hold: still compared,
/// so that a thread recorded by an earlier version does not read as edited.
fn legacy_of(message: &Message) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    content_of(message, |bytes| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(PRIME);
        }
    });
    hash
}

/// A message the agent has seen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forwarded {
    pub id: String,
    /// Absent in records of earlier versions, which hold `legacy` instead.
    #[serde(default, rename = "crc", skip_serializing_if = "Option::is_none")]
    fingerprint: Option<Fingerprint>,
    /// The FNV-1a fingerprint of a record written by an earlier version.
    #[serde(
        default,
        rename = "fingerprint",
        skip_serializing_if = "Option::is_none"
    )]
    legacy: Option<u64>,
    /// A reasoning message: clients may leave these out of the history they send back.
    optional: bool,
}

impl Forwarded {
    /// A message of `role` whose fingerprint is fed as it streams (the reader's outputs).
    pub fn new(id: String, role: &str) -> Forwarded {
        Forwarded {
            id,
            fingerprint: Some(Fingerprint::new(role)),
            legacy: None,
            optional: role == "reasoning",
        }
    }

    pub fn of(message: &Message) -> Forwarded {
        Forwarded {
            id: message.id().to_owned(),
            fingerprint: Some(Fingerprint::of(message)),
            legacy: None,
            optional: matches!(message, Message::Reasoning(_)),
        }
    }

    /// The same, but one clients may leave out of the history they send back.
    pub fn optional(self) -> Forwarded {
        Forwarded {
            optional: true,
            ..self
        }
    }

    /// Whether `message` is still the message the agent saw.
    pub fn matches(&self, message: &Message) -> bool {
        match (self.fingerprint, self.legacy) {
            (Some(fingerprint), _) => fingerprint == Fingerprint::of(message),
            (None, Some(legacy)) => legacy == legacy_of(message),
            // Neither: nothing to compare, which is an edit.
            (None, None) => false,
        }
    }

    pub fn is_optional(&self) -> bool {
        self.optional
    }

    /// The fingerprint being fed (the reader's outputs always have one).
    pub fn fingerprint_mut(&mut self) -> &mut Fingerprint {
        self.fingerprint.get_or_insert(Fingerprint(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(json: serde_json::Value) -> Message {
        serde_json::from_value(json).unwrap()
    }

    /// The Castagnoli polynomial's check value (CRC-32C of "123456789").
    #[test]
    fn the_fingerprint_is_crc_32c() {
        let mut f = Fingerprint(0);
        f.bytes(b"123456789");
        assert_eq!(f.0, 0xe306_9283);
    }

    /// Fed as a message streams — its text in any pieces, then its calls — the fingerprint is
    /// the whole message's, and an edit of any part changes it.
    #[test]
    fn a_streamed_fingerprint_is_the_whole_messages() {
        let whole = message(serde_json::json!({
            "id": "m1", "role": "assistant", "content": "Hello, wörld",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":1}"}},
                {"id": "confirm:perm:c1", "type": "function", "function": {"name": "confirm", "arguments": "{}"}},
            ],
        }));
        for split in 0..=12 {
            let text = "Hello, wörld";
            let Some((a, b)) = text.get(..split).zip(text.get(split..)) else {
                continue;
            };
            let mut f = Fingerprint::new("assistant");
            f.text(a);
            f.text(b);
            f.tool_call("c1", "search", "{\"q\":1}");
            assert_eq!(f, Fingerprint::of(&whole), "split at {split}");
        }
        let forwarded = Forwarded::of(&whole);
        assert!(forwarded.matches(&whole));
        for edited in [
            serde_json::json!({"id": "m1", "role": "assistant", "content": "Hello, world"}),
            serde_json::json!({"id": "m1", "role": "user", "content": "Hello, wörld"}),
            serde_json::json!({
                "id": "m1", "role": "assistant", "content": "Hello, wörld",
                "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":2}"}}],
            }),
        ] {
            assert!(!forwarded.matches(&message(edited.clone())), "{edited}");
        }
    }

    /// A record an earlier version wrote holds an FNV-1a fingerprint under `fingerprint`
    /// (the value below computed apart, of "assistant", 0xff, "Hello"): it still matches its
    /// message, an edit still shows, and a record written now holds the CRC under `crc`.
    #[test]
    fn records_of_earlier_versions_are_still_compared() {
        let old: Forwarded = serde_json::from_value(serde_json::json!({
            "id": "m1", "fingerprint": 1_132_773_052_481_162_160_u64, "optional": false,
        }))
        .unwrap();
        let hello =
            message(serde_json::json!({"id": "m1", "role": "assistant", "content": "Hello"}));
        let edited =
            message(serde_json::json!({"id": "m1", "role": "assistant", "content": "Hullo"}));
        assert!(old.matches(&hello));
        assert!(!old.matches(&edited));
        let new = serde_json::to_value(Forwarded::of(&hello)).unwrap();
        assert_eq!(new["crc"], serde_json::json!(Fingerprint::of(&hello).0));
        assert!(new.get("fingerprint").is_none(), "{new}");
        let back: Forwarded = serde_json::from_value(new).unwrap();
        assert!(back.matches(&hello) && !back.matches(&edited));
    }
}
