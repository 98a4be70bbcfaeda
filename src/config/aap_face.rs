//! `[routes.aap]`: the agent an AAP face serves, as `/meta` describes it (name, version,
//! options, server tools), how its turns are run, and the API keys it accepts.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::problems::{non_empty, parsed, Keys, Problems};
use crate::dialect::aap::types::{AgentOption, OptionKind, ToolSpec};
use crate::dialect::confirm::{DenialAs, ResultEncoding, DEFAULT_TOOL};

/// The agent version `/meta` announces when none is configured.
pub const DEFAULT_AGENT_VERSION: &str = "0.0.0";
/// The environment variable with inbound API keys for every AAP face (comma-separated).
pub const AAP_API_KEYS_ENV: &str = "DIALECT_PROXY_AAP_API_KEYS";

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
    /// Streamed turns carry what AAP cannot hold of the upstream's AG-UI run under the `agui`
    /// extension (`agui_extension`), which the gateway's own AAP client reads back.
    pub agui_extension: bool,
    /// Inbound API keys (`api_keys`, `api_keys_env`, `DIALECT_PROXY_AAP_API_KEYS`), folded
    /// into the route's `auth`, which the server checks; empty means none of the face's own.
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
            agui_extension: false,
            api_keys: Vec::new(),
        }
    }
}

/// `[routes.aap]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAap {
    pub name: Option<Spanned<String>>,
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
    agui_extension: bool,
    #[serde(default)]
    api_keys: Vec<String>,
    api_keys_env: Option<Spanned<String>>,
}

/// Reads one `[[routes.aap.options]]`, `[[routes.aap.tools]]` or `aap_upstream.tools` entry into
/// its wire type.
pub(super) fn table<T: serde::de::DeserializeOwned>(
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

/// A comma-separated key list.
pub(super) fn split_keys(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
}

/// The agent of the route at `at`; `env_keys` are the API keys every face accepts.
pub(super) fn aap_agent(
    p: &mut Problems,
    keys: &Keys,
    at: Range<usize>,
    raw: &RawAap,
    env_keys: &[String],
) -> Option<AapAgent> {
    let Some(name) = raw
        .name
        .as_ref()
        .map(|n| n.get_ref().clone())
        .filter(|n| !n.trim().is_empty())
    else {
        let at = raw.name.as_ref().map_or(at, Spanned::span);
        p.at(
            at,
            &keys.key("name"),
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
        let key = keys.key(&format!("options[{i}]"));
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
        let key = keys.key(&format!("tools[{i}]"));
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
    if let Some(name) = non_empty(p, &keys.key("confirm_tool"), &raw.confirm_tool) {
        agent.confirm_tool = name;
    }
    agent.inject_confirm_tool = raw.inject_confirm_tool.unwrap_or(true);
    agent.result_encoding = parsed(p, &keys.key("result_encoding"), &raw.result_encoding);
    agent.denial_as = parsed(p, &keys.key("denial_as"), &raw.denial_as);
    agent.forward_secret_options = raw.forward_secret_options.unwrap_or(true);
    agent.agui_extension = raw.agui_extension;
    agent.api_keys = raw.api_keys.clone();
    if let Some(var) = &raw.api_keys_env {
        match std::env::var(var.get_ref()) {
            Ok(keys) => agent.api_keys.extend(split_keys(&keys)),
            Err(_) => p.at(
                var.span(),
                &keys.key("api_keys_env"),
                format!("the environment variable {} is not set", var.get_ref()),
            ),
        }
    }
    agent.api_keys.extend(env_keys.iter().cloned());
    if agent.api_keys.iter().any(|k| k.trim().is_empty()) {
        p.at(
            at,
            &keys.key("api_keys"),
            "an API key must not be empty".into(),
        );
    }
    Some(agent)
}
