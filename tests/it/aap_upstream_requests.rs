//! The official AG-UI SDKs as validators of what the AAP face sends upstream (`translation.md`
//! §4.1 step 5, §6.2 B1–B4): every turn of an AAP session becomes an AG-UI 1.0 `RunAgentInput`
//! POSTed to the agent, and an agent built on either SDK must accept it.
//!
//! One multi-turn conversation runs through the real gateway binary (an AAP route at `/v1`, agent
//! `support` with a text and a secret option and the server tool `web_fetch`) in front of a
//! scripted AG-UI agent that answers each request as chosen here:
//!
//! 1. the session is seeded with a system message and a prior exchange holding thinking, a
//!    `web_fetch` `tool_use` and its tool result; the client tool `get_location` is declared with
//!    a title. Turn 1 (`delta`): a user message of text blocks → the agent thinks, snapshots its
//!    state, says something and calls `get_location` (pending);
//! 2. turn 2 (`message`): a `tool` message answers it → the agent calls `confirmAction` asking to
//!    run `web_fetch` on `https://example.com` (a permission request);
//! 3. turn 3 (`none`): `tool_permission` grants it → the agent says something and finishes with
//!    an interrupt outcome without `toolCallId` (a synthetic `intr:` call for the client);
//! 4. turn 4 (`delta`): `tool_permission` denies it with a reason → the agent answers text and
//!    finishes.
//!
//! Every recorded upstream request body, byte for byte, one per line, goes to both official
//! validators: `tests/python/validate_input.py` (`ag_ui.core.RunAgentInput`, ag-ui-protocol
//! 1.0.0) and `tests/node/validate-input.mjs` (`RunAgentInputSchema` of `@ag-ui/core` 1.0.0), each
//! with the strictness the SDKs leave out (no nulls for optional fields, camelCase, closed
//! objects). Both must say ok. Then the key facts of the last request are asserted: `threadId`
//! is the session, the `resume` entry carries the denial and its reason, no `intr:` id reaches the
//! agent, the confirm call's tool message is `{"confirmed":true}`, the client tool is declared
//! with `metadata.aap.title`, and `confirmAction` comes last in `tools`.
//!
//! The Node and Python dependencies are installed on first use when missing (as for
//! `tests/it/real_client.rs`); a failed install fails the test, it is never skipped. The requests
//! are kept in `target/real-client/aap-upstream-requests/requests.jsonl`.

use crate::support;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use serde_json::{json, Value};
use support::{
    aap::{spawn_with_config, stop_reason, tool_uses, AapClient, CONFIRM_TOOL},
    node::{ensure_node, node_script},
    process::run_command,
    python::{ensure_python, python, python_script},
    RecordedRequest, Script, ScriptedUpstream,
};

/// Outer limit for one validator process: only the point at which a hang is a failure.
const VALIDATOR_PATIENCE: Duration = Duration::from_secs(120);

/// The ids the scripted agent gives its calls and its interrupt.
const LOCATION_CALL: &str = "call-location-1";
const CONFIRM_CALL: &str = "call-confirm-1";
const INTERRUPT_ID: &str = "approve-share-1";
/// The id the gateway shows the AAP client for an interrupt without a tool call.
const INTERRUPT_CALL: &str = "intr:approve-share-1";
const SEED_CALL: &str = "seed-fetch-1";

const LOCATION: &str = "47.37,8.54";
const DENIAL: &str = "Not without a review — ça suffit.";

/// The agent's state after turn 1, sent back on every later request.
fn agent_state() -> Value {
    json!({"stage": "located", "visits": [1, 2], "note": "ü"})
}

fn config(upstream: &str) -> String {
    format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{upstream}"
upstream_dialect = "ag-ui"

[routes.aap]
name = "support"
title = "Support agent"
version = "1.0.0"
description = "Answers questions"

[[routes.aap.options]]
type = "text"
name = "model"
default = "fast"

[[routes.aap.options]]
type = "secret"
name = "api_key"
default = ""

[[routes.aap.tools]]
name = "web_fetch"
description = "Fetch a URL"
parameters = {{ type = "object", properties = {{ url = {{ type = "string" }} }}, required = ["url"] }}
"#
    )
}

fn location_tool() -> Value {
    json!({
        "name": "get_location",
        "title": "Device location",
        "description": "The device's GPS position",
        "parameters": {
            "type": "object",
            "properties": {"precision": {"type": "string", "enum": ["city", "exact"]}},
        },
    })
}

