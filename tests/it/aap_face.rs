//! The AAP v3 face: the real gateway serving the AAP REST API (`aap.md` §2–§6) in front of an
//! AG-UI agent (`translation.md` §4.1, §4.2, §6.2 B3/B4, §7), driven over real TCP by the AAP
//! client of `support::aap`.
//!
//! Covered: `GET /meta` (flags and config mode, the image capability), API keys (config and
//! environment), session create / get / list pages / delete, history types, a plain turn in each
//! stream mode against the built-in demo agent, the client-tool round trip (B4), permission
//! granted and denied through the confirm tool (B3), option merging and secret redaction, the
//! session limit (429), concurrent turns (409), a table of bad requests, and upstream faults
//! (truncated stream, HTTP 500) with what the scripted AG-UI upstream received.
//!
//! Every gateway here is spawned through `support::aap` (one test sets an environment variable
//! for its child only, see `spawn_gateway_with_env`).

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{
    aap::{
        agui_texts, assert_no_dangling_tool_use, assistant_text, block_types, content_text,
        event_names, normalise_call_ids, object, roles, spawn_gateway, spawn_gateway_with_env,
        spawn_with_config, stop_reason, tool_message, tool_spec, tool_uses, user_turn,
        wait_for_event, AapClient, Reply, CONFIRM_TOOL,
    },
    agui_script::{ack_upstream, agui_text_script, last_user_text},
    Gateway, RecordedRequest, Script, ScriptedUpstream, PATIENCE,
};

/// The multi-byte string every demo turn streams after the echo (`src/demo/script.rs`).
const GREETING: &str = "你好, wörld 🌍";

/// The demo's backend tool, answered inside the turn.
const BACKEND_TOOL: &str = "get_weather";

/// The exact capabilities of an agent without image support (`translation.md` §4.1).
fn capabilities_without_image() -> Value {
    json!({"stream": {"delta": {}, "message": {}, "none": {}},
           "application": {"tools": {}},
           "history": {"compacted": {}, "full": {}}})
}

/// The built-in demo agent served as AAP agent `demo` at the root, from flags only.
fn demo_gateway() -> (Gateway, AapClient) {
    let gateway = spawn_gateway(&demo_args());
    let aap = AapClient::new(gateway.addr, "", None);
    (gateway, aap)
}

fn demo_args() -> [&'static str; 6] {
    [
        "--client",
        "aap",
        "--upstream",
        "builtin:demo",
        "--agent-name",
        "demo",
    ]
}

/// A config file with one AAP route at `/v1`: agent `support` in front of `upstream`, with the
/// options `model` (text), `api_key` (secret) and `tier` (select) and the server tool
/// `web_fetch`. `aap_extra` adds keys to `[routes.aap]`; `sessions` is the `[sessions]` body.
fn support_config(upstream: &str, aap_extra: &str, sessions: &str) -> String {
    format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{upstream}"

[routes.aap]
name = "support"
title = "Support agent"
version = "1.2.3"
description = "Answers questions"
{aap_extra}

[[routes.aap.options]]
type = "text"
name = "model"
default = "fast"

[[routes.aap.options]]
type = "secret"
name = "api_key"
default = ""

[[routes.aap.options]]
type = "select"
name = "tier"
default = "free"
options = ["free", "gold"]

[[routes.aap.tools]]
name = "web_fetch"
description = "Fetch a URL"
parameters = {{ type = "object", properties = {{ url = {{ type = "string" }} }} }}

[sessions]
{sessions}
"#
    )
}

/// The `support` agent at `/v1` (see [`support_config`]); the client sends `api_key`.
fn support_gateway(
    upstream: &str,
    aap_extra: &str,
    sessions: &str,
    api_key: Option<&str>,
) -> (Gateway, AapClient) {
    let gateway = spawn_with_config(&support_config(upstream, aap_extra, sessions));
    let aap = AapClient::new(gateway.addr, "/v1", api_key);
    (gateway, aap)
}

