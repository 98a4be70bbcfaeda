//! Logs: `tracing` events to stderr, filtered by `RUST_LOG` (default `info`), as text or JSON
//! ([`LogFormat`], `--log-format` / `DIALECT_PROXY_LOG_FORMAT`).
//!
//! Values that came from a request or an upstream (ids, paths, error excerpts) are logged as
//! fields, and no field can forge a line: in text, [`EscapedFields`] escapes every control
//! character (`\n`, `\r`, the other C0 controls, ESC, DEL, C1) and the Unicode line and
//! paragraph separators of every field value, the message included, so one event is one line
//! and no value reaches a terminal as an escape sequence. In JSON ([`super::json`]), serde
//! escapes strings and each event is one object on one line, its spans' fields merged in.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Level, Subscriber};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::filter::Targets;
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

/// Which log events are written: `RUST_LOG` (default `info`), read once by [`filter`].
// Made once at start-up and consumed at once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum LogFilter {
    /// Levels and targets only ([`targets`]).
    Targets(Targets),
    /// Anything else `RUST_LOG` may say (span and field directives).
    Env(EnvFilter),
}

/// `RUST_LOG` (default `info`; `info` too when it cannot be read) as a [`LogFilter`].
pub(super) fn filter() -> LogFilter {
    let spec = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    match spec
        .as_deref()
        .map_or(Some(Targets::new().with_default(Level::INFO)), targets)
    {
        Some(targets) => LogFilter::Targets(targets),
        None => LogFilter::Env(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        ),
    }
}

/// The layer that writes log events to stderr in `format`, `filter` applying to it alone:
/// the other layers of the subscriber (the trace export) still see what it leaves out.
pub(super) fn layer<S>(format: LogFormat, filter: LogFilter) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    filtered(writer(format), filter, false)
}

/// The same layer for a subscriber that has no other: `filter` then decides for the whole
/// subscriber. A filter of one layer among several keeps, for every span, which layers want
/// it, and looks that up each time the span is entered or left (each poll of an
/// instrumented future); about 2 % of a one-event request's instructions under callgrind.
pub(super) fn sole_layer<S>(format: LogFormat, filter: LogFilter) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    filtered(writer(format), filter, true)
}

/// `inner` behind `filter`: for it alone, or for the whole subscriber (`sole`).
fn filtered<S>(
    inner: Box<dyn Layer<S> + Send + Sync>,
    filter: LogFilter,
    sole: bool,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    match (filter, sole) {
        (LogFilter::Targets(targets), false) => inner.with_filter(targets).boxed(),
        (LogFilter::Env(env), false) => inner.with_filter(env).boxed(),
        (LogFilter::Targets(targets), true) => targets.and_then(inner).boxed(),
        (LogFilter::Env(env), true) => env.and_then(inner).boxed(),
    }
}

/// `spec` (`RUST_LOG`'s syntax) as a [`Targets`] filter when each of its directives is a bare
/// level, a bare target or `target=level`; `None` for anything else (span or field
/// directives, anything unusual), which [`EnvFilter`] reads.
///
/// Both filters decide the same for such directives (the most specific target wins, a bare
/// target means every level). `EnvFilter` also tracks every span entered and left, to match
/// span directives: a lock and a hash lookup on every poll of an instrumented future (about
/// three quarters of a one-event request's SipHash work under callgrind), for directives that
/// are never there.
fn targets(spec: &str) -> Option<Targets> {
    let mut targets = Targets::new();
    let mut any = false;
    for directive in spec.split(',').filter(|d| !d.is_empty()) {
        let (target, level) = match directive.split_once('=') {
            Some((target, level)) => (Some(target), level.parse::<LevelFilter>().ok()?),
            None => match directive.parse::<LevelFilter>() {
                Ok(level) => (None, level),
                Err(_) => (Some(directive), LevelFilter::TRACE),
            },
        };
        targets = match target {
            None => targets.with_default(level),
            Some(target)
                if !target.is_empty()
                    && target
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_:-.".contains(&b)) =>
            {
                targets.with_target(target, level)
            }
            Some(_) => return None,
        };
        any = true;
    }
    any.then_some(targets)
}

/// The layer that writes every event it gets to stderr in `format`.
fn writer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Text => layer
            .fmt_fields(EscapedFields)
            // Colours only for a person at a terminal, never in files or log collectors.
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        LogFormat::Json => layer
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_ansi(false)
            .boxed(),
    }
}

