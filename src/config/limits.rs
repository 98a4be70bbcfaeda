//! Timeouts and sizes: the global ones (`[limits]`, then the flags) and each route's
//! (`[routes.limits]`, over the global ones), and the duration syntax they share. The
//! admission keys of the same tables are resolved by `super::admission`.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::problems::{Keys, Problems};

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_HEADERS_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
pub const DEFAULT_MAX_EVENT_BYTES: usize = crate::sse::DEFAULT_MAX_EVENT_BYTES;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 << 20;

/// Timeouts and sizes of one route (`streaming.md` §6, §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub connect_timeout: Duration,
    pub headers_timeout: Duration,
    pub idle_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub max_event_bytes: usize,
    pub max_request_bytes: usize,
    /// The route's own cap on requests answered at once (`[routes.limits] max_streams`),
    /// below the global one; `None`: only the global cap.
    pub max_streams: Option<usize>,
    /// How long one stream may last (`max_stream_duration`); `None`: unbounded (the default).
    pub max_stream_duration: Option<Duration>,
    /// Upstream bytes one stream may carry (`max_stream_bytes`); `None`: unbounded (the
    /// default).
    pub max_stream_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            headers_timeout: DEFAULT_HEADERS_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_streams: None,
            max_stream_duration: None,
            max_stream_bytes: None,
        }
    }
}

/// Limits as written (file or flags): durations like `500ms`, `15s`, `5m`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub connect_timeout: Option<Spanned<String>>,
    pub headers_timeout: Option<Spanned<String>>,
    pub idle_timeout: Option<Spanned<String>>,
    pub heartbeat_interval: Option<Spanned<String>>,
    pub max_event_bytes: Option<Spanned<u64>>,
    pub max_request_bytes: Option<Spanned<u64>>,
    /// Global in `[limits]`, a route's own cap in `[routes.limits]` (`super::admission`).
    pub max_streams: Option<Spanned<u64>>,
    /// A duration, or `"off"` (a route's way out of a global bound).
    pub max_stream_duration: Option<Spanned<String>>,
    /// Bytes; 0 turns the bound off.
    pub max_stream_bytes: Option<Spanned<u64>>,
    /// Server-wide: `[limits]` and the flags only (`super::admission`).
    pub max_buffered_request_bytes: Option<Spanned<u64>>,
    pub request_header_timeout: Option<Spanned<String>>,
    pub max_connections: Option<Spanned<u64>>,
    pub max_request_head_bytes: Option<Spanned<u64>>,
    /// 0 turns the bound off.
    pub max_requests_per_connection: Option<Spanned<u64>>,
}

/// Parses `500ms`, `2s`, `5m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (expected e.g. 500ms, 15s, 5m)"))?;
    let secs = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || !(0.001..=365.0 * 86400.0).contains(&secs) {
        return Err(format!("duration {text:?} must be between 1ms and a year"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `raw` over `base`.
pub(super) fn limits(p: &mut Problems, keys: &Keys, raw: &RawLimits, base: Limits) -> Limits {
    let mut out = base;
    let durations = [
        (
            "connect_timeout",
            &raw.connect_timeout,
            &mut out.connect_timeout,
        ),
        (
            "headers_timeout",
            &raw.headers_timeout,
            &mut out.headers_timeout,
        ),
        ("idle_timeout", &raw.idle_timeout, &mut out.idle_timeout),
        (
            "heartbeat_interval",
            &raw.heartbeat_interval,
            &mut out.heartbeat_interval,
        ),
    ];
    for (name, value, slot) in durations {
        if let Some(v) = value {
            match parse_duration(v.get_ref()) {
                Ok(d) => *slot = d,
                Err(e) => p.at(v.span(), &keys.key(name), e),
            }
        }
    }
    if let Some(v) = &raw.max_stream_duration {
        match v.get_ref().trim() {
            "off" => out.max_stream_duration = None,
            text => match parse_duration(text) {
                Ok(d) => out.max_stream_duration = Some(d),
                Err(e) => p.at(
                    v.span(),
                    &keys.key("max_stream_duration"),
                    format!("{e}, or \"off\""),
                ),
            },
        }
    }
    if let Some(v) = &raw.max_stream_bytes {
        out.max_stream_bytes = match *v.get_ref() {
            0 => None,
            n => Some(n),
        };
    }
    let sizes = [
        (
            "max_event_bytes",
            &raw.max_event_bytes,
            &mut out.max_event_bytes,
        ),
        (
            "max_request_bytes",
            &raw.max_request_bytes,
            &mut out.max_request_bytes,
        ),
    ];
    for (name, value, slot) in sizes {
        if let Some(v) = value {
            match usize::try_from(*v.get_ref()) {
                Ok(n) if n >= 64 => *slot = n,
                _ => p.at(
                    v.span(),
                    &keys.key(name),
                    "must be at least 64 bytes".into(),
                ),
            }
        }
    }
    out
}