fn seed_messages() -> Value {
    json!([
        {"role": "system", "content": "You are the support agent. Be brief."},
        {"role": "user", "content": "Is example.com up?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Fetch it to see."},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "toolCallId": SEED_CALL, "name": "web_fetch",
             "input": {"url": "https://example.com"}},
        ]},
        {"role": "tool", "toolCallId": SEED_CALL, "content": [{"type": "text", "text": "HTTP 200"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is up."}]},
    ])
}

// === the scripted agent ===

/// `RUN_STARTED` with the request's ids, `events`, then `RUN_FINISHED` with `outcome` if any.
fn agui_run(request: &RecordedRequest, events: Vec<Value>, outcome: Option<Value>) -> Script {
    let body = request.json();
    let (thread, run) = (body["threadId"].clone(), body["runId"].clone());
    let mut finished = json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run});
    if let Some(outcome) = outcome {
        finished["outcome"] = outcome;
    }
    Script::sse_headers()
        .event_json(&json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}))
        .events_json(&events)
        .event_json(&finished)
}

fn text_message(id: &str, text: &str) -> Vec<Value> {
    vec![
        json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
    ]
}

fn tool_call(id: &str, name: &str, parent: Option<&str>, args: &Value) -> Vec<Value> {
    let mut start = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name});
    if let Some(parent) = parent {
        start["parentMessageId"] = json!(parent);
    }
    vec![
        start,
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": args.to_string()}),
        json!({"type": "TOOL_CALL_END", "toolCallId": id}),
    ]
}

/// The answer to the `n`-th request (0-based): the four steps of the module docs.
fn agent_answer(n: usize, request: &RecordedRequest) -> Script {
    match n {
        0 => {
            let mut events = vec![
                json!({"type": "STATE_SNAPSHOT", "snapshot": agent_state()}),
                json!({"type": "REASONING_START", "messageId": "a1-think"}),
                json!({"type": "REASONING_MESSAGE_START", "messageId": "a1-thought", "role": "reasoning"}),
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "a1-thought", "delta": "Where is the user?"}),
                json!({"type": "REASONING_MESSAGE_END", "messageId": "a1-thought"}),
                json!({"type": "REASONING_END", "messageId": "a1-think"}),
            ];
            events.extend(text_message("a1-text", "Let me find you first."));
            events.extend(tool_call(
                LOCATION_CALL,
                "get_location",
                Some("a1-text"),
                &json!({"precision": "city"}),
            ));
            let outcome = json!({"type": "success", "pendingToolCallIds": [LOCATION_CALL]});
            agui_run(request, events, Some(outcome))
        }
        1 => {
            let args = json!({"action": "Fetch?", "tool": "web_fetch",
                              "arguments": {"url": "https://example.com"}});
            let events = tool_call(CONFIRM_CALL, CONFIRM_TOOL, None, &args);
            let outcome = json!({"type": "success", "pendingToolCallIds": [CONFIRM_CALL]});
            agui_run(request, events, Some(outcome))
        }
        2 => {
            let events = text_message("a3-text", "Fetched example.com: it is up.");
            let outcome = json!({"type": "interrupt", "interrupts": [{
                "id": INTERRUPT_ID,
                "reason": "confirmation",
                "message": "Share the page with the team?",
            }]});
            agui_run(request, events, Some(outcome))
        }
        3 => agui_run(
            request,
            text_message("a4-text", "Understood, I will not share it."),
            None,
        ),
        _ => Script::status_body(
            500,
            "text/plain",
            format!(
                "the scripted agent expected 4 requests; this is request {}",
                n + 1
            ),
        ),
    }
}

// === the validators ===

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory `target/real-client/<name>/`.
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target/real-client").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Runs a validator that prints one JSON verdict line; the problems unless it said ok for
/// exactly `count` documents with exit 0.
fn validator_problems(name: &str, mut command: Command, count: usize) -> Vec<String> {
    let ran = match run_command(&mut command, VALIDATOR_PATIENCE) {
        Ok(ran) => ran,
        Err(e) => return vec![format!("{name}: {e}")],
    };
    let verdict = ran
        .stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|line| serde_json::from_str::<Value>(line).ok());
    let Some(verdict) = verdict else {
        return vec![format!(
            "{name} printed no JSON verdict (exit {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            ran.code, ran.stdout, ran.stderr
        )];
    };
    let problems: Vec<&str> = verdict["problems"]
        .as_array()
        .map(|p| p.iter().map(|v| v.as_str().unwrap_or("?")).collect())
        .unwrap_or_else(|| vec!["<the verdict has no problems array>"]);
    if verdict["verdict"] == "ok"
        && ran.success
        && verdict["count"].as_u64() == Some(count as u64)
        && problems.is_empty()
    {
        return Vec::new();
    }
    let stderr = if ran.stderr.trim().is_empty() {
        String::new()
    } else {
        format!("\n--- stderr ---\n{}", ran.stderr)
    };
    vec![format!(
        "{name}: verdict {}, count {} of {count}, exit {:?}, problems:\n  {}{stderr}",
        verdict["verdict"],
        verdict["count"],
        ran.code,
        problems.join("\n  "),
    )]
}

