//! Configuration: defaults < config file < environment < flags, resolved once into a validated
//! [`Config`] (`STYLE.md` §5). Only `Config` leaves this module; a bad file is reported with
//! file, line, column and key, every problem at once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use toml::Spanned;

use crate::dialect::aap::read::LimitStops;
use crate::dialect::aap::types::{AgentOption, OptionKind, ServerToolRef, ToolSpec};
pub mod aap_client;
mod mappings;

pub use mappings::load_mappings;

use crate::dialect::agui::{ReaderOptions, RequestProfile, Timestamps, UnknownFields};
use crate::dialect::confirm::{DenialAs, ResultEncoding, DEFAULT_TOOL};
use crate::dialect::hai::HaiOptions;
use crate::dialect::Dialect;
use crate::mapping::{MappingError, Mappings};
use crate::session::SessionLimits;
use aap_client::{HitlStyle, StreamChoice, Unconfirmable};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_HEADERS_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
pub const DEFAULT_MAX_EVENT_BYTES: usize = crate::sse::DEFAULT_MAX_EVENT_BYTES;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 << 20;
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The upstream that runs the demo agent in-process.
pub const BUILTIN_DEMO: &str = "builtin:demo";

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
}

/// One path prefix and where it goes.
#[derive(Debug, Clone)]
pub struct Route {
    /// Matched as a prefix on whole path segments; `/` matches everything.
    pub path: String,
    pub client: Dialect,
    pub upstream: Upstream,
    pub upstream_dialect: Dialect,
    pub limits: Limits,
    pub keep_upstream_run_ids: bool,
    pub unknown_fields: UnknownFields,
    /// AG-UI reader policies (`[routes.agui]`).
    pub reader: ReaderOptions,
    /// How the upstream wants its request (`[routes.agui]`).
    pub request_profile: RequestProfile,
    /// HAI reader and writer profile (`[routes.hai]`).
    pub hai: HaiOptions,
    /// The agent an AAP face serves (`[routes.aap]`); set exactly when `client` is AAP.
    pub aap: Option<AapAgent>,
    /// How runs reach an AAP agent (`[routes.aap_upstream]`); set exactly when
    /// `upstream_dialect` is AAP.
    pub aap_upstream: Option<AapUpstream>,
}

/// The gateway as an AAP client (`[routes.aap_upstream]`, `translation.md` §4.3–4.4, §6).
#[derive(Debug, Clone, PartialEq)]
pub struct AapUpstream {
    /// The agent to run; else the run's `forwardedProps.aap.agent`, else the only one listed.
    pub agent: Option<String>,
    pub stream_mode: StreamChoice,
    pub hitl: HitlStyle,
    pub confirm_tool: String,
    pub unconfirmable: Unconfirmable,
    /// An edited history starts a new session (`fork`) rather than failing the run.
    pub fork_on_divergence: bool,
    /// A session the agent lost is recreated from the client's history.
    pub recreate_lost_sessions: bool,
    /// The run's `context` seeds a new session as a system message.
    pub context_as_system: bool,
    pub limit_stops: LimitStops,
    /// The outbound `Authorization: Bearer` key; without it the client's header is forwarded.
    pub api_key: Option<String>,
    /// Options and server tools when the run's `forwardedProps.aap` names none.
    pub options: serde_json::Map<String, serde_json::Value>,
    pub tools: Option<Vec<ServerToolRef>>,
}

impl Default for AapUpstream {
    fn default() -> Self {
        AapUpstream {
            agent: None,
            stream_mode: StreamChoice::default(),
            hitl: HitlStyle::default(),
            confirm_tool: DEFAULT_TOOL.into(),
            unconfirmable: Unconfirmable::default(),
            fork_on_divergence: true,
            recreate_lost_sessions: true,
            context_as_system: true,
            limit_stops: LimitStops::default(),
            api_key: None,
            options: serde_json::Map::new(),
            tools: None,
        }
    }
}

