//! Logs: `tracing` events to stderr, filtered by `RUST_LOG` (default `info`), as text or JSON
//! ([`LogFormat`], `--log-format` / `DIALECT_PROXY_LOG_FORMAT`).
//!
//! Values that came from a request or an upstream (ids, paths, error excerpts) are logged as
//! fields, and no field can forge a line: in text, [`EscapedFields`] escapes every control
//! character (`\n`, `\r`, the other C0 controls, ESC, DEL, C1) and the Unicode line and
//! paragraph separators of every field value, the message included, so one event is one line
//! and no value reaches a terminal as an escape sequence. In JSON ([`super::json`]), serde
//! escapes strings and each event is one object on one line, its spans' fields merged in.

use std::fmt;
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::Subscriber;
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, JsonFields, Writer};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use super::json::JsonLines;

/// How log events are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line per event: time, level, spans, message, `name=value` fields (escaped).
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The layer that writes log events to stderr in `format`, filtered by `RUST_LOG` (default
/// `info`).
pub(super) fn layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Text => layer
            .fmt_fields(EscapedFields)
            // Colours only for a person at a terminal, never in files or log collectors.
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => layer
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_ansi(false)
            .with_filter(filter)
            .boxed(),
    }
}

/// The text format's field formatter: tracing's default layout, written through [`Escaping`].
/// Used for events and spans alike, so a span's fields (a request's thread id) are escaped too.
/// Fields named `otel.*` steer the trace export and are left out.
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut escaping = Escaping(writer);
        // No ANSI inside fields: every escape byte written here is a value's, and is escaped.
        let mut visitor = NoOtel(DefaultVisitor::new(Writer::new(&mut escaping), true));
        fields.record(&mut visitor);
        visitor.0.finish()
    }
}

/// A visitor that passes every field on but the `otel.*` ones.
struct NoOtel<V>(V);

impl<V: Visit> NoOtel<V> {
    fn pass(field: &Field) -> bool {
        !field.name().starts_with("otel.")
    }
}

impl<V: Visit> Visit for NoOtel<V> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if Self::pass(field) {
            self.0.record_f64(field, value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if Self::pass(field) {
            self.0.record_i64(field, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if Self::pass(field) {
            self.0.record_u64(field, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if Self::pass(field) {
            self.0.record_bool(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if Self::pass(field) {
            self.0.record_str(field, value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if Self::pass(field) {
            self.0.record_error(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if Self::pass(field) {
            self.0.record_debug(field, value);
        }
    }
}

/// A writer that escapes what could end a line or drive a terminal.
struct Escaping<W>(W);

impl<W: fmt::Write> fmt::Write for Escaping<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Nearly every value (ids, paths, names) is printable ASCII: one pass over its bytes,
        // then written whole.
        if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return self.0.write_str(s);
        }
        let mut plain = 0;
        for (i, c) in s.char_indices() {
            if !needs_escape(c) {
                continue;
            }
            self.0.write_str(&s[plain..i])?;
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                other => write!(self.0, "\\u{{{:x}}}", u32::from(other))?,
            }
            plain = i + c.len_utf8();
        }
        self.0.write_str(&s[plain..])
    }
}

/// C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators.
fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// `s` as the text format writes a field value.
#[cfg(test)]
fn escaped(s: &str) -> String {
    let mut out = Escaping(String::new());
    let _ = fmt::Write::write_str(&mut out, s);
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::telemetry::captured::Captured;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escaped("plain text, ünïcødé"), "plain text, ünïcødé");
        assert_eq!(escaped("ascii ~ only"), "ascii ~ only");
        assert_eq!(escaped("ascii then\u{7f}"), "ascii then\\u{7f}");
        assert_eq!(
            escaped("a\nb\rc\td\u{1b}[31me\u{7f}f\u{9b}g\u{2028}h\0"),
            "a\\nb\\rc\\td\\u{1b}[31me\\u{7f}f\\u{9b}g\\u{2028}h\\u{0}"
        );
    }

    fn text_log(emit: impl FnOnce()) -> String {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(EscapedFields)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        captured.text()
    }

    #[test]
    fn no_field_value_starts_a_line() {
        let forged = "x\n2026-01-01T00:00:00Z  INFO forged line\r\u{1b}[2K";
        let log = text_log(|| {
            let span = tracing::info_span!("request", thread_id = %forged, otel.kind = "server");
            let _entered = span.enter();
            tracing::info!(role = %forged, debugged = ?forged, "first {}", forged);
            tracing::warn!(forged, "second");
        });
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{log}");
        for line in &lines {
            assert!(!line.contains('\u{1b}') && !line.contains('\r'), "{line:?}");
            assert!(
                line.contains("x\\n2026-01-01T00:00:00Z  INFO forged line"),
                "{line}"
            );
        }
        assert!(!lines[0].contains("otel.kind"), "{}", lines[0]);
        assert!(
            lines[0].contains("request{thread_id=x\\n2026"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("first x\\n2026"), "{}", lines[0]);
    }
}
