//! Stateless value repairs on a JSON object before it is decoded into a canonical type
//! (`dialects.md` rows 1, 3, 7–10, 13, 17, 19). Each function says which row it implements and
//! reports the rule it applied.

use serde_json::{Map, Value};

use super::strip;
use crate::event::ContentPart;
use crate::event::{Note, Rule};
use crate::mapping::AguiAliases;

/// Keys whose empty-string value means "absent" (row 9).
const OPTIONAL_IDS: &[&str] = &[
    "parentMessageId",
    "parentRunId",
    "subagentRunId",
    "parentSubagentRunId",
    "parentToolCallId",
];

/// Keys that must be present but may hold `null`.
const NULLABLE_REQUIRED: &[&str] = &["snapshot", "value", "event"];

/// Row 1: renames snake_case keys from the table; camelCase wins when both are present.
pub fn snake_keys(map: &mut Map<String, Value>, aliases: &AguiAliases, notes: &mut Vec<Note>) {
    // Canonical producers never send an underscore in a key: one scan instead of a lookup per
    // table entry on the common path.
    if !map.keys().any(|k| k.contains('_')) {
        return;
    }
    for (snake, camel) in &aliases.keys {
        if let Some(v) = map.remove(snake) {
            notes.push(Note::Fixup(Rule::SnakeCaseKeys));
            if !map.contains_key(camel) {
                map.insert(camel.clone(), v);
            }
        }
    }
}

/// Rows 7, 8, 16: per-type field aliases, applied when the canonical key is absent.
pub fn field_aliases(
    map: &mut Map<String, Value>,
    aliases: &AguiAliases,
    type_names: [&str; 2],
    notes: &mut Vec<Note>,
) {
    let [spelled, canonical] = type_names;
    let names: &[&str] = if spelled == canonical {
        &type_names[..1]
    } else {
        &type_names
    };
    for &name in names {
        let Some(pairs) = aliases.fields.get(name) else {
            continue;
        };
        for (alias, canonical) in pairs {
            if map.contains_key(canonical) {
                continue;
            }
            if let Some(v) = map.remove(alias) {
                notes.push(Note::Fixup(Rule::FieldAlias));
                map.insert(canonical.clone(), v);
            }
        }
    }
}

/// Rows 9 and 17: nulls, empty optional ids, non-object metadata, timestamps.
pub fn base_fields(map: &mut Map<String, Value>, timestamps: Timestamps, notes: &mut Vec<Note>) {
    let before = map.len();
    map.retain(|k, v| {
        if k == "metadata" {
            return v.is_object();
        }
        match v {
            Value::Null => NULLABLE_REQUIRED.contains(&k.as_str()),
            Value::String(s) if s.is_empty() => !OPTIONAL_IDS.contains(&k.as_str()),
            _ => true,
        }
    });
    if map.len() != before {
        notes.push(Note::Fixup(Rule::NullsAndEmptyIds));
    }
    if let Some(ts) = map.get("timestamp") {
        let fixed = match timestamps {
            Timestamps::Normalise => timestamp_ms(ts),
            Timestamps::Drop => None,
            // Integers as sent; anything a 1.0 client cannot read still has to go.
            Timestamps::Passthrough => ts.as_i64().map(Value::from),
        };
        if fixed.as_ref().and_then(Value::as_i64) != ts.as_i64() || !ts.is_i64() {
            notes.push(Note::Fixup(Rule::Timestamps));
            match fixed {
                Some(v) => {
                    map.insert("timestamp".into(), v);
                }
                None => {
                    map.remove("timestamp");
                }
            }
        }
    }
}

/// What the reader does with upstream timestamps (`dialects.md` row 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timestamps {
    /// Integer ms; seconds, floats and RFC 3339 converted; implausible values dropped.
    #[default]
    Normalise,
    /// Never forward upstream timestamps.
    Drop,
    /// Forward integers as sent; drop anything else.
    Passthrough,
}

