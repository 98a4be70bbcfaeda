//! `[routes.upstream_auth]`: the gateway's own credential toward a route's upstream, sent as
//! `Authorization: Bearer <token>` on every upstream request of the route (AAP agents' too).
//!
//! Keys, exactly one of: `bearer_env = "VAR"` (the token, read once at start-up; the variable
//! must be set) or `bearer_file = "path"` (read at start-up, and again whenever the file
//! changes, so rotated service-account tokens work). Next to it, the route key
//! `forward_authorization` (default false) says whether the client's own `Authorization`
//! travels upstream on a route with `[routes.auth]`; without `[routes.auth]` it always does,
//! unless `upstream_auth` replaces it.

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::auth::Secret;
use super::problems::{Keys, Problems};

/// Where the outbound Bearer token comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamBearer {
    /// From `bearer_env`, read at start-up.
    Token(Secret),
    /// From `bearer_file`, re-read when it changes.
    File(PathBuf),
}

/// `[routes.upstream_auth]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstreamAuth {
    bearer_env: Option<Spanned<String>>,
    bearer_file: Option<Spanned<String>>,
}

/// Checks and resolves the `[routes.upstream_auth]` of the route written at `at`.
pub(super) fn upstream_auth(
    p: &mut Problems,
    keys: &Keys,
    at: Range<usize>,
    raw: &RawUpstreamAuth,
) -> Option<UpstreamBearer> {
    match (&raw.bearer_env, &raw.bearer_file) {
        (Some(_), Some(file)) => {
            p.at(
                file.span(),
                &keys.key("bearer_file"),
                "give bearer_env or bearer_file, not both".into(),
            );
            None
        }
        (None, None) => {
            p.at(at, &keys.whole(), "needs bearer_env or bearer_file".into());
            None
        }
        (Some(var), None) => match std::env::var(var.get_ref()) {
            Ok(token) if !token.trim().is_empty() => {
                let token = token.trim();
                if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
                    p.at(
                        var.span(),
                        &keys.key("bearer_env"),
                        format!("the environment variable {} does not hold a token that can be sent in a header", var.get_ref()),
                    );
                    return None;
                }
                Some(UpstreamBearer::Token(Secret::new(token)))
            }
            _ => {
                p.at(
                    var.span(),
                    &keys.key("bearer_env"),
                    format!(
                        "the environment variable {} is not set or empty",
                        var.get_ref()
                    ),
                );
                None
            }
        },
        (None, Some(file)) => {
            let path = PathBuf::from(file.get_ref());
            match std::fs::read_to_string(&path) {
                Ok(token) if !token.trim().is_empty() => Some(UpstreamBearer::File(path)),
                Ok(_) => {
                    p.at(
                        file.span(),
                        &keys.key("bearer_file"),
                        format!("{} is empty", path.display()),
                    );
                    None
                }
                Err(e) => {
                    p.at(
                        file.span(),
                        &keys.key("bearer_file"),
                        format!("{}: {e}", path.display()),
                    );
                    None
                }
            }
        }
    }
}
