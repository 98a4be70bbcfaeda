use std::collections::{HashMap, HashSet};

use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::{json, Value};

use super::script::{BACKEND_TOOL, MULTI_BYTE_GREETING};
use super::*;
use crate::event::{MessageContent, RunOutcome};
use http::StatusCode;

// === fixtures ===

fn input(value: Value) -> RunAgentInput {
    serde_json::from_value(value).expect("fixture is a RunAgentInput")
}

fn user_turn() -> RunAgentInput {
    input(json!({
        "threadId": "th-1", "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": "héllo 世界"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    }))
}

fn turn_with_tools() -> RunAgentInput {
    input(json!({
        "threadId": "th-1", "runId": "run-2",
        "messages": [{"id": "u1", "role": "user", "content": [{"type": "text", "text": "go"}]}],
        "tools": [
            {"name": "confirmAction", "description": "ask the user",
             "parameters": {"type": "object", "properties": {}}},
            {"name": "second", "description": "never called"}
        ]
    }))
}

fn tool_reply() -> RunAgentInput {
    input(json!({
        "threadId": "th-1", "runId": "run-3",
        "messages": [
            {"id": "u1", "role": "user", "content": "go"},
            {"id": "run-2.m1", "role": "assistant", "content": "Now your app runs",
             "toolCalls": [{"id": "run-2.c1", "type": "function",
                            "function": {"name": "confirmAction", "arguments": "{}"}}]},
            {"id": "tm1", "role": "tool", "toolCallId": "run-2.c1",
             "content": [{"type": "text", "text": "confirmed"}, {"type": "text", "text": "✓ ok"}]}
        ],
        "tools": [{"name": "confirmAction", "description": "ask the user"}]
    }))
}

// === a small AG-UI 1.0 sequence checker (agui.md §5.2) ===

/// Panics unless `events` is one legal run for `input`; returns the frontend calls left open.
fn assert_legal_run(input: &RunAgentInput, events: &[Event]) -> Vec<String> {
    match events.first() {
        Some(Event::RunStarted(e)) => {
            assert_eq!(e.thread_id, input.thread_id);
            assert_eq!(e.run_id, input.run_id);
            assert_eq!(e.protocol_version.as_deref(), Some("1.0"));
        }
        other => panic!("first event must be RUN_STARTED, got {other:?}"),
    }
    let Some((Event::RunFinished(finished), middle)) = events[1..].split_last() else {
        panic!("last event must be RUN_FINISHED");
    };
    assert_eq!(finished.thread_id, input.thread_id);
    assert_eq!(finished.run_id, input.run_id);

    let mut texts = HashSet::new();
    let mut calls = HashSet::new();
    let mut reasoning = HashSet::new();
    let mut spans = HashSet::new();
    let mut steps = HashSet::new();
    let mut call_names = HashMap::new();
    let mut results = HashSet::new();
    for event in middle {
        match event {
            Event::RunStarted(_) | Event::RunFinished(_) | Event::RunError(_) => {
                panic!("lifecycle event inside the run: {event:?}")
            }
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => panic!("chunk emitted: {event:?}"),
            Event::TextMessageStart(e) => assert!(texts.insert(&e.message_id), "{event:?}"),
            Event::TextMessageContent(e) => assert!(texts.contains(&e.message_id), "{event:?}"),
            Event::TextMessageEnd(e) => assert!(texts.remove(&e.message_id), "{event:?}"),
            Event::ToolCallStart(e) => {
                assert!(calls.insert(&e.tool_call_id), "{event:?}");
                assert!(e.parent_message_id.is_some(), "{event:?}");
                call_names.insert(&e.tool_call_id, e.tool_call_name.as_str());
            }
            Event::ToolCallArgs(e) => assert!(calls.contains(&e.tool_call_id), "{event:?}"),
            Event::ToolCallEnd(e) => assert!(calls.remove(&e.tool_call_id), "{event:?}"),
            Event::ToolCallResult(e) => {
                assert!(
                    !calls.contains(&e.tool_call_id),
                    "result before END: {event:?}"
                );
                assert_eq!(call_names.get(&e.tool_call_id), Some(&BACKEND_TOOL));
                assert!(results.insert(&e.tool_call_id), "{event:?}");
            }
            Event::ReasoningStart(e) => assert!(spans.insert(&e.message_id), "{event:?}"),
            Event::ReasoningEnd(e) => assert!(spans.remove(&e.message_id), "{event:?}"),
            Event::ReasoningMessageStart(e) => {
                assert!(reasoning.insert(&e.message_id), "{event:?}")
            }
            Event::ReasoningMessageContent(e) => {
                assert!(reasoning.contains(&e.message_id), "{event:?}")
            }
            Event::ReasoningMessageEnd(e) => {
                assert!(reasoning.remove(&e.message_id), "{event:?}")
            }
            Event::StepStarted(e) => assert!(steps.insert(&e.step_name), "{event:?}"),
            Event::StepFinished(e) => assert!(steps.remove(&e.step_name), "{event:?}"),
            Event::StateDelta(e) => {
                assert!(!e.delta.is_empty());
                assert!(
                    e.delta.iter().all(|op| op.path.starts_with('/')),
                    "{event:?}"
                );
            }
            _ => {}
        }
    }
    assert!(
        texts.is_empty() && calls.is_empty(),
        "left open: {texts:?} {calls:?}"
    );
    assert!(reasoning.is_empty() && spans.is_empty() && steps.is_empty());

    let mut pending: Vec<String> = call_names
        .iter()
        .filter(|(id, _)| !results.contains(*id))
        .map(|(id, _)| (*id).clone())
        .collect();
    pending.sort();
    for (id, name) in &call_names {
        let frontend = input.tools.iter().any(|t| t.name == *name);
        assert_eq!(
            frontend,
            !results.contains(id),
            "{name}: frontend calls have no result"
        );
    }
    let listed = match &finished.outcome {
        Some(RunOutcome::Success {
            pending_tool_call_ids,
        }) => pending_tool_call_ids.clone(),
        other => panic!("unexpected outcome {other:?}"),
    };
    assert_eq!(
        listed.is_some(),
        !pending.is_empty(),
        "pendingToolCallIds iff calls pending"
    );
    assert_eq!(listed.unwrap_or_default(), pending);

    for event in events {
        assert_no_null(&serde_json::to_value(event).expect("serialises"));
    }
    pending
}

