//! Routes: the raw route (a `[[routes]]` entry, or the single route the flags describe), the
//! one builder that checks and resolves it into a [`Route`], and the checks across routes.

use std::ops::Range;

use http::Uri;
use serde::Deserialize;
use toml::Spanned;

use super::aap_client::{aap_upstream, AapUpstream, RawAapUpstream};
use super::aap_face::{aap_agent, AapAgent, RawAap};
use super::admission::route_max_streams;
use super::auth::{auth, Auth, RawAuth, Secret};
use super::cors::{cors, Cors, RawCors};
use super::dialects::{agui_options, hai_options, unknown_fields, RawAguiOptions, RawHaiOptions};
use super::forwarding::{forwarding, Forwarding};
use super::limits::{limits, Limits, RawLimits};
use super::problems::{Keys, Problems};
use super::tls::{client_tls, RawClientTls};
use super::upstream_auth::{upstream_auth, RawUpstreamAuth, UpstreamBearer};
use crate::dialect::agui::{ProtocolVersion, ReaderOptions, RequestProfile, UnknownFields};
use crate::dialect::hai::HaiOptions;
use crate::dialect::Dialect;

/// The upstream that runs the demo agent in-process.
pub const BUILTIN_DEMO: &str = "builtin:demo";

/// One path prefix and where it goes.
#[derive(Debug, Clone)]
pub struct Route {
    /// Matched as a prefix on whole path segments; `/` matches everything.
    pub path: String,
    pub client: Dialect,
    pub upstream: Upstream,
    pub upstream_dialect: Dialect,
    /// How an `https://` upstream is reached (`[routes.tls]`); `None` for any other.
    pub tls: Option<crate::tls::ClientTls>,
    pub limits: Limits,
    pub keep_upstream_run_ids: bool,
    pub unknown_fields: UnknownFields,
    /// AG-UI reader policies (`[routes.agui]`).
    pub reader: ReaderOptions,
    /// How the upstream wants its request (`[routes.agui]`).
    pub request_profile: RequestProfile,
    /// The AG-UI version written to AG-UI clients (`[routes.agui] protocol_version`).
    pub protocol_version: ProtocolVersion,
    /// HAI reader and writer profile (`[routes.hai]`).
    pub hai: HaiOptions,
    /// The agent an AAP face serves (`[routes.aap]`); set exactly when `client` is AAP.
    pub aap: Option<AapAgent>,
    /// How runs reach an AAP agent (`[routes.aap_upstream]`); set exactly when
    /// `upstream_dialect` is AAP.
    pub aap_upstream: Option<AapUpstream>,
    /// Which client headers reach the upstream (`forward_cookies`, `forward_headers`).
    pub forwarding: Forwarding,
    /// Browser origins allowed to call the route (`[routes.cors]`).
    pub cors: Option<Cors>,
    /// Credentials the route accepts (`[routes.auth]`, and an AAP face's keys); `None`: anyone.
    pub auth: Option<Auth>,
    /// The client's `Authorization` travels upstream although the route has `auth`.
    pub forward_authorization: bool,
    /// The gateway's Bearer token toward the upstream (`[routes.upstream_auth]`).
    pub upstream_auth: Option<UpstreamBearer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    Url(Uri),
    /// The scripted demo agent, in-process.
    BuiltinDemo,
}

/// A route as written. The flags' single route is one too, with empty spans.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub path: Spanned<String>,
    pub client: Spanned<String>,
    pub upstream: Spanned<String>,
    pub upstream_dialect: Option<Spanned<String>>,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub keep_upstream_run_ids: bool,
    pub unknown_fields: Option<Spanned<String>>,
    #[serde(default)]
    pub agui: RawAguiOptions,
    #[serde(default)]
    pub hai: RawHaiOptions,
    pub aap: Option<RawAap>,
    pub aap_upstream: Option<RawAapUpstream>,
    pub tls: Option<RawClientTls>,
    #[serde(default)]
    pub forward_cookies: bool,
    pub forward_headers: Option<Vec<Spanned<String>>>,
    pub cors: Option<RawCors>,
    pub auth: Option<RawAuth>,
    #[serde(default)]
    pub forward_authorization: bool,
    pub upstream_auth: Option<RawUpstreamAuth>,
}