/// The agent behind an AAP face, as `/meta` describes it, and how its turns are run
/// (`[routes.aap]`, `translation.md` §4.1, §6).
#[derive(Debug, Clone, PartialEq)]
pub struct AapAgent {
    pub name: String,
    pub title: Option<String>,
    /// The agent's own version (semver), announced in `/meta`.
    pub version: String,
    pub description: Option<String>,
    pub options: Vec<AgentOption>,
    /// Server tools the agent exposes.
    pub tools: Vec<ToolSpec>,
    /// The upstream accepts images (`capabilities.image`).
    pub image: bool,
    /// The confirm tool the gateway declares to the agent for permissions.
    pub confirm_tool: String,
    /// Declare the confirm tool to the agent (`hitl.inject_confirm_tool`).
    pub inject_confirm_tool: bool,
    pub result_encoding: ResultEncoding,
    pub denial_as: DenialAs,
    /// Secret options reach the upstream in `forwardedProps.aap.options`.
    pub forward_secret_options: bool,
    /// Inbound API keys; empty means no authentication.
    pub api_keys: Vec<String>,
}

impl AapAgent {
    /// An agent with every default but its name.
    pub fn named(name: impl Into<String>) -> AapAgent {
        AapAgent {
            name: name.into(),
            title: None,
            version: DEFAULT_AGENT_VERSION.into(),
            description: None,
            options: Vec::new(),
            tools: Vec::new(),
            image: false,
            confirm_tool: DEFAULT_TOOL.into(),
            inject_confirm_tool: true,
            result_encoding: ResultEncoding::default(),
            denial_as: DenialAs::default(),
            forward_secret_options: true,
            api_keys: Vec::new(),
        }
    }
}

/// The agent version `/meta` announces when none is configured.
pub const DEFAULT_AGENT_VERSION: &str = "0.0.0";
/// The environment variable with inbound API keys for every AAP face (comma-separated).
pub const AAP_API_KEYS_ENV: &str = "DIALECT_PROXY_AAP_API_KEYS";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    Url(Uri),
    /// The scripted demo agent, in-process.
    BuiltinDemo,
}

/// Timeouts and sizes of one route (`streaming.md` §6, §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub connect_timeout: Duration,
    pub headers_timeout: Duration,
    pub idle_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub max_event_bytes: usize,
    pub max_request_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            headers_timeout: DEFAULT_HEADERS_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

/// Settings from flags or the environment; `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub admin_listen: Option<String>,
    pub client: Option<String>,
    pub upstream: Option<String>,
    pub upstream_dialect: Option<String>,
    pub agent_name: Option<String>,
    pub mappings: Option<PathBuf>,
    pub drain_timeout: Option<String>,
    pub stall_timeout: Option<String>,
    pub limits: RawLimits,
    /// API keys for every AAP face, from [`AAP_API_KEYS_ENV`] (comma-separated).
    pub aap_api_keys: Option<String>,
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

/// Limits as written (file or flags): durations like `500ms`, `15s`, `5m`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub connect_timeout: Option<Spanned<String>>,
    pub headers_timeout: Option<Spanned<String>>,
    pub idle_timeout: Option<Spanned<String>>,
    pub heartbeat_interval: Option<Spanned<String>>,
    pub max_event_bytes: Option<Spanned<u64>>,
    pub max_request_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<Spanned<String>>,
    admin_listen: Option<Spanned<String>>,
    mappings: Option<PathBuf>,
    drain_timeout: Option<Spanned<String>>,
    stall_timeout: Option<Spanned<String>>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    routes: Vec<RawRoute>,
    #[serde(default)]
    sessions: RawSessions,
}

/// `[sessions]`: bounds of the AAP session store.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSessions {
    max_sessions: Option<Spanned<u64>>,
    max_history_bytes: Option<Spanned<u64>>,
    idle_timeout: Option<Spanned<String>>,
    page_size: Option<Spanned<u64>>,
}

/// `[routes.aap]`: the agent an AAP face serves.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAap {
    name: Option<Spanned<String>>,
    title: Option<String>,
    version: Option<String>,
    description: Option<String>,
    #[serde(default)]
    options: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    tools: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    image: bool,
    confirm_tool: Option<Spanned<String>>,
    inject_confirm_tool: Option<bool>,
    result_encoding: Option<Spanned<String>>,
    denial_as: Option<Spanned<String>>,
    forward_secret_options: Option<bool>,
    #[serde(default)]
    api_keys: Vec<String>,
    api_keys_env: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: Spanned<String>,
    client: Spanned<String>,
    upstream: Spanned<String>,
    upstream_dialect: Option<Spanned<String>>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    keep_upstream_run_ids: bool,
    unknown_fields: Option<Spanned<String>>,
    #[serde(default)]
    agui: RawAguiOptions,
    #[serde(default)]
    hai: RawHaiOptions,
    aap: Option<RawAap>,
    aap_upstream: Option<RawAapUpstream>,
}

