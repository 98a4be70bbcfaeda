//! The JSON log format ([`JsonLines`]): one object per line, with `timestamp`, `level` and
//! `message` first, then the fields of the event's spans, root to leaf, and the event's own,
//! all at the top level: a request's `request_id`, `route`, `principal`, `thread_id` and
//! `run_id` are on every line it logs, whichever span or event set them. A field set twice
//! keeps the innermost value (the event's over its spans', a child span's over its parent's);
//! `timestamp`, `level` and `message` are always the event's own. Fields named `otel.*` steer
//! the trace export and are left out.
//!
//! Span fields are kept, as the fmt layer stores them, by [`JsonFields`]: each span's are a
//! JSON object already, merged here. serde writes the line, so every value is escaped.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines;

/// The keys every line starts with; a field of the same name does not replace them.
const OWN_KEYS: [&str; 3] = ["timestamp", "level", "message"];

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(stored) = extensions.get::<FormattedFields<JsonFields>>() else {
                    continue;
                };
                if let Ok(Value::Object(span_fields)) = serde_json::from_str(stored) {
                    fields.extend(span_fields);
                }
            }
        }
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        fields.extend(visitor.0);

        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut line = Map::with_capacity(fields.len() + 3);
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert(
            "level".into(),
            Value::String(event.metadata().level().as_str().into()),
        );
        let message = fields
            .remove("message")
            .unwrap_or(Value::String(String::new()));
        line.insert("message".into(), message);
        for (key, value) in fields {
            if !OWN_KEYS.contains(&key.as_str()) && !key.starts_with("otel.") {
                line.insert(key, value);
            }
        }
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writer.write_str(&text)?;
        writer.write_char('\n')
    }
}

/// An event's fields as JSON values: numbers and booleans as such, the rest as text.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        self.0.insert(field.name().to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let number = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.put(field, number);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::telemetry::captured::Captured;

    fn json_log(emit: impl FnOnce()) -> Vec<Map<String, Value>> {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let text = captured.text();
        text.lines()
            .map(|line| match serde_json::from_str(line) {
                Ok(Value::Object(map)) => map,
                other => panic!("not one JSON object: {line:?} ({other:?})"),
            })
            .collect()
    }

    #[test]
    fn span_fields_are_flattened_innermost_first() {
        let lines = json_log(|| {
            let request = tracing::info_span!(
                "request",
                request_id = "r-1",
                route = "/agent",
                run_id = tracing::field::Empty,
                otel.kind = "server",
            );
            let _request = request.enter();
            request.record("run_id", "run-7");
            let turn = tracing::info_span!("turn", route = "/inner", attempt = 2u64);
            let _turn = turn.enter();
            tracing::info!(
                outcome = "completed",
                attempt = 3u64,
                ok = true,
                "stream ended"
            );
            tracing::warn!(level = "forged", message2 = 1.5, "second {}", "line");
        });
        assert_eq!(lines.len(), 2, "{lines:?}");
        let first = &lines[0];
        let keys: Vec<&str> = first.keys().map(String::as_str).take(3).collect();
        assert_eq!(keys, ["timestamp", "level", "message"]);
        assert!(
            first["timestamp"].as_str().unwrap().ends_with('Z'),
            "{first:?}"
        );
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["message"], "stream ended");
        assert_eq!(first["request_id"], "r-1");
        assert_eq!(first["run_id"], "run-7", "a field recorded after creation");
        assert_eq!(first["route"], "/inner", "the inner span wins");
        assert_eq!(first["attempt"], 3, "the event wins, as a number");
        assert_eq!(first["ok"], true);
        assert_eq!(first["outcome"], "completed");
        assert!(!first.contains_key("otel.kind"), "{first:?}");
        let second = &lines[1];
        assert_eq!(second["level"], "WARN", "a field cannot replace the level");
        assert_eq!(second["message"], "second line");
        assert_eq!(second["message2"], 1.5);
        assert_eq!(second["request_id"], "r-1");
    }

    #[test]
    fn values_cannot_break_the_line() {
        let forged = "x\"}\n{\"level\":\"ERROR\",\"message\":\"forged\u{2028}\u{1b}[2K";
        let lines = json_log(|| {
            let span = tracing::info_span!("request", thread_id = %forged);
            let _entered = span.enter();
            tracing::info!(role = %forged, debugged = ?forged, "first {}", forged);
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["thread_id"], forged);
        assert_eq!(line["role"], forged);
        assert_eq!(line["message"], format!("first {forged}"));
        assert_eq!(line["debugged"], format!("{forged:?}"));
    }
}
