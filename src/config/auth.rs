//! `[routes.auth]`: the credentials a route accepts from its clients — static API keys, JWTs
//! checked against a JWKS, or both (a request passes with either) — and [`Secret`], how the
//! configuration holds a credential without printing it.
//!
//! Keys: `api_keys = ["…"]`; `api_keys_env = "VAR"` (more keys, comma-separated, from that
//! environment variable, which must be set); `jwt = { jwks_file = "keys.json", issuer = "…",
//! audience = "…" }` or `jwt = { jwks_url = "https://…", issuer, audience }` (exactly one of
//! `jwks_file` and `jwks_url`; `issuer` and `audience` are required). A JWKS file is read and
//! checked at start-up (a problem when it cannot be read or holds no public key); a URL
//! (`https://`, verified against the system roots plus the table's optional `ca_file`; plain
//! `http://` only to a loopback address) is fetched when the first token arrives. An AAP face's `[routes.aap] api_keys`,
//! `api_keys_env` and `DIALECT_PROXY_AAP_API_KEYS` are folded into its route's `auth`.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

use http::Uri;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use serde::Deserialize;
use toml::Spanned;

use super::aap_face::split_keys;
use super::problems::{Keys, Problems};
use crate::tls::client::{read_roots, ClientFiles, ClientTls};

/// A credential held by the configuration; `Debug` does not show it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The credential itself, for comparing or sending it; never for logs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// What a route accepts from its clients (`[routes.auth]`); a request needs one of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auth {
    pub api_keys: Vec<Secret>,
    /// Token issuers: one per `jwt` table (an AAP face joins those of its routes).
    pub jwt: Vec<Jwt>,
}

impl Auth {
    /// Adds what `other` accepts.
    pub fn join(&mut self, other: &Auth) {
        for key in &other.api_keys {
            if !self.api_keys.contains(key) {
                self.api_keys.push(key.clone());
            }
        }
        for jwt in &other.jwt {
            if !self.jwt.contains(jwt) {
                self.jwt.push(jwt.clone());
            }
        }
    }
}

/// Tokens of one issuer, for one audience, signed by a key of its JWKS.
#[derive(Debug, Clone, PartialEq)]
pub struct Jwt {
    pub jwks: Jwks,
    pub issuer: String,
    pub audience: String,
}

/// Where the issuer's public keys are.
#[derive(Debug, Clone, PartialEq)]
pub enum Jwks {
    /// A file, read at start-up (`keys`) and again when a token names a key it lacks.
    File { path: PathBuf, keys: JwkSet },
    /// An `http://` or `https://` URL, fetched on first use, then refreshed; `tls` (for an
    /// `https://` one) trusts the system roots and the table's `ca_file`, read at start-up.
    Url { uri: Uri, tls: Option<ClientTls> },
}

/// `[routes.auth]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    api_keys: Vec<Spanned<String>>,
    api_keys_env: Option<Spanned<String>>,
    jwt: Option<RawJwt>,
}

/// `[routes.auth] jwt` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    jwks_file: Option<Spanned<String>>,
    jwks_url: Option<Spanned<String>>,
    ca_file: Option<Spanned<String>>,
    issuer: Option<Spanned<String>>,
    audience: Option<Spanned<String>>,
}

/// Checks and resolves the `[routes.auth]` of the route written at `at`; `None` when it has a
/// problem.
pub(super) fn auth(p: &mut Problems, keys: &Keys, at: Range<usize>, raw: &RawAuth) -> Option<Auth> {
    let before = p.count();
    let mut auth = Auth::default();
    for key in &raw.api_keys {
        if key.get_ref().trim().is_empty() {
            p.at(
                key.span(),
                &keys.key("api_keys"),
                "an API key must not be empty".into(),
            );
        } else {
            auth.api_keys.push(Secret::new(key.get_ref().trim()));
        }
    }
    if let Some(var) = &raw.api_keys_env {
        let key = keys.key("api_keys_env");
        match std::env::var(var.get_ref()) {
            Ok(text) if split_keys(&text).next().is_some() => {
                auth.api_keys.extend(split_keys(&text).map(Secret::new));
            }
            Ok(_) => p.at(
                var.span(),
                &key,
                format!("the environment variable {} holds no key", var.get_ref()),
            ),
            Err(_) => p.at(
                var.span(),
                &key,
                format!("the environment variable {} is not set", var.get_ref()),
            ),
        }
    }
    if let Some(raw_jwt) = &raw.jwt {
        if let Some(jwt) = jwt(p, &keys.table("jwt"), at.clone(), raw_jwt) {
            auth.jwt.push(jwt);
        }
    }
    if p.count() != before {
        return None;
    }
    if auth.api_keys.is_empty() && auth.jwt.is_empty() {
        p.at(
            at,
            &keys.whole(),
            "names no credential: set api_keys, api_keys_env or jwt".into(),
        );
        return None;
    }
    Some(auth)
}

