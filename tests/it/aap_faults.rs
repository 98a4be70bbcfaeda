//! Faults, human-in-the-loop flows and robustness of the AAP v3 face, driven over real TCP by
//! the AAP client of `support::aap` against scripted upstreams (`translation.md` §4.1–4.2,
//! §6.2 B1–B4, §7; `aap.md` §3–§4; `streaming.md` §5–§7).
//!
//! Covered:
//! - The core's upstream faults rendered in AAP, each in `delta` and in `none` mode: an idle
//!   upstream (`[routes.limits] idle_timeout`), a `data:` line that is not JSON, an event over
//!   `max_event_bytes`, `RUN_ERROR` in the middle of a message (after a completed tool round),
//!   an endless upstream past `max_stream_duration`, a flooding one past `max_stream_bytes`,
//!   an HTTP 503 and a refused connection. Mid-stream faults end in `turn_stop error` / 200
//!   `{"stopReason":"error"}` and leave the user's message and the completed tool rounds in the
//!   history, never the interrupted step; failures before the stream are a 502 / `turn_start`,
//!   `turn_stop error` and leave the session as it was. Every fault is followed by a second turn
//!   on the same session that succeeds, and by what the upstream then received.
//! - A client that leaves (mid-stream in `delta`, during a `none` turn, before the agent's
//!   response headers): the upstream connection is closed, the session is not left busy, the
//!   next turn works and the upstream sees no trace of the abandoned answer.
//! - AG-UI interrupts answered with `tool_permission`: B1 on a streamed call (with `denial_as`
//!   resolved and cancelled), B1 on a call the run did not stream, B2 without a call, and B1,
//!   B2 and a confirm call in one batch: the `resume` the upstream receives, synthetic calls
//!   kept from the upstream but shown, resolved, in the history.
//! - The confirm tool naming the tool it asks about (B3), with the default and the `boolean`
//!   result encoding; a mixed stop (a client tool and a permission) answered in one turn only.
//! - A HAI upstream behind the AAP face.
//! - Robustness: 200 deterministic pseudo-random bodies for every endpoint; never a 5xx, every
//!   4xx a JSON `{"error": "<text>"}`, and the gateway still running and serving.
//!
//! No timing assertions: sleeps only keep an upstream busy. Every gateway is spawned through
//! `support::aap`.

use crate::support;

use std::{net::SocketAddr, time::Duration};

use serde_json::{json, Value};
use support::{
    aap::{
        agui_texts, assert_no_dangling_tool_use, assistant_text, content_text, event_names, roles,
        spawn_with_config, stop_reason, tool_message, tool_spec, tool_uses, user_turn,
        wait_for_event, AapClient, Reply, CONFIRM_TOOL,
    },
    random::Rng,
    text, Conn, Gateway, RecordedRequest, Response, Script, ScriptedUpstream, Step, PATIENCE,
};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// Gateways

/// A config with one AAP route at `/v1`: agent `support` in front of `upstream`, with the server
/// tool `web_fetch`. `route_extra` adds keys to `[[routes]]` (e.g. `upstream_dialect`), `limits`
/// is the body of `[routes.limits]`, `aap_extra` adds keys to `[routes.aap]`.
fn config(upstream: &str, route_extra: &str, limits: &str, aap_extra: &str) -> String {
    format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{upstream}"
{route_extra}

[routes.limits]
{limits}

[routes.aap]
name = "support"
version = "1.0.0"
{aap_extra}

[[routes.aap.options]]
type = "text"
name = "model"
default = "fast"

[[routes.aap.tools]]
name = "web_fetch"
description = "Fetch a URL"
parameters = {{ type = "object", properties = {{ url = {{ type = "string" }} }} }}
"#
    )
}

fn gateway(
    upstream: &str,
    route_extra: &str,
    limits: &str,
    aap_extra: &str,
) -> (Gateway, AapClient) {
    let gateway = spawn_with_config(&config(upstream, route_extra, limits, aap_extra));
    let aap = AapClient::new(gateway.addr, "/v1", None);
    (gateway, aap)
}

async fn new_session(aap: &AapClient) -> String {
    aap.new_session(json!({"agent": {"name": "support"}})).await
}

// ---------------------------------------------------------------------------------------------
// The scripted AG-UI upstream

/// The request body as JSON (`null` when it is not JSON: a responder must never panic).
fn body_of(request: &RecordedRequest) -> Value {
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

/// The text of the last user message of an AG-UI request body ("" when there is none).
fn last_user_text(body: &Value) -> String {
    let Some(messages) = body["messages"].as_array() else {
        return String::new();
    };
    agui_texts(&Value::Array(messages.clone()))
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .unwrap_or_default()
}

fn pairs(texts: &[(String, String)]) -> Vec<(&str, &str)> {
    texts
        .iter()
        .map(|(r, t)| (r.as_str(), t.as_str()))
        .collect()
}

/// `(role, text)` of each AAP history message.
fn history_texts(history: &[Value]) -> Vec<(String, String)> {
    history
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                content_text(&m["content"]),
            )
        })
        .collect()
}

fn run_started(body: &Value) -> Value {
    json!({"type": "RUN_STARTED", "threadId": body["threadId"], "runId": body["runId"]})
}

fn run_finished(body: &Value) -> Value {
    json!({"type": "RUN_FINISHED", "threadId": body["threadId"], "runId": body["runId"]})
}

fn interrupted(body: &Value, interrupts: Value) -> Value {
    let mut event = run_finished(body);
    event["outcome"] = json!({"type": "interrupt", "interrupts": interrupts});
    event
}

/// One whole text message.
fn text_message(id: &str, text: &str) -> [Value; 3] {
    [text::start(id), text::content(id, text), text::end(id)]
}

/// One whole tool call (START, one ARGS per chunk, END).
fn tool_call(id: &str, name: &str, parent: &str, args: &[&str]) -> Vec<Value> {
    let mut events = vec![json!({"type": "TOOL_CALL_START", "toolCallId": id,
                                 "toolCallName": name, "parentMessageId": parent})];
    for chunk in args {
        events.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": chunk}));
    }
    events.push(json!({"type": "TOOL_CALL_END", "toolCallId": id}));
    events
}

/// A whole run answering `request`: `RUN_STARTED`, `events`, `RUN_FINISHED`.
fn run_script(request: &RecordedRequest, events: &[Value]) -> Script {
    let body = body_of(request);
    Script::sse_json(&[run_started(&body)])
        .events_json(events)
        .event_json(&run_finished(&body))
}

/// A run answering with one text message `ack: <last user text>`.
fn ack_script(request: &RecordedRequest) -> Script {
    let said = last_user_text(&body_of(request));
    run_script(request, &text_message("ack.m0", &format!("ack: {said}")))
}

/// An upstream that answers every turn with [`ack_script`].
async fn ack_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(ack_script).await
}