/// `[routes.aap_upstream]`: how runs reach an AAP agent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAapUpstream {
    agent: Option<String>,
    stream_mode: Option<Spanned<String>>,
    hitl: Option<Spanned<String>>,
    confirm_tool: Option<Spanned<String>>,
    unconfirmable: Option<Spanned<String>>,
    history_divergence: Option<Spanned<String>>,
    on_session_lost: Option<Spanned<String>>,
    context: Option<Spanned<String>>,
    limit_stops: Option<Spanned<String>>,
    api_key: Option<String>,
    api_key_env: Option<Spanned<String>>,
    #[serde(default)]
    options: std::collections::BTreeMap<String, String>,
    tools: Option<Vec<Spanned<toml::Value>>>,
}

/// `[routes.hai]`: HAI's writer profile and reader choices (`translation.md` §0.1, `hai.md` §9).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHaiOptions {
    delta_encoding: Option<Spanned<String>>,
    tool_args: Option<Spanned<String>>,
    snapshot_name: Option<Spanned<String>>,
    run_ids: Option<bool>,
    thinking_final_chunk: Option<bool>,
    subagents: Option<Spanned<String>>,
    error_notice: Option<bool>,
    collaboration: Option<Spanned<String>>,
    history_content: Option<Spanned<String>>,
    confirm_tool: Option<Spanned<String>>,
}

/// Parses one `[routes.hai]` choice with its type's `FromStr`, reporting at the value's span.
fn parsed<T: std::str::FromStr + Default>(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
) -> T
where
    T::Err: std::fmt::Display,
{
    match value {
        None => T::default(),
        Some(v) => v.get_ref().parse().unwrap_or_else(|e: T::Err| {
            p.at(v.span(), key, e.to_string());
            T::default()
        }),
    }
}

fn hai_options(p: &mut Problems, prefix: &str, raw: &RawHaiOptions) -> HaiOptions {
    let mut options = HaiOptions::default();
    let w = &mut options.writer;
    w.delta_encoding = parsed(p, &format!("{prefix}delta_encoding"), &raw.delta_encoding);
    w.tool_args = parsed(p, &format!("{prefix}tool_args"), &raw.tool_args);
    w.snapshot_name = parsed(p, &format!("{prefix}snapshot_name"), &raw.snapshot_name);
    w.subagents = parsed(p, &format!("{prefix}subagents"), &raw.subagents);
    w.run_ids = raw.run_ids.unwrap_or(w.run_ids);
    w.thinking_final_chunk = raw.thinking_final_chunk.unwrap_or(w.thinking_final_chunk);
    w.error_notice = raw.error_notice.unwrap_or(w.error_notice);
    if let Some(name) = non_empty(p, &format!("{prefix}confirm_tool"), &raw.confirm_tool) {
        w.confirm_tool = name;
    }
    options.collaboration = parsed(p, &format!("{prefix}collaboration"), &raw.collaboration);
    options.history_content = parsed(p, &format!("{prefix}history_content"), &raw.history_content);
    options
}

/// `[routes.agui]`: the alternatives `dialects.md` offers (rows 13, 17, 20, 25).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAguiOptions {
    timestamps: Option<Spanned<String>>,
    state_path_repair: Option<Spanned<String>>,
    system_exception: Option<Spanned<String>>,
    content_parts: Option<Spanned<String>>,
    tool_content: Option<Spanned<String>>,
}

/// Reads one choice among `options` (the first is the default).
fn choice<'a>(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
    options: &[&'a str],
) -> &'a str {
    let Some(v) = value else {
        return options[0];
    };
    match options.iter().find(|o| **o == v.get_ref()) {
        Some(found) => found,
        None => {
            p.at(
                v.span(),
                key,
                format!(
                    "unknown value {:?} (expected {})",
                    v.get_ref(),
                    options.join(" or ")
                ),
            );
            options[0]
        }
    }
}