/// The text format's field formatter: tracing's default layout (`name=value` separated by
/// spaces, the message bare, strings quoted), written through [`Escaping`]. Used for events and
/// spans alike, so a span's fields (a request's thread id) are escaped too. Fields named
/// `otel.*` steer the trace export and are left out.
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        // A span's fields go into a string of the span's own that starts empty and would grow
        // by doubling, field by field (about ten reallocations for a request span); written
        // here first, they reach it in one piece.
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => {
                scratch.clear();
                let written = write_fields(Writer::new(&mut *scratch), fields);
                let copied = writer.write_str(&scratch);
                if scratch.capacity() > SCRATCH_KEPT {
                    *scratch = String::new();
                }
                written.and(copied)
            }
            // Already in use on this thread (the formatting re-entered): written in place.
            Err(_) => write_fields(writer, fields),
        })
    }
}

thread_local! {
    /// Where [`EscapedFields`] writes fields before they are copied to their destination.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The most [`SCRATCH`] keeps between uses; a larger one (an unusually long value) is freed.
const SCRATCH_KEPT: usize = 4096;

fn write_fields<R: RecordFields>(writer: Writer<'_>, fields: R) -> fmt::Result {
    let mut visitor = TextVisitor {
        out: Escaping(writer),
        empty: true,
        result: Ok(()),
    };
    fields.record(&mut visitor);
    visitor.result
}

/// Writes fields as tracing's `DefaultVisitor` does, without its styling: that visitor paints
/// every name through `nu_ansi_term` and formats every value through `write!`, even with
/// colours off, and the request span's fields and each request's closing line are formatted on
/// every request (about a tenth of a one-event request's instructions under callgrind). No ANSI
/// is written here: every escape byte is a value's, and is escaped.
struct TextVisitor<'w> {
    out: Escaping<Writer<'w>>,
    empty: bool,
    result: fmt::Result,
}

