//! The file as written: [`RawConfig`], read top-level key by top-level key and route by route,
//! so that one part serde cannot read (a wrong type, an unknown or missing key) is reported
//! without hiding the others. Every table below keeps serde's `deny_unknown_fields`; the top
//! level checks its keys the same way.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml_edit::{ImDocument, Item, Key};

use super::limits::RawLimits;
use super::part::{self, PartError};
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
    "tls_cert",
    "tls_key",
    "limits",
    "routes",
    "sessions",
    "trusted_proxies",
];

#[derive(Debug, Default)]
pub(super) struct RawConfig {
    pub listen: Option<Spanned<String>>,
    pub admin_listen: Option<Spanned<String>>,
    pub mappings: Option<PathBuf>,
    pub drain_timeout: Option<Spanned<String>>,
    pub stall_timeout: Option<Spanned<String>>,
    pub tls_cert: Option<Spanned<String>>,
    pub tls_key: Option<Spanned<String>>,
    pub limits: RawLimits,
    /// The routes that could be read, each with its index among those written.
    pub routes: Vec<(usize, Spanned<RawRoute>)>,
    /// The file writes `routes`: some routes, read or not, or a value that is not routes.
    pub routes_written: bool,
    pub sessions: RawSessions,
    pub trusted_proxies: Option<Vec<Spanned<String>>>,
}

impl RawConfig {
    /// Reads `text`, reporting what cannot be read to `p`; a syntax error ends the reading and is
    /// returned as the whole report.
    pub fn read(origin: &str, text: &str, p: &mut Problems) -> Result<RawConfig, String> {
        let doc = ImDocument::parse(text).map_err(|e| syntax(origin, text, &e))?;
        let mut raw = RawConfig::default();
        for (key, item) in doc.iter().filter_map(|(name, _)| doc.get_key_value(name)) {
            let name = key.get();
            match name {
                "listen" => raw.listen = entry(p, key, item),
                "admin_listen" => raw.admin_listen = entry(p, key, item),
                "mappings" => raw.mappings = entry(p, key, item),
                "drain_timeout" => raw.drain_timeout = entry(p, key, item),
                "stall_timeout" => raw.stall_timeout = entry(p, key, item),
                "tls_cert" => raw.tls_cert = entry(p, key, item),
                "tls_key" => raw.tls_key = entry(p, key, item),
                "limits" => raw.limits = entry(p, key, item).unwrap_or_default(),
                "sessions" => raw.sessions = entry(p, key, item).unwrap_or_default(),
                "trusted_proxies" => raw.trusted_proxies = entry(p, key, item),
                "routes" => match part::elements(key, item) {
                    Ok(elements) => {
                        raw.routes_written = !elements.is_empty();
                        for (i, element) in elements.into_iter().enumerate() {
                            match part::element(element) {
                                Ok(route) => raw.routes.push((i, route)),
                                Err(e) => p.unreadable(&format!("routes[{i}]"), &e),
                            }
                        }
                    }
                    Err(e) => {
                        raw.routes_written = true;
                        p.unreadable(name, &e);
                    }
                },
                _ => p.unreadable("", &PartError::unknown_key(key, KEYS)),
            }
        }
        Ok(raw)
    }
}

/// Reads one top-level value.
fn entry<T: DeserializeOwned>(p: &mut Problems, key: &Key, item: &Item) -> Option<T> {
    part::entry(key, item)
        .map_err(|e| p.unreadable(key.get(), &e))
        .ok()
}
