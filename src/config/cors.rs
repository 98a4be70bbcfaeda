//! `[routes.cors]`: which browser origins may call a route from another origin, checked at
//! start-up so the server's CORS layer cannot be handed rules it would refuse.
//!
//! Keys: `allow_origins` (exact origins such as `"https://app.example"`, or `"*"` alone, which
//! `allow_credentials = true` forbids), `allow_headers` (request headers a preflight may ask
//! for; default `authorization` and `content-type`), `expose_headers` (response headers the
//! page may read beyond the CORS-safelisted ones; none by default — add e.g. `retry-after`),
//! `allow_credentials` (default false), `max_age` (how long a browser may cache a preflight: a
//! duration like `10m`, or a number of seconds; no header by default). The allowed methods are
//! not configured: they are what the route serves.

use std::ops::Range;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};
use serde::Deserialize;
use toml::Spanned;

use super::limits::parse_duration;
use super::problems::{Keys, Problems};

/// Request headers a preflight may ask for when `allow_headers` is not written: what every
/// client of the gateway sends (a JSON body, a Bearer credential).
pub const DEFAULT_ALLOW_HEADERS: &[&str] = &["authorization", "content-type"];

/// The CORS rules of one route (`[routes.cors]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    pub allow_origins: AllowedOrigins,
    pub allow_headers: Vec<HeaderName>,
    pub expose_headers: Vec<HeaderName>,
    pub allow_credentials: bool,
    pub max_age: Option<Duration>,
}

/// The origins a route answers CORS requests from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// `"*"`: any origin, without credentials.
    Any,
    /// Exact `scheme://host[:port]` origins, compared byte for byte with the `Origin` header.
    List(Vec<HeaderValue>),
}

/// `[routes.cors]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCors {
    allow_origins: Option<Spanned<Vec<Spanned<String>>>>,
    allow_headers: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    expose_headers: Vec<Spanned<String>>,
    #[serde(default)]
    allow_credentials: Option<Spanned<bool>>,
    max_age: Option<Spanned<toml::Value>>,
}

/// Checks and resolves the `[routes.cors]` of the route written at `at`; `None` when it has a
/// problem.
pub(super) fn cors(p: &mut Problems, keys: &Keys, at: Range<usize>, raw: &RawCors) -> Option<Cors> {
    let before = p.count();
    let allow_credentials = raw.allow_credentials.as_ref().is_some_and(|c| *c.get_ref());
    let key = keys.key("allow_origins");
    let (origins, at) = match &raw.allow_origins {
        Some(list) => (list.get_ref().as_slice(), list.span()),
        None => (&[][..], at),
    };
    let allow_origins = if origins.iter().any(|o| o.get_ref() == "*") {
        if origins.len() > 1 {
            p.at(
                at.clone(),
                &key,
                "\"*\" stands alone: it already allows every origin".into(),
            );
        }
        if allow_credentials {
            p.at(
                at,
                &key,
                "\"*\" cannot be combined with allow_credentials = true (browsers refuse it); list the origins".into(),
            );
        }
        AllowedOrigins::Any
    } else {
        if origins.is_empty() {
            p.at(
                at,
                &key,
                "list at least one origin (e.g. \"https://app.example\"), or \"*\"".into(),
            );
        }
        AllowedOrigins::List(
            origins
                .iter()
                .filter_map(|o| match origin(o.get_ref()) {
                    Ok(value) => Some(value),
                    Err(problem) => {
                        p.at(o.span(), &key, problem);
                        None
                    }
                })
                .collect(),
        )
    };
    let allow_headers = match &raw.allow_headers {
        Some(names) => header_names(p, &keys.key("allow_headers"), names),
        None => DEFAULT_ALLOW_HEADERS
            .iter()
            .map(|n| HeaderName::from_static(n))
            .collect(),
    };
    let expose_headers = header_names(p, &keys.key("expose_headers"), &raw.expose_headers);
    let max_age = raw.max_age.as_ref().and_then(|v| {
        let found = match v.get_ref() {
            toml::Value::Integer(secs) => u64::try_from(*secs)
                .map(Duration::from_secs)
                .map_err(|_| "must not be negative".to_owned()),
            toml::Value::String(text) => parse_duration(text),
            _ => Err("a duration like \"10m\", or a number of seconds".to_owned()),
        };
        found
            .map_err(|e| p.at(v.span(), &keys.key("max_age"), e))
            .ok()
    });
    (p.count() == before).then_some(Cors {
        allow_origins,
        allow_headers,
        expose_headers,
        allow_credentials,
        max_age,
    })
}

/// An origin as browsers send it: `scheme://host[:port]`, lowercase, nothing after.
fn origin(text: &str) -> Result<HeaderValue, String> {
    let malformed = || {
        format!(
            "{text:?} is not an origin (scheme://host[:port] in lowercase, no path, e.g. \"https://app.example\")"
        )
    };
    let uri: Uri = text.parse().map_err(|_| malformed())?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(malformed());
    };
    let exact = format!("{scheme}://{authority}");
    if exact != text || text.bytes().any(|b| b.is_ascii_uppercase()) || text.contains('@') {
        return Err(malformed());
    }
    HeaderValue::from_str(text).map_err(|_| malformed())
}

fn header_names(p: &mut Problems, key: &str, names: &[Spanned<String>]) -> Vec<HeaderName> {
    names
        .iter()
        .filter_map(|name| {
            let text = name.get_ref().trim();
            let parsed = HeaderName::from_bytes(text.as_bytes())
                .ok()
                .filter(|_| text != "*");
            if parsed.is_none() {
                p.at(
                    name.span(),
                    key,
                    format!("{text:?} is not a header name (\"*\" is not accepted here: list the names)"),
                );
            }
            parsed
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::origin;

    #[test]
    fn origins_are_exact() {
        for good in [
            "https://app.example",
            "http://localhost:3000",
            "capacitor://localhost",
        ] {
            assert!(origin(good).is_ok(), "{good}");
        }
        for bad in [
            "https://app.example/",
            "https://App.example",
            "app.example",
            "https://app.example/path",
            "https://user@app.example",
            "null",
            "",
        ] {
            assert!(origin(bad).is_err(), "{bad}");
        }
    }
}
