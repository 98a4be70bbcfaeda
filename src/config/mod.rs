//! Configuration: defaults < config file < environment < flags, resolved once into a validated
//! [`Config`] (`STYLE.md` §5). Only `Config` leaves this module; a bad file is reported with
//! file, line, column and key, every problem at once.
//!
//! The file is read into `raw::RawConfig` (serde over `toml_edit`, spans kept; `part`), then
//! checked and resolved by one module per reason to change: `server`, `limits` (and
//! `admission`, what the gateway lets in at once), `routes` (with `dialects`, `aap_face`,
//! [`aap_client`], `forwarding`, and `cors`, `auth`, `upstream_auth` for who may call a route
//! and what it sends upstream; `faces` for what an AAP face's routes share), `tls` (the
//! listener's and the upstreams'), `sessions`, `mappings`. The single-route flags become a raw
//! route too (`flags`), built by the same code as the file's routes. `problems` says how
//! problems are reported.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::mapping::{MappingError, Mappings};
use crate::session::SessionLimits;

pub mod aap_client;
mod aap_face;
mod admission;
mod auth;
mod cors;
mod dialects;
mod faces;
mod flags;
mod forwarding;
mod limits;
mod mappings;
mod part;
mod problems;
mod raw;
mod routes;
mod server;
mod sessions;
mod tls;
mod upstream_auth;

pub use aap_client::AapUpstream;
pub use aap_face::{AapAgent, AAP_API_KEYS_ENV, DEFAULT_AGENT_VERSION};
pub use admission::{
    Admission, DEFAULT_MAX_BUFFERED_REQUEST_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_STREAMS,
    DEFAULT_REQUEST_HEADER_TIMEOUT,
};
pub use auth::{parse_jwks, Auth, Jwks, Jwt, Secret};
pub use cors::{AllowedOrigins, Cors, DEFAULT_ALLOW_HEADERS};
pub use flags::Overrides;
pub use forwarding::{Forwarding, TrustedProxies};
pub use limits::{
    parse_duration, Limits, RawLimits, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEADERS_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
};
pub use mappings::load_mappings;
pub use routes::{Route, Upstream, BUILTIN_DEMO};
pub use server::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_LISTEN, DEFAULT_STALL_TIMEOUT};
pub use upstream_auth::UpstreamBearer;

use aap_face::split_keys;
use problems::{Keys, Problems};
use raw::RawConfig;
use routes::Defaults;

/// What runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The admin listener (`/metrics`, `/live`, `/ready`), when configured.
    pub admin_listen: Option<SocketAddr>,
    pub routes: Vec<Route>,
    pub mappings: Mappings,
    /// How long open streams may run on after a shutdown signal.
    pub drain_timeout: Duration,
    /// How long a write to a client may stay blocked before the client counts as gone.
    pub stall_timeout: Duration,
    /// Bounds of the AAP session store (`[sessions]`).
    pub sessions: SessionLimits,
    /// Which store keeps the sessions, and how to reach it (`[sessions] store`).
    pub store: crate::session::StoreSettings,
    /// TLS on `listen` (`tls_cert`, `tls_key`); plaintext without it.
    pub tls: Option<crate::tls::ListenerTls>,
    /// Peers whose forwarding headers are believed (`trusted_proxies`).
    pub trusted_proxies: TrustedProxies,
    /// What the gateway lets in at once (`[limits]`: streams, buffered request bytes,
    /// connections, the request header timeout).
    pub admission: Admission,
}

/// A configuration problem; `Display` is what the operator reads.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Mapping(#[from] MappingError),
}

/// Resolves the configuration: the file (if any), then `overrides` (flags and environment).
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
    let Some(path) = file else {
        return resolve(None, overrides);
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    resolve(Some((&path.display().to_string(), &text)), overrides)
}

/// [`load`] with the file's text already read; `origin` names it in problems.
pub fn load_text(origin: &str, text: &str, overrides: &Overrides) -> Result<Config, ConfigError> {
    resolve(Some((origin, text)), overrides)
}

/// `file`: its name and text.
fn resolve(file: Option<(&str, &str)>, overrides: &Overrides) -> Result<Config, ConfigError> {
    let mut p = match file {
        Some((origin, text)) => Problems::file(origin, text),
        None => Problems::flags(),
    };
    let mut f = Problems::flags();
    let raw = match file {
        Some((origin, text)) => {
            RawConfig::read(origin, text, &mut p).map_err(ConfigError::Invalid)?
        }
        None => RawConfig::default(),
    };
    let server = server::server(&mut p, &mut f, &raw, overrides);
    let file_limits = limits::limits(
        &mut p,
        &Keys::file("limits."),
        &raw.limits,
        Limits::default(),
    );
    let api_keys: Vec<String> = overrides
        .aap_api_keys
        .as_deref()
        .map(|k| split_keys(k).collect())
        .unwrap_or_default();
    let admission = admission::admission(&mut p, &mut f, &raw.limits, &overrides.limits);
    let defaults = Defaults {
        limits: limits::limits(&mut f, &Keys::flags(), &overrides.limits, file_limits),
        api_keys: &api_keys,
    };
    let sessions = sessions::sessions(&mut p, &raw.sessions);
    let store = sessions::store(&mut p, &raw.sessions);
    let trusted_proxies =
        forwarding::trusted_proxies(&mut p, "trusted_proxies", &raw.trusted_proxies);
    let mut built = Vec::new();
    if file.is_some() {
        if overrides.names_a_route() {
            f.plain(
                "--upstream/--client",
                "single-route flags cannot be combined with --config; put the route in the file"
                    .into(),
            );
        }
        if !raw.routes_written {
            p.plain("routes", "the file defines no [[routes]]".into());
        }
        for (i, route) in &raw.routes {
            let keys = Keys::file(format!("routes[{i}]."));
            built.extend(routes::build(
                &mut p,
                keys,
                route.get_ref(),
                route.span(),
                &defaults,
            ));
        }
    } else {
        match overrides.route() {
            Some(route) => built.extend(routes::build(
                &mut f,
                Keys::flags(),
                &route,
                0..0,
                &defaults,
            )),
            None => f.plain(
                "--upstream",
                format!(
                    "required without --config (an http:// or https:// URL, or {BUILTIN_DEMO})"
                ),
            ),
        }
    }
    routes::check_paths(&mut p, &built);
    faces::share(&mut p, &mut built);
    let mappings = match overrides.mappings.as_ref().or(raw.mappings.as_ref()) {
        Some(dir) => load_mappings(dir).unwrap_or_else(|e| {
            p.other(e.to_string());
            Mappings::builtin()
        }),
        None => Mappings::builtin(),
    };
    let mut problems = p.into_lines();
    problems.extend(f.into_lines());
    let (Some(listen), true) = (server.listen, problems.is_empty()) else {
        return Err(ConfigError::Invalid(problems.join("\n")));
    };
    let mut routes: Vec<Route> = built.into_iter().map(|b| b.route).collect();
    // Longest prefix first, so the most specific route wins.
    routes.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
    Ok(Config {
        listen,
        admin_listen: server.admin_listen,
        routes,
        mappings,
        drain_timeout: server.drain_timeout,
        stall_timeout: server.stall_timeout,
        sessions,
        store,
        tls: server.tls,
        trusted_proxies,
        admission,
    })
}

impl Config {
    /// The route for a request path: the longest prefix matching on segment boundaries.
    pub fn route(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| {
            let prefix = r.path.trim_end_matches('/');
            prefix.is_empty()
                || path == prefix
                || path
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