fn agui_options(
    p: &mut Problems,
    prefix: &str,
    raw: &RawAguiOptions,
) -> (ReaderOptions, RequestProfile) {
    let timestamps = match choice(
        p,
        &format!("{prefix}timestamps"),
        &raw.timestamps,
        &["normalise", "drop", "passthrough"],
    ) {
        "drop" => Timestamps::Drop,
        "passthrough" => Timestamps::Passthrough,
        _ => Timestamps::Normalise,
    };
    let reader = ReaderOptions {
        timestamps,
        drop_unrooted_patches: choice(
            p,
            &format!("{prefix}state_path_repair"),
            &raw.state_path_repair,
            &["prefix", "drop_event"],
        ) == "drop_event",
        system_exception_passthrough: choice(
            p,
            &format!("{prefix}system_exception"),
            &raw.system_exception,
            &["run_error", "passthrough"],
        ) == "passthrough",
    };
    let profile = RequestProfile {
        legacy_binary_parts: choice(
            p,
            &format!("{prefix}content_parts"),
            &raw.content_parts,
            &["1.0", "legacy_binary"],
        ) == "legacy_binary",
        tool_content_as_text: choice(
            p,
            &format!("{prefix}tool_content"),
            &raw.tool_content,
            &["parts", "string"],
        ) == "string",
    };
    (reader, profile)
}

/// Parses `500ms`, `2s`, `5m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (expected e.g. 500ms, 15s, 5m)"))?;
    let secs = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || !(0.001..=365.0 * 86400.0).contains(&secs) {
        return Err(format!("duration {text:?} must be between 1ms and a year"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Collects every problem with its location before failing.
struct Problems<'a> {
    origin: &'a str,
    text: &'a str,
    list: Vec<String>,
}

impl Problems<'_> {
    fn at(&mut self, span: std::ops::Range<usize>, key: &str, problem: String) {
        let before = &self.text[..span.start.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        self.list
            .push(format!("{}:{line}:{col}: {key}: {problem}", self.origin));
    }

    fn plain(&mut self, key: &str, problem: String) {
        self.list.push(format!("{}: {key}: {problem}", self.origin));
    }
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
        Ok(uri) if uri.scheme_str() == Some("http") && uri.authority().is_some() => {
            Some(Upstream::Url(uri))
        }
        Ok(uri) if uri.scheme_str() == Some("https") => {
            p.at(v.span(), key, format!("{text:?}: https upstreams are not supported by this build; put a TLS-terminating sidecar or plain http on the pod network"));
            let _ = uri;
            None
        }
        _ => {
            p.at(
                v.span(),
                key,
                format!("{text:?} is not an http:// URL or {BUILTIN_DEMO}"),
            );
            None
        }
    }
}

fn limits(p: &mut Problems, prefix: &str, raw: &RawLimits, base: Limits) -> Limits {
    let mut out = base;
    let durations = [
        (
            "connect_timeout",
            &raw.connect_timeout,
            &mut out.connect_timeout,
        ),
        (
            "headers_timeout",
            &raw.headers_timeout,
            &mut out.headers_timeout,
        ),
        ("idle_timeout", &raw.idle_timeout, &mut out.idle_timeout),
        (
            "heartbeat_interval",
            &raw.heartbeat_interval,
            &mut out.heartbeat_interval,
        ),
    ];
    for (name, value, slot) in durations {
        if let Some(v) = value {
            match parse_duration(v.get_ref()) {
                Ok(d) => *slot = d,
                Err(e) => p.at(v.span(), &format!("{prefix}{name}"), e),
            }
        }
    }
    let sizes = [
        (
            "max_event_bytes",
            &raw.max_event_bytes,
            &mut out.max_event_bytes,
        ),
        (
            "max_request_bytes",
            &raw.max_request_bytes,
            &mut out.max_request_bytes,
        ),
    ];
    for (name, value, slot) in sizes {
        if let Some(v) = value {
            match usize::try_from(*v.get_ref()) {
                Ok(n) if n >= 64 => *slot = n,
                _ => p.at(
                    v.span(),
                    &format!("{prefix}{name}"),
                    "must be at least 64 bytes".into(),
                ),
            }
        }
    }
    out
}

fn unknown_fields(p: &mut Problems, key: &str, v: &Option<Spanned<String>>) -> UnknownFields {
    match v.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
        None | Some(("metadata", _)) => UnknownFields::Metadata,
        Some(("drop", _)) => UnknownFields::Drop,
        Some((other, span)) => {
            p.at(
                span,
                key,
                format!("unknown policy {other:?} (expected metadata or drop)"),
            );
            UnknownFields::Metadata
        }
    }
}