fn jwt(p: &mut Problems, keys: &Keys, at: Range<usize>, raw: &RawJwt) -> Option<Jwt> {
    let required = |p: &mut Problems, name: &str, value: &Option<Spanned<String>>| match value
        .as_ref()
        .filter(|v| !v.get_ref().trim().is_empty())
    {
        Some(v) => Some(v.get_ref().trim().to_owned()),
        None => {
            let place = value.as_ref().map_or(at.clone(), Spanned::span);
            p.at(place, &keys.key(name), "required, and not empty".into());
            None
        }
    };
    let issuer = required(p, "issuer", &raw.issuer);
    let audience = required(p, "audience", &raw.audience);
    let jwks = match (&raw.jwks_file, &raw.jwks_url) {
        (Some(_), Some(url)) => {
            p.at(
                url.span(),
                &keys.key("jwks_url"),
                "give jwks_file or jwks_url, not both".into(),
            );
            None
        }
        (None, None) => {
            // Placed at a key of the table when it has one.
            let place = [&raw.issuer, &raw.audience]
                .into_iter()
                .flatten()
                .map(Spanned::span)
                .next()
                .unwrap_or(at);
            p.at(
                place,
                &keys.whole(),
                "needs jwks_file or jwks_url (where the issuer's public keys are)".into(),
            );
            None
        }
        (Some(file), None) => jwks_file(p, &keys.key("jwks_file"), file),
        (None, Some(url)) => jwks_url(p, keys, url, raw.ca_file.as_ref()),
    };
    Some(Jwt {
        jwks: jwks?,
        issuer: issuer?,
        audience: audience?,
    })
}

fn jwks_file(p: &mut Problems, key: &str, file: &Spanned<String>) -> Option<Jwks> {
    let path = PathBuf::from(file.get_ref());
    let read = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|text| parse_jwks(&text).map_err(|e| format!("{}: {e}", path.display())));
    match read {
        Ok(keys) => Some(Jwks::File { path, keys }),
        Err(problem) => {
            p.at(file.span(), key, problem);
            None
        }
    }
}

fn jwks_url(
    p: &mut Problems,
    keys: &Keys,
    url: &Spanned<String>,
    ca_file: Option<&Spanned<String>>,
) -> Option<Jwks> {
    let text = url.get_ref().trim();
    let uri = match text.parse::<Uri>() {
        Ok(uri)
            if matches!(uri.scheme_str(), Some("http" | "https")) && uri.authority().is_some() =>
        {
            uri
        }
        _ => {
            p.at(
                url.span(),
                &keys.key("jwks_url"),
                format!("{text:?} is not an http:// or https:// URL"),
            );
            return None;
        }
    };
    // Keys fetched in the clear let anyone on the path mint tokens for any principal.
    let loopback = uri.host().is_some_and(|host| {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if uri.scheme_str() == Some("http") && !loopback {
        p.at(
            url.span(),
            &keys.key("jwks_url"),
            format!("{text:?}: keys fetched over plain http could be replaced by anyone on the way; use https:// (http:// only to a loopback address)"),
        );
        return None;
    }
    let https = uri.scheme_str() == Some("https");
    let tls = match (ca_file, https) {
        (None, false) => None,
        (Some(file), false) => {
            p.at(
                file.span(),
                &keys.key("ca_file"),
                "only an https:// jwks_url takes a ca_file".into(),
            );
            return None;
        }
        (None, true) => match ClientTls::system() {
            Ok(tls) => Some(tls),
            Err(e) => {
                p.at(url.span(), &keys.key("jwks_url"), e.to_string());
                return None;
            }
        },
        (Some(file), true) => {
            let path = PathBuf::from(file.get_ref());
            let files = ClientFiles {
                ca_file: Some(path.clone()),
                ..ClientFiles::default()
            };
            match read_roots(&path).and_then(|roots| ClientTls::new(files, roots, None)) {
                Ok(tls) => Some(tls),
                Err(e) => {
                    p.at(file.span(), &keys.key("ca_file"), e.to_string());
                    return None;
                }
            }
        }
    };
    Some(Jwks::Url { uri, tls })
}

/// A JWKS document (`{"keys": [...]}`) holding at least one public signing key.
pub fn parse_jwks(text: &str) -> Result<JwkSet, String> {
    let set: JwkSet =
        serde_json::from_str(text).map_err(|e| format!("not a JWKS document: {e}"))?;
    let public = set.keys.iter().any(|k| {
        matches!(
            k.algorithm,
            AlgorithmParameters::RSA(_)
                | AlgorithmParameters::EllipticCurve(_)
                | AlgorithmParameters::OctetKeyPair(_)
        )
    });
    if !public {
        return Err("the JWKS holds no RSA, EC or OKP public key".into());
    }
    Ok(set)
}