impl TextVisitor<'_> {
    /// Starts a field: false when it is not to be written (an `otel.*` field; a `log.*` one,
    /// the metadata of a record bridged from the `log` crate, which the line already shows, as
    /// the default visitor skips it; or an earlier write failed).
    fn start(&mut self, field: &Field) -> bool {
        let name = field.name();
        if self.result.is_err() || name.starts_with("otel.") || name.starts_with("log.") {
            return false;
        }
        if !std::mem::take(&mut self.empty) {
            self.result = self.out.0.write_str(" ");
        }
        self.result.is_ok()
    }

    /// `name=value` for a value with nothing to escape.
    fn plain(&mut self, field: &Field, value: &str) {
        if !self.start(field) {
            return;
        }
        self.result = self.name(field).and_then(|()| self.out.0.write_str(value));
    }

    /// `name=`, or nothing for the message.
    fn name(&mut self, field: &Field) -> fmt::Result {
        match field.name() {
            "message" => Ok(()),
            name => {
                // Names are the code's identifiers: nothing to escape.
                self.out
                    .0
                    .write_str(name.strip_prefix("r#").unwrap_or(name))?;
                self.out.0.write_str("=")
            }
        }
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.start(field) {
            return;
        }
        self.result = self.name(field).and_then(|()| {
            if field.name() == "message" {
                self.out.write_str(value)
            } else if value
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
            {
                // What `{:?}` writes for such a string, without the formatter; nothing in it
                // needs escaping.
                self.out.0.write_str("\"")?;
                self.out.0.write_str(value)?;
                self.out.0.write_str("\"")
            } else {
                write!(self.out, "{value:?}")
            }
        });
    }

    // Integers and booleans are written as `{:?}` writes them (the closing line of every
    // stream carries six counts): without the formatter's padding logic and the escaping
    // writer, neither of which a digit or `true` needs.
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.plain(field, itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.plain(field, itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.plain(field, if value { "true" } else { "false" });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if !self.start(field) {
            return;
        }
        // Rare (failures only): the default visitor's layout for an error and its sources.
        let empty = true;
        let mut default = DefaultVisitor::new(Writer::new(&mut self.out), empty);
        default.record_error(field, value);
        self.result = default.finish();
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.start(field) {
            return;
        }
        self.result = self
            .name(field)
            .and_then(|()| write!(self.out, "{value:?}"));
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

    /// The lines written for one event per target and level below, through `filter` as the
    /// gateway applies it: to the writing layer alone, or to the whole subscriber (`sole`).
    fn lines_through(filter: LogFilter, sole: bool) -> Vec<String> {
        use tracing_subscriber::layer::SubscriberExt as _;

        let captured = Captured::default();
        let sink = captured.clone();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(EscapedFields)
            .with_ansi(false)
            .without_time()
            .with_writer(move || sink.clone())
            .boxed();
        let subscriber = tracing_subscriber::registry().with(filtered(layer, filter, sole));
        macro_rules! each_level {
            ($($target:literal),*) => {$(
                tracing::trace!(target: $target, "{} trace", $target);
                tracing::debug!(target: $target, "{} debug", $target);
                tracing::info!(target: $target, "{} info", $target);
                tracing::warn!(target: $target, "{} warn", $target);
                tracing::error!(target: $target, "{} error", $target);
            )*};
        }
        tracing::subscriber::with_default(subscriber, || {
            each_level!(
                "dialect_proxy",
                "dialect_proxy::server::h1",
                "dialect_proxy_extra",
                "hyper",
                "h2::codec"
            );
        });
        captured.text().lines().map(str::to_owned).collect()
    }

    /// Plain directives are read by `Targets`, and it keeps exactly the events `EnvFilter`
    /// would keep for them, for one layer or for the whole subscriber.
    #[test]
    fn plain_directives_filter_as_env_filter_does() {
        for spec in [
            "info",
            "warn",
            "off",
            "TRACE",
            "warn,dialect_proxy=debug",
            "dialect_proxy",
            "dialect_proxy::server=trace,dialect_proxy=warn,error",
            "info,hyper=off,h2=debug",
            ",info,,",
        ] {
            let theirs = lines_through(LogFilter::Env(EnvFilter::new(spec)), false);
            assert!(
                !theirs.is_empty() || spec == "off",
                "{spec}: nothing logged"
            );
            for sole in [false, true] {
                let Some(targets) = targets(spec) else {
                    panic!("{spec:?} was not read as targets");
                };
                assert_eq!(
                    lines_through(LogFilter::Targets(targets), sole),
                    theirs,
                    "{spec}"
                );
                let env = LogFilter::Env(EnvFilter::new(spec));
                assert_eq!(lines_through(env, sole), theirs, "{spec}");
            }
        }
    }

    /// What only `EnvFilter` reads (span and field directives) or what is not a directive at
    /// all goes to it.
    #[test]
    fn other_directives_are_left_to_env_filter() {
        for spec in [
            "",
            ",",
            "dialect_proxy[request]=debug",
            "[request{thread_id=t}]=trace",
            "dialect_proxy[{thread_id}]=debug",
            "dialect_proxy=loud",
            "a=b=c",
            "=info",
            " info",
        ] {
            assert!(targets(spec).is_none(), "{spec:?}");
        }
    }

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

    /// One event and its span as `fields` format them, without the time.
    fn formatted<N>(fields: N) -> String
    where
        N: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(fields)
            .with_ansi(false)
            .without_time()
            .with_writer(move || sink.clone())
            .finish();
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", thread_id = "t-1", route = %"/ok", n = 3_u64);
            let _entered = span.enter();
            let error = Outer(std::io::Error::other("inner"));
            tracing::info!(
                text = "plain",
                quoted = "a \"b\" c\\d",
                unicode = "é",
                shown = %"display",
                debugged = ?vec![1, 2],
                signed = -4_i64,
                unsigned = 7_u64,
                zero = 0_u64,
                big = u64::MAX,
                low = i64::MIN,
                flag = true,
                off = false,
                ratio = 0.5_f64,
                r#type = "kind",
                log.target = "bridged",
                error = &error as &(dyn std::error::Error + 'static),
                "the message {}",
                "formatted"
            );
            tracing::warn!("only a message");
        });
        captured.text()
    }

    /// The text formatter writes what tracing's default field formatter writes, for every kind
    /// of value, so a reader of the logs sees the usual layout.
    #[test]
    fn fields_are_laid_out_as_tracing_lays_them_out() {
        let ours = formatted(EscapedFields);
        let theirs = formatted(tracing_subscriber::fmt::format::DefaultFields::new());
        assert_eq!(ours, theirs);
        assert!(ours.contains(r#"quoted="a \"b\" c\\d""#), "{ours}");
        assert!(ours.contains("error=outer error.sources=[inner]"), "{ours}");
        assert!(!ours.contains("bridged"), "{ours}");
    }

    /// Fields recorded later are added to the span's, and a value longer than the scratch
    /// string keeps is written whole, as is what comes after it.
    #[test]
    fn recorded_and_long_fields_are_written() {
        let long = "x".repeat(SCRATCH_KEPT * 2);
        let log = text_log(|| {
            let span = tracing::info_span!(
                "request",
                route = "/r",
                thread_id = tracing::field::Empty,
                long = %long
            );
            span.record("thread_id", "t-9");
            let _entered = span.enter();
            tracing::info!("done");
            let next = tracing::info_span!("next", n = 1_u64);
            next.in_scope(|| tracing::info!("again"));
        });
        let span = format!("request{{route=\"/r\" long={long} thread_id=\"t-9\"}}");
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{} bytes logged", log.len());
        assert!(lines[0].contains(&format!("{span}: dialect_proxy")));
        assert!(lines[1].contains(&format!("{span}:next{{n=1}}: dialect_proxy")));
        SCRATCH.with(|scratch| assert!(scratch.borrow().capacity() <= SCRATCH_KEPT));
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
