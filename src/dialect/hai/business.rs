//! The business-data `delta` both ways (`hai.md` §3, §6, §8).
//!
//! Reading: any of the three wire variants becomes a list of business objects
//! `{output, layout?, blockId?, style?, …}` (a plain-text delta is a text output), each then
//! classified as text, thinking, or opaque. Text and thinking become canonical content events,
//! their attributes and any extra keys carried in `metadata.hai` so the writer can rebuild the
//! exact object; everything else stays one opaque object.
//!
//! Writing: `hai-client` concatenates every delta of a message and splits the buffer on `}{`,
//! so each delta must be one compact object and no `}{` may appear inside a string value: every
//! brace inside a string is written as `\u007b` / `\u007d` ([`escape_braces_in_strings`]).

use bytes::BytesMut;
use serde_json::{Map, Value};

use crate::mapping::HaiTables;

/// Per-output attribute keys that sit beside `output` (`hai.md` §3).
pub(super) const ATTRIBUTES: [&str; 3] = ["layout", "blockId", "style"];

/// Keys of `metadata.hai` on a thinking chunk that are the thinking panel's flags.
pub(super) const THINKING_FLAGS: [&str; 3] = ["elapsed", "thinking", "collapse"];

/// One decoded business output.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Output {
    /// A `text` output: the text, and `metadata.hai` (attributes and extra keys).
    Text(String, Map<String, Value>),
    /// A `thinking` output: the reasoning text, and `metadata.hai` (flags, attributes, extras).
    Thinking(String, Map<String, Value>),
    /// Anything else, verbatim (after the output-type alias).
    Opaque(Map<String, Value>),
}

/// Decodes a `BUSINESS_DATA_CONTENT.delta` (any variant) into business objects, merging the
/// event's top-level attributes into each (the inner value wins).
pub(super) fn decode_delta(delta: Value, top: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let mut objects = match delta {
        Value::Null => return Vec::new(),
        Value::String(text) => split_objects(&text).unwrap_or_else(|| vec![text_object(text)]),
        Value::Object(object) => vec![object],
        other => vec![text_object(other.to_string())],
    };
    for object in &mut objects {
        for key in ATTRIBUTES {
            if let Some(v) = top.get(key) {
                object.entry(key).or_insert_with(|| v.clone());
            }
        }
    }
    objects
}

/// A string holding one or more business objects (`{…}{…}`, whitespace tolerated), parsed with
/// a real JSON stream parser; `None` when it is anything else (then it is plain text).
pub(super) fn split_objects(text: &str) -> Option<Vec<Map<String, Value>>> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let mut objects = Vec::new();
    for item in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match item {
            Ok(Value::Object(o)) if o.get("output").is_some_and(Value::is_object) => {
                objects.push(o)
            }
            _ => return None,
        }
    }
    (!objects.is_empty()).then_some(objects)
}

fn text_object(text: String) -> Map<String, Value> {
    let mut output = Map::new();
    output.insert("type".into(), "text".into());
    output.insert("content".into(), Value::String(text));
    let mut object = Map::new();
    object.insert("output".into(), Value::Object(output));
    object
}

/// Classifies one business object (`translation.md` §3.3).
pub(super) fn classify(mut object: Map<String, Value>, tables: &HaiTables) -> Output {
    if let Some(Value::String(ty)) = object.get_mut("output").and_then(|o| o.get_mut("type")) {
        let canonical = tables.output_type(ty);
        if canonical != ty {
            *ty = canonical.to_owned();
        }
    }
    let Some(Value::Object(output)) = object.get("output") else {
        return Output::Opaque(object);
    };
    match output.get("type").and_then(Value::as_str) {
        Some("text") if output.get("content").is_some_and(Value::is_string) => {
            let Some(Value::Object(mut output)) = object.shift_remove("output") else {
                unreachable!("matched above")
            };
            let Some(Value::String(content)) = output.shift_remove("content") else {
                unreachable!("matched above")
            };
            output.shift_remove("type");
            let mut hai = object;
            if !output.is_empty() {
                hai.insert("output".into(), Value::Object(output));
            }
            Output::Text(content, hai)
        }
        Some("thinking") if is_thinking_data(output.get("data"), &object) => {
            let Some(Value::Object(mut output)) = object.shift_remove("output") else {
                unreachable!("matched above")
            };
            let Some(Value::Object(mut data)) = output.shift_remove("data") else {
                unreachable!("matched above")
            };
            let Some(Value::String(content)) = data.shift_remove("content") else {
                unreachable!("matched above")
            };
            output.shift_remove("type");
            let mut hai = object;
            for flag in THINKING_FLAGS {
                if let Some(v) = data.shift_remove(flag) {
                    hai.insert(flag.into(), v);
                }
            }
            if !data.is_empty() {
                hai.insert("data".into(), Value::Object(data));
            }
            if !output.is_empty() {
                hai.insert("output".into(), Value::Object(output));
            }
            Output::Thinking(content, hai)
        }
        _ => Output::Opaque(object),
    }
}

