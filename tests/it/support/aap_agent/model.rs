//! The built-in behaviour of [`super::AapAgent`]: a deterministic stand-in for the reference
//! SDK's example agent driven by an LLM (`aap.md` §8), enough to exercise every turn shape.
//!
//! The turn's input messages are read in order:
//!
//! - `tool_permission` granted → `"Fetched."` (for `web_fetch`; `"Done."` for any other tool).
//!   The tool ran before `turn_start` and, as in SDK 0.8.0 (deviation 1 of `aap.md` §7), there
//!   is **no** `tool_result` event; the result is stored in the history by the server.
//! - `tool_permission` denied → `"Understood: <reason>"` (`"Understood."` without a reason).
//! - `tool_permission` for a call that is not pending → the stream ends without `turn_stop` (a
//!   500 in `none` mode), as the SDK does (deviation 4).
//! - `tool` → `"Weather: <content text>"`.
//! - `user` (its text, case-insensitively):
//!   - contains `think` → a thinking part `"Thinking about: "` + text first;
//!   - contains `weather` and the session has the client tool `get_weather` → `tool_call`
//!     `get_weather {"city": <last word>}`, `turn_stop: tool_use`;
//!   - contains `fetch` → `tool_call` `web_fetch {"url": <first http(s) word ∥
//!     "https://example.com">}`; trusted (`{"name":"web_fetch","trust":true}` in the session's
//!     `agent.tools`) → `tool_result` `"Content of <url>"` and text `"Fetched."`, `end_turn`;
//!     otherwise `turn_stop: tool_use`, awaiting permission;
//!   - otherwise → `"You said: <text>"`, as the two deltas `"You said: "` and `<text>`.
//!
//! Texts produced by several answers of one turn are joined by `"\n"` into one text part.

use serde_json::json;

use super::{super::aap::content_text, server_tool_output, TurnCtx, TurnReply};

/// The server tool the model calls for "fetch".
pub const WEB_FETCH: &str = "web_fetch";
/// The client tool the model calls for "weather".
pub const GET_WEATHER: &str = "get_weather";

/// The built-in model's answer to a turn (see the module docs). Scripts may call it and add
/// quirks: `model_reply(ctx).double_stop()`.
pub fn model_reply(ctx: &TurnCtx) -> TurnReply {
    let mut reply = TurnReply::new();
    let mut texts: Vec<String> = Vec::new();
    for message in ctx.input() {
        match message["role"].as_str().unwrap_or_default() {
            "tool_permission" => {
                let id = message["toolCallId"].as_str().unwrap_or_default();
                let Some(call) = ctx.pending_call(id) else {
                    return reply.omit_stop();
                };
                if message["granted"] == true {
                    let done = if call["name"] == WEB_FETCH {
                        "Fetched."
                    } else {
                        "Done."
                    };
                    texts.push(done.to_owned());
                } else {
                    texts.push(match message["reason"].as_str() {
                        Some(reason) => format!("Understood: {reason}"),
                        None => "Understood.".to_owned(),
                    });
                }
            }
            "tool" => texts.push(format!("Weather: {}", content_text(&message["content"]))),
            "user" => {
                reply = flush(reply, &mut texts);
                let text = content_text(&message["content"]);
                let (next, stopped) = answer_user(ctx, reply, &text);
                if stopped {
                    return next;
                }
                reply = next;
            }
            _ => {}
        }
    }
    flush(reply, &mut texts)
}

fn flush(reply: TurnReply, texts: &mut Vec<String>) -> TurnReply {
    if texts.is_empty() {
        return reply;
    }
    let text = std::mem::take(texts).join("\n");
    reply.text(&text)
}

/// The answer to one user message; `true` when the turn stops here (a tool call).
fn answer_user(ctx: &TurnCtx, mut reply: TurnReply, text: &str) -> (TurnReply, bool) {
    let lower = text.to_lowercase();
    if lower.contains("think") {
        reply = reply.thinking_deltas(&["Thinking about: ", text]);
    }
    if lower.contains("weather") && ctx.has_client_tool(GET_WEATHER) {
        let city = text
            .split_whitespace()
            .last()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .unwrap_or_default();
        let id = ctx.new_call_id();
        let reply = reply
            .tool_call(&id, GET_WEATHER, json!({"city": city}))
            .stop("tool_use");
        return (reply, true);
    }
    if lower.contains("fetch") {
        let url = text
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .unwrap_or("https://example.com");
        let input = json!({"url": url});
        let id = ctx.new_call_id();
        reply = reply.tool_call(&id, WEB_FETCH, input.clone());
        if ctx.server_tool_trusted(WEB_FETCH) {
            let output = server_tool_output(WEB_FETCH, &input);
            return (reply.tool_result(&id, output).text("Fetched."), false);
        }
        return (reply.stop("tool_use"), true);
    }
    (reply.text_deltas(&["You said: ", text]), false)
}
