//! The file as written: [`RawConfig`], read top-level key by top-level key and route by route,
//! so that one part serde cannot read (a wrong type, an unknown or missing key) is reported
//! without hiding the others. Every table below keeps serde's `deny_unknown_fields`; the top
//! level checks its keys the same way.

use std::ops::Range;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use toml::Spanned;

use super::document::PartError;
use super::document::{self, Entry};
use super::limits::RawLimits;
use super::part;
use super::problems::{syntax, Problems};
use super::routes::RawRoute;
use super::sessions::RawSessions;

/// The keys of the top level.
const KEYS: &[&str] = &[
    "listen",
    "admin_listen",
    "mappings",
    "drain_timeout",
    "stall_timeout",
    "limits",
    "routes",
    "sessions",
];

#[derive(Debug, Default)]
pub(super) struct RawConfig {
    pub listen: Option<Spanned<String>>,
    pub admin_listen: Option<Spanned<String>>,
    pub mappings: Option<PathBuf>,
    pub drain_timeout: Option<Spanned<String>>,
    pub stall_timeout: Option<Spanned<String>>,
    pub limits: RawLimits,
    /// The routes that could be read, each with its index among those written.
    pub routes: Vec<(usize, Spanned<RawRoute>)>,
    /// The file writes `routes`: some routes, read or not, or a value that is not routes.
    pub routes_written: bool,
    pub sessions: RawSessions,
}

impl RawConfig {
    /// Reads `text`, reporting what cannot be read to `p`; a syntax error ends the reading and is
    /// returned as the whole report.
    pub fn read(origin: &str, text: &str, p: &mut Problems) -> Result<RawConfig, String> {
        let entries = document::parse(text).map_err(|e| syntax(origin, text, &e))?;
        let mut raw = RawConfig::default();
        for entry in &entries {
            let at = entry.span(&(0..0));
            let key = entry.key.as_str();
            match key {
                "listen" => raw.listen = part(p, key, entry, &at),
                "admin_listen" => raw.admin_listen = part(p, key, entry, &at),
                "mappings" => raw.mappings = part(p, key, entry, &at),
                "drain_timeout" => raw.drain_timeout = part(p, key, entry, &at),
                "stall_timeout" => raw.stall_timeout = part(p, key, entry, &at),
                "limits" => raw.limits = part(p, key, entry, &at).unwrap_or_default(),
                "sessions" => raw.sessions = part(p, key, entry, &at).unwrap_or_default(),
                "routes" => match part::items(&entry.node, &at) {
                    Ok(items) => {
                        raw.routes_written = !items.is_empty();
                        for (i, (at, node)) in items.into_iter().enumerate() {
                            match part::read(node, at) {
                                Ok(route) => raw.routes.push((i, route)),
                                Err(e) => p.unreadable(&format!("routes[{i}]"), &e),
                            }
                        }
                    }
                    Err(e) => {
                        raw.routes_written = true;
                        p.unreadable(key, &e);
                    }
                },
                _ => p.unreadable("", &PartError::unknown_key(entry, KEYS)),
            }
        }
        Ok(raw)
    }
}

/// Reads one top-level value.
fn part<T: DeserializeOwned>(
    p: &mut Problems,
    key: &str,
    entry: &Entry,
    at: &Range<usize>,
) -> Option<T> {
    part::read(&entry.node, at.clone())
        .map_err(|e| p.unreadable(key, &e))
        .ok()
}