fn assert_no_null(value: &Value) {
    match value {
        Value::Null => panic!("null emitted"),
        Value::Array(items) => items.iter().for_each(assert_no_null),
        Value::Object(map) => map.values().for_each(assert_no_null),
        _ => {}
    }
}

/// The concatenated deltas of text message `id`.
fn text_of(events: &[Event], id: &str) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageContent(c) if c.message_id == id => Some(c.delta.as_str()),
            _ => None,
        })
        .collect()
}

fn sse_of(events: &[Event]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for event in events {
        encode_json(&mut out, None, event).expect("encodes");
    }
    out.to_vec()
}

// === the script ===

#[test]
fn a_user_turn_is_a_legal_run_with_every_kind_of_entity() {
    let input = user_turn();
    let events = script(&input);
    assert!(assert_legal_run(&input, &events).is_empty());
    assert_eq!(events, script(&input), "deterministic");

    let kinds: HashSet<_> = events.iter().map(|e| e.event_type().as_str()).collect();
    for kind in [
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "TOOL_CALL_RESULT",
    ] {
        assert!(kinds.contains(kind), "missing {kind}");
    }
    let reasoning_deltas = events
        .iter()
        .filter(|e| matches!(e, Event::ReasoningMessageContent(_)))
        .count();
    assert_eq!(reasoning_deltas, 2);
}

#[test]
fn the_echo_streams_multi_byte_text_in_small_deltas() {
    let events = script(&user_turn());
    let expected = format!("You said “héllo 世界”. In return: {MULTI_BYTE_GREETING}");
    assert_eq!(text_of(&events, "run-1.m0"), expected);
    assert_eq!(MULTI_BYTE_GREETING, "你好, wörld 🌍");

    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageContent(c) if c.message_id == "run-1.m0" => Some(c.delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 5, "{deltas:?}");
    assert!(deltas.iter().all(|d| d.chars().count() <= 4), "{deltas:?}");
    assert!(deltas.iter().filter(|d| !d.is_ascii()).count() >= 3);
}