/// What every route starts from.
pub(super) struct Defaults<'a> {
    /// The global limits (`[limits]`, then the flags).
    pub limits: Limits,
    /// API keys every AAP face accepts, from [`super::AAP_API_KEYS_ENV`].
    pub api_keys: &'a [String],
}

/// A route that was built, with where it was written, for the checks across routes.
pub(super) struct Built {
    pub route: Route,
    pub keys: Keys,
    pub path_span: Range<usize>,
}

/// Checks and resolves one raw route written at `at`; `None` when it has a problem.
pub(super) fn build(
    p: &mut Problems,
    keys: Keys,
    raw: &RawRoute,
    at: Range<usize>,
    defaults: &Defaults,
) -> Option<Built> {
    let client = dialect(p, &keys.key("client"), &raw.client);
    let upstream_dialect = match &raw.upstream_dialect {
        Some(d) => dialect(p, &keys.key("upstream_dialect"), d),
        None => Some(Dialect::AgUi),
    };
    let upstream = upstream(p, &keys.key("upstream"), &raw.upstream);
    let https = upstream
        .as_ref()
        .map(|u| matches!(u, Upstream::Url(uri) if is_https(uri)));
    let tls = client_tls(p, &keys.table("tls"), raw.tls.as_ref(), at.clone(), https);
    let mut limits = limits(p, &keys.table("limits"), &raw.limits, defaults.limits);
    limits.max_streams = route_max_streams(p, &keys.table("limits"), &raw.limits);
    let unknown_fields = unknown_fields(p, &keys.key("unknown_fields"), &raw.unknown_fields);
    let (reader, request_profile, protocol_version) =
        agui_options(p, &keys.table("agui"), &raw.agui);
    let hai = hai_options(p, &keys.table("hai"), &raw.hai);
    let forwarding = forwarding(
        p,
        &keys.key("forward_headers"),
        raw.forward_cookies,
        &raw.forward_headers,
    );
    let path = raw.path.get_ref().clone();
    if !path.starts_with('/') {
        p.at(
            raw.path.span(),
            &keys.key("path"),
            format!("{path:?} must start with /"),
        );
    }
    if let (Some(c), Some(u)) = (client, upstream_dialect) {
        check_dialects(p, &keys, at.clone(), c, u, upstream.as_ref());
    }
    let aap = match (client, &raw.aap) {
        (Some(Dialect::Aap), table) => {
            let empty = RawAap::default();
            let table = table.as_ref().unwrap_or(&empty);
            aap_agent(p, &keys.table("aap"), at.clone(), table, defaults.api_keys)
        }
        (Some(c), Some(_)) => {
            p.at(
                at.clone(),
                &keys.key("aap"),
                format!(
                    "only a route with client = \"aap\" has an [routes.aap] table, not a {c} route"
                ),
            );
            None
        }
        _ => None,
    };
    let aap_upstream = match (upstream_dialect, &raw.aap_upstream) {
        (Some(Dialect::Aap), table) => {
            let empty = RawAapUpstream::default();
            let table = table.as_ref().unwrap_or(&empty);
            Some(aap_upstream(p, &keys.table("aap_upstream"), table))
        }
        (Some(u), Some(_)) => {
            p.at(
                at.clone(),
                &keys.key("aap_upstream"),
                format!("only a route with upstream_dialect = \"aap\" has an [routes.aap_upstream] table, not an {u} upstream"),
            );
            None
        }
        _ => None,
    };
    let cors = raw
        .cors
        .as_ref()
        .and_then(|c| cors(p, &keys.table("cors"), at.clone(), c));
    let mut auth = raw
        .auth
        .as_ref()
        .and_then(|a| auth(p, &keys.table("auth"), at.clone(), a));
    // An AAP face's own keys are checked like any other route's.
    if let Some(agent) = aap.as_ref().filter(|a| !a.api_keys.is_empty()) {
        let keys = Auth {
            api_keys: agent.api_keys.iter().map(Secret::new).collect(),
            jwt: Vec::new(),
        };
        auth.get_or_insert_with(Auth::default).join(&keys);
    }
    let upstream_auth = raw.upstream_auth.as_ref().and_then(|u| {
        let table = keys.table("upstream_auth");
        if aap_upstream.as_ref().is_some_and(|a| a.api_key.is_some()) {
            p.at(
                at.clone(),
                &table.whole(),
                "the route already sends [routes.aap_upstream] api_key; keep one of them".into(),
            );
        }
        upstream_auth(p, &table, at.clone(), u)
    });
    let (client, upstream, upstream_dialect) = (client?, upstream?, upstream_dialect?);
    if client == Dialect::Aap && aap.is_none() {
        return None;
    }
    Some(Built {
        route: Route {
            path,
            client,
            upstream,
            upstream_dialect,
            tls,
            limits,
            keep_upstream_run_ids: raw.keep_upstream_run_ids,
            unknown_fields,
            reader,
            request_profile,
            protocol_version,
            hai,
            aap,
            aap_upstream,
            forwarding,
            cors,
            auth,
            forward_authorization: raw.forward_authorization,
            upstream_auth,
        },
        keys,
        path_span: raw.path.span(),
    })
}