// === checks on the requests ===

/// Every id a message carries: its own, `toolCallId`, and those of its `toolCalls`.
fn message_ids(message: &Value) -> Vec<String> {
    let mut ids: Vec<String> = ["id", "toolCallId"]
        .iter()
        .filter_map(|k| message[*k].as_str().map(str::to_owned))
        .collect();
    for call in message["toolCalls"].as_array().into_iter().flatten() {
        ids.extend(call["id"].as_str().map(str::to_owned));
    }
    ids
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("<no role>"))
        .collect()
}

/// The `toolCalls[].id` of each message, in order.
fn call_ids(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap_or("<no id>"))
        .collect()
}

fn tool_message<'a>(messages: &'a [Value], call: &str) -> &'a Value {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["toolCallId"] == call)
        .unwrap_or_else(|| {
            panic!(
                "no tool message for {call} upstream:\n{}",
                Value::Array(messages.to_vec())
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_request_of_an_aap_conversation_is_valid_run_agent_input() {
    ensure_node();
    ensure_python();
    let dir = scratch("aap-upstream-requests");

    let answered = AtomicUsize::new(0);
    let upstream = ScriptedUpstream::start(move |request| {
        agent_answer(answered.fetch_add(1, Ordering::SeqCst), request)
    })
    .await;
    let gateway = spawn_with_config(&config(&upstream.url("/agent")));
    let aap = AapClient::new(gateway.addr, "/v1", None);

    let server_tools = json!([{"name": "web_fetch", "trust": false}]);
    let options = json!({"model": "slow", "api_key": "s3cret"});
    let sid = aap
        .new_session(json!({
            "agent": {"name": "support", "tools": server_tools, "options": options},
            "tools": [location_tool()],
            "messages": seed_messages(),
        }))
        .await;

    // Turn 1: text blocks → a call of the client tool.
    let reply = aap
        .turn(
            &sid,
            json!({"stream": "delta", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Where am I?"},
                {"type": "text", "text": "Then check example.com for me."},
            ]}]}),
        )
        .await;
    assert_eq!(
        stop_reason(reply.expect_events()),
        "tool_use",
        "{}",
        reply.text
    );
    let calls = tool_uses(&reply.turn_messages().1);
    assert_eq!(calls.len(), 1, "turn 1: {}", reply.text);
    assert_eq!(
        calls[0]["toolCallId"], LOCATION_CALL,
        "turn 1: {}",
        reply.text
    );
    assert_eq!(calls[0]["name"], "get_location", "turn 1: {}", reply.text);

    // Turn 2: the tool's answer → a permission request for web_fetch.
    let reply = aap
        .turn(
            &sid,
            json!({"stream": "message", "messages": [{"role": "tool", "toolCallId": LOCATION_CALL,
                   "content": [{"type": "text", "text": LOCATION}]}]}),
        )
        .await;
    assert_eq!(
        stop_reason(reply.expect_events()),
        "tool_use",
        "{}",
        reply.text
    );
    let calls = tool_uses(&reply.turn_messages().1);
    assert_eq!(calls.len(), 1, "turn 2: {}", reply.text);
    assert_eq!(
        calls[0]["toolCallId"], CONFIRM_CALL,
        "turn 2: {}",
        reply.text
    );
    assert_eq!(calls[0]["name"], "web_fetch", "turn 2: {}", reply.text);
    assert_eq!(calls[0]["input"], json!({"url": "https://example.com"}));

    // Turn 3: granted → text, then an interrupt without a tool call.
    let reply = aap
        .turn(
            &sid,
            json!({"stream": "none", "messages": [{"role": "tool_permission",
                   "toolCallId": CONFIRM_CALL, "granted": true}]}),
        )
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "tool_use", "turn 3: {}", reply.text);
    let calls = tool_uses(&messages);
    assert_eq!(calls.len(), 1, "turn 3: {}", reply.text);
    assert_eq!(
        calls[0]["toolCallId"], INTERRUPT_CALL,
        "turn 3: {}",
        reply.text
    );

    // Turn 4: denied with a reason → text, the end.
    let reply = aap
        .turn(
            &sid,
            json!({"stream": "delta", "messages": [{"role": "tool_permission",
                   "toolCallId": INTERRUPT_CALL, "granted": false, "reason": DENIAL}]}),
        )
        .await;
    assert_eq!(
        stop_reason(reply.expect_events()),
        "end_turn",
        "{}",
        reply.text
    );

    // Every request the agent received, byte for byte, one per line.
    let requests = upstream.requests();
    assert_eq!(
        requests.len(),
        4,
        "one upstream request per turn: {:?}",
        requests.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    let mut lines = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/agent"),
            "request {i}"
        );
        assert!(
            request
                .header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "request {i}: content-type {:?}",
            request.header("content-type")
        );
        assert!(
            !request.body.contains(&b'\n'),
            "request {i}: the body spans lines; it is kept as sent, so it must be one line"
        );
        lines.extend_from_slice(&request.body);
        lines.push(b'\n');
    }
    let file = dir.join("requests.jsonl");
    std::fs::write(&file, &lines).unwrap_or_else(|e| panic!("{}: {e}", file.display()));

    let mut python_check = Command::new(python());
    python_check
        .arg(python_script("validate_input.py"))
        .arg(&file);
    let mut node_check = node_script("validate-input.mjs");
    node_check.arg(&file);
    let mut problems = validator_problems(
        "validate_input.py (ag-ui-protocol RunAgentInput)",
        python_check,
        requests.len(),
    );
    problems.extend(validator_problems(
        "validate-input.mjs (@ag-ui/core RunAgentInputSchema)",
        node_check,
        requests.len(),
    ));
    assert!(
        problems.is_empty(),
        "the official SDKs reject upstream requests of the AAP face (all in {}):\n\n{}",
        file.display(),
        problems.join("\n\n")
    );

    // Across the turns: one thread, a fresh run each time, the options and server tools.
    let bodies: Vec<Value> = requests.iter().map(RecordedRequest::json).collect();
    let mut run_ids: Vec<&str> = bodies.iter().filter_map(|b| b["runId"].as_str()).collect();
    run_ids.sort_unstable();
    run_ids.dedup();
    assert_eq!(run_ids.len(), 4, "a fresh runId per turn: {run_ids:?}");
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(body["threadId"], sid.as_str(), "request {i}: threadId");
        assert_eq!(
            body["forwardedProps"]["aap"],
            json!({"agent": "support", "options": options, "tools": server_tools}),
            "request {i}: forwardedProps.aap"
        );
        if i > 0 {
            assert_eq!(
                body["state"],
                agent_state(),
                "request {i}: the agent's state"
            );
        }
    }

    // The last request, in detail.
    let last = &bodies[3];
    let all = last.to_string();
    assert_eq!(last["threadId"], sid.as_str());
    assert_eq!(
        last["resume"],
        json!([{"interruptId": INTERRUPT_ID, "status": "resolved",
                "payload": {"approved": false, "reason": DENIAL}}]),
        "the denial reaches the agent as its interrupt's resume entry: {all}"
    );
    let messages = last["messages"].as_array().expect("messages array").clone();
    for message in &messages {
        for id in message_ids(message) {
            assert!(
                !id.starts_with("intr:"),
                "the synthetic interrupt call {id} reached the agent: {message}"
            );
        }
    }
    assert_eq!(
        roles(&messages),
        [
            "system",    // seed
            "user",      // seed
            "reasoning", // seed: thinking
            "assistant", // seed: text + web_fetch call
            "tool",      // seed: its result
            "assistant", // seed: text
            "user",      // turn 1
            "reasoning", // turn 1: thinking
            "assistant", // turn 1: text + get_location call
            "tool",      // turn 2: the location
            "assistant", // turn 2: the confirm call
            "tool",      // turn 3: the grant
            "assistant", // turn 3: text (its interrupt call is not the agent's)
        ],
        "the whole history goes upstream: {all}"
    );
    assert_eq!(
        call_ids(&messages),
        [SEED_CALL, LOCATION_CALL, CONFIRM_CALL],
        "{all}"
    );
    assert_eq!(
        messages[6]["content"], "Where am I?\nThen check example.com for me.",
        "text blocks become one string: {all}"
    );
    assert_eq!(tool_message(&messages, LOCATION_CALL)["content"], LOCATION);
    assert_eq!(
        tool_message(&messages, CONFIRM_CALL)["content"],
        r#"{"confirmed":true}"#,
        "the granted confirm call's result: {all}"
    );
    let tools = last["tools"].as_array().expect("tools array");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["get_location", CONFIRM_TOOL],
        "the client tool, then the confirm tool last"
    );
    assert_eq!(
        tools[0]["metadata"],
        json!({"aap": {"title": "Device location"}}),
        "the client tool's title: {}",
        tools[0]
    );
    assert_eq!(tools[0]["parameters"], location_tool()["parameters"]);
    drop(gateway);
}
