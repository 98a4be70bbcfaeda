//! The policy words of `[routes.aap_upstream]` (`translation.md` §0.1): how permissions reach
//! the client, what the gateway answers for a client that cannot be asked, and which stream
//! mode the agent is asked for.

use crate::dialect::aap::types::StreamMode;

/// Parses one of a policy's words, or says which were expected.
fn word<T: Copy>(s: &str, words: &[(&str, T)]) -> Result<T, String> {
    words
        .iter()
        .find(|(w, _)| *w == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = words.iter().map(|(w, _)| *w).collect();
            format!("unknown value {s:?} (expected {})", names.join(", "))
        })
}

/// How permissions reach the client (`hitl.style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HitlStyle {
    /// The confirm tool when the client declared it; else an interrupt for AG-UI 1.0 clients;
    /// else the client cannot be asked.
    #[default]
    Auto,
    Interrupt,
    ConfirmTool,
}

impl std::str::FromStr for HitlStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("auto", HitlStyle::Auto),
                ("interrupt", HitlStyle::Interrupt),
                ("confirm_tool", HitlStyle::ConfirmTool),
            ],
        )
    }
}

/// What the gateway answers for a client that cannot be asked (`hitl.unconfirmable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unconfirmable {
    /// Fail closed: deny, and let the agent go on.
    #[default]
    Deny,
    Grant,
    /// End the run with `CONFIRMATION_UNAVAILABLE`.
    Error,
}

impl std::str::FromStr for Unconfirmable {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("deny", Unconfirmable::Deny),
                ("grant", Unconfirmable::Grant),
                ("error", Unconfirmable::Error),
            ],
        )
    }
}

/// Which stream mode turns ask for (`aap.stream_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamChoice {
    /// The best the agent declares: delta, then message, then none.
    #[default]
    Auto,
    Fixed(StreamMode),
}

impl std::str::FromStr for StreamChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("auto", StreamChoice::Auto),
                ("delta", StreamChoice::Fixed(StreamMode::Delta)),
                ("message", StreamChoice::Fixed(StreamMode::Message)),
                ("none", StreamChoice::Fixed(StreamMode::None)),
            ],
        )
    }
}
