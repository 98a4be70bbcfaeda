//! Request-body errors in the protocol's words. serde describes a body that does not fit in
//! terms of the Rust types it was reading into (`invalid type: string "x", expected struct
//! CreateSession`, `expected u64`); a client is told instead which field is wrong and what it
//! must be, with the field spelled as on the wire (`messages[0].role: must be one of "user",
//! "assistant"`, `the body must be a JSON object`). The client's own values are not echoed
//! back, and no Rust type name survives: what cannot be put in protocol words becomes a plain
//! "is not valid".
//!
//! Pure: text in, text out.

/// Reads a request body that must be a JSON object into `T`; the error is the sentence for
/// the client. (serde would read a struct from an array too, and name the array's items.)
pub fn parse_object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Err(e) => describe(".", &e),
                Ok(_) => "the body must be a JSON object".to_owned(),
            },
        );
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| describe(&e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| describe(".", &e))?;
    Ok(value)
}

/// The sentence for `error`, met while reading the field at `path` (as `serde_path_to_error`
/// spells it: `messages[0].role`, or `.` for the body itself).
pub fn describe(path: &str, error: &serde_json::Error) -> String {
    if error.is_syntax() || error.is_eof() {
        return format!(
            "the body is not valid JSON (line {}, column {})",
            error.line(),
            error.column()
        );
    }
    let text = error.to_string();
    describe_message(path, without_position(&text))
}

/// [`describe`] for serde's message text alone (its position already removed).
pub fn describe_message(path: &str, message: &str) -> String {
    let at = Field::new(path);
    if let Some(name) = between(message, "missing field `", "`") {
        return at.child(name).says("is required");
    }
    if let Some(name) = between(message, "duplicate field `", "`") {
        return at.child(name).says("appears more than once");
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known = wire_names(expected);
        let problem = if known.is_empty() {
            "is not a known field".to_owned()
        } else {
            format!("is not a known field (known: {known})")
        };
        return at.child(name).says(&problem);
    }
    if message.starts_with("unknown variant `") {
        let expected = message.split_once("`, ").map_or("", |(_, e)| e);
        let known = wire_names(expected);
        return if known.is_empty() {
            at.says("is not a known value")
        } else {
            at.says(&format!("must be one of {known}"))
        };
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        let (unexpected, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let expected = expected_kind(expected);
        let given = given_kind(unexpected);
        return match (expected, given) {
            (Some(e), Some(g)) if at.is_root() => format!("the body must be {e}, not {g}"),
            (Some(e), Some(g)) => at.says(&format!("must be {e}, not {g}")),
            (Some(e), None) => at.says(&format!("must be {e}")),
            (None, _) => at.says("has the wrong type"),
        };
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
        return match expected_kind(expected) {
            Some(e) => at.says(&format!("must be {e}")),
            None => at.says("is not valid"),
        };
    }
    if message.starts_with("invalid length ") {
        return at.says("has the wrong number of items");
    }
    if message.starts_with("data did not match any variant of untagged enum") {
        return at.says("is not in any of the accepted forms");
    }
    at.says("is not valid")
}

/// serde_json's message without its ` at line L column C` suffix.
fn without_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) if message[i..].contains(" column ") => &message[..i],
        _ => message,
    }
}

/// The field a problem is about, as the wire spells it.
struct Field(String);

impl Field {
    fn new(path: &str) -> Field {
        Field(if path == "." {
            String::new()
        } else {
            path.to_owned()
        })
    }

    fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    fn child(&self, name: &str) -> Field {
        if self.is_root() {
            Field(name.to_owned())
        } else {
            Field(format!("{}.{name}", self.0))
        }
    }

    fn says(&self, problem: &str) -> String {
        if self.is_root() {
            format!("the body {problem}")
        } else {
            format!("{}: {problem}", self.0)
        }
    }
}

/// The text between `start` (at the beginning of `text`) and the next `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(start)?;
    Some(rest.split_once(end).map_or(rest, |(inner, _)| inner))
}

/// serde's list of wire names (`` expected one of `user`, `assistant` ``, `` expected `user` ``)
/// as `"user", "assistant"`; empty when it lists none.
fn wire_names(expected: &str) -> String {
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What serde expected, in JSON's words; `None` when it names something only Rust knows.
fn expected_kind(expected: &str) -> Option<&'static str> {
    let e = expected.trim();
    let object = [
        "struct ",
        "internally tagged enum",
        "struct variant ",
        "a map",
        "map",
    ];
    if object.iter().any(|p| e.starts_with(p)) {
        return Some("a JSON object");
    }
    let kind = match e {
        "a string" | "a borrowed string" | "string" | "a character" | "char" | "a string key" => {
            "a string"
        }
        "a sequence" | "sequence" | "a borrowed byte array" | "a byte array" => "an array",
        "a boolean" | "bool" => "true or false",
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "unit" | "null" => "null",
        "any valid JSON value" => "a JSON value",
        _ if e.starts_with("a tuple") || e.starts_with("tuple") => "an array",
        _ => return None,
    };
    Some(kind)
}