fn dialect(p: &mut Problems, key: &str, v: &Spanned<String>) -> Option<Dialect> {
    v.get_ref()
        .parse()
        .map_err(|e: crate::dialect::UnknownDialect| p.at(v.span(), key, e.to_string()))
        .ok()
}

fn upstream(p: &mut Problems, key: &str, v: &Spanned<String>) -> Option<Upstream> {
    let text = v.get_ref().trim();
    if text == BUILTIN_DEMO {
        return Some(Upstream::BuiltinDemo);
    }
    match text.parse::<Uri>() {
        Ok(uri)
            if (uri.scheme_str() == Some("http") || is_https(&uri))
                && uri.authority().is_some() =>
        {
            Some(Upstream::Url(uri))
        }
        _ => {
            p.at(
                v.span(),
                key,
                format!("{text:?} is not an http:// or https:// URL, or {BUILTIN_DEMO}"),
            );
            None
        }
    }
}

fn is_https(uri: &Uri) -> bool {
    uri.scheme_str() == Some("https")
}

fn check_dialects(
    p: &mut Problems,
    keys: &Keys,
    at: Range<usize>,
    client: Dialect,
    upstream_dialect: Dialect,
    upstream: Option<&Upstream>,
) {
    // The registry decides which pairs translate.
    if let Err(unsupported) = crate::dialect::check_pair(upstream_dialect, client) {
        p.at(at.clone(), &keys.whole(), unsupported.to_string());
    }
    if upstream == Some(&Upstream::BuiltinDemo) && upstream_dialect != Dialect::AgUi {
        p.at(
            at,
            &keys.whole(),
            format!("the built-in demo agent speaks ag-ui, not {upstream_dialect}; drop upstream_dialect or set it to ag-ui"),
        );
    }
}

/// Routes sharing a path: AAP routes serving agents of different names form one face (its
/// `/meta` lists them all); any other two routes on one path would take the same requests.
/// Reported at the later route's path, naming the earlier one.
pub(super) fn check_paths(p: &mut Problems, routes: &[Built]) {
    for (i, a) in routes.iter().enumerate() {
        for b in &routes[i + 1..] {
            let path = a.route.path.trim_end_matches('/');
            if path != b.route.path.trim_end_matches('/') {
                continue;
            }
            let problem = match (&a.route.aap, &b.route.aap) {
                (Some(x), Some(y)) if x.name != y.name => continue,
                (Some(x), Some(_)) => {
                    format!(
                        "two AAP routes on {} serve the agent {:?}",
                        a.route.path, x.name
                    )
                }
                (Some(_), None) | (None, Some(_)) => format!(
                    "{} is both an AAP face and a {} route; give them different paths",
                    a.route.path,
                    if a.route.aap.is_some() {
                        b.route.client
                    } else {
                        a.route.client
                    }
                ),
                (None, None) => format!(
                    "two routes on {} would take the same requests; give them different paths",
                    a.route.path
                ),
            };
            let other = format!("{}, {}", a.keys.whole(), p.place(&a.path_span));
            p.at(
                b.path_span.clone(),
                &b.keys.key("path"),
                format!("{problem} (the other is {other})"),
            );
        }
    }
}