/// A thinking output the canonical form can carry exactly: string content, and no business key
/// that would collide with the flags kept beside the attributes.
fn is_thinking_data(data: Option<&Value>, object: &Map<String, Value>) -> bool {
    data.and_then(|d| d.get("content"))
        .is_some_and(Value::is_string)
        && !object
            .keys()
            .any(|k| THINKING_FLAGS.contains(&k.as_str()) || k == "data")
}

/// Rebuilds the business object of a text chunk from its text and `metadata.hai`.
pub(super) fn text_business(content: &str, hai: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut output = Map::new();
    output.insert("type".into(), "text".into());
    output.insert("content".into(), content.into());
    business(output, hai, &[])
}

/// Rebuilds the business object of a thinking chunk; `flags` fill what `metadata.hai` lacks.
pub(super) fn thinking_business(
    content: &str,
    hai: Option<&Map<String, Value>>,
    flags: [(&str, Value); 3],
) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("content".into(), content.into());
    for (flag, default) in flags {
        let v = hai.and_then(|h| h.get(flag)).cloned().unwrap_or(default);
        data.insert(flag.into(), v);
    }
    if let Some(Value::Object(extra)) = hai.and_then(|h| h.get("data")) {
        data.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let mut output = Map::new();
    output.insert("type".into(), "thinking".into());
    output.insert("data".into(), Value::Object(data));
    business(output, hai, &["data", "elapsed", "thinking", "collapse"])
}

