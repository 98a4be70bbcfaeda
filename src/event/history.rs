//! Operations on a canonical message history that several converters and both AAP adapters
//! share: removing tool calls with their answers, measuring what a history holds, and reading
//! a call's argument text as one object.

use serde_json::Value;

use super::{Message, MessageContent};

/// Removes from `messages` the tool calls whose id is `doomed`, the tool messages answering
/// them, and the assistant messages left empty.
pub fn remove_calls(messages: &mut Vec<Message>, doomed: impl Fn(&str) -> bool) {
    for m in messages.iter_mut() {
        if let Message::Assistant(a) = m {
            if let Some(calls) = &mut a.tool_calls {
                calls.retain(|c| !doomed(&c.id));
                if calls.is_empty() {
                    a.tool_calls = None;
                }
            }
        }
    }
    messages.retain(|m| match m {
        Message::Assistant(a) => {
            a.tool_calls.is_some() || a.content.as_deref().is_some_and(|c| !c.is_empty())
        }
        Message::Tool(t) => !doomed(&t.tool_call_id),
        _ => true,
    });
}

/// The size a content value adds to a history.
pub fn content_len(content: &MessageContent) -> usize {
    match content {
        MessageContent::Text(t) => t.len(),
        MessageContent::Parts(parts) => serde_json::to_string(parts).map_or(0, |s| s.len()),
    }
}

/// Argument text → one object (`translation.md` §5, `args.invalid = wrap`): empty → `{}`, an
/// object as is, other JSON as `{"_value": v}`, anything else as `{"_raw": text}`.
pub fn args_object(text: &str) -> serde_json::Map<String, Value> {
    let mut wrapped = serde_json::Map::new();
    if text.trim().is_empty() {
        return wrapped;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => return object,
        Ok(value) => wrapped.insert("_value".into(), value),
        Err(_) => wrapped.insert("_raw".into(), text.into()),
    };
    wrapped
}

/// The bytes of content a history holds: the measure of `max_history_bytes`.
pub fn history_bytes(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| match m {
            Message::Developer(m) | Message::System(m) => m.content.len(),
            Message::Assistant(m) => {
                m.content.as_ref().map_or(0, String::len)
                    + m.tool_calls
                        .iter()
                        .flatten()
                        .map(|c| c.function.arguments.len())
                        .sum::<usize>()
            }
            Message::User(m) => content_len(&m.content),
            Message::Tool(m) => content_len(&m.content),
            Message::Activity(_) => 0,
            Message::Reasoning(m) => m.content.len(),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_become_one_object() {
        assert_eq!(args_object("  "), serde_json::Map::new());
        assert_eq!(json!(args_object(r#"{"a":1}"#)), json!({"a":1}));
        assert_eq!(json!(args_object("[1]")), json!({"_value":[1]}));
        assert_eq!(json!(args_object("{\"a\":")), json!({"_raw":"{\"a\":"}));
    }
}