/// Reads one `[[routes.aap.options]]` or `[[routes.aap.tools]]` entry into its wire type.
fn table<T: serde::de::DeserializeOwned>(
    p: &mut Problems,
    key: &str,
    value: &Spanned<toml::Value>,
) -> Option<T> {
    let json = serde_json::to_value(value.get_ref()).ok()?;
    serde_path_to_error::deserialize(json)
        .map_err(|e| {
            let at = e.path().to_string();
            let field = if at == "." {
                String::new()
            } else {
                format!(".{at}")
            };
            p.at(
                value.span(),
                &format!("{key}{field}"),
                e.into_inner().to_string(),
            );
        })
        .ok()
}

fn aap_agent(
    p: &mut Problems,
    prefix: &str,
    raw: &RawAap,
    name: Option<String>,
    env_keys: &[String],
) -> Option<AapAgent> {
    let Some(name) = name
        .or_else(|| raw.name.as_ref().map(|n| n.get_ref().clone()))
        .filter(|n| !n.trim().is_empty())
    else {
        p.plain(
            &format!("{prefix}name"),
            "an AAP face needs its agent's name".into(),
        );
        return None;
    };
    let mut agent = AapAgent::named(name);
    agent.title = raw.title.clone();
    agent.description = raw.description.clone();
    if let Some(v) = &raw.version {
        agent.version = v.clone();
    }
    agent.image = raw.image;
    for (i, option) in raw.options.iter().enumerate() {
        let key = format!("{prefix}options[{i}]");
        let Some(o) = table::<AgentOption>(p, &key, option) else {
            continue;
        };
        if agent.options.iter().any(|x| x.name == o.name) {
            p.at(
                option.span(),
                &format!("{key}.name"),
                format!("{:?} is declared twice", o.name),
            );
        }
        match (&o.kind, &o.options) {
            (OptionKind::Select, Some(values)) if values.contains(&o.default) => {}
            (OptionKind::Select, _) => p.at(
                option.span(),
                &format!("{key}.options"),
                "a select option lists its values, the default among them".into(),
            ),
            (_, Some(_)) => p.at(
                option.span(),
                &format!("{key}.options"),
                "only select options list values".into(),
            ),
            _ => {}
        }
        agent.options.push(o);
    }
    for (i, tool) in raw.tools.iter().enumerate() {
        let key = format!("{prefix}tools[{i}]");
        let Some(t) = table::<ToolSpec>(p, &key, tool) else {
            continue;
        };
        if agent.tools.iter().any(|x| x.name == t.name) {
            p.at(
                tool.span(),
                &format!("{key}.name"),
                format!("{:?} is declared twice", t.name),
            );
        }
        agent.tools.push(t);
    }
    if let Some(name) = non_empty(p, &format!("{prefix}confirm_tool"), &raw.confirm_tool) {
        agent.confirm_tool = name;
    }
    agent.inject_confirm_tool = raw.inject_confirm_tool.unwrap_or(true);
    agent.result_encoding = parsed(p, &format!("{prefix}result_encoding"), &raw.result_encoding);
    agent.denial_as = parsed(p, &format!("{prefix}denial_as"), &raw.denial_as);
    agent.forward_secret_options = raw.forward_secret_options.unwrap_or(true);
    agent.api_keys = raw.api_keys.clone();
    if let Some(var) = &raw.api_keys_env {
        match std::env::var(var.get_ref()) {
            Ok(keys) => agent.api_keys.extend(split_keys(&keys)),
            Err(_) => p.at(
                var.span(),
                &format!("{prefix}api_keys_env"),
                format!("the environment variable {} is not set", var.get_ref()),
            ),
        }
    }
    agent.api_keys.extend(env_keys.iter().cloned());
    if agent.api_keys.iter().any(|k| k.trim().is_empty()) {
        p.plain(
            &format!("{prefix}api_keys"),
            "an API key must not be empty".into(),
        );
    }
    Some(agent)
}

/// A name that must not be blank, when one is given.
fn non_empty(p: &mut Problems, key: &str, value: &Option<Spanned<String>>) -> Option<String> {
    let value = value.as_ref()?;
    if value.get_ref().trim().is_empty() {
        p.at(value.span(), key, "must not be empty".into());
        return None;
    }
    Some(value.get_ref().clone())
}

/// One of two words, as a flag.
fn either(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
    yes: &str,
    no: &str,
) -> bool {
    match value {
        None => true,
        Some(v) if v.get_ref() == yes => true,
        Some(v) if v.get_ref() == no => false,
        Some(v) => {
            p.at(
                v.span(),
                key,
                format!("unknown value {:?} (expected {yes} or {no})", v.get_ref()),
            );
            true
        }
    }
}

