//! What an AAP client remembers of a message the agent has seen: its id and a [`Fingerprint`]
//! of its content, so the next run can tell whether the client edited it. The reader feeds
//! fingerprints while the agent's messages stream; the planner compares them with the client's
//! history.

use crate::event::Message;

/// Every synthetic confirm call's id starts so (`confirm:perm:`, `confirm:intr:`); such calls
/// are the gateway's own and never part of what the agent saw.
pub const CONFIRM_PREFIX: &str = "confirm:";

/// A stable 64-bit FNV-1a hash of a message's role, text and tool calls, fed incrementally so
/// the reader can fingerprint a message while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(u64);

impl Fingerprint {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub fn new(role: &str) -> Fingerprint {
        let mut f = Fingerprint(Self::OFFSET);
        f.bytes(role.as_bytes());
        f.bytes(&[0xff]);
        f
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// More of the message's text.
    pub fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    /// One of the message's tool calls (after all its text).
    pub fn tool_call(&mut self, id: &str, name: &str, arguments: &str) {
        self.bytes(&[0xfe]);
        self.bytes(id.as_bytes());
        self.bytes(&[0xff]);
        self.bytes(name.as_bytes());
        self.bytes(&[0xff]);
        self.bytes(arguments.as_bytes());
    }

    /// The fingerprint of a whole message; synthetic confirm calls do not count.
    pub fn of(message: &Message) -> Fingerprint {
        let text = match message {
            Message::User(m) => m.content.text(),
            Message::Assistant(m) => m.content.clone().unwrap_or_default(),
            Message::System(m) | Message::Developer(m) => m.content.clone(),
            Message::Tool(m) => m.content.text(),
            Message::Reasoning(m) => m.content.clone(),
            Message::Activity(_) => String::new(),
        };
        let mut f = Fingerprint::new(message.role());
        f.text(&text);
        if let Message::Assistant(m) = message {
            for call in m.tool_calls.iter().flatten() {
                if !call.id.starts_with(CONFIRM_PREFIX) {
                    f.tool_call(&call.id, &call.function.name, &call.function.arguments);
                }
            }
        }
        f
    }
}

/// A message the agent has seen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forwarded {
    pub id: String,
    fingerprint: Fingerprint,
    /// A reasoning message: clients may leave these out of the history they send back.
    optional: bool,
}

impl Forwarded {
    /// A message of `role` whose fingerprint is fed as it streams (the reader's outputs).
    pub fn new(id: String, role: &str) -> Forwarded {
        Forwarded {
            id,
            fingerprint: Fingerprint::new(role),
            optional: role == "reasoning",
        }
    }

    pub fn of(message: &Message) -> Forwarded {
        Forwarded {
            id: message.id().to_owned(),
            fingerprint: Fingerprint::of(message),
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
        self.fingerprint == Fingerprint::of(message)
    }

    pub fn is_optional(&self) -> bool {
        self.optional
    }

    pub fn fingerprint_mut(&mut self) -> &mut Fingerprint {
        &mut self.fingerprint
    }
}