impl Timestamps {
    /// Whether an integer timestamp (or none) passes as it is, so an event carrying it needs
    /// no repair.
    pub fn keeps(self, timestamp: Option<i64>) -> bool {
        match (timestamp, self) {
            (None, _) | (Some(_), Timestamps::Passthrough) => true,
            // What `timestamp_ms` leaves as it is: an integer in milliseconds already (at or
            // above 1e11, which every plausible one is) and plausible.
            (Some(ts), Timestamps::Normalise) => {
                (EARLIEST_PLAUSIBLE_MS..=MAX_SAFE_INTEGER).contains(&ts)
            }
            (Some(_), Timestamps::Drop) => false,
        }
    }
}

/// The largest integer JavaScript represents exactly.
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// 2000-01-01T00:00:00Z in ms: anything earlier is a placeholder, not a time.
const EARLIEST_PLAUSIBLE_MS: i64 = 946_684_800_000;

/// Row 17: integer ms; seconds (below 1e11) ×1000; fractions floored; RFC 3339 strings parsed;
/// implausible or unparseable values dropped.
pub fn timestamp_ms(v: &Value) -> Option<Value> {
    let ms = match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if i.unsigned_abs() < 100_000_000_000 {
                    i.checked_mul(1000)?
                } else {
                    i
                }
            } else {
                let f = n.as_f64()?;
                let f = if f.abs() < 1e11 { f * 1000.0 } else { f };
                if !f.is_finite() || f.abs() > 9.007_199_254_740_991e15 {
                    return None;
                }
                f.floor() as i64
            }
        }
        Value::String(s) => rfc3339_ms(s)?,
        _ => return None,
    };
    // Beyond 2^53 - 1 a JavaScript client cannot hold the value exactly (and rejects it).
    (EARLIEST_PLAUSIBLE_MS..=MAX_SAFE_INTEGER)
        .contains(&ms)
        .then(|| Value::from(ms))
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]` into epoch milliseconds.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i)?;
        if frac.is_empty() {
            return None;
        }
        let padded = format!("{:0<3}", &frac[..frac.len().min(3)]);
        millis = padded.parse::<i64>().ok()?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// Compact JSON text of a value (never fails for a `Value`).
pub fn compact(v: &Value) -> String {
    v.to_string()
}

/// Row 3: `message` from `error.message` ∥ `error` ∥ "unknown error"; `code` stringified;
/// `error` and `result` dropped.
pub fn run_error(map: &mut Map<String, Value>, notes: &mut Vec<Note>) {
    let error = map.remove("error");
    let had_result = map.remove("result").is_some();
    let mut fixed = error.is_some() || had_result;
    if !map.get("message").is_some_and(Value::is_string) {
        let message = match &error {
            Some(Value::Object(e)) => e.get("message").and_then(Value::as_str).map(str::to_owned),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        map.insert(
            "message".into(),
            Value::String(message.unwrap_or_else(|| "unknown error".into())),
        );
        fixed = true;
    }
    let nested_code = match &error {
        Some(Value::Object(e)) => e.get("code").cloned(),
        _ => None,
    };
    let code = nested_code
        .filter(|c| !c.is_null())
        .or_else(|| map.remove("code"));
    match code {
        Some(Value::String(s)) => {
            map.insert("code".into(), Value::String(s));
        }
        Some(Value::Null) | None => {}
        Some(other) => {
            fixed = true;
            let text = other
                .as_str()
                .map_or_else(|| compact(&other), str::to_owned);
            map.insert("code".into(), Value::String(text));
        }
    }
    if fixed {
        notes.push(Note::Fixup(Rule::RunErrorShape));
    }
}

/// Row 8: tool-result content as a string or valid parts; anything else as compact JSON. A
/// parts list first has its legacy `binary` parts upgraded (row 19) and the parts AG-UI does
/// not describe stripped ([`strip::tool_result_parts`]).
pub fn tool_result_content(map: &mut Map<String, Value>, notes: &mut Vec<Note>) {
    map.remove("tool_name");
    map.remove("tool_call_args");
    map.remove("toolName");
    map.remove("role");
    if let Some(Value::Array(parts)) = map.get_mut("content") {
        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
            upgrade_binary_part(part, notes);
        }
        strip::tool_result_parts(parts, notes);
    }
    match map.get("content") {
        Some(Value::String(_)) => {}
        Some(Value::Array(parts))
            if serde_json::from_value::<Vec<ContentPart>>(Value::Array(parts.clone())).is_ok() => {}
        Some(other) => {
            let text = compact(other);
            notes.push(Note::Fixup(Rule::ToolResultShape));
            map.insert("content".into(), Value::String(text));
        }
        None => {
            notes.push(Note::Fixup(Rule::ToolResultShape));
            map.insert("content".into(), Value::String(String::new()));
        }
    }
}

/// Row 13: an op list (a single op is wrapped), pointers with a leading `/`. Operations RFC 6902
/// does not define leave the list ([`strip::patch_ops`]); members an operation does not define
/// (a `from` on an `add`, say) belong to the patch and are kept as they are (RFC 6902 §4).
pub fn patch(value: &mut Value, notes: &mut Vec<Note>) {
    if value.is_object() {
        notes.push(Note::Fixup(Rule::StateDeltaShape));
        *value = Value::Array(vec![value.take()]);
    }
    let Value::Array(ops) = value else {
        return;
    };
    strip::patch_ops(ops, notes);
    for op in ops.iter_mut().filter_map(Value::as_object_mut) {
        for &key in pointer_members(op) {
            if let Some(Value::String(p)) = op.get_mut(key) {
                if !p.is_empty() && !p.starts_with('/') {
                    notes.push(Note::Fixup(Rule::StateDeltaShape));
                    p.insert(0, '/');
                }
                if escape_stray_tildes(p) {
                    notes.push(Note::Fixup(Rule::StateDeltaShape));
                }
            }
        }
    }
}

/// The members of an operation that are JSON pointers: `from` only where RFC 6902 defines it.
fn pointer_members(op: &Map<String, Value>) -> &'static [&'static str] {
    match op.get("op").and_then(Value::as_str) {
        Some("move" | "copy") => &["path", "from"],
        _ => &["path"],
    }
}

/// True when a typed patch needs none of row 13's repairs: rooted, valid pointers (a typed
/// operation holds `from` only on move/copy).
pub fn patch_is_canonical(ops: &[crate::event::JsonPatchOp]) -> bool {
    use crate::event::PatchOpKind;
    let valid = |p: &str| {
        let b = p.as_bytes();
        p.is_empty()
            || (b[0] == b'/'
                && (0..b.len()).all(|i| b[i] != b'~' || matches!(b.get(i + 1), Some(b'0' | b'1'))))
    };
    ops.iter().all(|op| {
        valid(&op.path)
            && match &op.from {
                None => true,
                Some(from) => matches!(op.op, PatchOpKind::Move | PatchOpKind::Copy) && valid(from),
            }
    })
}

/// Row 13's detection: some op's path (or, on move/copy, `from`) is non-empty and lacks its
/// leading `/`. An op of an unknown kind is not judged: it leaves the patch anyway.
pub fn has_unrooted_path(value: &Value) -> bool {
    let single = std::slice::from_ref(value);
    let ops = value.as_array().map_or(single, Vec::as_slice);
    let known = ops.iter().filter(|op| !strip::is_unknown_op(op));
    known.filter_map(Value::as_object).any(|op| {
        pointer_members(op).iter().any(|k| {
            op.get(*k)
                .and_then(Value::as_str)
                .is_some_and(|p| !p.is_empty() && !p.starts_with('/'))
        })
    })
}

/// A JSON pointer may hold `~` only as `~0` or `~1` (RFC 6901); a bare one is meant literally,
/// so it becomes `~0`. True when something changed.
fn escape_stray_tildes(pointer: &mut String) -> bool {
    let bytes = pointer.as_bytes();
    let stray = |i: usize| bytes[i] == b'~' && !matches!(bytes.get(i + 1), Some(b'0' | b'1'));
    if !(0..bytes.len()).any(stray) {
        return false;
    }
    let mut fixed = String::with_capacity(pointer.len() + 2);
    let mut chars = pointer.chars().peekable();
    while let Some(c) = chars.next() {
        fixed.push(c);
        if c == '~' && !matches!(chars.peek(), Some('0' | '1')) {
            fixed.push('0');
        }
    }
    *pointer = fixed;
    true
}

/// Rows 1, 9, 19 on one message: snake keys, nulls, legacy `binary` parts upgraded.
pub fn message(map: &mut Map<String, Value>, aliases: &AguiAliases, notes: &mut Vec<Note>) {
    snake_keys(map, aliases, notes);
    map.retain(|_, v| !v.is_null());
    if map.get("metadata").is_some_and(|m| !m.is_object()) {
        map.remove("metadata");
    }
    if let Some(Value::Array(parts)) = map.get_mut("content") {
        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
            upgrade_binary_part(part, notes);
        }
    }
    if let Some(Value::Array(calls)) = map.get_mut("toolCalls") {
        for call in calls.iter_mut().filter_map(Value::as_object_mut) {
            call.retain(|_, v| !v.is_null());
            call.entry("type")
                .or_insert_with(|| Value::from("function"));
        }
    }
}

/// Row 19: `{type:"binary", mimeType, data|url|id}` → an image/audio/video/document part.
fn upgrade_binary_part(part: &mut Map<String, Value>, notes: &mut Vec<Note>) {
    if part.get("type").and_then(Value::as_str) != Some("binary") {
        return;
    }
    notes.push(Note::Fixup(Rule::VendorExtras));
    let mime = part
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = ["image", "audio", "video"]
        .into_iter()
        .find(|k| mime.starts_with(&format!("{k}/")))
        .unwrap_or("document");
    let mut source = Map::new();
    if let Some(data) = part.remove("data") {
        source.insert("type".into(), "data".into());
        source.insert("value".into(), data);
    } else if let Some(url) = part.remove("url") {
        source.insert("type".into(), "url".into());
        source.insert("value".into(), url);
    } else if let Some(id) = part.remove("id") {
        source.insert("type".into(), "file".into());
        source.insert("value".into(), id);
    }
    if !mime.is_empty() {
        source.insert("mimeType".into(), Value::String(mime));
    }
    part.remove("mimeType");
    part.remove("filename");
    part.insert("type".into(), Value::from(kind));
    part.insert("source".into(), Value::Object(source));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_integer_timestamp_is_kept_exactly_when_normalising_leaves_it() {
        for ts in [
            i64::MIN,
            -EARLIEST_PLAUSIBLE_MS,
            -1,
            0,
            1,
            99_999_999_999,
            100_000_000_000,
            EARLIEST_PLAUSIBLE_MS - 1,
            EARLIEST_PLAUSIBLE_MS,
            1_761_819_878,
            1_761_819_878_000,
            MAX_SAFE_INTEGER,
            MAX_SAFE_INTEGER + 1,
            1_732_460_000_000_000_000,
            i64::MAX,
        ] {
            let normalised = timestamp_ms(&Value::from(ts)) == Some(Value::from(ts));
            assert_eq!(Timestamps::Normalise.keeps(Some(ts)), normalised, "{ts}");
        }
    }

    #[test]
    fn timestamps() {
        let cases = [
            (json!(1_700_000_000_000_i64), Some(1_700_000_000_000_i64)),
            (json!(1_761_819_878), Some(1_761_819_878_000)),
            (json!(1_761_819_878.5), Some(1_761_819_878_500)),
            (json!(1_700_000_000_000.7), Some(1_700_000_000_000)),
            (json!(10_693_854), None),
            (json!("2025-10-30T10:24:38Z"), Some(1_761_819_878_000)),
            (
                json!("2025-10-30T18:24:38.25+08:00"),
                Some(1_761_819_878_250),
            ),
            (json!("yesterday"), None),
            (json!(true), None),
        ];
        for (input, want) in cases {
            assert_eq!(timestamp_ms(&input), want.map(Value::from), "{input}");
        }
    }

    #[test]
    fn base_fields_drop_nulls_empty_ids_and_bad_metadata() {
        for bad_metadata in [json!(""), json!("x"), json!([1]), json!(null), json!(3)] {
            let mut m = json!({"messageId":"m","parentMessageId":"","snapshot":null,"name":null,
                               "delta":"","metadata":bad_metadata})
            .as_object()
            .unwrap()
            .clone();
            base_fields(&mut m, Timestamps::Normalise, &mut Vec::new());
            assert_eq!(
                Value::Object(m),
                json!({"messageId":"m","snapshot":null,"delta":""})
            );
        }
    }

    #[test]
    fn run_error_shapes() {
        let fix = |v: Value| {
            let mut m = v.as_object().unwrap().clone();
            run_error(&mut m, &mut Vec::new());
            Value::Object(m)
        };
        assert_eq!(
            fix(json!({"error":{"code":"TIMEOUT","message":"slow"}})),
            json!({"message":"slow","code":"TIMEOUT"})
        );
        assert_eq!(
            fix(json!({"error":"bad","code":500})),
            json!({"message":"bad","code":"500"})
        );
        assert_eq!(
            fix(json!({"message":"x","code":"400","result":{}})),
            json!({"message":"x","code":"400"})
        );
        assert_eq!(fix(json!({})), json!({"message":"unknown error"}));
    }

    #[test]
    fn patches() {
        // `from` is no member of an `add`: RFC 6902 ignores it, so it is kept as it came.
        let mut v = json!({"op":"add","path":"a/b","value":1,"from":"x~y"});
        patch(&mut v, &mut Vec::new());
        assert_eq!(
            v,
            json!([{"op":"add","path":"/a/b","value":1,"from":"x~y"}])
        );
        let mut v =
            json!([{"op":"move","path":"/b","from":"a"},{"op":"replace","path":"","value":{}}]);
        patch(&mut v, &mut Vec::new());
        assert_eq!(
            v,
            json!([{"op":"move","path":"/b","from":"/a"},{"op":"replace","path":"","value":{}}])
        );
    }

    #[test]
    fn pointers_are_made_valid() {
        let mut v =
            json!([{"op":"add","path":"/a~b/c~","value":1},{"op":"remove","path":"/x~1y~0"}]);
        patch(&mut v, &mut Vec::new());
        assert_eq!(
            v,
            json!([{"op":"add","path":"/a~0b/c~0","value":1},{"op":"remove","path":"/x~1y~0"}])
        );
    }

    #[test]
    fn timestamps_beyond_the_safe_integer_range_are_dropped() {
        assert_eq!(timestamp_ms(&json!(9_007_199_254_740_993_i64)), None);
        assert_eq!(
            timestamp_ms(&json!(9_007_199_254_740_991_i64)),
            Some(json!(9_007_199_254_740_991_i64))
        );
    }

    #[test]
    fn binary_parts_are_upgraded() {
        let mut m = json!({"id":"u","role":"user","content":[
            {"type":"binary","mimeType":"image/png","data":"AAAA"},
            {"type":"binary","mimeType":"application/pdf","url":"https://x/y.pdf","filename":"y.pdf"}]})
        .as_object()
        .unwrap()
        .clone();
        message(&mut m, &AguiAliases::builtin(), &mut Vec::new());
        assert_eq!(
            m["content"],
            json!([{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}},
                   {"type":"document","source":{"type":"url","value":"https://x/y.pdf","mimeType":"application/pdf"}}])
        );
    }
}