fn aap_upstream(
    p: &mut Problems,
    prefix: &str,
    raw: &RawAapUpstream,
    agent: Option<String>,
) -> AapUpstream {
    let mut up = AapUpstream {
        agent: agent
            .or_else(|| raw.agent.clone())
            .filter(|a| !a.trim().is_empty()),
        stream_mode: parsed(p, &format!("{prefix}stream_mode"), &raw.stream_mode),
        hitl: parsed(p, &format!("{prefix}hitl"), &raw.hitl),
        unconfirmable: parsed(p, &format!("{prefix}unconfirmable"), &raw.unconfirmable),
        limit_stops: parsed(p, &format!("{prefix}limit_stops"), &raw.limit_stops),
        fork_on_divergence: either(
            p,
            &format!("{prefix}history_divergence"),
            &raw.history_divergence,
            "fork",
            "reject",
        ),
        recreate_lost_sessions: either(
            p,
            &format!("{prefix}on_session_lost"),
            &raw.on_session_lost,
            "recreate",
            "error",
        ),
        context_as_system: either(
            p,
            &format!("{prefix}context"),
            &raw.context,
            "seed_system",
            "drop",
        ),
        api_key: raw.api_key.clone(),
        options: raw
            .options
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
        ..AapUpstream::default()
    };
    if let Some(name) = non_empty(p, &format!("{prefix}confirm_tool"), &raw.confirm_tool) {
        up.confirm_tool = name;
    }
    if let Some(var) = &raw.api_key_env {
        match std::env::var(var.get_ref()) {
            Ok(key) if !key.trim().is_empty() => up.api_key = Some(key.trim().to_owned()),
            _ => p.at(
                var.span(),
                &format!("{prefix}api_key_env"),
                format!("the environment variable {} is not set", var.get_ref()),
            ),
        }
    }
    if let Some(tools) = &raw.tools {
        let mut refs = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            if let Some(t) = table::<ServerToolRef>(p, &format!("{prefix}tools[{i}]"), tool) {
                refs.push(t);
            }
        }
        up.tools = Some(refs);
    }
    up
}

/// A comma-separated key list.
fn split_keys(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
}

