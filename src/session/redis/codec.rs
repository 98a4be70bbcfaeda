//! Sessions and thread records as Redis holds them (JSON text in hash fields and list
//! entries), and the defensive reading of replies: a reply of an unexpected shape is an error
//! naming what was expected, never a panic.

use ::redis::Value;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::super::{Principal, Session, SessionConfig, StoreError};
use crate::event::Message;

/// A reply that is not what the script promises.
pub(super) fn unexpected(what: &str) -> StoreError {
    StoreError::Unavailable(format!("unexpected reply from Redis to {what}"))
}

/// A stored value that does not decode.
fn unreadable(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("a stored {what} does not decode: {error}"))
}

/// The elements of an array reply.
pub(super) fn array(value: Value, what: &str) -> Result<Vec<Value>, StoreError> {
    match value {
        Value::Array(items) | Value::Set(items) => Ok(items),
        _ => Err(unexpected(what)),
    }
}

/// Bytes of a string reply; `None` for nil.
pub(super) fn bytes(value: Value, what: &str) -> Result<Option<Vec<u8>>, StoreError> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(b) => Ok(Some(b)),
        Value::SimpleString(s) => Ok(Some(s.into_bytes())),
        Value::VerbatimString { text, .. } => Ok(Some(text.into_bytes())),
        Value::Okay => Ok(Some(b"OK".to_vec())),
        _ => Err(unexpected(what)),
    }
}

/// A string reply; `None` for nil.
pub(super) fn text(value: Value, what: &str) -> Result<Option<String>, StoreError> {
    bytes(value, what)?
        .map(|b| String::from_utf8(b).map_err(|_| unexpected(what)))
        .transpose()
}

/// An integer reply (or an integer in a string).
pub(super) fn int(value: Value, what: &str) -> Result<i64, StoreError> {
    match value {
        Value::Int(i) => Ok(i),
        other => text(other, what)?
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| unexpected(what)),
    }
}

/// A count in a reply.
pub(super) fn count(value: Value, what: &str) -> Result<usize, StoreError> {
    usize::try_from(int(value, what)?).map_err(|_| unexpected(what))
}

/// `value` as JSON text.
pub(super) fn json<T: Serialize + ?Sized>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Unavailable(format!("cannot encode the {what}: {e}")))
}

/// JSON text back to a value.
pub(super) fn from_json<T: DeserializeOwned>(raw: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(raw).map_err(|e| unreadable(what, e))
}

/// A session's fields as script arguments: config, state ('' for none), pending.
pub(super) struct Fields {
    pub config: String,
    pub state: String,
    pub pending: String,
}

impl Fields {
    pub(super) fn of(
        config: &SessionConfig,
        state: Option<&serde_json::Value>,
        pending: &[crate::dialect::aap::Pending],
    ) -> Result<Fields, StoreError> {
        Ok(Fields {
            config: json(config, "session configuration")?,
            // A state that is JSON `null` is kept apart from no state: its text is "null".
            state: match state {
                Some(s) => json(s, "session state")?,
                None => String::new(),
            },
            pending: json(pending, "pending calls")?,
        })
    }
}

/// Messages as list entries.
pub(super) fn messages(history: &[Message]) -> Result<Vec<String>, StoreError> {
    history.iter().map(|m| json(m, "message")).collect()
}

/// A session from `[config, state, pending, history]` as the scripts reply them.
pub(super) fn session(
    id: &str,
    owner: &Principal,
    fields: Vec<Value>,
    what: &str,
) -> Result<Session, StoreError> {
    let mut fields = fields.into_iter();
    let mut next = || fields.next().ok_or_else(|| unexpected(what));
    let config = bytes(next()?, what)?.ok_or_else(|| unexpected(what))?;
    let state = bytes(next()?, what)?;
    let pending = bytes(next()?, what)?;
    let history = array(next()?, what)?;
    Ok(Session {
        id: id.to_owned(),
        owner: owner.clone(),
        config: from_json(&config, "session configuration")?,
        history: history
            .into_iter()
            .map(|m| {
                let raw = bytes(m, what)?.ok_or_else(|| unexpected(what))?;
                from_json(&raw, "message")
            })
            .collect::<Result<_, _>>()?,
        state: state.map(|s| from_json(&s, "session state")).transpose()?,
        pending: match pending {
            Some(p) => from_json(&p, "pending calls")?,
            None => Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_of_another_shape_are_errors_not_panics() {
        assert!(array(Value::Int(1), "x").is_err());
        assert!(int(Value::Nil, "x").is_err());
        assert_eq!(int(Value::BulkString(b"42".to_vec()), "x"), Ok(42));
        assert!(count(Value::Int(-1), "x").is_err());
        assert_eq!(text(Value::Nil, "x"), Ok(None));
        assert!(text(Value::BulkString(vec![0xff]), "x").is_err());
        let owner = Principal::anonymous();
        assert!(session("s", &owner, vec![Value::Nil], "x").is_err());
        let garbled = vec![
            Value::BulkString(b"{not json".to_vec()),
            Value::Nil,
            Value::Nil,
            Value::Array(Vec::new()),
        ];
        assert!(matches!(
            session("s", &owner, garbled, "x"),
            Err(StoreError::Unavailable(_))
        ));
    }

    #[test]
    fn a_null_state_is_kept_apart_from_no_state() {
        let config = SessionConfig::default();
        let none = Fields::of(&config, None, &[]).unwrap();
        let null = Fields::of(&config, Some(&serde_json::Value::Null), &[]).unwrap();
        assert_eq!(none.state, "");
        assert_eq!(null.state, "null");
        let read = |state: &str| {
            let fields = vec![
                Value::BulkString(none.config.clone().into_bytes()),
                if state.is_empty() {
                    Value::Nil
                } else {
                    Value::BulkString(state.as_bytes().to_vec())
                },
                Value::BulkString(b"[]".to_vec()),
                Value::Array(Vec::new()),
            ];
            session("s", &Principal::anonymous(), fields, "x")
                .unwrap()
                .state
        };
        assert_eq!(read(""), None);
        assert_eq!(read("null"), Some(serde_json::Value::Null));
    }
}