/// The tool messages of an AG-UI request body: `(toolCallId, content)`.
fn agui_tool_messages(body: &Value) -> Vec<(String, Value)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["toolCallId"].as_str().unwrap_or_default().to_owned(),
                m["content"].clone(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Turn helpers

fn event(name: &str, data: Value) -> (String, Value) {
    (name.to_owned(), data)
}

/// A `tool_permission` turn in `mode`.
fn permission_turn(mode: &str, call: &str, granted: bool, reason: Option<&str>) -> Value {
    let mut answer = json!({"role": "tool_permission", "toolCallId": call, "granted": granted});
    if let Some(reason) = reason {
        answer["reason"] = json!(reason);
    }
    json!({"stream": mode, "messages": [answer]})
}

/// Reads `response` until `n` `event: <name>` lines have arrived.
async fn wait_for_events(response: &mut Response, name: &str, n: usize) {
    let line = format!("event: {name}\n");
    loop {
        let received = String::from_utf8_lossy(response.raw_body()).replace("\r\n", "\n");
        if received.matches(&line).count() >= n {
            return;
        }
        assert!(
            response.read_more().await,
            "the stream ended before {n} {name:?} events:\n{received}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Upstream faults, in delta and none mode, each followed by a turn that works

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Some text, then silence under `idle_timeout = "300ms"`.
    IdleTimeout,
    /// Some text, then `data: not json`, then more text and `RUN_FINISHED`.
    Malformed,
    /// Some text, then an event over `max_event_bytes = 4096`.
    Oversized,
    /// A completed tool round, then text cut by `RUN_ERROR`.
    RunError,
    /// `503` before any event.
    Http503,
    /// Some text, then a comment every 20 ms for 20 s under `max_stream_duration = "500ms"`.
    Endless,
    /// Some text, then 64 KiB of comments at once under `max_stream_bytes = 8192`.
    Flood,
}

const PARTIAL: &str = "partial answer";

/// The `[routes.limits]` the fault needs.
fn fault_limits(fault: Fault) -> &'static str {
    match fault {
        Fault::IdleTimeout => r#"idle_timeout = "300ms""#,
        Fault::Oversized => "max_event_bytes = 4096",
        Fault::Endless => r#"max_stream_duration = "500ms""#,
        Fault::Flood => "max_stream_bytes = 8192",
        _ => "",
    }
}

/// The faulty answer to the turn "first".
fn fault_script(fault: Fault, request: &RecordedRequest) -> Script {
    let body = body_of(request);
    let prefix = [
        run_started(&body),
        text::start("f.m0"),
        text::content("f.m0", PARTIAL),
    ];
    match fault {
        Fault::IdleTimeout => Script::sse_json(&prefix).stall(),
        Fault::Malformed => Script::sse_json(&prefix)
            .bytes("data: not json\n\n")
            .event_json(&text::content("f.m0", " after"))
            .event_json(&text::end("f.m0"))
            .event_json(&run_finished(&body)),
        Fault::Oversized => Script::sse_json(&prefix)
            .event_json(&text::content("f.m0", &"b".repeat(20_000)))
            .event_json(&text::end("f.m0"))
            .event_json(&run_finished(&body)),
        Fault::RunError => {
            let mut events = vec![run_started(&body)];
            events.extend(text_message("f.m0", "Looking it up"));
            events.extend(tool_call(
                "call_lookup",
                "lookup",
                "f.m0",
                &[r#"{"q":"x"}"#],
            ));
            events.push(json!({"type": "TOOL_CALL_RESULT", "messageId": "f.t0",
                               "toolCallId": "call_lookup", "content": "found it",
                               "role": "tool"}));
            events.push(text::start("f.m1"));
            events.push(text::content("f.m1", PARTIAL));
            events.push(
                json!({"type": "RUN_ERROR", "message": "the model crashed", "code": "MODEL_ERROR"}),
            );
            Script::sse_json(&events)
        }
        Fault::Http503 => Script::status_body(503, "application/json", r#"{"error":"overloaded"}"#),
        Fault::Endless => Script::sse_json(&prefix).comments(1000, 16, Duration::from_millis(20)),
        Fault::Flood => Script::sse_json(&prefix)
            .comments(64, 1024, Duration::ZERO)
            .stall(),
    }
}

/// The code a fault ends the run with, where the gateway logs it (AAP's `error` stop carries
/// none).
fn fault_code(fault: Fault) -> Option<&'static str> {
    match fault {
        Fault::Endless => Some("STREAM_DURATION_EXCEEDED"),
        Fault::Flood => Some("STREAM_BYTES_EXCEEDED"),
        _ => None,
    }
}

/// What the failed turn leaves in the history, as `(role, text)`: the user's message and the
/// completed tool round, never the interrupted step; nothing at all when nothing ran.
fn kept_after(fault: Fault) -> Vec<(&'static str, &'static str)> {
    match fault {
        Fault::Http503 => vec![],
        Fault::RunError => vec![
            ("user", "first"),
            ("assistant", "Looking it up"),
            ("tool", "found it"),
        ],
        _ => vec![("user", "first")],
    }
}

/// The `lookup` call of [`Fault::RunError`] as AAP shows it.
fn lookup_call() -> Value {
    json!({"toolCallId": "call_lookup", "name": "lookup", "input": {"q": "x"}})
}

/// Checks the reply to the faulty turn in `mode`.
fn assert_fault_reply(fault: Fault, mode: &str, reply: &Reply) {
    if mode == "none" {
        if fault == Fault::Http503 {
            let error = reply.expect_error(502);
            assert!(
                !error.contains("partial"),
                "a 502 carries an error text: {error}"
            );
            return;
        }
        let body = reply.expect_json(200);
        assert_eq!(body["stopReason"], "error", "{body}");
        let (_, messages) = reply.turn_messages();
        // §4.2: `RUN_ERROR` → 200 {stopReason:"error", messages:<so far>}.
        match fault {
            Fault::RunError => {
                assert_eq!(
                    roles(&messages),
                    ["assistant", "tool", "assistant"],
                    "{body}"
                );
                assert_eq!(
                    assistant_text(&messages),
                    format!("Looking it up\n{PARTIAL}")
                );
                let calls = tool_uses(&messages);
                let mut expected = lookup_call();
                expected["type"] = json!("tool_use");
                assert_eq!(calls, [expected], "{body}");
                let result = tool_message(&messages, "call_lookup").expect("the lookup result");
                assert_eq!(content_text(&result["content"]), "found it");
            }
            _ => {
                assert_eq!(roles(&messages), ["assistant"], "{body}");
                assert_eq!(assistant_text(&messages), PARTIAL, "{body}");
            }
        }
        return;
    }
    let events = reply.expect_events();
    let expected = match fault {
        Fault::Http503 => vec![
            event("turn_start", json!({})),
            event("turn_stop", json!({"stopReason": "error"})),
        ],
        Fault::RunError => vec![
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "Looking it up"})),
            event("tool_call", lookup_call()),
            event(
                "tool_result",
                json!({"toolCallId": "call_lookup", "content": "found it"}),
            ),
            event("text_delta", json!({"delta": PARTIAL})),
            event("turn_stop", json!({"stopReason": "error"})),
        ],
        _ => vec![
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": PARTIAL})),
            event("turn_stop", json!({"stopReason": "error"})),
        ],
    };
    assert_eq!(events, expected, "{fault:?} in delta mode:\n{}", reply.text);
}

