//! `[sessions]`: the bounds of the AAP session store (`crate::session`, whose module docs say
//! where bytes are counted).
//!
//! | Key | Default | Meaning |
//! | --- | --- | --- |
//! | `max_sessions` | 10000 | sessions the gateway holds; one more is a 429 `SESSION_LIMIT` |
//! | `max_sessions_per_principal` | 100 | sessions one principal (API key, token subject, or the anonymous caller of a route without authentication) holds; one more is a 429 `PRINCIPAL_SESSION_LIMIT` |
//! | `max_history_bytes` | 8 MiB | content bytes of one session's history; more is a 413 |
//! | `max_total_bytes` | 256 MiB | content bytes of all histories together; a session or a turn's input that would pass it is a 507 `SESSION_STORAGE_FULL` |
//! | `max_bytes_per_principal` | 64 MiB | content bytes of one principal's histories; a session or a turn's input that would pass it is a 429 `PRINCIPAL_SESSION_LIMIT` |
//! | `idle_timeout` | `"24h"` | an unused session is dropped after this |
//! | `page_size` | 100 | sessions per `GET /sessions` page |
//! | `store` | `"memory"` | where sessions are kept: `"memory"` (this process), `"file"` (durable, in `path`), `"redis"` (shared by replicas, at `url`) |
//! | `path` | | `file`: the directory of the database; one gateway per directory |
//! | `url` | | `redis`: `redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]`, or `rediss://` for TLS |
//! | `password_env` | | `redis`: the environment variable holding the password, when the URL has none |
//! | `key_prefix` | `"dialect-proxy:"` | `redis`: put before every key |
//! | `lock_ttl` | `"15s"` | `redis`: how long a turn's lock outlives a replica that died (renewed while the turn runs) |
//! | `cluster` | `false` | `redis`: `url` is one node of a Redis Cluster, which the client discovers the rest of (database 0 only) |
//! | `store_timeout` | `"5s"` | how long one store operation may take before the request is a 503 `STORE_UNAVAILABLE` |

use serde::Deserialize;
use toml::Spanned;

use super::limits::parse_duration;
use super::problems::Problems;
use crate::session::backend::{DEFAULT_KEY_PREFIX, DEFAULT_LOCK_TTL};
use crate::session::{Backend, RedisSettings, SessionLimits, StoreSettings};

/// `[sessions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSessions {
    max_sessions: Option<Spanned<u64>>,
    max_sessions_per_principal: Option<Spanned<u64>>,
    max_history_bytes: Option<Spanned<u64>>,
    max_total_bytes: Option<Spanned<u64>>,
    max_bytes_per_principal: Option<Spanned<u64>>,
    idle_timeout: Option<Spanned<String>>,
    page_size: Option<Spanned<u64>>,
    store: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    password_env: Option<Spanned<String>>,
    key_prefix: Option<Spanned<String>>,
    lock_ttl: Option<Spanned<String>>,
    cluster: Option<Spanned<bool>>,
    store_timeout: Option<Spanned<String>>,
}

/// A duration key of `[sessions]`, when given and valid.
fn duration(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
) -> Option<std::time::Duration> {
    let v = value.as_ref()?;
    match parse_duration(v.get_ref()) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => {
            p.at(v.span(), key, "must be more than zero".into());
            None
        }
        Err(e) => {
            p.at(v.span(), key, e);
            None
        }
    }
}

