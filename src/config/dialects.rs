//! Per-dialect options of a route: `unknown_fields`, `[routes.agui]` (the AG-UI reader's
//! policies and the upstream's request profile) and `[routes.hai]` (HAI's writer profile and
//! reader choices).

use serde::Deserialize;
use toml::Spanned;

use super::problems::{non_empty, parsed, Keys, Problems};
use crate::dialect::agui::{
    ProtocolVersion, ReaderOptions, RequestProfile, Timestamps, UnknownFields,
};
use crate::dialect::hai::HaiOptions;

/// `[routes.agui]`: the alternatives `dialects.md` offers (rows 13, 17, 20, 25).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAguiOptions {
    timestamps: Option<Spanned<String>>,
    state_path_repair: Option<Spanned<String>>,
    system_exception: Option<Spanned<String>>,
    content_parts: Option<Spanned<String>>,
    tool_content: Option<Spanned<String>>,
    protocol_version: Option<Spanned<String>>,
}

/// `[routes.hai]`: HAI's writer profile and reader choices (`translation.md` §0.1, `hai.md` §9).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHaiOptions {
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

/// `unknown_fields`: what the readers do with fields the dialect does not define.
pub(super) fn unknown_fields(
    p: &mut Problems,
    key: &str,
    v: &Option<Spanned<String>>,
) -> UnknownFields {
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

pub(super) fn agui_options(
    p: &mut Problems,
    keys: &Keys,
    raw: &RawAguiOptions,
) -> (ReaderOptions, RequestProfile, ProtocolVersion) {
    let timestamps = match choice(
        p,
        &keys.key("timestamps"),
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
            &keys.key("state_path_repair"),
            &raw.state_path_repair,
            &["prefix", "drop_event"],
        ) == "drop_event",
        system_exception_passthrough: choice(
            p,
            &keys.key("system_exception"),
            &raw.system_exception,
            &["run_error", "passthrough"],
        ) == "passthrough",
    };
    let profile = RequestProfile {
        legacy_binary_parts: choice(
            p,
            &keys.key("content_parts"),
            &raw.content_parts,
            &["1.0", "legacy_binary"],
        ) == "legacy_binary",
        tool_content_as_text: choice(
            p,
            &keys.key("tool_content"),
            &raw.tool_content,
            &["parts", "string"],
        ) == "string",
    };
    let version = match choice(
        p,
        &keys.key("protocol_version"),
        &raw.protocol_version,
        &["1.0", "1.1"],
    ) {
        "1.1" => ProtocolVersion::V1_1,
        _ => ProtocolVersion::V1_0,
    };
    (reader, profile, version)
}

pub(super) fn hai_options(p: &mut Problems, keys: &Keys, raw: &RawHaiOptions) -> HaiOptions {
    let mut options = HaiOptions::default();
    let w = &mut options.writer;
    w.delta_encoding = parsed(p, &keys.key("delta_encoding"), &raw.delta_encoding);
    w.tool_args = parsed(p, &keys.key("tool_args"), &raw.tool_args);
    w.snapshot_name = parsed(p, &keys.key("snapshot_name"), &raw.snapshot_name);
    w.subagents = parsed(p, &keys.key("subagents"), &raw.subagents);
    w.run_ids = raw.run_ids.unwrap_or(w.run_ids);
    w.thinking_final_chunk = raw.thinking_final_chunk.unwrap_or(w.thinking_final_chunk);
    w.error_notice = raw.error_notice.unwrap_or(w.error_notice);
    if let Some(name) = non_empty(p, &keys.key("confirm_tool"), &raw.confirm_tool) {
        w.confirm_tool = name;
    }
    options.collaboration = parsed(p, &keys.key("collaboration"), &raw.collaboration);
    options.history_content = parsed(p, &keys.key("history_content"), &raw.history_content);
    options
}
