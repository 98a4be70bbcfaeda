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

use serde::Deserialize;
use toml::Spanned;

use super::limits::parse_duration;
use super::problems::Problems;
use crate::session::SessionLimits;

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