fn web_fetch_spec() -> Value {
    json!({"name": "web_fetch", "description": "Fetch a URL",
           "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}})
}

/// Checks what the AG-UI upstream received for a turn of session `sid` (`translation.md` §4.1
/// step 5): `threadId` = sessionId, a fresh `runId`, the client tools then the confirm tool,
/// `forwardedProps.aap` = `aap`, and the messages' `(role, text)` = `history`.
fn assert_upstream_request(
    request: &RecordedRequest,
    sid: &str,
    client_tools: &[&str],
    aap: &Value,
    history: &[(&str, &str)],
) {
    let body = request.json();
    assert_eq!(
        body["threadId"], sid,
        "threadId must be the sessionId: {body}"
    );
    assert!(
        body["runId"].as_str().is_some_and(|r| !r.is_empty()),
        "runId: {body}"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools array: {body}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default())
        .collect();
    let mut expected_tools = client_tools.to_vec();
    expected_tools.push(CONFIRM_TOOL);
    assert_eq!(tools, expected_tools, "client tools, then the confirm tool");
    assert_eq!(body["forwardedProps"]["aap"], *aap, "forwardedProps.aap");
    let texts = agui_texts(&body["messages"]);
    let texts: Vec<(&str, &str)> = texts
        .iter()
        .map(|(r, t)| (r.as_str(), t.as_str()))
        .collect();
    assert_eq!(texts, history, "the whole history goes upstream");
}

// ---------------------------------------------------------------------------------------------
// Demo-turn checks

/// What every demo user turn says (`src/demo/script.rs`): one assistant message with the
/// thinking, the echo of `said` with the greeting and the `get_weather` call; its `tool` result;
/// a closing assistant message ending in an unanswered `{}` call of `pending_tool`; `tool_use`.
/// Returns the id of the pending call.
fn assert_demo_turn(stop: &str, messages: &[Value], said: &str, pending_tool: &str) -> String {
    let all = Value::Array(messages.to_vec());
    assert_eq!(
        stop, "tool_use",
        "a demo turn ends calling {pending_tool}: {all}"
    );
    assert_eq!(roles(messages), ["assistant", "tool", "assistant"], "{all}");
    assert_eq!(
        block_types(messages),
        [
            vec!["thinking", "text", "tool_use"],
            vec!["text", "tool_use"]
        ],
        "{all}"
    );
    let text = assistant_text(messages);
    assert!(text.contains(said), "the echo quotes {said:?}: {text}");
    assert!(
        text.contains(GREETING),
        "the echo ends in {GREETING:?}: {text}"
    );
    let thinking = &messages[0]["content"][0]["thinking"];
    assert!(
        thinking.as_str().is_some_and(|t| t.contains("Zürich")),
        "thinking: {thinking}"
    );

    let calls = tool_uses(messages);
    assert_eq!(calls.len(), 2, "{all}");
    assert_eq!(calls[0]["name"], BACKEND_TOOL);
    assert_eq!(calls[0]["input"], json!({"city": "Zürich"}));
    let weather_id = calls[0]["toolCallId"].as_str().unwrap();
    let result = tool_message(messages, weather_id).expect("the get_weather result");
    assert!(
        content_text(&result["content"]).contains("\"temperatureC\":21"),
        "get_weather result: {result}"
    );

    assert_eq!(calls[1]["name"], pending_tool, "{all}");
    assert_eq!(calls[1]["input"], json!({}), "{all}");
    let pending = calls[1]["toolCallId"].as_str().unwrap().to_owned();
    assert!(tool_message(messages, &pending).is_none(), "{all}");
    assert_ne!(pending, weather_id);
    pending
}

/// The transcript after one demo turn: the user's words, then what the turn generated (same
/// text, same tool calls, same tool results), with one assistant message holding thinking, text
/// and tool_use blocks.
fn assert_history_holds_turn(history: &[Value], said: &str, turn: &[Value]) {
    let all = Value::Array(history.to_vec());
    assert_eq!(history[0]["role"], "user", "{all}");
    assert_eq!(content_text(&history[0]["content"]), said, "{all}");
    let generated = &history[1..];
    assert_eq!(assistant_text(generated), assistant_text(turn), "{all}");
    assert_eq!(tool_uses(generated), tool_uses(turn), "{all}");
    for call in tool_uses(turn) {
        let id = call["toolCallId"].as_str().unwrap();
        assert_eq!(
            tool_message(generated, id).map(|m| content_text(&m["content"])),
            tool_message(turn, id).map(|m| content_text(&m["content"])),
            "tool message for {id}: {all}"
        );
    }
    assert!(
        block_types(generated)
            .iter()
            .any(|types| ["thinking", "text", "tool_use"]
                .iter()
                .all(|t| types.iter().any(|have| have == t))),
        "an assistant message with thinking, text and tool_use blocks: {all}"
    );
}

/// In a streamed demo turn, `get_weather` arrives as `tool_call` immediately followed by its
/// `tool_result`, and the pending call is the last event before `turn_stop`.
fn assert_demo_tool_events(events: &[(String, Value)], pending_tool: &str) {
    let names = event_names(events);
    let call = events
        .iter()
        .position(|(n, d)| n == "tool_call" && d["name"] == BACKEND_TOOL)
        .unwrap_or_else(|| panic!("no get_weather tool_call: {names:?}"));
    let (next, result) = &events[call + 1];
    assert_eq!(next, "tool_result", "{names:?}");
    assert_eq!(result["toolCallId"], events[call].1["toolCallId"]);
    let (name, last_call) = &events[events.len() - 2];
    assert_eq!(name, "tool_call", "{names:?}");
    assert_eq!(
        *last_call,
        json!({"toolCallId": last_call["toolCallId"], "name": pending_tool, "input": {}})
    );
    assert_eq!(names.iter().filter(|n| **n == "tool_result").count(), 1);
}

// ---------------------------------------------------------------------------------------------
// GET /meta and API keys

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_from_flags_announces_the_demo_agent() {
    let (_gateway, aap) = demo_gateway();
    let reply = aap.meta().await;
    let meta = reply.expect_json(200);
    assert_eq!(meta["version"], 3);
    let agents = meta["agents"].as_array().expect("agents array");
    assert_eq!(agents.len(), 1, "{meta}");
    let agent = object(&agents[0]);
    assert_eq!(agent["name"], "demo");
    assert!(agent["version"].is_string(), "version: {meta}");
    assert_eq!(
        agent.get("tools"),
        Some(&json!([])),
        "no server tools: {meta}"
    );
    assert!(
        agent.get("options").is_none_or(|o| *o == json!([])),
        "no options: {meta}"
    );
    assert_eq!(agent["capabilities"], capabilities_without_image());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_from_a_config_file_with_and_without_images() {
    let (_plain, aap) = support_gateway("builtin:demo", "image = false", "", None);
    let reply = aap.meta().await;
    let meta = reply.expect_json(200);
    assert_eq!(meta["version"], 3);
    assert_eq!(meta["agents"].as_array().map(Vec::len), Some(1), "{meta}");
    let agent = &meta["agents"][0];
    assert_eq!(
        *agent,
        json!({
            "name": "support",
            "title": "Support agent",
            "version": "1.2.3",
            "description": "Answers questions",
            "tools": [web_fetch_spec()],
            "options": [
                {"type": "text", "name": "model", "default": "fast"},
                {"type": "secret", "name": "api_key", "default": ""},
                {"type": "select", "name": "tier", "default": "free", "options": ["free", "gold"]}
            ],
            "capabilities": capabilities_without_image()
        })
    );

    let (_images, aap) = support_gateway("builtin:demo", "image = true", "", None);
    let reply = aap.meta().await;
    let capabilities = &reply.expect_json(200)["agents"][0]["capabilities"];
    let mut expected = capabilities_without_image();
    expected["image"] = json!({"http": {}, "data": {}});
    assert_eq!(*capabilities, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_api_keys_guard_every_endpoint() {
    let (_gateway, aap) =
        support_gateway("builtin:demo", r#"api_keys = ["k1", "k2"]"#, "", Some("k1"));
    let sid = aap.new_session(json!({"agent": {"name": "support"}})).await;
    let turn = user_turn("none", "hi").to_string();
    let create = json!({"agent": {"name": "support"}}).to_string();
    let endpoints: Vec<(&str, String, String)> = vec![
        ("GET", "/meta".into(), String::new()),
        ("GET", "/sessions".into(), String::new()),
        ("POST", "/sessions".into(), create.clone()),
        ("GET", format!("/sessions/{sid}"), String::new()),
        (
            "GET",
            format!("/sessions/{sid}/history?type=full"),
            String::new(),
        ),
        ("POST", format!("/sessions/{sid}/turns"), turn.clone()),
        ("DELETE", format!("/sessions/{sid}"), String::new()),
        // Auth comes first, so an unknown session is still a 401.
        (
            "GET",
            "/sessions/sess_00000000000000000000000000000000".into(),
            String::new(),
        ),
    ];
    for bad_key in [None, Some("k3"), Some(""), Some("k1,k2")] {
        let intruder = aap.with_key(bad_key);
        for (method, path, body) in &endpoints {
            let reply = intruder.request(method, path, body.as_bytes()).await;
            assert_eq!(
                reply.status, 401,
                "{method} {path} with key {bad_key:?}: {}",
                reply.text
            );
            reply.expect_error(401);
        }
    }

    // Nothing happened: still the one session, still there.
    let list = aap.list_sessions(None).await;
    assert_eq!(
        list.expect_json(200)["sessions"].as_array().map(Vec::len),
        Some(1)
    );
    // The other key is served too, with sessions of its own (`session_owners` covers more).
    let second = aap.with_key(Some("k2"));
    second.meta().await.expect(200);
    let own = second
        .request("POST", "/sessions", create.as_bytes())
        .await
        .session_id();
    second.get_session(&own).await.expect(200);
    second.history(&own, Some("full")).await.expect(200);
    second.turn(&own, user_turn("none", "hi")).await.expect(200);
    second.delete_session(&own).await.expect(204);
    aap.get_session(&sid).await.expect(200);
    aap.history(&sid, Some("full")).await.expect(200);
    aap.turn(&sid, user_turn("none", "hi")).await.expect(200);
    aap.delete_session(&sid).await.expect(204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_from_the_environment_in_flags_mode() {
    let gateway = spawn_gateway_with_env(&demo_args(), "DIALECT_PROXY_AAP_API_KEYS", "e1,e2");
    let aap = AapClient::new(gateway.addr, "", None);
    aap.meta().await.expect_error(401);
    aap.with_key(Some("e1,e2")).meta().await.expect_error(401);
    aap.with_key(Some("k1"))
        .create_session(json!({"agent": {"name": "demo"}}))
        .await
        .expect_error(401);
    for key in ["e1", "e2"] {
        let meta = aap.with_key(Some(key)).meta().await;
        assert_eq!(meta.expect_json(200)["agents"][0]["name"], "demo");
    }
    aap.with_key(Some("e2"))
        .new_session(json!({"agent": {"name": "demo"}}))
        .await;
}

// ---------------------------------------------------------------------------------------------
// Sessions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_created_read_and_listed_in_pages() {
    let (_gateway, aap) =
        support_gateway("builtin:demo", "", "page_size = 2\nmax_sessions = 10", None);
    let empty = aap.list_sessions(None).await;
    assert_eq!(*empty.expect_json(200), json!({"sessions": []}));

    let location = tool_spec("get_location", "Current GPS position");
    let create = json!({
        "agent": {"name": "support", "tools": [{"name": "web_fetch", "trust": false}],
                  "options": {"model": "slow"}},
        "tools": [location],
    });
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(aap.new_session(create.clone()).await);
    }
    let info = aap.get_session(&created[0]).await;
    assert_eq!(
        *info.expect_json(200),
        json!({
            "sessionId": created[0],
            "agent": {"name": "support", "tools": [{"name": "web_fetch", "trust": false}],
                      "options": {"model": "slow"}},
            "tools": [location],
        })
    );

    // Pages of two, in sessionId order, `after` = the last id of the previous page.
    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let reply = aap.list_sessions(after.as_deref()).await;
        let page = reply.expect_json(200).clone();
        let sessions = page["sessions"].as_array().expect("sessions array").clone();
        sizes.push(sessions.len());
        for session in &sessions {
            assert_eq!(session["agent"]["name"], "support", "{session}");
            assert_eq!(session["tools"], json!([location]), "{session}");
            listed.push(session["sessionId"].as_str().unwrap().to_owned());
        }
        match page.get("next") {
            Some(next) => {
                assert_eq!(
                    next.as_str(),
                    listed.last().map(String::as_str),
                    "next is the last sessionId of the page: {page}"
                );
                after = next.as_str().map(str::to_owned);
            }
            None => break,
        }
        assert!(sizes.len() < 10, "pagination does not end: {sizes:?}");
    }
    assert_eq!(sizes, [2, 2, 1]);
    let mut expected = created.clone();
    expected.sort();
    assert_eq!(listed, expected, "every session once, sorted by sessionId");

    let missing = aap
        .get_session("sess_00000000000000000000000000000000")
        .await;
    missing.expect_error(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_creation_rejects_invalid_bodies_naming_the_field() {
    let (_gateway, aap) = support_gateway("builtin:demo", "", "", None);
    let spec = |name: &str| tool_spec(name, "A tool");
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("missing agent", json!({"tools": []}), &["agent"]),
        ("agent without name", json!({"agent": {}}), &["name"]),
        (
            "unknown option",
            json!({"agent": {"name": "support", "options": {"colour": "red"}}}),
            &["colour"],
        ),
        (
            "select value outside its list",
            json!({"agent": {"name": "support", "options": {"tier": "platinum"}}}),
            &["tier"],
        ),
        (
            "unknown server tool",
            json!({"agent": {"name": "support", "tools": [{"name": "shell"}]}}),
            &["shell"],
        ),
        (
            "client tool without name",
            json!({"agent": {"name": "support"},
                   "tools": [{"description": "x", "parameters": {"type": "object"}}]}),
            &["name"],
        ),
        (
            "client tool without description",
            json!({"agent": {"name": "support"},
                   "tools": [{"name": "get_location", "parameters": {"type": "object"}}]}),
            &["description"],
        ),
        (
            "client tool named like a server tool",
            json!({"agent": {"name": "support"}, "tools": [spec("web_fetch")]}),
            &["web_fetch"],
        ),
        (
            "invalid seed message",
            json!({"agent": {"name": "support"},
                   "messages": [{"role": "robot", "content": "beep"}]}),
            &["messages", "role"],
        ),
    ];
    for (what, body, names) in cases {
        let reply = aap.create_session(body.clone()).await;
        let error = reply.expect_error(400);
        assert!(
            names.iter().any(|n| error.contains(n)),
            "{what}: the error should name one of {names:?}; got {error:?} for {body}"
        );
    }
    aap.request("POST", "/sessions", b"{\"agent\": {")
        .await
        .expect_error(400);
    aap.create_session(json!({"agent": {"name": "nobody"}}))
        .await
        .expect_error(404);

    // None of them created anything.
    let list = aap.list_sessions(None).await;
    assert_eq!(*list.expect_json(200), json!({"sessions": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_is_gone() {
    let (_gateway, aap) = demo_gateway();
    let keep = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    let sid = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    let deleted = aap.delete_session(&sid).await;
    deleted.expect(204);
    assert!(
        deleted.text.is_empty(),
        "204 has no body: {:?}",
        deleted.text
    );

    aap.get_session(&sid).await.expect_error(404);
    aap.delete_session(&sid).await.expect_error(404);
    aap.history(&sid, Some("full")).await.expect_error(404);
    aap.turn(&sid, user_turn("none", "hello?"))
        .await
        .expect_error(404);
    let list = aap.list_sessions(None).await;
    let ids: Vec<&str> = list.expect_json(200)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [keep.as_str()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_full_and_compacted_hold_the_same_transcript() {
    let (_gateway, aap) = demo_gateway();
    let seed = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": [{"type": "text", "text": "earlier answer"}]},
    ]);
    let sid = aap
        .new_session(json!({"agent": {"name": "demo"}, "messages": seed}))
        .await;
    let seeded = aap.full_history(&sid).await;
    assert_eq!(roles(&seeded), ["system", "user", "assistant"]);
    let texts: Vec<String> = seeded.iter().map(|m| content_text(&m["content"])).collect();
    assert_eq!(texts, ["Be brief.", "earlier question", "earlier answer"]);

    let reply = aap.turn(&sid, user_turn("none", "and now?")).await;
    let (_, generated) = reply.turn_messages();

    let full = aap.history(&sid, Some("full")).await;
    let compacted = aap.history(&sid, Some("compacted")).await;
    let full = object(&full.expect_json(200)["history"]).clone();
    let compacted = object(&compacted.expect_json(200)["history"]).clone();
    assert_eq!(full.keys().collect::<Vec<_>>(), ["full"]);
    assert_eq!(compacted.keys().collect::<Vec<_>>(), ["compacted"]);
    assert_eq!(full["full"], compacted["compacted"]);
    let transcript = full["full"].as_array().unwrap();
    assert_eq!(transcript[..3], seeded[..]);
    assert_history_holds_turn(&transcript[3..], "and now?", &generated);

    aap.history(&sid, None).await.expect_error(400);
    aap.history(&sid, Some("summary")).await.expect_error(404);
}

// ---------------------------------------------------------------------------------------------
// Turns against the demo agent

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_turn_in_each_stream_mode() {
    let (_gateway, aap) = demo_gateway();
    let said = "hello there";
    let mut by_mode = Vec::new();
    for mode in ["delta", "message", "none"] {
        let sid = aap.new_session(json!({"agent": {"name": "demo"}})).await;
        let reply = aap.turn(&sid, user_turn(mode, said)).await;
        if mode == "none" {
            let body = reply.expect_json(200);
            let mut keys: Vec<&String> = object(body).keys().collect();
            keys.sort();
            assert_eq!(keys, ["messages", "stopReason"], "{body}");
        } else {
            let events = reply.expect_events();
            let names = event_names(events);
            let count = |name: &str| names.iter().filter(|n| **n == name).count();
            if mode == "delta" {
                assert!(count("text_delta") > 2, "text comes in deltas: {names:?}");
                assert!(count("thinking_delta") >= 1, "{names:?}");
                assert_eq!(count("text") + count("thinking"), 0, "{names:?}");
            } else {
                assert_eq!(count("text"), 2, "one text event per message: {names:?}");
                assert_eq!(count("thinking"), 1, "{names:?}");
                assert_eq!(
                    count("text_delta") + count("thinking_delta"),
                    0,
                    "{names:?}"
                );
            }
            assert_demo_tool_events(events, CONFIRM_TOOL);
        }
        let (stop, messages) = reply.turn_messages();
        assert_demo_turn(&stop, &messages, said, CONFIRM_TOOL);
        let history = aap.full_history(&sid).await;
        assert_history_holds_turn(&history, said, &messages);
        by_mode.push((mode, sid, messages));
    }

    // The three modes say the same thing.
    let (_, _, none) = &by_mode[2];
    for (mode, _, messages) in &by_mode[..2] {
        assert_eq!(
            assistant_text(messages),
            assistant_text(none),
            "{mode} vs none"
        );
        assert_eq!(
            normalise_call_ids(messages),
            normalise_call_ids(none),
            "{mode} vs none"
        );
    }

    // Without `stream`, a turn answers JSON: here, granting the pending confirmAction.
    let (_, sid, messages) = &by_mode[2];
    let pending = tool_uses(messages)[1]["toolCallId"].clone();
    let grant = json!({"role": "tool_permission", "toolCallId": pending, "granted": true});
    let reply = aap.turn(sid, json!({"messages": [grant]})).await;
    assert!(
        reply.events.is_none(),
        "stream absent means none: {}",
        reply.text
    );
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn");
    assert!(assistant_text(&messages).contains(r#""confirmed":true"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_call_is_answered_with_a_tool_message() {
    let (_gateway, aap) = demo_gateway();
    let location = tool_spec("get_location", "Current GPS position");
    let sid = aap
        .new_session(json!({"agent": {"name": "demo"}, "tools": [location]}))
        .await;
    let reply = aap.turn(&sid, user_turn("delta", "Where am I?")).await;
    assert_demo_tool_events(reply.expect_events(), "get_location");
    let (stop, messages) = reply.turn_messages();
    let call = assert_demo_turn(&stop, &messages, "Where am I?", "get_location");

    // Only a complete answer of the right kind is accepted.
    let not_answered = aap.turn(&sid, user_turn("delta", "never mind")).await;
    not_answered.expect_error_naming(400, &call);
    let as_permission = json!({"stream": "delta", "messages": [
        {"role": "tool_permission", "toolCallId": call, "granted": true}]});
    aap.turn(&sid, as_permission).await.expect_error(400);

    let answer = json!({"stream": "delta", "messages": [
        {"role": "tool", "toolCallId": call, "content": "47.37,8.54"}]});
    let reply = aap.turn(&sid, answer).await;
    let events = reply.expect_events();
    assert_eq!(stop_reason(events), "end_turn");
    let (_, messages) = reply.turn_messages();
    let text = assistant_text(&messages);
    assert!(
        text.contains("get_location") && text.contains("47.37,8.54"),
        "{text}"
    );

    let history = aap.full_history(&sid).await;
    let answered = tool_message(&history, &call).expect("the client's tool message");
    assert_eq!(content_text(&answered["content"]), "47.37,8.54");
    assert_eq!(roles(&history).last(), Some(&"assistant"));
    assert_no_dangling_tool_use(&history);
}

/// A demo turn without client tools stops on a `confirmAction` permission request; `answer`
/// (a `tool_permission` body without `toolCallId`) answers it in `mode`. Returns the reply text
/// and the parsed content of the tool message the history holds for the confirm call.
async fn answer_permission(mode: &str, answer: Value) -> (String, Value) {
    let (_gateway, aap) = demo_gateway();
    let sid = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    let reply = aap.turn(&sid, user_turn(mode, "delete the file")).await;
    let (stop, messages) = reply.turn_messages();
    let call = assert_demo_turn(&stop, &messages, "delete the file", CONFIRM_TOOL);

    let wrong_kind = json!({"stream": mode, "messages": [
        {"role": "tool", "toolCallId": call, "content": "ok"}]});
    aap.turn(&sid, wrong_kind).await.expect_error(400);

    let mut permission = answer;
    permission["role"] = json!("tool_permission");
    permission["toolCallId"] = json!(call);
    let reply = aap
        .turn(&sid, json!({"stream": mode, "messages": [permission]}))
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    let history = aap.full_history(&sid).await;
    assert!(
        !roles(&history).contains(&"tool_permission"),
        "permission messages are never stored"
    );
    assert_no_dangling_tool_use(&history);
    let result = tool_message(&history, &call).expect("the confirm call's tool message");
    let result: Value = serde_json::from_str(&content_text(&result["content"]))
        .unwrap_or_else(|e| panic!("the confirm result is JSON ({e}): {result}"));
    (assistant_text(&messages), result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_permission_reaches_the_agent_as_confirmed() {
    let (text, result) = answer_permission("message", json!({"granted": true})).await;
    assert!(text.contains(CONFIRM_TOOL), "{text}");
    assert!(text.contains(r#""confirmed":true"#), "{text}");
    assert_eq!(result, json!({"confirmed": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_permission_reaches_the_agent_with_its_reason() {
    let answer = json!({"granted": false, "reason": "not now"});
    let (text, result) = answer_permission("delta", answer).await;
    assert!(text.contains(r#""confirmed":false"#), "{text}");
    assert!(text.contains("not now"), "{text}");
    assert_eq!(result, json!({"confirmed": false, "reason": "not now"}));
}

// ---------------------------------------------------------------------------------------------
// Options, limits, concurrency

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_merge_over_turns_and_secrets_stay_hidden() {
    let upstream = ack_upstream().await;
    let (_gateway, aap) = support_gateway(&upstream.url("/agent"), "", "", None);
    let location = tool_spec("get_location", "Current GPS position");
    let web_fetch = json!([{"name": "web_fetch", "trust": false}]);
    let sid = aap
        .new_session(json!({
            "agent": {"name": "support", "tools": web_fetch,
                      "options": {"model": "slow", "api_key": "s3cret", "tier": "free"}},
            "tools": [location],
        }))
        .await;
    let shown = |reply: &Reply| reply.expect_json(200)["agent"]["options"].clone();
    let redacted = json!({"model": "slow", "api_key": "***", "tier": "free"});
    assert_eq!(shown(&aap.get_session(&sid).await), redacted);
    let list = aap.list_sessions(None).await;
    assert_eq!(
        list.expect_json(200)["sessions"][0]["agent"]["options"],
        redacted
    );

    // Turn 1: the stored options go upstream, secret included.
    let reply = aap.turn(&sid, user_turn("none", "one")).await;
    assert_eq!(reply.turn_messages().0, "end_turn");
    assert_upstream_request(
        &upstream.wait_for_requests(1, PATIENCE).await,
        &sid,
        &["get_location"],
        &json!({"agent": "support", "tools": web_fetch,
                "options": {"model": "slow", "api_key": "s3cret", "tier": "free"}}),
        &[("user", "one")],
    );

    // Turn 2: a merge by key; the placeholder does not overwrite the secret.
    let mut turn = user_turn("none", "two");
    turn["agent"] = json!({"options": {"model": "fast", "api_key": "***"}});
    aap.turn(&sid, turn).await.expect(200);
    assert_upstream_request(
        &upstream.wait_for_requests(2, PATIENCE).await,
        &sid,
        &["get_location"],
        &json!({"agent": "support", "tools": web_fetch,
                "options": {"model": "fast", "api_key": "s3cret", "tier": "free"}}),
        &[("user", "one"), ("assistant", "ack: one"), ("user", "two")],
    );
    assert_eq!(
        shown(&aap.get_session(&sid).await),
        json!({"model": "fast", "api_key": "***", "tier": "free"})
    );

    // Turn 3: a new secret and tier; `tools` and `agent.tools` replace the lists.
    let clock = tool_spec("get_time", "Current time");
    let mut turn = user_turn("delta", "three");
    turn["tools"] = json!([clock]);
    turn["agent"] = json!({"tools": [], "options": {"api_key": "n3w", "tier": "gold"}});
    let reply = aap.turn(&sid, turn).await;
    assert_eq!(stop_reason(reply.expect_events()), "end_turn");
    assert_upstream_request(
        &upstream.wait_for_requests(3, PATIENCE).await,
        &sid,
        &["get_time"],
        &json!({"agent": "support", "tools": [],
                "options": {"model": "fast", "api_key": "n3w", "tier": "gold"}}),
        &[
            ("user", "one"),
            ("assistant", "ack: one"),
            ("user", "two"),
            ("assistant", "ack: two"),
            ("user", "three"),
        ],
    );
    let info = aap.get_session(&sid).await;
    let info = info.expect_json(200);
    assert_eq!(
        info["agent"]["options"],
        json!({"model": "fast", "api_key": "***", "tier": "gold"})
    );
    assert_eq!(info["tools"], json!([clock]));
    assert!(
        info["agent"].get("tools").is_none_or(|t| *t == json!([])),
        "agent.tools replaced by []: {info}"
    );
    assert!(!info.to_string().contains("n3w") && !info.to_string().contains("s3cret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_the_limit_are_refused() {
    let (_gateway, aap) = support_gateway("builtin:demo", "", "max_sessions = 3", None);
    let create = json!({"agent": {"name": "support"}});
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(aap.new_session(create.clone()).await);
    }
    aap.create_session(create.clone()).await.expect_error(429);
    aap.delete_session(&ids[0]).await.expect(204);
    aap.new_session(create.clone()).await;
    aap.create_session(create).await.expect_error(429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_turn_while_one_runs_is_a_conflict() {
    // "slow" keeps the upstream busy between its two deltas; anything else answers at once.
    let upstream = ScriptedUpstream::start(|request| {
        let said = last_user_text(&request.json());
        if said == "slow" {
            agui_text_script(request, &["working", " done"], Some(Duration::from_secs(3)))
        } else {
            agui_text_script(request, &[&format!("ack: {said}")], None)
        }
    })
    .await;
    let (_gateway, aap) = support_gateway(&upstream.url("/agent"), "", "", None);
    let busy = aap.new_session(json!({"agent": {"name": "support"}})).await;
    let other = aap.new_session(json!({"agent": {"name": "support"}})).await;

    let mut running = aap.open_turn(&busy, &user_turn("delta", "slow")).await;
    assert_eq!(running.status, 200);
    wait_for_event(&mut running, "text_delta").await;

    aap.turn(&busy, user_turn("none", "meanwhile"))
        .await
        .expect_error(409);
    aap.turn(&busy, user_turn("delta", "meanwhile"))
        .await
        .expect_error(409);
    let elsewhere = aap.turn(&other, user_turn("none", "elsewhere")).await;
    assert_eq!(
        elsewhere.turn_messages().0,
        "end_turn",
        "other sessions run"
    );

    let finished = Reply::read(running).await;
    let (stop, messages) = finished.turn_messages();
    assert_eq!(stop, "end_turn");
    assert_eq!(assistant_text(&messages), "working done");

    let after = aap.turn(&busy, user_turn("none", "after")).await;
    assert_eq!(after.turn_messages().0, "end_turn");
    let users: Vec<String> = aap
        .full_history(&busy)
        .await
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| content_text(&m["content"]))
        .collect();
    assert_eq!(users, ["slow", "after"], "refused turns leave no trace");
}

// ---------------------------------------------------------------------------------------------
// Bad requests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_4xx_with_a_json_error() {
    let (_gateway, aap) = demo_gateway();
    let sid = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    let ghost = "sess_00000000000000000000000000000000";
    let turn = format!("POST /sessions/{sid}/turns");
    let ghost_turn = format!("POST /sessions/{ghost}/turns");
    let ghost_get = format!("GET /sessions/{ghost}");
    let ghost_delete = format!("DELETE /sessions/{ghost}");
    let history = format!("GET /sessions/{sid}/history");
    let bad_history = format!("GET /sessions/{sid}/history?type=everything");
    let ghost_history = format!("GET /sessions/{ghost}/history?type=full");
    let user = user_turn("none", "hi").to_string();
    let unknown_call = r#"{"messages":[{"role":"tool","toolCallId":"call_nope","content":"x"}]}"#;
    let unknown_permission =
        r#"{"messages":[{"role":"tool_permission","toolCallId":"call_nope2","granted":true}]}"#;
    let assistant = r#"{"messages":[{"role":"assistant","content":"hi"}]}"#;
    let system = r#"{"messages":[{"role":"system","content":"hi"}]}"#;
    // (what, "METHOD path", body, status, text the error must contain)
    let cases: [(&str, &str, &str, u16, &str); 20] = [
        (
            "create: malformed JSON",
            "POST /sessions",
            "{\"agent\":",
            400,
            "",
        ),
        (
            "create: unknown agent",
            "POST /sessions",
            r#"{"agent":{"name":"x"}}"#,
            404,
            "",
        ),
        ("turn: malformed JSON", &turn, "{\"messages\": [", 400, ""),
        ("turn: not an object", &turn, "[]", 400, ""),
        ("turn: unknown session", &ghost_turn, &user, 404, ""),
        (
            "turn: odd session id",
            "POST /sessions/nope/turns",
            &user,
            404,
            "",
        ),
        (
            "turn: no messages",
            &turn,
            r#"{"stream":"none"}"#,
            400,
            "messages",
        ),
        (
            "turn: empty messages",
            &turn,
            r#"{"messages":[]}"#,
            400,
            "messages",
        ),
        (
            "turn: messages not a list",
            &turn,
            r#"{"messages":"hi"}"#,
            400,
            "messages",
        ),
        ("turn: assistant input", &turn, assistant, 400, ""),
        ("turn: system input", &turn, system, 400, ""),
        (
            "turn: unknown tool call",
            &turn,
            unknown_call,
            400,
            "call_nope",
        ),
        (
            "turn: unknown permission",
            &turn,
            unknown_permission,
            400,
            "call_nope2",
        ),
        ("get: unknown session", &ghost_get, "", 404, ""),
        ("delete: unknown session", &ghost_delete, "", 404, ""),
        ("history: missing type", &history, "", 400, ""),
        ("history: unknown type", &bad_history, "", 404, ""),
        ("history: unknown session", &ghost_history, "", 404, ""),
        ("meta: POST", "POST /meta", "{}", 405, ""),
        ("meta: DELETE", "DELETE /meta", "", 405, ""),
    ];
    for (what, request, body, status, needle) in cases {
        let (method, path) = request.split_once(' ').unwrap();
        let reply = aap.request(method, path, body.as_bytes()).await;
        assert!(
            reply.status < 500,
            "{what}: never a 5xx; got {}: {}",
            reply.status,
            reply.text
        );
        assert_eq!(reply.status, status, "{what}: {}", reply.text);
        reply.expect_error_naming(status, needle);
    }

    // Nothing above broke the session.
    let reply = aap.turn(&sid, user_turn("none", "still here?")).await;
    let (stop, messages) = reply.turn_messages();
    assert_demo_turn(&stop, &messages, "still here?", CONFIRM_TOOL);
    let history = aap.full_history(&sid).await;
    assert_history_holds_turn(&history, "still here?", &messages);
}

// ---------------------------------------------------------------------------------------------
// Upstream faults

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_upstream_ends_the_turn_in_error_and_the_session_recovers() {
    // "first" is cut mid-stream, inside a tool call; anything else answers normally.
    let upstream = ScriptedUpstream::start(|request| {
        let said = last_user_text(&request.json());
        if said != "first" {
            return agui_text_script(request, &[&format!("ack: {said}")], None);
        }
        let body = request.json();
        let (thread, run) = (body["threadId"].clone(), body["runId"].clone());
        Script::sse_headers()
            .events_json(&[
                json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}),
                json!({"type": "TEXT_MESSAGE_START", "messageId": "cut.m0", "role": "assistant"}),
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "cut.m0",
                       "delta": "partial answer"}),
                json!({"type": "TOOL_CALL_START", "toolCallId": "call_cut",
                       "toolCallName": "lookup", "parentMessageId": "cut.m0"}),
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call_cut", "delta": "{\"q\":"}),
            ])
            .close()
    })
    .await;
    let (_gateway, aap) = support_gateway(&upstream.url("/agent"), "", "", None);
    let sid = aap.new_session(json!({"agent": {"name": "support"}})).await;

    let cut = aap.turn(&sid, user_turn("delta", "first")).await;
    let events = cut.expect_events();
    assert_eq!(
        events[..2],
        [
            ("turn_start".to_owned(), json!({})),
            ("text_delta".to_owned(), json!({"delta": "partial answer"}))
        ],
        "{:?}",
        event_names(events)
    );
    assert_eq!(stop_reason(events), "error");

    let next = aap.turn(&sid, user_turn("delta", "second")).await;
    let events = next.expect_events();
    assert_eq!(stop_reason(events), "end_turn", "the session still works");
    let (_, messages) = next.turn_messages();
    assert_eq!(assistant_text(&messages), "ack: second");

    let second = upstream.wait_for_requests(2, PATIENCE).await;
    let users: Vec<String> = agui_texts(&second.json()["messages"])
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(users, ["first", "second"]);
    let history = aap.full_history(&sid).await;
    assert_no_dangling_tool_use(&history);
    assert_eq!(
        history.last().map(|m| content_text(&m["content"])),
        Some("ack: second".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_http_error_is_a_502_or_a_turn_stop_error() {
    let upstream = ScriptedUpstream::with_script(Script::status_body(
        500,
        "application/json",
        r#"{"error":"boom"}"#,
    ))
    .await;
    let (_gateway, aap) = support_gateway(&upstream.url("/agent"), "", "", None);
    let sid = aap.new_session(json!({"agent": {"name": "support"}})).await;

    aap.turn(&sid, user_turn("none", "hi"))
        .await
        .expect_error(502);

    let streamed = aap.turn(&sid, user_turn("delta", "hi again")).await;
    let events = streamed.expect_events();
    assert_eq!(
        events,
        [
            ("turn_start".to_owned(), json!({})),
            ("turn_stop".to_owned(), json!({"stopReason": "error"}))
        ]
    );
    let message_mode = aap.turn(&sid, user_turn("message", "and again")).await;
    assert_eq!(
        event_names(message_mode.expect_events()),
        ["turn_start", "turn_stop"]
    );
    assert_eq!(
        upstream.requests().len(),
        3,
        "each turn reached the upstream"
    );
}