/// `store` and the keys of the store it names; a key of another store is a problem, so a
/// `url` given to a `file` store does not go unnoticed.
pub(super) fn store(p: &mut Problems, raw: &RawSessions) -> StoreSettings {
    let mut settings = StoreSettings::default();
    if let Some(t) = duration(p, "sessions.store_timeout", &raw.store_timeout) {
        settings.timeout = t;
    }
    let kind = raw
        .store
        .as_ref()
        .map_or("memory", |s| s.get_ref().as_str());
    let only = |p: &mut Problems, key: &str, value: Option<std::ops::Range<usize>>, of: &str| {
        if let Some(span) = value {
            p.at(span, key, format!("applies to store = \"{of}\" only"));
        }
    };
    let redis_keys = [
        ("sessions.url", raw.url.as_ref().map(Spanned::span)),
        (
            "sessions.password_env",
            raw.password_env.as_ref().map(Spanned::span),
        ),
        (
            "sessions.key_prefix",
            raw.key_prefix.as_ref().map(Spanned::span),
        ),
        (
            "sessions.lock_ttl",
            raw.lock_ttl.as_ref().map(Spanned::span),
        ),
        ("sessions.cluster", raw.cluster.as_ref().map(Spanned::span)),
    ];
    match kind {
        "memory" => {
            only(
                p,
                "sessions.path",
                raw.path.as_ref().map(Spanned::span),
                "file",
            );
            for (key, span) in redis_keys {
                only(p, key, span, "redis");
            }
        }
        "file" => {
            for (key, span) in redis_keys {
                only(p, key, span, "redis");
            }
            match raw.path.as_ref().filter(|v| !v.get_ref().trim().is_empty()) {
                Some(path) => {
                    settings.backend = Backend::File {
                        path: path.get_ref().into(),
                    }
                }
                None => p.plain(
                    "sessions.path",
                    "store = \"file\" needs path, the directory of its database".into(),
                ),
            }
        }
        "redis" => {
            only(
                p,
                "sessions.path",
                raw.path.as_ref().map(Spanned::span),
                "file",
            );
            let url = match &raw.url {
                Some(url) if redis_url(url.get_ref()) => url.get_ref().clone(),
                Some(url) => {
                    p.at(
                        url.span(),
                        "sessions.url",
                        "must be redis://HOST[:PORT][/DB] or rediss://HOST[:PORT][/DB]".into(),
                    );
                    String::new()
                }
                None => {
                    p.plain(
                        "sessions.url",
                        "store = \"redis\" needs url (redis://HOST:PORT/DB)".into(),
                    );
                    String::new()
                }
            };
            let key_prefix = match &raw.key_prefix {
                Some(k) if k.get_ref().contains(['{', '}']) => {
                    p.at(k.span(), "sessions.key_prefix", "must not hold { or }: they would change which Redis Cluster slot a key is in".into());
                    String::new()
                }
                Some(k) => k.get_ref().clone(),
                None => DEFAULT_KEY_PREFIX.into(),
            };
            let password_env = raw.password_env.as_ref().map(|v| v.get_ref().clone());
            if let Some(v) = raw.password_env.as_ref().filter(|v| v.get_ref().is_empty()) {
                p.at(
                    v.span(),
                    "sessions.password_env",
                    "must name an environment variable".into(),
                );
            }
            settings.backend = Backend::Redis(RedisSettings {
                url,
                password_env,
                key_prefix,
                lock_ttl: duration(p, "sessions.lock_ttl", &raw.lock_ttl)
                    .unwrap_or(DEFAULT_LOCK_TTL),
                cluster: raw.cluster.as_ref().is_some_and(|c| *c.get_ref()),
            });
        }
        other => {
            if let Some(v) = &raw.store {
                p.at(
                    v.span(),
                    "sessions.store",
                    format!("{other:?} is not a store; one of \"memory\", \"file\", \"redis\""),
                );
            }
        }
    }
    settings
}

/// Whether `url` is a Redis URL with a host.
fn redis_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("redis://")
        .or_else(|| url.strip_prefix("rediss://"));
    rest.is_some_and(|r| {
        let host = r.rsplit_once('@').map_or(r, |(_, h)| h);
        !host.is_empty() && !host.starts_with(['/', ':'])
    })
}

pub(super) fn sessions(p: &mut Problems, raw: &RawSessions) -> SessionLimits {
    let mut limits = SessionLimits::default();
    let counts = [
        (
            "sessions.max_sessions",
            &raw.max_sessions,
            &mut limits.max_sessions,
            1,
        ),
        (
            "sessions.max_sessions_per_principal",
            &raw.max_sessions_per_principal,
            &mut limits.max_sessions_per_principal,
            1,
        ),
        (
            "sessions.max_history_bytes",
            &raw.max_history_bytes,
            &mut limits.max_history_bytes,
            1024,
        ),
        (
            "sessions.max_total_bytes",
            &raw.max_total_bytes,
            &mut limits.max_total_bytes,
            1024,
        ),
        (
            "sessions.max_bytes_per_principal",
            &raw.max_bytes_per_principal,
            &mut limits.max_bytes_per_principal,
            1024,
        ),
        (
            "sessions.page_size",
            &raw.page_size,
            &mut limits.page_size,
            1,
        ),
    ];
    for (key, value, slot, min) in counts {
        if let Some(v) = value {
            match usize::try_from(*v.get_ref()) {
                Ok(n) if n >= min => *slot = n,
                _ => p.at(v.span(), key, format!("must be at least {min}")),
            }
        }
    }
    if let Some(v) = &raw.idle_timeout {
        match parse_duration(v.get_ref()) {
            Ok(d) => limits.idle_timeout = d,
            Err(e) => p.at(v.span(), "sessions.idle_timeout", e),
        }
    }
    limits
}