/// Turn "first" meets `fault` in `mode`; turn "second" on the same session works.
async fn fault_then_recovery(fault: Fault, mode: &str) {
    let upstream = ScriptedUpstream::start(move |request| {
        if last_user_text(&body_of(request)) == "first" {
            fault_script(fault, request)
        } else {
            ack_script(request)
        }
    })
    .await;
    let (mut gateway, aap) = gateway(&upstream.url("/agent"), "", fault_limits(fault), "");
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn(mode, "first")).await;
    assert_fault_reply(fault, mode, &reply);
    if matches!(fault, Fault::IdleTimeout | Fault::Endless | Fault::Flood) {
        assert!(
            upstream.wait_for_cancellation(PATIENCE).await,
            "after {fault:?} the gateway closes the upstream connection"
        );
    }
    if let Some(code) = fault_code(fault) {
        gateway.wait_for_stderr(code).await;
    }

    // The history: the failed turn's input and completed rounds, no half answer, no dangling call.
    let history = aap.full_history(&sid).await;
    assert_eq!(
        pairs(&history_texts(&history)),
        kept_after(fault),
        "{fault:?}/{mode}: history after the failed turn: {}",
        Value::Array(history.clone())
    );
    assert_no_dangling_tool_use(&history);
    assert!(
        !Value::Array(history.clone()).to_string().contains(PARTIAL),
        "the interrupted step is not kept: {}",
        Value::Array(history)
    );

    // The same session takes the next turn, and the upstream sees what the history holds.
    let next = aap.turn(&sid, user_turn(mode, "second")).await;
    let (stop, messages) = next.turn_messages();
    assert_eq!(stop, "end_turn", "{fault:?}/{mode}: {}", next.text);
    assert_eq!(assistant_text(&messages), "ack: second");
    let second = upstream.wait_for_requests(2, PATIENCE).await;
    let mut expected = kept_after(fault);
    expected.push(("user", "second"));
    assert_eq!(
        pairs(&agui_texts(&second.json()["messages"])),
        expected,
        "{fault:?}/{mode}: what the upstream received next"
    );
    assert_eq!(second.json()["threadId"], sid.as_str());

    let history = aap.full_history(&sid).await;
    let mut expected = kept_after(fault);
    expected.extend([("user", "second"), ("assistant", "ack: second")]);
    assert_eq!(pairs(&history_texts(&history)), expected);
    assert_no_dangling_tool_use(&history);
    assert_eq!(
        upstream.requests().len(),
        2,
        "one upstream request per turn"
    );
    assert!(gateway.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_upstream_past_max_stream_duration_in_delta_mode() {
    fault_then_recovery(Fault::Endless, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_upstream_past_max_stream_duration_in_none_mode() {
    fault_then_recovery(Fault::Endless, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_upstream_past_max_stream_bytes_in_delta_mode() {
    fault_then_recovery(Fault::Flood, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_upstream_past_max_stream_bytes_in_none_mode() {
    fault_then_recovery(Fault::Flood, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_upstream_in_delta_mode() {
    fault_then_recovery(Fault::IdleTimeout, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_upstream_in_none_mode() {
    fault_then_recovery(Fault::IdleTimeout, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_upstream_data_in_delta_mode() {
    fault_then_recovery(Fault::Malformed, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_upstream_data_in_none_mode() {
    fault_then_recovery(Fault::Malformed, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_upstream_event_in_delta_mode() {
    fault_then_recovery(Fault::Oversized, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_upstream_event_in_none_mode() {
    fault_then_recovery(Fault::Oversized, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_error_mid_message_in_delta_mode() {
    fault_then_recovery(Fault::RunError, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_error_mid_message_in_none_mode() {
    fault_then_recovery(Fault::RunError, "none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_503_in_delta_mode() {
    fault_then_recovery(Fault::Http503, "delta").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_503_in_none_mode() {
    fault_then_recovery(Fault::Http503, "none").await;
}

/// Forwards every connection accepted on `listener` to `to`.
async fn forward(listener: TcpListener, to: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(to).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_upstream_connection_leaves_the_session_unchanged() {
    let (socket, port) = support::refusing_port();
    let (mut gateway, aap) = gateway(&format!("http://{port}/agent"), "", "", "");
    let sid = new_session(&aap).await;

    // none: a 502 with a JSON error; delta and message: turn_start, turn_stop error.
    aap.turn(&sid, user_turn("none", "first"))
        .await
        .expect_error(502);
    assert_eq!(aap.full_history(&sid).await, Vec::<Value>::new());
    for mode in ["delta", "message"] {
        let reply = aap.turn(&sid, user_turn(mode, "first")).await;
        assert_eq!(
            reply.expect_events(),
            [
                event("turn_start", json!({})),
                event("turn_stop", json!({"stopReason": "error"}))
            ],
            "{mode}"
        );
        assert_eq!(
            aap.full_history(&sid).await,
            Vec::<Value>::new(),
            "{mode}: nothing ran, nothing is kept"
        );
    }

    // The agent comes up on the same address: the session works, with no trace of the refusals.
    let upstream = ack_upstream().await;
    let listener = socket.listen(64).expect("listen on the refusing port");
    let forwarder = tokio::spawn(forward(listener, upstream.addr()));
    let reply = aap.turn(&sid, user_turn("delta", "second")).await;
    let events = reply.expect_events();
    assert_eq!(stop_reason(events), "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&reply.turn_messages().1), "ack: second");
    let request = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(
        pairs(&agui_texts(&request.json()["messages"])),
        [("user", "second")]
    );
    let history = aap.full_history(&sid).await;
    assert_eq!(
        pairs(&history_texts(&history)),
        [("user", "second"), ("assistant", "ack: second")]
    );
    assert!(gateway.is_running());
    forwarder.abort();
}

// ---------------------------------------------------------------------------------------------
// 2. Client disconnect

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_cancels_the_upstream_and_frees_the_session() {
    // "slow" trickles a delta every 100 ms for 20 s; anything else is answered at once.
    let upstream = ScriptedUpstream::start(|request| {
        if last_user_text(&body_of(request)) != "slow" {
            return ack_script(request);
        }
        let body = body_of(request);
        let mut script = Script::sse_json(&[run_started(&body), text::start("s.m0")]);
        for i in 0..200 {
            script = script
                .event_json(&text::content("s.m0", &format!("{i} ")))
                .step(Step::Sleep(Duration::from_millis(100)));
        }
        script
            .event_json(&text::end("s.m0"))
            .event_json(&run_finished(&body))
    })
    .await;
    let (mut gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let mut running = aap.open_turn(&sid, &user_turn("delta", "slow")).await;
    assert_eq!(running.status, 200);
    wait_for_event(&mut running, "turn_start").await;
    wait_for_events(&mut running, "text_delta", 2).await;
    assert_eq!(
        upstream.cancellations(),
        0,
        "the upstream was closed before the client left"
    );
    running.disconnect();
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the client left mid-stream but the upstream connection stayed open"
    );

    // Not 409: the abandoned turn released the session.
    let next = aap.turn(&sid, user_turn("delta", "second")).await;
    let events = next.expect_events();
    assert_eq!(stop_reason(events), "end_turn", "{}", next.text);
    assert_eq!(assistant_text(&next.turn_messages().1), "ack: second");
    let second = upstream.wait_for_requests(2, PATIENCE).await;
    assert_eq!(
        pairs(&agui_texts(&second.json()["messages"])),
        [("user", "slow"), ("user", "second")],
        "the abandoned answer is not part of the history"
    );
    let history = aap.full_history(&sid).await;
    assert_eq!(
        pairs(&history_texts(&history)),
        [
            ("user", "slow"),
            ("user", "second"),
            ("assistant", "ack: second")
        ]
    );
    assert!(gateway.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_none_mode_turn_cancels_the_upstream_and_frees_the_session() {
    // `none` answers only at the end: the client leaves while the agent is still talking
    // (`streaming.md` §7: every phase cancels).
    let upstream = ScriptedUpstream::start(|request| {
        if last_user_text(&body_of(request)) != "slow" {
            return ack_script(request);
        }
        let body = body_of(request);
        let mut script = Script::sse_json(&[run_started(&body), text::start("s.m0")]);
        for i in 0..300 {
            script = script
                .event_json(&text::content("s.m0", &format!("{i} ")))
                .step(Step::Sleep(Duration::from_millis(100)));
        }
        script
            .event_json(&text::end("s.m0"))
            .event_json(&run_finished(&body))
    })
    .await;
    let (mut gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let mut conn = Conn::open(aap.addr).await;
    conn.send(&aap.turn_request(&sid, &user_turn("none", "slow")))
        .await;
    upstream.wait_for_request(PATIENCE).await;
    assert_eq!(upstream.cancellations(), 0);
    drop(conn);
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the client left a none-mode turn but the upstream connection stayed open"
    );

    // Whether the turn had started running when the client left (its input kept) or was still
    // waiting for the agent's headers (nothing kept) depends on timing; either way the answer
    // in progress is not kept and the upstream next sees exactly what the history holds.
    let history = aap.full_history(&sid).await;
    let kept = history_texts(&history);
    assert!(
        kept.is_empty() || pairs(&kept) == [("user", "slow")],
        "the history after the abandoned turn: {}",
        Value::Array(history)
    );

    let next = aap.turn(&sid, user_turn("none", "second")).await;
    let (stop, messages) = next.turn_messages();
    assert_eq!(stop, "end_turn", "not busy: {}", next.text);
    assert_eq!(assistant_text(&messages), "ack: second");
    let second = upstream.wait_for_requests(2, PATIENCE).await;
    let mut expected = pairs(&kept);
    expected.push(("user", "second"));
    assert_eq!(pairs(&agui_texts(&second.json()["messages"])), expected);
    assert!(gateway.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_before_the_agent_answers_leaves_the_session_as_it_was() {
    // "silent" never gets response headers from the agent.
    let upstream = ScriptedUpstream::start(|request| {
        if last_user_text(&body_of(request)) == "silent" {
            Script::no_headers()
        } else {
            ack_script(request)
        }
    })
    .await;
    let (mut gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let mut conn = Conn::open(aap.addr).await;
    conn.send(&aap.turn_request(&sid, &user_turn("delta", "silent")))
        .await;
    upstream.wait_for_request(PATIENCE).await;
    assert_eq!(upstream.cancellations(), 0);
    drop(conn);
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the client left before the agent's first byte but the upstream connection stayed open"
    );

    let next = aap.turn(&sid, user_turn("delta", "second")).await;
    assert_eq!(
        stop_reason(next.expect_events()),
        "end_turn",
        "not busy: {}",
        next.text
    );
    let second = upstream.wait_for_requests(2, PATIENCE).await;
    assert_eq!(
        pairs(&agui_texts(&second.json()["messages"])),
        [("user", "second")],
        "nothing ran: the abandoned turn left no trace"
    );
    assert!(gateway.is_running());
}

// ---------------------------------------------------------------------------------------------
// 3. Interrupts (B1, B2)

/// B1: the upstream streams `call_x` (not a client tool) and interrupts on it; the client
/// denies. Returns the `resume` of the next upstream request.
async fn deny_an_interrupted_call(aap_extra: &str) -> Value {
    let upstream = ScriptedUpstream::start(|request| {
        let body = body_of(request);
        if body.get("resume").is_some() {
            return run_script(request, &text_message("b1.m1", "Understood, not deleting."));
        }
        let mut events = vec![run_started(&body)];
        events.extend(text_message("b1.m0", "I will delete it."));
        events.extend(tool_call(
            "call_x",
            "delete_repo",
            "b1.m0",
            &[r#"{"repo":"#, r#""dialect-proxy"}"#],
        ));
        events.push(interrupted(
            &body,
            json!([{"id": "int-1", "reason": "tool_call", "toolCallId": "call_x",
                    "message": "Allow?"}]),
        ));
        Script::sse_json(&events)
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", aap_extra);
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn("delta", "delete the repo")).await;
    assert_eq!(
        reply.expect_events(),
        [
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "I will delete it."})),
            event(
                "tool_call",
                json!({"toolCallId": "call_x", "name": "delete_repo",
                       "input": {"repo": "dialect-proxy"}})
            ),
            event("turn_stop", json!({"stopReason": "tool_use"})),
        ],
        "{}",
        reply.text
    );

    // Only a tool_permission answers an interrupt; nothing reaches the upstream meanwhile.
    let as_tool = json!({"stream": "delta", "messages": [
        {"role": "tool", "toolCallId": "call_x", "content": "ok"}]});
    aap.turn(&sid, as_tool)
        .await
        .expect_error_naming(400, "call_x");
    aap.turn(&sid, user_turn("delta", "hello?"))
        .await
        .expect_error_naming(400, "call_x");
    assert_eq!(upstream.requests().len(), 1);

    let reply = aap
        .turn(&sid, permission_turn("delta", "call_x", false, Some("no")))
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "Understood, not deleting.");
    let resumed = upstream.wait_for_requests(2, PATIENCE).await.json();
    assert_eq!(resumed["threadId"], sid.as_str());
    assert!(
        !resumed.to_string().contains("tool_permission"),
        "permission messages never reach the upstream: {resumed}"
    );
    resumed["resume"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_a_denied_interrupt_on_a_streamed_call_is_resumed_as_resolved() {
    let resume = deny_an_interrupted_call("").await;
    assert_eq!(
        resume,
        json!([{"interruptId": "int-1", "status": "resolved",
                "payload": {"approved": false, "reason": "no"}}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_with_denial_as_cancelled_a_denial_is_resumed_as_cancelled() {
    let resume = deny_an_interrupted_call(r#"denial_as = "cancelled""#).await;
    assert_eq!(resume[0]["interruptId"], "int-1", "{resume}");
    assert_eq!(resume[0]["status"], "cancelled", "{resume}");
    assert_eq!(resume.as_array().map(Vec::len), Some(1), "{resume}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b2_an_interrupt_without_a_call_is_a_synthetic_call_the_upstream_never_sees() {
    let schema = json!({"type": "object", "properties": {"approved": {"type": "boolean"}}});
    let interrupt_schema = schema.clone();
    let upstream = ScriptedUpstream::start(move |request| {
        let body = body_of(request);
        if body.get("resume").is_some() {
            return run_script(request, &text_message("b2.m1", "Migrated."));
        }
        let mut events = vec![run_started(&body)];
        events.extend(text_message("b2.m0", "I need your input."));
        events.push(interrupted(
            &body,
            json!([{"id": "int-2", "reason": "input_required",
                    "message": "Proceed with the migration?",
                    "responseSchema": interrupt_schema}]),
        ));
        Script::sse_json(&events)
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn("delta", "migrate")).await;
    assert_eq!(
        reply.expect_events(),
        [
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "I need your input."})),
            event(
                "tool_call",
                json!({"toolCallId": "intr:int-2", "name": "interrupt:input_required",
                       "input": {"message": "Proceed with the migration?",
                                 "responseSchema": schema}})
            ),
            event("turn_stop", json!({"stopReason": "tool_use"})),
        ],
        "{}",
        reply.text
    );

    let reply = aap
        .turn(&sid, permission_turn("none", "intr:int-2", true, None))
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "Migrated.");

    let resumed = upstream.wait_for_requests(2, PATIENCE).await.json();
    assert_eq!(
        resumed["resume"],
        json!([{"interruptId": "int-2", "status": "resolved", "payload": {"approved": true}}])
    );
    assert!(
        !resumed["messages"].to_string().contains("intr:"),
        "no synthetic call or answer goes upstream: {}",
        resumed["messages"]
    );
    assert_eq!(
        pairs(&agui_texts(&resumed["messages"])),
        [("user", "migrate"), ("assistant", "I need your input.")]
    );

    // The history the client reads back has the synthetic call, resolved.
    let history = aap.full_history(&sid).await;
    let calls = tool_uses(&history);
    assert_eq!(
        calls,
        [json!({"type": "tool_use", "toolCallId": "intr:int-2",
                "name": "interrupt:input_required",
                "input": {"message": "Proceed with the migration?", "responseSchema": schema}})],
        "{}",
        Value::Array(history.clone())
    );
    let at = history
        .iter()
        .position(|m| !tool_uses(std::slice::from_ref(m)).is_empty())
        .unwrap();
    let answer = tool_message(&history[at + 1..], "intr:int-2")
        .unwrap_or_else(|| panic!("a tool message after intr:int-2: {history:?}"));
    assert_eq!(content_text(&answer["content"]), "granted");
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "assistant"],
        "{}",
        Value::Array(history.clone())
    );
    assert_no_dangling_tool_use(&history);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_an_interrupt_on_a_call_not_streamed_is_a_synthetic_call_the_upstream_never_sees() {
    // §6.2 B1: the call was not streamed in this run, so the gateway synthesises
    // `tool_call {toolCallId, name:"interrupt:tool_call", input:{message}}`. The upstream never
    // made that call: like every synthetic call (§6.1), it must not be sent back to it.
    let upstream = ScriptedUpstream::start(|request| {
        let body = body_of(request);
        if body.get("resume").is_some() {
            return run_script(request, &text_message("y.m1", "Deployed."));
        }
        let mut events = vec![run_started(&body)];
        events.extend(text_message("y.m0", "Deploying."));
        events.push(interrupted(
            &body,
            json!([{"id": "int-3", "reason": "tool_call", "toolCallId": "call_y",
                    "message": "Deploy to prod?"}]),
        ));
        Script::sse_json(&events)
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn("delta", "deploy")).await;
    assert_eq!(
        reply.expect_events(),
        [
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "Deploying."})),
            event(
                "tool_call",
                json!({"toolCallId": "call_y", "name": "interrupt:tool_call",
                       "input": {"message": "Deploy to prod?"}})
            ),
            event("turn_stop", json!({"stopReason": "tool_use"})),
        ],
        "{}",
        reply.text
    );

    let reply = aap
        .turn(&sid, permission_turn("delta", "call_y", true, None))
        .await;
    assert_eq!(
        stop_reason(reply.expect_events()),
        "end_turn",
        "{}",
        reply.text
    );
    let resumed = upstream.wait_for_requests(2, PATIENCE).await.json();
    assert_eq!(
        resumed["resume"],
        json!([{"interruptId": "int-3", "status": "resolved", "payload": {"approved": true}}])
    );
    assert!(
        !resumed["messages"]
            .to_string()
            .contains("interrupt:tool_call"),
        "the gateway's synthetic call went upstream as if the agent had made it: {}",
        resumed["messages"]
    );
    assert_eq!(
        pairs(&agui_texts(&resumed["messages"])),
        [("user", "deploy"), ("assistant", "Deploying.")]
    );
    // And the history the client reads back has it resolved, like any answered permission.
    assert_no_dangling_tool_use(&aap.full_history(&sid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_and_a_permission_in_one_stop_are_answered_in_one_batch() {
    // B1 (streamed call), B2 (no call) and B3 (confirm call) in one run.
    let upstream = ScriptedUpstream::start(|request| {
        let body = body_of(request);
        if body.get("resume").is_some() {
            return run_script(request, &text_message("z.m1", "All done."));
        }
        let mut events = vec![run_started(&body)];
        events.extend(text_message("z.m0", "Three questions."));
        events.extend(tool_call("call_a", "rotate_keys", "z.m0", &["{}"]));
        events.extend(tool_call(
            "call_b",
            CONFIRM_TOOL,
            "z.m0",
            &[r#"{"action":"Notify the team?"}"#],
        ));
        events.push(interrupted(
            &body,
            json!([{"id": "int-a", "reason": "tool_call", "toolCallId": "call_a"},
                   {"id": "int-b", "reason": "confirm", "message": "Really?"}]),
        ));
        Script::sse_json(&events)
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn("none", "go")).await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "tool_use", "{}", reply.text);
    let ids: Vec<Value> = tool_uses(&messages)
        .iter()
        .map(|c| c["toolCallId"].clone())
        .collect();
    assert_eq!(ids, ["call_a", "call_b", "intr:int-b"], "{}", reply.text);

    // Each answer alone is refused, naming what is missing.
    let a = json!({"role": "tool_permission", "toolCallId": "call_a", "granted": true});
    let b = json!({"role": "tool_permission", "toolCallId": "call_b", "granted": false,
                   "reason": "quiet hours"});
    let c = json!({"role": "tool_permission", "toolCallId": "intr:int-b", "granted": false});
    aap.turn(&sid, json!({"messages": [a, b]}))
        .await
        .expect_error_naming(400, "intr:int-b");
    aap.turn(&sid, json!({"messages": [c, b]}))
        .await
        .expect_error_naming(400, "call_a");
    assert_eq!(upstream.requests().len(), 1);

    let reply = aap
        .turn(&sid, json!({"stream": "delta", "messages": [c, b, a]}))
        .await;
    assert_eq!(
        stop_reason(reply.expect_events()),
        "end_turn",
        "{}",
        reply.text
    );
    let resumed = upstream.wait_for_requests(2, PATIENCE).await.json();
    // One entry per interrupt (AG-UI keys them by interruptId; their order is not specified).
    let mut resume = resumed["resume"]
        .as_array()
        .unwrap_or_else(|| panic!("resume: {resumed}"))
        .clone();
    resume.sort_by_key(|r| r["interruptId"].to_string());
    assert_eq!(
        resume,
        [
            json!({"interruptId": "int-a", "status": "resolved", "payload": {"approved": true}}),
            json!({"interruptId": "int-b", "status": "resolved", "payload": {"approved": false}})
        ]
    );
    assert_eq!(
        agui_tool_messages(&resumed),
        [(
            "call_b".to_owned(),
            json!(r#"{"confirmed":false,"reason":"quiet hours"}"#)
        )],
        "the confirm call is answered with a tool message: {resumed}"
    );
    assert!(
        !resumed["messages"].to_string().contains("intr:"),
        "{resumed}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. The confirm tool naming the real tool (B3)

/// The upstream calls the confirm tool about `web_fetch`; the client grants it in `mode`.
/// Returns the content of the tool message the next upstream request holds for the call.
async fn grant_a_confirm_call_naming_web_fetch(aap_extra: &str, mode: &str) -> Value {
    let upstream = ScriptedUpstream::start(|request| {
        let body = body_of(request);
        if agui_tool_messages(&body).is_empty() {
            run_script(
                request,
                &tool_call(
                    "call_c",
                    CONFIRM_TOOL,
                    "c.m0",
                    &[
                        r#"{"action":"Fetch it?","tool":"web_fetch","#,
                        r#""arguments":{"url":"https://example.com"}}"#,
                    ],
                ),
            )
        } else {
            run_script(request, &text_message("c.m1", "Fetched."))
        }
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", aap_extra);
    let sid = aap
        .new_session(json!({"agent": {"name": "support",
                                      "tools": [{"name": "web_fetch", "trust": false}]}}))
        .await;

    let reply = aap.turn(&sid, user_turn(mode, "fetch example.com")).await;
    let web_fetch = json!({"toolCallId": "call_c", "name": "web_fetch",
                           "input": {"url": "https://example.com"}});
    if mode == "none" {
        let (stop, messages) = reply.turn_messages();
        assert_eq!(stop, "tool_use", "{}", reply.text);
        let mut block = web_fetch.clone();
        block["type"] = json!("tool_use");
        assert_eq!(tool_uses(&messages), [block], "{}", reply.text);
    } else {
        assert_eq!(
            reply.expect_events(),
            [
                event("turn_start", json!({})),
                event("tool_call", web_fetch.clone()),
                event("turn_stop", json!({"stopReason": "tool_use"})),
            ],
            "{}",
            reply.text
        );
    }

    // A permission is answered with tool_permission, not with a tool result.
    let as_tool = json!({"stream": mode, "messages": [
        {"role": "tool", "toolCallId": "call_c", "content": "ok"}]});
    aap.turn(&sid, as_tool)
        .await
        .expect_error_naming(400, "call_c");

    let reply = aap
        .turn(&sid, permission_turn(mode, "call_c", true, None))
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "Fetched.");

    let granted = upstream.wait_for_requests(2, PATIENCE).await.json();
    // The upstream sees its own call as it made it, answered.
    let calls: Vec<&Value> = granted["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["toolCalls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{granted}");
    assert_eq!(calls[0]["id"], "call_c");
    assert_eq!(calls[0]["function"]["name"], CONFIRM_TOOL);
    let answers = agui_tool_messages(&granted);
    assert_eq!(answers.len(), 1, "one tool message: {granted}");
    assert_eq!(answers[0].0, "call_c");

    // The history shows the call as web_fetch, answered.
    let history = aap.full_history(&sid).await;
    let mut block = web_fetch;
    block["type"] = json!("tool_use");
    assert_eq!(tool_uses(&history), [block]);
    let stored = tool_message(&history, "call_c").expect("the stored answer");
    assert_eq!(
        Value::String(content_text(&stored["content"])),
        answers[0].1,
        "the history holds what the upstream was sent"
    );
    assert_no_dangling_tool_use(&history);
    answers[0].1.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_a_confirm_call_naming_a_tool_shows_as_that_tool_and_is_answered_confirmed() {
    let content = grant_a_confirm_call_naming_web_fetch("", "delta").await;
    assert_eq!(content, json!(r#"{"confirmed":true}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_with_the_boolean_result_encoding_a_grant_is_true() {
    let content =
        grant_a_confirm_call_naming_web_fetch(r#"result_encoding = "boolean""#, "none").await;
    assert_eq!(content, json!("true"));
}

// ---------------------------------------------------------------------------------------------
// 5. A mixed stop: a client tool and a permission, answered in one turn

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_stop_must_be_answered_whole_and_reaches_the_upstream_in_pending_order() {
    let upstream = ScriptedUpstream::start(|request| {
        let body = body_of(request);
        if !agui_tool_messages(&body).is_empty() {
            return run_script(request, &text_message("x.m1", "Done."));
        }
        let mut events = text_message("x.m0", "Checking.").to_vec();
        events.extend(tool_call(
            "call_perm",
            CONFIRM_TOOL,
            "x.m0",
            &[r#"{"action":"Share your location?"}"#],
        ));
        events.extend(tool_call("call_loc", "get_location", "x.m0", &["{}"]));
        run_script(request, &events)
    })
    .await;
    let (_gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let location = tool_spec("get_location", "Current GPS position");
    let sid = aap
        .new_session(json!({"agent": {"name": "support"}, "tools": [location]}))
        .await;

    let reply = aap.turn(&sid, user_turn("delta", "where am I?")).await;
    assert_eq!(
        reply.expect_events(),
        [
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "Checking."})),
            event(
                "tool_call",
                json!({"toolCallId": "call_perm", "name": CONFIRM_TOOL,
                       "input": {"action": "Share your location?"}})
            ),
            event(
                "tool_call",
                json!({"toolCallId": "call_loc", "name": "get_location", "input": {}})
            ),
            event("turn_stop", json!({"stopReason": "tool_use"})),
        ],
        "{}",
        reply.text
    );

    let location_answer =
        json!({"role": "tool", "toolCallId": "call_loc", "content": "47.37,8.54"});
    let permission = json!({"role": "tool_permission", "toolCallId": "call_perm", "granted": true});
    aap.turn(
        &sid,
        json!({"stream": "delta", "messages": [location_answer]}),
    )
    .await
    .expect_error_naming(400, "call_perm");
    aap.turn(&sid, json!({"stream": "none", "messages": [permission]}))
        .await
        .expect_error_naming(400, "call_loc");
    assert_eq!(upstream.requests().len(), 1, "refused turns reach nobody");

    // Both, in the order opposite to the pending one.
    let reply = aap
        .turn(
            &sid,
            json!({"stream": "none", "messages": [location_answer, permission]}),
        )
        .await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "Done.");

    let answered = upstream.wait_for_requests(2, PATIENCE).await.json();
    assert_eq!(
        agui_tool_messages(&answered),
        [
            ("call_perm".to_owned(), json!(r#"{"confirmed":true}"#)),
            ("call_loc".to_owned(), json!("47.37,8.54")),
        ],
        "the answers follow the pending order: {answered}"
    );
    let sent = answered["messages"].as_array().unwrap();
    assert_eq!(
        sent.last().map(|m| m["role"].clone()),
        Some(json!("tool")),
        "no user message was added: {answered}"
    );

    let history = aap.full_history(&sid).await;
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "tool", "assistant"],
        "{}",
        Value::Array(history.clone())
    );
    assert_no_dangling_tool_use(&history);
}

// ---------------------------------------------------------------------------------------------
// 6. A HAI upstream behind the AAP face

/// A HAI run (`hai.md` §2–§3, variant 3 deltas): one business message with two text outputs.
fn hai_script(texts: &[&str]) -> Script {
    let mut events = vec![
        json!({"type": "RUN_STARTED", "messageId": "msgId-001", "role": "assistant",
               "timestamp": 1_620_000_000_000_i64}),
        json!({"type": "BUSINESS_DATA_START", "messageId": "msg-2", "role": "assistant",
               "timestamp": 1_620_000_000_500_i64}),
    ];
    for text in texts {
        let output = json!({"output": {"type": "text", "content": text}}).to_string();
        events.push(
            json!({"type": "BUSINESS_DATA_CONTENT", "messageId": "msg-2",
                           "delta": output, "timestamp": 1_620_000_001_000_i64}),
        );
    }
    events.push(json!({"type": "BUSINESS_DATA_END", "messageId": "msg-2",
                       "timestamp": 1_620_000_002_000_i64}));
    events.push(
        json!({"type": "RUN_FINISHED", "messageId": "msgId-001", "role": "assistant",
                       "timestamp": 1_620_000_002_500_i64}),
    );
    Script::sse_json(&events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hai_upstream_behind_the_aap_face() {
    let upstream = ScriptedUpstream::with_script(hai_script(&["Hello ", "from HAI"])).await;
    let (_gateway, aap) = gateway(
        &upstream.url("/chat"),
        r#"upstream_dialect = "hai""#,
        "",
        "",
    );
    let sid = new_session(&aap).await;

    let reply = aap.turn(&sid, user_turn("delta", "hi")).await;
    assert_eq!(
        reply.expect_events(),
        [
            event("turn_start", json!({})),
            event("text_delta", json!({"delta": "Hello "})),
            event("text_delta", json!({"delta": "from HAI"})),
            event("turn_stop", json!({"stopReason": "end_turn"})),
        ],
        "{}",
        reply.text
    );

    let sent = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(sent.path, "/chat");
    let body = sent.json();
    assert!(
        body.get("protocolVersion").is_none(),
        "a HAI request has no protocolVersion: {body}"
    );
    assert!(body.get("resume").is_none(), "{body}");
    assert_eq!(body["threadId"], sid.as_str());
    assert!(
        body["runId"].as_str().is_some_and(|r| !r.is_empty()),
        "{body}"
    );
    assert_eq!(pairs(&agui_texts(&body["messages"])), [("user", "hi")]);
    assert_eq!(body["forwardedProps"]["aap"]["agent"], "support", "{body}");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {body}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, [CONFIRM_TOOL]);

    // A second turn: the HAI upstream gets the answer back as plain assistant text.
    let reply = aap.turn(&sid, user_turn("none", "again")).await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "Hello from HAI");
    let sent = upstream.wait_for_requests(2, PATIENCE).await.json();
    assert_eq!(
        pairs(&agui_texts(&sent["messages"])),
        [
            ("user", "hi"),
            ("assistant", "Hello from HAI"),
            ("user", "again")
        ]
    );
    let history = aap.full_history(&sid).await;
    assert_eq!(
        pairs(&history_texts(&history)),
        [
            ("user", "hi"),
            ("assistant", "Hello from HAI"),
            ("user", "again"),
            ("assistant", "Hello from HAI")
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Robustness

/// A junk JSON value: wrong types, huge and odd strings, deep nesting.
fn junk(rng: &mut Rng, depth: usize) -> Value {
    const KEYS: [&str; 12] = [
        "role",
        "content",
        "type",
        "text",
        "toolCallId",
        "name",
        "agent",
        "messages",
        "stream",
        "tools",
        "granted",
        "input",
    ];
    match rng.below(15) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.next() as i64),
        3 => json!(-1.5e300),
        4 => json!(""),
        5 => json!("x".repeat(1 + rng.below(70_000))),
        6 => json!("\u{0}\u{7f}\u{feff}\u{10ffff}🌍 \"quoted\" \\ back\n\t"),
        7 => json!([]),
        8 => json!({}),
        9 if depth < 3 => Value::Array((0..rng.below(4)).map(|_| junk(rng, depth + 1)).collect()),
        10 if depth < 3 => Value::Object(
            (0..rng.below(4))
                .map(|_| (KEYS[rng.below(KEYS.len())].to_owned(), junk(rng, depth + 1)))
                .collect(),
        ),
        11 => {
            let mut nested = json!("bottom");
            for _ in 0..rng.below(300) {
                nested = if rng.below(2) == 0 {
                    json!([nested])
                } else {
                    json!({"content": nested})
                };
            }
            nested
        }
        12 => json!(
            [
                "user",
                "assistant",
                "tool",
                "tool_permission",
                "system",
                "robot",
                "USER"
            ][rng.below(7)]
        ),
        13 => json!(["delta", "message", "none", "DELTA", ""][rng.below(5)]),
        _ => json!(["text", "thinking", "tool_use", "image", "audio"][rng.below(5)]),
    }
}

/// The JSON pointers of every node of `value` ("" for the root).
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                pointers(
                    v,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn random_pointer(rng: &mut Rng, value: &Value) -> String {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    all.swap_remove(rng.below(all.len()))
}

/// One pseudo-random body derived from one of `valid`.
fn random_body(rng: &mut Rng, valid: &[Value]) -> Vec<u8> {
    let mut base = valid[rng.below(valid.len())].clone();
    let mut bytes = base.to_string().into_bytes();
    match rng.below(11) {
        0 => {}
        1 => bytes.truncate(rng.below(bytes.len())),
        2 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next() as u8;
            }
        }
        3 | 4 => {
            for _ in 0..1 + rng.below(3) {
                let at = random_pointer(rng, &base);
                let replacement = junk(rng, 0);
                if let Some(slot) = base.pointer_mut(&at) {
                    *slot = replacement;
                }
            }
            bytes = base.to_string().into_bytes();
        }
        5 => {
            let at = random_pointer(rng, &base);
            if let Some((parent, last)) = at.rsplit_once('/') {
                match base.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.shift_remove(&last.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(i) = last.parse::<usize>() {
                            items.remove(i);
                        }
                    }
                    _ => {}
                }
            }
            bytes = base.to_string().into_bytes();
        }
        6 => {
            // Invalid UTF-8 inside a string: every valid body says "hello".
            let bad: &[&[u8]] = &[b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c"];
            let text = String::from_utf8_lossy(&bytes).replace("hello", "he\u{1}llo");
            let mut out = Vec::new();
            for (i, part) in text.split('\u{1}').enumerate() {
                if i > 0 {
                    out.extend_from_slice(bad[rng.below(bad.len())]);
                }
                out.extend_from_slice(part.as_bytes());
            }
            bytes = out;
        }
        7 => bytes = junk(rng, 0).to_string().into_bytes(),
        8 => bytes = (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
        9 => {
            // A huge string where a string was.
            let mut strings = Vec::new();
            let mut all = Vec::new();
            pointers(&base, String::new(), &mut all);
            for at in all {
                if base.pointer(&at).is_some_and(Value::is_string) {
                    strings.push(at);
                }
            }
            if !strings.is_empty() {
                let at = strings.swap_remove(rng.below(strings.len()));
                *base.pointer_mut(&at).unwrap() = json!("é".repeat(1 + rng.below(60_000)));
            }
            bytes = base.to_string().into_bytes();
        }
        _ => {
            let tails: [&[u8]; 5] = [b"}", b",", b"{\"extra\":", b"\0", b"]]]]"];
            bytes.extend_from_slice(tails[rng.below(tails.len())]);
        }
    }
    bytes
}

/// A random `[A-Za-z0-9._~-]` or `%XX` path segment.
fn junk_segment(rng: &mut Rng) -> String {
    const SAFE: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
    (0..rng.below(40))
        .map(|_| {
            if rng.below(4) == 0 {
                format!("%{:02X}", rng.next() as u8)
            } else {
                (SAFE[rng.below(SAFE.len())] as char).to_string()
            }
        })
        .collect()
}

/// Every answer must be a 2xx, or a 4xx with exactly `{"error": "<text>"}`.
fn assert_sane(reply: &Reply, what: &str) {
    match reply.status {
        200..=299 => {}
        400..=499 => {
            assert!(
                reply
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.starts_with("application/json")),
                "{what}: a {} must be JSON, got {:?}: {}",
                reply.status,
                reply.content_type,
                reply.text
            );
            let body = reply.json.as_ref().unwrap_or_else(|| {
                panic!(
                    "{what}: a {} body is not JSON: {}",
                    reply.status, reply.text
                )
            });
            let keys: Vec<&String> = body
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            assert_eq!(keys, ["error"], "{what}: {} body: {body}", reply.status);
            assert!(
                body["error"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "{what}: {} needs an error text: {body}",
                reply.status
            );
        }
        other => panic!("{what}: HTTP {other} (never a 5xx): {}", reply.text),
    }
}

/// A body for the log: its first 200 bytes.
fn preview(body: &[u8]) -> String {
    let shown = &body[..body.len().min(200)];
    format!("{} bytes: {:?}", body.len(), String::from_utf8_lossy(shown))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bodies_on_every_endpoint_never_get_a_5xx() {
    const PER_ENDPOINT: usize = 200;
    /// Bodies of requests the gateway does not read are kept small (see below).
    const UNREAD_BODY_MAX: usize = 2048;
    let upstream = ack_upstream().await;
    let (mut gateway, aap) = gateway(&upstream.url("/agent"), "", "", "");
    let sid = new_session(&aap).await;
    let location = tool_spec("get_location", "Current GPS position");

    let create_bodies = [
        json!({"agent": {"name": "support"}}),
        json!({"agent": {"name": "support", "tools": [{"name": "web_fetch", "trust": false}],
                         "options": {"model": "slow"}},
               "tools": [location],
               "messages": [
                   {"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "hello"},
                   {"role": "assistant", "content": [
                       {"type": "thinking", "thinking": "hm"},
                       {"type": "text", "text": "hello back"},
                       {"type": "tool_use", "toolCallId": "c1", "name": "get_location", "input": {}}]},
                   {"role": "tool", "toolCallId": "c1", "content": [{"type": "text", "text": "47,8"}]}]}),
    ];
    let turn_bodies = [
        user_turn("none", "hello"),
        user_turn("delta", "hello there"),
        json!({"stream": "message",
               "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
               "tools": [location],
               "agent": {"tools": [{"name": "web_fetch"}], "options": {"model": "slow"}}}),
        json!({"messages": [{"role": "user", "content": "hello"},
                            {"role": "user", "content": [{"type": "text", "text": "again"}]}]}),
        json!({"stream": "delta",
               "messages": [{"role": "tool", "toolCallId": "call_1", "content": "hello"},
                            {"role": "tool_permission", "toolCallId": "call_2", "granted": true,
                             "reason": "hello"}]}),
    ];
    let empty = [json!({}), json!({"hello": true})];

    let mut rng = Rng(0x5EED_AAF0_0D15_EA5E);
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for endpoint in [
        "GET /meta",
        "GET /sessions",
        "POST /sessions",
        "GET /sessions/:id",
        "GET /sessions/:id/history",
        "POST /sessions/:id/turns",
        "DELETE /sessions/:id",
    ] {
        for i in 0..PER_ENDPOINT {
            let (method, path, valid): (&str, String, &[Value]) = match endpoint {
                "GET /meta" => ("GET", "/meta".into(), &empty),
                "GET /sessions" => {
                    let path = match rng.below(3) {
                        0 => "/sessions".to_owned(),
                        1 => format!("/sessions?after={sid}"),
                        _ => format!("/sessions?after={}", junk_segment(&mut rng)),
                    };
                    ("GET", path, &empty)
                }
                "POST /sessions" => ("POST", "/sessions".into(), &create_bodies),
                "GET /sessions/:id" => {
                    let id = if rng.below(4) == 0 {
                        junk_segment(&mut rng)
                    } else {
                        sid.clone()
                    };
                    ("GET", format!("/sessions/{id}"), &empty)
                }
                "GET /sessions/:id/history" => {
                    let kind = match rng.below(4) {
                        0 => "full".to_owned(),
                        1 => "compacted".to_owned(),
                        _ => junk_segment(&mut rng),
                    };
                    (
                        "GET",
                        format!("/sessions/{sid}/history?type={kind}"),
                        &empty,
                    )
                }
                "POST /sessions/:id/turns" => {
                    ("POST", format!("/sessions/{sid}/turns"), &turn_bodies)
                }
                _ => {
                    // Half of the deletes remove a session made for the purpose.
                    let id = if i % 2 == 0 {
                        aap.new_session(json!({"agent": {"name": "support"}})).await
                    } else {
                        junk_segment(&mut rng)
                    };
                    ("DELETE", format!("/sessions/{id}"), &empty)
                }
            };
            let mut body = random_body(&mut rng, valid);
            if method != "POST" {
                // The gateway does not read these bodies; a large unread body makes the close
                // after the answer a reset, which could hide the answer from the client.
                body.truncate(UNREAD_BODY_MAX);
            }
            let what = format!("{endpoint} #{i}: {method} {path} with {}", preview(&body));
            eprintln!("{what}");
            let reply = aap.request(method, &path, &body).await;
            assert_sane(&reply, &what);
            if endpoint == "POST /sessions/:id/turns" && reply.status == 200 {
                // A turn that ran is a well-formed turn (streams are parsed strictly).
                let (stop, _) = reply.turn_messages();
                assert!(
                    ["end_turn", "error"].contains(&stop.as_str()),
                    "{what}: stop {stop}"
                );
            }
            *counts
                .entry(format!("{endpoint} {}", reply.status))
                .or_default() += 1;
        }
    }
    eprintln!("answers: {counts:?}");
    assert!(gateway.is_running(), "the gateway died");

    // Every endpoint saw valid requests too, and the gateway still serves.
    for ok in [
        "GET /meta 200",
        "POST /sessions 201",
        "POST /sessions 400",
        "POST /sessions/:id/turns 200",
        "POST /sessions/:id/turns 400",
        "DELETE /sessions/:id 204",
    ] {
        assert!(counts.contains_key(ok), "no {ok:?} among {counts:?}");
    }
    aap.meta().await.expect(200);
    let reply = aap.turn(&sid, user_turn("none", "still here?")).await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assert_eq!(assistant_text(&messages), "ack: still here?");
    assert_no_dangling_tool_use(&aap.full_history(&sid).await);
    assert_eq!(
        event_names(
            aap.turn(&sid, user_turn("delta", "and streaming?"))
                .await
                .expect_events()
        ),
        ["turn_start", "text_delta", "turn_stop"]
    );
}