fn sessions(p: &mut Problems, raw: &RawSessions) -> SessionLimits {
    let mut limits = SessionLimits::default();
    let counts = [
        (
            "sessions.max_sessions",
            &raw.max_sessions,
            &mut limits.max_sessions,
            1,
        ),
        (
            "sessions.max_history_bytes",
            &raw.max_history_bytes,
            &mut limits.max_history_bytes,
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

/// Routes sharing a path must all be AAP faces, serving agents of different names (one face
/// lists them all in `/meta`).
fn check_shared_paths(p: &mut Problems, routes: &[Route]) {
    for (i, a) in routes.iter().enumerate() {
        for b in &routes[i + 1..] {
            if a.path.trim_end_matches('/') != b.path.trim_end_matches('/') {
                continue;
            }
            match (&a.aap, &b.aap) {
                (Some(x), Some(y)) if x.name != y.name => {}
                (Some(x), Some(_)) => p.plain(
                    "routes",
                    format!("two AAP routes on {} serve the agent {:?}", a.path, x.name),
                ),
                _ if a.aap.is_some() || b.aap.is_some() => p.plain(
                    "routes",
                    format!(
                        "{} is both an AAP face and a {} route; give them different paths",
                        a.path,
                        if a.aap.is_some() { b.client } else { a.client }
                    ),
                ),
                _ => {}
            }
        }
    }
}

fn check_route_dialects(
    p: &mut Problems,
    key: &str,
    client: Dialect,
    upstream_dialect: Dialect,
    upstream: Option<&Upstream>,
) {
    if upstream_dialect == Dialect::Aap && client == Dialect::Aap {
        p.plain(
            key,
            "aap clients in front of aap upstreams are not supported by this build (an AAP agent can be reached directly)".into(),
        );
    }
    if upstream == Some(&Upstream::BuiltinDemo) && upstream_dialect != Dialect::AgUi {
        p.plain(
            key,
            format!("the built-in demo agent speaks ag-ui, not {upstream_dialect}; drop upstream_dialect or set it to ag-ui"),
        );
    }
}

/// A server-wide duration: the flag, else the file, else the default.
fn server_duration(
    p: &mut Problems,
    key: &str,
    flag: &Option<String>,
    file: &Option<Spanned<String>>,
    default: Duration,
) -> Duration {
    if let Some(text) = flag {
        return parse_duration(text).unwrap_or_else(|e| {
            p.list
                .push(format!("flags: --{}: {e}", key.replace('_', "-")));
            default
        });
    }
    match file {
        Some(v) => parse_duration(v.get_ref()).unwrap_or_else(|e| {
            p.at(v.span(), key, e);
            default
        }),
        None => default,
    }
}

/// Resolves the configuration: the file (if any), then `overrides` (flags and environment).
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
    let (text, origin) = match file {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?,
            path.display().to_string(),
        ),
        None => (String::new(), "flags".to_string()),
    };
    let raw: RawConfig = toml::from_str(&text)
        .map_err(|e| ConfigError::Invalid(format!("{origin}: {}", e.to_string().trim_end())))?;
    let mut p = Problems {
        origin: &origin,
        text: &text,
        list: Vec::new(),
    };
    let flag_text = String::new();
    let base_limits = limits(&mut p, "limits.", &raw.limits, Limits::default());
    let mut flag_problems = Problems {
        origin: "flags",
        text: &flag_text,
        list: Vec::new(),
    };
    let flag_limits = limits(&mut flag_problems, "--", &overrides.limits, base_limits);
    let drain_timeout = server_duration(
        &mut p,
        "drain_timeout",
        &overrides.drain_timeout,
        &raw.drain_timeout,
        DEFAULT_DRAIN_TIMEOUT,
    );
    let stall_timeout = server_duration(
        &mut p,
        "stall_timeout",
        &overrides.stall_timeout,
        &raw.stall_timeout,
        DEFAULT_STALL_TIMEOUT,
    );
    let listen_text = overrides
        .listen
        .clone()
        .or_else(|| raw.listen.as_ref().map(|l| l.get_ref().clone()))
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen = listen_text.parse::<SocketAddr>().map_err(|e| {
        ConfigError::Invalid(format!(
            "listen: {listen_text:?} is not an address like 127.0.0.1:8080 ({e})"
        ))
    });
    let admin_text = overrides
        .admin_listen
        .clone()
        .or_else(|| raw.admin_listen.as_ref().map(|l| l.get_ref().clone()));
    let admin_listen = match admin_text {
        None => None,
        Some(text) => match text.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(e) => {
                p.plain(
                    "admin_listen",
                    format!("{text:?} is not an address like 127.0.0.1:9901 ({e})"),
                );
                None
            }
        },
    };
    let session_limits = sessions(&mut p, &raw.sessions);
    let env_keys: Vec<String> = overrides
        .aap_api_keys
        .as_deref()
        .map(|k| split_keys(k).collect())
        .unwrap_or_default();
    let mut routes = Vec::new();
    let single_route = overrides.upstream.is_some() || overrides.client.is_some();
    if file.is_some() && single_route {
        p.plain(
            "--upstream/--client",
            "single-route flags cannot be combined with --config; put the route in the file".into(),
        );
    }
    for (i, r) in raw.routes.iter().enumerate() {
        let key = format!("routes[{i}]");
        let client = dialect(&mut p, &format!("{key}.client"), &r.client);
        let upstream_dialect = match &r.upstream_dialect {
            Some(d) => dialect(&mut p, &format!("{key}.upstream_dialect"), d),
            None => Some(Dialect::AgUi),
        };
        let upstream = upstream(&mut p, &format!("{key}.upstream"), &r.upstream);
        let limits = limits(&mut p, &format!("{key}.limits."), &r.limits, flag_limits);
        let unknown_fields =
            unknown_fields(&mut p, &format!("{key}.unknown_fields"), &r.unknown_fields);
        let (reader, request_profile) = agui_options(&mut p, &format!("{key}.agui."), &r.agui);
        let hai = hai_options(&mut p, &format!("{key}.hai."), &r.hai);
        let path = r.path.get_ref().clone();
        if !path.starts_with('/') {
            p.at(
                r.path.span(),
                &format!("{key}.path"),
                format!("{path:?} must start with /"),
            );
        }
        if let (Some(c), Some(u)) = (client, upstream_dialect) {
            check_route_dialects(&mut p, &key, c, u, upstream.as_ref());
        }
        let aap = match (client, &r.aap) {
            (Some(Dialect::Aap), raw) => {
                let empty = RawAap::default();
                aap_agent(
                    &mut p,
                    &format!("{key}.aap."),
                    raw.as_ref().unwrap_or(&empty),
                    None,
                    &env_keys,
                )
            }
            (Some(c), Some(_)) => {
                p.plain(&format!("{key}.aap"), format!("only a route with client = \"aap\" has an [routes.aap] table, not a {c} route"));
                None
            }
            _ => None,
        };
        let aap_upstream = match (upstream_dialect, &r.aap_upstream) {
            (Some(Dialect::Aap), raw) => {
                let empty = RawAapUpstream::default();
                Some(aap_upstream(
                    &mut p,
                    &format!("{key}.aap_upstream."),
                    raw.as_ref().unwrap_or(&empty),
                    None,
                ))
            }
            (Some(u), Some(_)) => {
                p.plain(&format!("{key}.aap_upstream"), format!("only a route with upstream_dialect = \"aap\" has an [routes.aap_upstream] table, not an {u} upstream"));
                None
            }
            _ => None,
        };
        if let (Some(client), Some(upstream), Some(upstream_dialect)) =
            (client, upstream, upstream_dialect)
        {
            if client == Dialect::Aap && aap.is_none() {
                continue;
            }
            routes.push(Route {
                path,
                client,
                upstream,
                upstream_dialect,
                limits,
                keep_upstream_run_ids: r.keep_upstream_run_ids,
                unknown_fields,
                reader,
                request_profile,
                hai,
                aap,
                aap_upstream,
            });
        }
    }
    if file.is_none() {
        let flag = |v: &Option<String>, default: &str| {
            Spanned::new(0..0, v.clone().unwrap_or_else(|| default.to_string()))
        };
        match &overrides.upstream {
            None => flag_problems.plain(
                "--upstream",
                format!("required without --config (an http:// URL, or {BUILTIN_DEMO})"),
            ),
            Some(_) => {
                let client = dialect(
                    &mut flag_problems,
                    "--client",
                    &flag(&overrides.client, "ag-ui"),
                );
                let upstream_dialect = dialect(
                    &mut flag_problems,
                    "--upstream-dialect",
                    &flag(&overrides.upstream_dialect, "ag-ui"),
                );
                let upstream = upstream(
                    &mut flag_problems,
                    "--upstream",
                    &flag(&overrides.upstream, ""),
                );
                if let (Some(c), Some(u)) = (client, upstream_dialect) {
                    check_route_dialects(&mut flag_problems, "route", c, u, upstream.as_ref());
                }
                let aap = match client {
                    Some(Dialect::Aap) => aap_agent(
                        &mut flag_problems,
                        "--agent-",
                        &RawAap::default(),
                        overrides.agent_name.clone(),
                        &env_keys,
                    ),
                    _ => None,
                };
                let aap_upstream = (upstream_dialect == Some(Dialect::Aap)).then(|| {
                    aap_upstream(
                        &mut flag_problems,
                        "--",
                        &RawAapUpstream::default(),
                        overrides.agent_name.clone(),
                    )
                });
                if let (Some(client), Some(upstream), Some(upstream_dialect)) =
                    (client, upstream, upstream_dialect)
                {
                    routes.push(Route {
                        path: "/".into(),
                        client,
                        upstream,
                        upstream_dialect,
                        limits: flag_limits,
                        keep_upstream_run_ids: false,
                        unknown_fields: UnknownFields::Metadata,
                        reader: ReaderOptions::default(),
                        request_profile: RequestProfile::default(),
                        hai: HaiOptions::default(),
                        aap,
                        aap_upstream,
                    });
                }
            }
        }
    } else if raw.routes.is_empty() {
        p.plain("routes", "the file defines no [[routes]]".into());
    }
    check_shared_paths(&mut p, &routes);
    let mut problems = p.list;
    problems.extend(flag_problems.list);
    if let Err(e) = &listen {
        problems.push(e.to_string());
    }
    if !problems.is_empty() {
        return Err(ConfigError::Invalid(problems.join("\n")));
    }
    let mappings = match overrides.mappings.as_ref().or(raw.mappings.as_ref()) {
        Some(dir) => load_mappings(dir)?,
        None => Mappings::builtin(),
    };
    // Longest prefix first, so the most specific route wins.
    routes.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
    Ok(Config {
        listen: listen?,
        admin_listen,
        routes,
        mappings,
        drain_timeout,
        stall_timeout,
        sessions: session_limits,
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