#[test]
fn the_backend_tool_streams_its_arguments_and_gets_a_result() {
    let events = script(&user_turn());
    let args: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallArgs(a) if a.tool_call_id == "run-1.c0" => Some(a.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"city":"Zürich"}"#);
    let fragments = events
        .iter()
        .filter(|e| matches!(e, Event::ToolCallArgs(_)))
        .count();
    assert!((2..=3).contains(&fragments));

    let result = events.iter().find_map(|e| match e {
        Event::ToolCallResult(r) => Some(r),
        _ => None,
    });
    let result = result.expect("a TOOL_CALL_RESULT");
    assert_eq!(result.message_id, "run-1.t0");
    assert_eq!(result.tool_call_id, "run-1.c0");
    assert!(matches!(result.content, MessageContent::Text(_)));
}

#[test]
fn frontend_tools_leave_the_first_tool_pending() {
    let input = turn_with_tools();
    let events = script(&input);
    assert_eq!(assert_legal_run(&input, &events), ["run-2.c1"]);
    let start = events.iter().find_map(|e| match e {
        Event::ToolCallStart(s) if s.tool_call_id == "run-2.c1" => Some(s),
        _ => None,
    });
    let start = start.expect("the frontend call");
    assert_eq!(start.tool_call_name, "confirmAction");
    assert_eq!(start.parent_message_id.as_deref(), Some("run-2.m1"));
    assert_eq!(
        serde_json::to_value(events.last().expect("events")).expect("serialises")["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["run-2.c1"]})
    );
}

#[test]
fn a_tool_reply_is_quoted_in_a_short_run() {
    let input = tool_reply();
    let events = script(&input);
    assert!(assert_legal_run(&input, &events).is_empty());
    assert_eq!(
        text_of(&events, "run-3.m0"),
        "Your app answered `confirmAction`: “confirmed\n✓ ok”"
    );
    // Short: one message between the lifecycle events, nothing else.
    assert!(events[1..events.len() - 1].iter().all(|e| matches!(
        e,
        Event::TextMessageStart(_) | Event::TextMessageContent(_) | Event::TextMessageEnd(_)
    )));

    let string_reply = input_with_string_tool_content("done, 完了");
    let events = script(&string_reply);
    assert_legal_run(&string_reply, &events);
    assert!(text_of(&events, "r.m0").contains("“done, 完了”"));
}

fn input_with_string_tool_content(content: &str) -> RunAgentInput {
    input(json!({
        "threadId": "t", "runId": "r",
        "messages": [{"id": "tm", "role": "tool", "toolCallId": "unknown", "content": content}]
    }))
}

#[test]
fn no_messages_and_long_text_still_make_legal_runs() {
    let empty = input(json!({"threadId": "t", "runId": "r", "messages": []}));
    assert_legal_run(&empty, &script(&empty));

    let long = input(json!({"threadId": "t", "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "é".repeat(10_000)}]}));
    let events = script(&long);
    assert_legal_run(&long, &events);
    assert!(text_of(&events, "r.m0").chars().count() < 400);
}

// === the body ===

#[tokio::test(start_paused = true)]
async fn the_body_is_the_sse_encoding_of_the_script_and_keeps_its_pace() {
    let input = user_turn();
    let events = script(&input);
    let began = Instant::now();
    let bytes = demo_response(&input, DEFAULT_PACE)
        .collect()
        .await
        .expect("infallible")
        .to_bytes();
    assert_eq!(bytes, sse_of(&events));

    // One frame per event, `pace` apart, none before the first.
    let expected = DEFAULT_PACE * (events.len() as u32 - 1);
    let elapsed = began.elapsed();
    assert!(elapsed >= expected, "{elapsed:?} < {expected:?}");
    assert!(
        elapsed < expected + Duration::from_millis(events.len() as u64),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn frames_are_cut_inside_characters_and_across_events() {
    let input = turn_with_tools();
    let wire = sse_of(&script(&input));
    let text = std::str::from_utf8(&wire).expect("the stream is UTF-8");

    let mut body = demo_response(&input, DEFAULT_PACE);
    assert!(!body.is_end_stream());
    let mut boundaries = Vec::new();
    let mut received = Vec::new();
    while let Some(frame) = body.frame().await {
        let data = frame
            .expect("infallible")
            .into_data()
            .expect("data frames only");
        assert!(!data.is_empty(), "no empty frames");
        received.extend_from_slice(&data);
        boundaries.push(received.len());
    }
    assert!(body.is_end_stream());
    assert!(body.frame().await.is_none(), "None after the end, forever");
    assert_eq!(received, wire);

    let (last, inner) = boundaries.split_last().expect("frames");
    assert_eq!(*last, wire.len());
    let inside_char = inner.iter().filter(|&&b| !text.is_char_boundary(b)).count();
    assert!(
        inside_char >= 5,
        "only {inside_char} cuts inside a character"
    );
    // Every cut lies strictly inside an event: never right after a `\n\n`.
    assert!(inner.iter().all(|&b| &wire[b - 2..b] != b"\n\n"));
    assert_eq!(boundaries.len(), text.matches("data: ").count());
}

#[tokio::test]
async fn zero_pace_never_waits() {
    let input = tool_reply();
    let mut body = demo_response(&input, Duration::ZERO);
    let mut frames = 0;
    // Without a timer every poll is ready at once: a no-op waker suffices.
    let mut cx = Context::from_waker(std::task::Waker::noop());
    while let Poll::Ready(Some(_)) = Pin::new(&mut body).poll_frame(&mut cx) {
        frames += 1;
    }
    assert!(body.is_end_stream());
    assert_eq!(frames, script(&input).len());
}

// === the server, over real TCP ===

async fn start_server() -> (SocketAddr, tokio::task::JoinHandle<io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    (addr, tokio::spawn(serve(listener, Duration::ZERO)))
}

async fn send(
    addr: SocketAddr,
    method: Method,
    body: impl Into<Bytes>,
) -> (StatusCode, http::HeaderMap, Bytes) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri("/any/path")
        .header(http::header::HOST, "demo")
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body.into()))
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, body)
}

fn error_of(body: &[u8]) -> (String, String) {
    let value: Value = serde_json::from_slice(body).expect("a JSON error body");
    let error = &value["error"];
    (
        error["code"].as_str().expect("code").to_owned(),
        error["message"].as_str().expect("message").to_owned(),
    )
}

#[tokio::test]
async fn the_server_streams_a_run_for_a_post() {
    let (addr, server) = start_server().await;
    let input = user_turn();
    let request = serde_json::to_vec(&input).expect("serialises");
    let (status, headers, body) = send(addr, Method::POST, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "text/event-stream");
    assert_eq!(headers[CACHE_CONTROL], "no-cache");
    assert!(!headers.contains_key(CONTENT_LENGTH));
    assert_eq!(body, sse_of(&script(&input)));
    server.abort();
}

#[tokio::test]
async fn the_server_answers_400_naming_the_field() {
    let (addr, server) = start_server().await;
    let (status, headers, body) =
        send(addr, Method::POST, r#"{"threadId":"t","messages":[]}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers[CONTENT_TYPE], "application/json");
    let (code, message) = error_of(&body);
    assert_eq!(code, "INVALID_REQUEST");
    assert!(message.contains("runId"), "{message}");

    let (status, _, body) = send(addr, Method::POST, "not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&body).0, "INVALID_REQUEST");
    server.abort();
}

#[tokio::test]
async fn the_server_answers_405_to_other_methods_and_413_to_huge_bodies() {
    let (addr, server) = start_server().await;
    let (status, headers, body) = send(addr, Method::GET, Bytes::new()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers[ALLOW], "POST");
    assert_eq!(error_of(&body).0, "METHOD_NOT_ALLOWED");

    let huge = vec![b' '; MAX_REQUEST_BYTES + 1];
    let (status, _, body) = send(addr, Method::POST, huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(&body).0, "PAYLOAD_TOO_LARGE");
    server.abort();
}