/// What the client sent instead, in JSON's words (serde's `string "x"`, `integer `5``, …),
/// without the value itself.
fn given_kind(unexpected: &str) -> Option<&'static str> {
    let u = unexpected.trim();
    let kind = match u.split([' ', '`', '"']).next().unwrap_or("") {
        "string" | "char" => "a string",
        "integer" => "an integer",
        "floating" => "a number",
        "boolean" => "a boolean",
        "map" => "an object",
        "sequence" => "an array",
        "null" | "unit" => "null",
        _ => return None,
    };
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::aap::types::{CreateSession, TurnRequest};
    use crate::event::RunAgentInput;

    fn error_of<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        parse_object::<T>(body.as_bytes()).expect_err("the body must not fit")
    }

    /// No Rust type name, serde wording or echoed value in what a client reads.
    fn assert_protocol_words(message: &str) {
        for rust in [
            "struct",
            "enum",
            "variant",
            "u64",
            "usize",
            "i64",
            "Create",
            "Turn",
            "Aap",
            "RunAgent",
            "invalid type",
            "`",
        ] {
            assert!(!message.contains(rust), "{rust:?} in {message:?}");
        }
    }

    #[test]
    fn a_body_that_is_not_an_object() {
        for body in [
            r#""just a string""#,
            "[1, 2]",
            " 42",
            "null",
            "[{\"name\": \"a\"}]",
        ] {
            let m = error_of::<CreateSession>(body);
            assert_eq!(m, "the body must be a JSON object", "{body}");
        }
        let m = error_of::<CreateSession>(r#"{"agent": {"name": "a"}} trailing"#);
        assert!(m.starts_with("the body is not valid JSON"), "{m}");
    }

    #[test]
    fn fields_are_named_as_on_the_wire() {
        let m = error_of::<CreateSession>(r#"{"agent": 5}"#);
        assert_eq!(m, "agent: must be a JSON object, not an integer");
        let m = error_of::<CreateSession>(r#"{}"#);
        assert_eq!(m, "agent: is required");
        let m = error_of::<TurnRequest>(r#"{"messages": [{"role": "robot", "content": "x"}]}"#);
        assert!(m.starts_with("messages[0]"), "{m}");
        assert_eq!(
            m,
            r#"messages[0].role: must be one of "system", "user", "assistant", "tool", "tool_permission""#
        );
        assert!(
            !m.contains("robot"),
            "the client's value is not echoed: {m}"
        );
        let m = error_of::<TurnRequest>(r#"{"messages": [{"content": "x"}]}"#);
        assert_eq!(m, "messages[0].role: is required");
        let m = error_of::<TurnRequest>(r#"{"messages": "hello"}"#);
        assert_eq!(m, "messages: must be an array, not a string");
        for body in [
            r#"{"messages": [{"role": "user", "content": 5}]}"#,
            r#"{"messages": [{"role": "user", "content": [{"type": "picture"}]}]}"#,
            r#"{"messages": [{"role": "user"}], "stream": 3}"#,
            r#"{"agent": {"name": "a", "options": 1}}"#,
        ] {
            let m = error_of::<TurnRequest>(body);
            assert_protocol_words(&m);
        }
    }

    #[test]
    fn run_agent_input_errors() {
        let m = error_of::<RunAgentInput>(r#"{"threadId": 5, "runId": "r"}"#);
        assert_protocol_words(&m);
        assert_eq!(m, "threadId: must be a string, not an integer");
        let m = error_of::<RunAgentInput>(
            r#"{"runId": "r", "messages": [], "tools": [], "context": []}"#,
        );
        assert_eq!(m, "threadId: is required");
        let m = error_of::<RunAgentInput>(
            r#"{"threadId": "t", "runId": "r", "tools": [], "context": [], "messages": [{"id": "m", "role": "wizard", "content": "x"}]}"#,
        );
        assert!(m.starts_with("messages[0]"), "{m}");
        assert!(m.contains(r#"must be one of "#), "{m}");
        assert_protocol_words(&m);
    }

    #[test]
    fn syntax_errors_give_the_position() {
        let m = error_of::<CreateSession>("{\"agent\": ");
        assert!(m.starts_with("the body is not valid JSON (line 1"), "{m}");
    }

    #[test]
    fn what_has_no_protocol_words_is_plain() {
        assert_eq!(
            describe_message("a", "invalid type: string \"x\", expected struct Secret"),
            "a: must be a JSON object, not a string"
        );
        assert_eq!(
            describe_message("a", "invalid value: integer `-1`, expected u64"),
            "a: must be a non-negative integer"
        );
        assert_eq!(
            describe_message("a.b", "something custom about MyType"),
            "a.b: is not valid"
        );
        assert_eq!(
            describe_message(".", "invalid type: map, expected enum Foo"),
            "the body has the wrong type"
        );
    }
}
