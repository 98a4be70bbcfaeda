//! TLS settings, checked by reading the files they name, so a missing file, a file without a
//! certificate or a key that does not match is reported at its key like any other problem:
//!
//! - the listener's `tls_cert` + `tls_key` (top level, or `--tls-cert`/`--tls-key`, or
//!   `DIALECT_PROXY_TLS_CERT`/`DIALECT_PROXY_TLS_KEY`): PEM files, both or neither; with them
//!   the listener speaks HTTPS (HTTP/2 and HTTP/1.1 by ALPN) and re-reads them when they change;
//! - a route's `[routes.tls]` table, for an `https://` upstream only: `ca_file` (PEM roots
//!   trusted besides the system's), `client_cert` + `client_key` (PEM, both or neither: the
//!   certificate presented to an upstream that asks for one).
//!
//! Relative paths are relative to the working directory, as `mappings` is. What the files hold
//! is built here once (`crate::tls`), so what was checked is what runs.

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::problems::{Given, Keys, Problems};
use crate::tls::client::read_roots;
use crate::tls::server::Stamp;
use crate::tls::{certified_key, read_certs, read_key, ClientFiles, ClientTls, ListenerTls};

/// A route's `[routes.tls]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientTls {
    pub ca_file: Option<Spanned<String>>,
    pub client_cert: Option<Spanned<String>>,
    pub client_key: Option<Spanned<String>>,
}

/// How a route reaches its upstream over TLS: `Some` exactly for an `https://` upstream (the
/// system roots alone without a table); `None` otherwise, or after a problem. `https` says
/// whether the upstream is an `https://` URL (`None` when the upstream itself has a problem).
pub(super) fn client_tls(
    p: &mut Problems,
    keys: &Keys,
    raw: Option<&RawClientTls>,
    at: Range<usize>,
    https: Option<bool>,
) -> Option<ClientTls> {
    let raw = match (https, raw) {
        (Some(true), raw) => raw,
        (Some(false), Some(_)) => {
            p.at(
                at,
                &keys.whole(),
                "only an https:// upstream has a [routes.tls] table".into(),
            );
            return None;
        }
        (_, _) => return None,
    };
    let Some(raw) = raw else {
        return report(p, at, &keys.whole(), ClientTls::system());
    };
    let path = |p: &mut Problems, key: &str, v: &Option<Spanned<String>>| {
        let v = v.as_ref()?;
        if v.get_ref().trim().is_empty() {
            p.at(v.span(), &keys.key(key), "must not be empty".into());
            return None;
        }
        Some((PathBuf::from(v.get_ref()), v.span()))
    };
    let ca_file = path(p, "ca_file", &raw.ca_file);
    let cert = path(p, "client_cert", &raw.client_cert);
    let key = path(p, "client_key", &raw.client_key);
    // Every file is checked before giving up, so all of their problems are reported at once.
    let roots = match &ca_file {
        Some((file, span)) => report(p, span.clone(), &keys.key("ca_file"), read_roots(file)),
        None => Some(rustls::RootCertStore::empty()),
    };
    let identity = match (&cert, &key) {
        (Some((cert, cert_span)), Some((key, key_span))) => {
            let chain = report(
                p,
                cert_span.clone(),
                &keys.key("client_cert"),
                read_certs(cert),
            );
            let key_key = keys.key("client_key");
            let der = report(p, key_span.clone(), &key_key, read_key(key));
            match (chain, der) {
                (Some(chain), Some(der)) => report(
                    p,
                    key_span.clone(),
                    &key_key,
                    certified_key(chain, der, key),
                )
                .map(Some),
                _ => None,
            }
        }
        (Some((_, span)), None) => {
            let problem = "is given without client_key; give both or neither".into();
            p.at(span.clone(), &keys.key("client_cert"), problem);
            None
        }
        (None, Some((_, span))) => {
            let problem = "is given without client_cert; give both or neither".into();
            p.at(span.clone(), &keys.key("client_key"), problem);
            None
        }
        (None, None) => Some(None),
    };
    let (roots, identity) = (roots?, identity?);
    let files = ClientFiles {
        ca_file: ca_file.map(|(f, _)| f),
        client_cert: cert.map(|(f, _)| f),
        client_key: key.map(|(f, _)| f),
    };
    report(p, at, &keys.whole(), ClientTls::new(files, roots, identity))
}

/// The listener's TLS, from `tls_cert` and `tls_key` (each the flag, else the file); `None`
/// without them, or after a problem (reported at the value, or under the flag's name).
pub(super) fn listener_tls(
    file: &mut Problems,
    flags: &mut Problems,
    cert: Option<Given>,
    key: Option<Given>,
) -> Option<ListenerTls> {
    let (cert, key) = match (cert, key) {
        (None, None) => return None,
        (Some(cert), Some(key)) => (cert, key),
        (Some(cert), None) => {
            let problem = "is given without tls_key; give both or neither".into();
            cert.report(file, flags, "tls_cert", problem);
            return None;
        }
        (None, Some(key)) => {
            let problem = "is given without tls_cert; give both or neither".into();
            key.report(file, flags, "tls_key", problem);
            return None;
        }
    };
    let mut empty = false;
    for (given, name) in [(&cert, "tls_cert"), (&key, "tls_key")] {
        if given.text().trim().is_empty() {
            given.report(file, flags, name, "must not be empty".into());
            empty = true;
        }
    }
    if empty {
        return None;
    }
    let (cert_file, key_file) = (PathBuf::from(cert.text()), PathBuf::from(key.text()));
    // Stamped before reading: a change while they are read is seen at the first check.
    let stamp = Stamp::of(&cert_file, &key_file);
    let chain = read_certs(&cert_file)
        .map_err(|e| cert.report(file, flags, "tls_cert", e.to_string()))
        .ok();
    let der = read_key(&key_file)
        .map_err(|e| key.report(file, flags, "tls_key", e.to_string()))
        .ok();
    let identity = certified_key(chain?, der?, &key_file)
        .map_err(|e| key.report(file, flags, "tls_key", e.to_string()))
        .ok()?;
    ListenerTls::new(cert_file, key_file, identity, stamp)
        .map_err(|e| cert.report(file, flags, "tls_cert", e.to_string()))
        .ok()
}

/// `result`'s value, or its problem reported at `span` under `key`.
fn report<T>(
    p: &mut Problems,
    span: Range<usize>,
    key: &str,
    result: Result<T, crate::tls::TlsError>,
) -> Option<T> {
    result.map_err(|e| p.at(span, key, e.to_string())).ok()
}
