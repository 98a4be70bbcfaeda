//! `[routes.aap_upstream]`: the gateway as an AAP client (`translation.md` §4.3–4.4, §6), and
//! its policy words (§0.1): how permissions reach the client, what the gateway answers for a
//! client that cannot be asked, and which stream mode the agent is asked for.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::aap_face::table;
use super::problems::{non_empty, parsed, Keys, Problems};
use crate::dialect::aap::read::LimitStops;
use crate::dialect::aap::types::{ServerToolRef, StreamMode};
use crate::dialect::confirm::DEFAULT_TOOL;

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

/// `[routes.aap_upstream]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAapUpstream {
    pub agent: Option<String>,
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
    options: BTreeMap<String, String>,
    tools: Option<Vec<Spanned<toml::Value>>>,
}

pub(super) fn aap_upstream(p: &mut Problems, keys: &Keys, raw: &RawAapUpstream) -> AapUpstream {
    let mut up = AapUpstream {
        agent: raw.agent.clone().filter(|a| !a.trim().is_empty()),
        stream_mode: parsed(p, &keys.key("stream_mode"), &raw.stream_mode),
        hitl: parsed(p, &keys.key("hitl"), &raw.hitl),
        unconfirmable: parsed(p, &keys.key("unconfirmable"), &raw.unconfirmable),
        limit_stops: parsed(p, &keys.key("limit_stops"), &raw.limit_stops),
        fork_on_divergence: either(
            p,
            &keys.key("history_divergence"),
            &raw.history_divergence,
            "fork",
            "reject",
        ),
        recreate_lost_sessions: either(
            p,
            &keys.key("on_session_lost"),
            &raw.on_session_lost,
            "recreate",
            "error",
        ),
        context_as_system: either(p, &keys.key("context"), &raw.context, "seed_system", "drop"),
        api_key: raw.api_key.clone(),
        options: raw
            .options
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
        ..AapUpstream::default()
    };
    if let Some(name) = non_empty(p, &keys.key("confirm_tool"), &raw.confirm_tool) {
        up.confirm_tool = name;
    }
    if let Some(var) = &raw.api_key_env {
        match std::env::var(var.get_ref()) {
            Ok(key) if !key.trim().is_empty() => up.api_key = Some(key.trim().to_owned()),
            _ => p.at(
                var.span(),
                &keys.key("api_key_env"),
                format!("the environment variable {} is not set", var.get_ref()),
            ),
        }
    }
    if let Some(tools) = &raw.tools {
        let mut refs = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            if let Some(t) = table::<ServerToolRef>(p, &keys.key(&format!("tools[{i}]")), tool) {
                refs.push(t);
            }
        }
        up.tools = Some(refs);
    }
    up
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

/// Parses one of a policy's words, or says which were expected.
fn word<T: Copy>(s: &str, words: &[(&str, T)]) -> Result<T, String> {
    words
        .iter()
        .find(|(w, _)| *w == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = words.iter().map(|(w, _)| *w).collect();
            format!("unknown value {s:?} (expected {})", names.join(", "))
        })
}

/// How permissions reach the client (`hitl.style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HitlStyle {
    /// The confirm tool when the client declared it; else an interrupt for AG-UI 1.0 clients;
    /// else the client cannot be asked.
    #[default]
    Auto,
    Interrupt,
    ConfirmTool,
}

impl std::str::FromStr for HitlStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("auto", HitlStyle::Auto),
                ("interrupt", HitlStyle::Interrupt),
                ("confirm_tool", HitlStyle::ConfirmTool),
            ],
        )
    }
}

/// What the gateway answers for a client that cannot be asked (`hitl.unconfirmable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unconfirmable {
    /// Fail closed: deny, and let the agent go on.
    #[default]
    Deny,
    Grant,
    /// End the run with `CONFIRMATION_UNAVAILABLE`.
    Error,
}

impl std::str::FromStr for Unconfirmable {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("deny", Unconfirmable::Deny),
                ("grant", Unconfirmable::Grant),
                ("error", Unconfirmable::Error),
            ],
        )
    }
}

/// Which stream mode turns ask for (`aap.stream_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamChoice {
    /// The best the agent declares: delta, then message, then none.
    #[default]
    Auto,
    Fixed(StreamMode),
}

impl std::str::FromStr for StreamChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        word(
            s,
            &[
                ("auto", StreamChoice::Auto),
                ("delta", StreamChoice::Fixed(StreamMode::Delta)),
                ("message", StreamChoice::Fixed(StreamMode::Message)),
                ("none", StreamChoice::Fixed(StreamMode::None)),
            ],
        )
    }
}