fn business(
    mut output: Map<String, Value>,
    hai: Option<&Map<String, Value>>,
    skip: &[&str],
) -> Map<String, Value> {
    let mut object = Map::new();
    if let Some(Value::Object(extra)) = hai.and_then(|h| h.get("output")) {
        for (k, v) in extra {
            output.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    object.insert("output".into(), Value::Object(output));
    if let Some(hai) = hai {
        for (k, v) in hai {
            if k != "output" && !skip.contains(&k.as_str()) {
                object.insert(k.clone(), v.clone());
            }
        }
    }
    object
}

/// Compact JSON text with every `{` and `}` inside a string value escaped as `\u007b` /
/// `\u007d`, so a concatenation of such texts splits on `}{` exactly at object boundaries.
pub(super) fn json_string(value: &Value) -> String {
    escape_braces_in_strings(&value.to_string())
}

/// Appends `s` as a JSON string literal with its braces escaped, as [`json_string`] writes
/// string values.
pub(super) fn write_braceless_str(out: &mut BytesMut, s: &str) {
    let start = out.len();
    crate::json::write_str(out, s);
    if memchr::memchr2(b'{', b'}', &out[start..]).is_none() {
        return;
    }
    let literal = out.split_off(start);
    for &b in literal.iter() {
        match b {
            b'{' => out.extend_from_slice(b"\\u007b"),
            b'}' => out.extend_from_slice(b"\\u007d"),
            _ => out.extend_from_slice(&[b]),
        }
    }
}

/// Escapes braces inside the string literals of compact JSON text (`hai.md` §6 obligation 2).
pub fn escape_braces_in_strings(json: &str) -> String {
    let bytes = json.as_bytes();
    if !bytes.contains(&b'"') {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !in_string {
            in_string = b == b'"';
            continue;
        }
        if escaped {
            escaped = false;
            continue;
        }
        let replacement = match b {
            b'\\' => {
                escaped = true;
                continue;
            }
            b'"' => {
                in_string = false;
                continue;
            }
            b'{' => "\\u007b",
            b'}' => "\\u007d",
            _ => continue,
        };
        // Braces are ASCII, so `i` is a char boundary.
        out.push_str(&json[start..i]);
        out.push_str(replacement);
        start = i + 1;
    }
    out.push_str(&json[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn the_three_variants_decode_to_the_same_objects() {
        let top = obj(json!({"blockId":"b0","style":{"s":1}}));
        let want = json!({"output":{"type":"text","content":"Hello"},"layout":{"x":0},"blockId":"b1","style":{"s":1}});
        // Variant 3: a JSON string, blockId inside (wins over the top level).
        let v3 = decode_delta(
            json!(
                r#"{"output":{"type":"text","content":"Hello"},"layout":{"x":0},"blockId":"b1"}"#
            ),
            &top,
        );
        assert_eq!(v3, vec![obj(want.clone())]);
        // Variant 2: an object.
        let v2 = decode_delta(
            json!({"output":{"type":"text","content":"Hello"},"layout":{"x":0},"blockId":"b1"}),
            &top,
        );
        assert_eq!(v2, vec![obj(want)]);
        // Variant 1: plain text, with the top-level attributes.
        let v1 = decode_delta(json!("HAI 是一套"), &Map::new());
        assert_eq!(
            v1,
            vec![obj(
                json!({"output":{"type":"text","content":"HAI 是一套"}})
            )]
        );
    }

    #[test]
    fn several_objects_split_with_a_real_parser() {
        let text = r#"{"output":{"type":"text","content":"a}{b"}} {"output":{"type":"icon","data":{"icon":"x"}}}"#;
        let objects = decode_delta(json!(text), &Map::new());
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["output"]["content"], "a}{b");
        assert_eq!(objects[1]["output"]["type"], "icon");
        // Text that merely looks like JSON stays text.
        for text in ["{not json", "{\"a\":1}", "[1]", "{\"output\":\"x\"}", ""] {
            let objects = decode_delta(json!(text), &Map::new());
            assert_eq!(objects[0]["output"]["content"], text, "{text}");
        }
        assert!(decode_delta(Value::Null, &Map::new()).is_empty());
    }

    #[test]
    fn outputs_classify_and_rebuild_exactly() {
        let tables = HaiTables::builtin();
        let cases = [
            json!({"output":{"type":"text","content":"hi"}}),
            json!({"output":{"type":"text","content":"hi","id":"o1"},"layout":{},"blockId":"b","extra":1}),
            json!({"output":{"type":"thinking","data":{"content":"hm","elapsed":3,"thinking":true,"collapse":false}},"blockId":"b"}),
            json!({"output":{"type":"thinking","data":{"content":"","elapsed":1,"thinking":false,"collapse":true,"more":"x"},"id":"t"}}),
        ];
        for case in cases {
            let rebuilt = match classify(obj(case.clone()), &tables) {
                Output::Text(text, hai) => text_business(&text, Some(&hai)),
                Output::Thinking(text, hai) => thinking_business(
                    &text,
                    Some(&hai),
                    [
                        ("elapsed", 0.into()),
                        ("thinking", true.into()),
                        ("collapse", true.into()),
                    ],
                ),
                Output::Opaque(o) => panic!("{case} classified opaque: {o:?}"),
            };
            assert_eq!(Value::Object(rebuilt), case);
        }
        let think = classify(
            obj(json!({"output":{"type":"think","data":{"content":"x"}}})),
            &tables,
        );
        assert!(
            matches!(think, Output::Thinking(ref t, _) if t == "x"),
            "{think:?}"
        );
        for opaque in [
            json!({"output":{"type":"fold","data":{"title":"t","fold":false,"position":"start"}}}),
            json!({"output":{"type":"text","content":5}}),
            json!({"output":{"type":"thinking","data":"x"}}),
            json!({"output":{"type":"future"}}),
            json!({"layout":{}}),
        ] {
            assert!(
                matches!(classify(obj(opaque.clone()), &tables), Output::Opaque(o) if Value::Object(o.clone()) == opaque)
            );
        }
    }

    #[test]
    fn braces_inside_strings_are_escaped_and_nothing_else() {
        let v = json!({"output":{"type":"text","content":"a}{b \"{x}\" \\{"}});
        let text = json_string(&v);
        assert_eq!(
            text,
            r#"{"output":{"type":"text","content":"a\u007d\u007bb \"\u007bx\u007d\" \\\u007b"}}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
        // The hai-client split: concatenations break only between objects.
        let joined = format!("{text}{text}");
        assert_eq!(joined.matches("}{").count(), 1);
        assert_eq!(escape_braces_in_strings("{}"), "{}");
        assert_eq!(
            escape_braces_in_strings(r#""多字节{}""#),
            r#""多字节\u007b\u007d""#
        );
    }
}
