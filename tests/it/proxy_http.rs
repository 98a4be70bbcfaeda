//! HTTP-level contract of `dialect-proxy serve` in flag mode: request validation, upstream
//! failures before headers, response headers and byte-level SSE framing, header forwarding, and
//! the built-in demo agent. Real binary, real TCP.

use crate::support;

use serde_json::{json, Value};
use support::{
    assert_json_subset, assert_run_envelope, client::BodyEnd, event_types, run_input, send,
    Gateway, Request, Response, Script, ScriptedUpstream, PATIENCE,
};

const THREAD: &str = "thread-http";
const RUN: &str = "run-7";

fn run_started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": RUN})
}

fn run_finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": THREAD, "runId": RUN})
}

fn hello_run() -> Vec<Value> {
    vec![
        run_started(),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
        run_finished(),
    ]
}

fn post_run() -> Request {
    Request::post_json("/", run_input(THREAD, RUN))
}

/// Reads a JSON error response and checks its shape: `{"error":{"code","message"}}` served as
/// `application/json`. Returns `(code, message)`.
async fn json_error(response: &mut Response, status: u16) -> (String, String) {
    let text = response.text().await;
    assert_eq!(response.status, status, "body: {text}");
    let content_type = response.header("content-type").unwrap_or("");
    assert!(
        content_type.starts_with("application/json"),
        "error responses are JSON; content-type {content_type:?}, body {text}"
    );
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("error body is not JSON ({e}): {text}"));
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    let message = body["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(!code.is_empty(), "error.code missing: {body}");
    assert!(!message.trim().is_empty(), "error.message missing: {body}");
    (code, message)
}

/// A gateway in front of an upstream that must never be contacted.
async fn gateway_with_unused_upstream() -> (ScriptedUpstream, Gateway) {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hello_run())).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    (upstream, gateway)
}

// ---------------------------------------------------------------- request validation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_body_is_400() {
    let (upstream, gateway) = gateway_with_unused_upstream().await;

    let mut response = send(gateway.addr, &Request::post_json("/", "{not json")).await;
    json_error(&mut response, 400).await;

    assert!(
        upstream.requests().is_empty(),
        "invalid input reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_thread_id_is_400_naming_the_field() {
    let (upstream, gateway) = gateway_with_unused_upstream().await;
    let body = json!({"runId": RUN, "messages": [], "tools": [], "context": []});

    let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
    let (_, message) = json_error(&mut response, 400).await;

    assert!(
        message.contains("threadId"),
        "message must name threadId: {message:?}"
    );
    assert!(
        upstream.requests().is_empty(),
        "invalid input reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_not_an_array_is_400_naming_the_field() {
    let (upstream, gateway) = gateway_with_unused_upstream().await;
    let body =
        json!({"threadId": THREAD, "runId": RUN, "messages": "hi", "tools": [], "context": []});

    let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
    let (_, message) = json_error(&mut response, 400).await;

    assert!(
        message.contains("messages"),
        "message must name messages: {message:?}"
    );
    assert!(
        upstream.requests().is_empty(),
        "invalid input reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_is_405_with_json_error() {
    let (upstream, gateway) = gateway_with_unused_upstream().await;

    let mut response = send(gateway.addr, &Request::get("/")).await;
    json_error(&mut response, 405).await;

    assert!(upstream.requests().is_empty(), "GET reached the upstream");
}

// ---------------------------------------------------------------- upstream failures before headers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_upstream_is_502_upstream_unavailable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }; // dropped: nothing listens there any more
    let gateway = Gateway::agui(
        &format!("http://127.0.0.1:{port}/agent"),
        &["--connect-timeout", "1s"],
    );

    let mut response = send(gateway.addr, &post_run()).await;
    let (code, _) = json_error(&mut response, 502).await;

    assert_eq!(code, "UPSTREAM_UNAVAILABLE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_500_is_502_naming_the_status_and_the_body_goes_to_the_log() {
    let upstream = ScriptedUpstream::with_script(Script::status_body(
        500,
        "text/plain",
        "model overloaded, try again later",
    ))
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    let (code, message) = json_error(&mut response, 502).await;

    assert_eq!(code, "UPSTREAM_HTTP_500");
    assert!(message.contains("HTTP 500"), "{message:?}");
    assert!(
        !message.contains("overloaded"),
        "the upstream's body is for the log, not the client: {message:?}"
    );
    gateway
        .wait_for_stderr("model overloaded, try again later")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logged_excerpt_of_an_upstream_error_body_is_bounded() {
    let huge = format!("BEGIN-MARKER {}", "x".repeat(200_000));
    let upstream =
        ScriptedUpstream::with_script(Script::status_body(503, "text/plain", huge.as_bytes()))
            .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    let (code, _) = json_error(&mut response, 502).await;

    assert_eq!(code, "UPSTREAM_HTTP_503");
    let body_len = response.raw_body().len();
    assert!(body_len < 1024, "error body is {body_len} bytes");
    let log = gateway.wait_for_stderr("BEGIN-MARKER").await;
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(
        longest < 16 * 1024,
        "a 200 KB upstream body must be cut to a bounded excerpt; a log line is {longest} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_upstream_headers_in_time_is_504_and_the_upstream_is_dropped() {
    let upstream = ScriptedUpstream::with_script(Script::no_headers()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--headers-timeout", "1s"]);

    let mut response = send(gateway.addr, &post_run()).await;
    let (code, _) = json_error(&mut response, 504).await;

    assert_eq!(code, "UPSTREAM_HEADERS_TIMEOUT");
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "after the headers timeout the gateway must drop the upstream request"
    );
}

// ---------------------------------------------------------------- success: headers and framing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_response_headers() {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hello_run())).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    // Node's fetch asks for compression; an event stream must not be compressed anyway.
    let request = post_run().header("accept-encoding", "gzip, deflate, br");
    let mut response = send(gateway.addr, &request).await;
    response.read_to_end().await;

    assert_eq!(response.status, 200, "{}", response.status_line);
    assert_eq!(response.header_all("content-type"), ["text/event-stream"]);
    assert_eq!(response.header_all("cache-control"), ["no-cache"]);
    assert_eq!(response.header_all("x-accel-buffering"), ["no"]);
    assert_eq!(
        response.header("content-length"),
        None,
        "a stream must not have content-length; headers {:?}",
        response.headers
    );
    assert_eq!(
        response.header("content-encoding"),
        None,
        "an event stream must not be compressed; headers {:?}",
        response.headers
    );
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_framing_is_ok_comment_then_lf_data_frames_and_pings() {
    // Upstream JSON has spaces and there is a 600 ms pause: the gateway output must still be
    // canonical (agui.md §6.1): compact JSON, LF only, pings in the silence.
    let events = hello_run();
    let mut script = Script::sse_headers();
    for (i, ev) in events.iter().enumerate() {
        if i == 2 {
            script = script.sleep_ms(600);
        }
        let spaced = serde_json::to_string_pretty(ev).unwrap().replace('\n', " ");
        script = script.bytes(format!("data: {spaced}\n\n"));
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--heartbeat-interval", "100ms"]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let body = String::from_utf8(response.read_to_end().await.to_vec()).expect("UTF-8 body");
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));

    assert!(
        body.starts_with(": ok\n\n"),
        "body must start with `: ok\\n\\n`: {body:?}"
    );
    assert!(!body.contains('\r'), "LF only, never CR: {body:?}");
    assert!(
        body.ends_with("\n\n"),
        "last frame must end with a blank line: {body:?}"
    );

    let frames: Vec<&str> = body[..body.len() - 2].split("\n\n").collect();
    let mut delivered = Vec::new();
    let mut pings = 0;
    for (i, frame) in frames.iter().enumerate() {
        if i == 0 {
            assert_eq!(*frame, ": ok");
        } else if *frame == ": ping" {
            pings += 1;
        } else {
            let json = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("frame {i} is neither `data: ` nor `: ping`: {frame:?}"));
            assert!(!json.contains('\n'), "one data line per event: {frame:?}");
            assert!(
                support::is_compact_json(json),
                "compact JSON expected: {json}"
            );
            let value: Value =
                serde_json::from_str(json).unwrap_or_else(|e| panic!("frame {i}: {e}: {json}"));
            assert!(value["type"].is_string(), "event without type: {json}");
            delivered.push(value);
        }
    }
    assert!(
        pings >= 1,
        "expected a `: ping` during the 600 ms pause: {body:?}"
    );
    assert_eq!(
        delivered.len(),
        events.len(),
        "{:?}",
        event_types(&delivered)
    );
    for (actual, expected) in delivered.iter().zip(&events) {
        assert_json_subset(actual, expected);
    }
    assert_run_envelope(&delivered, THREAD, RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crlf_upstream_framing_is_normalised_to_lf() {
    // streaming.md §4: the decoder accepts CRLF; the encoder writes LF only.
    let events = hello_run();
    let mut script = Script::sse_headers();
    for ev in &events {
        script = script.bytes(format!("data: {ev}\r\n\r\n"));
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let body = String::from_utf8(response.read_to_end().await.to_vec()).expect("UTF-8 body");
    assert!(!body.contains('\r'), "LF only, never CR: {body:?}");

    let mut response = send(gateway.addr, &post_run()).await;
    let delivered = response.events_to_end().await;
    assert_eq!(
        delivered.len(),
        events.len(),
        "{:?}",
        event_types(&delivered)
    );
    for (actual, expected) in delivered.iter().zip(&events) {
        assert_json_subset(actual, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_flushed_as_they_arrive() {
    // The upstream sends three events and then nothing: they must reach the client without
    // waiting for more data or the end of the stream.
    let script = Script::sse_json(&hello_run()[..3]).stall();
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let events = response.read_events(3).await;

    assert_eq!(
        event_types(&events),
        ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    );
    assert_json_subset(&events[2], &hello_run()[2]);
}

// ---------------------------------------------------------------- what the upstream receives

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_headers_are_forwarded_and_hop_by_hop_are_not() {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hello_run())).await;
    let gateway = Gateway::agui(&upstream.url("/agent/run"), &[]);

    let request = Request::post_json("/any/path?x=1", run_input(THREAD, RUN))
        .header("authorization", "Bearer test-token")
        .header("x-trace-id", "trace-123")
        .header("connection", "keep-alive, x-drop-me")
        .header("x-drop-me", "1")
        .header("keep-alive", "timeout=5")
        .header("te", "trailers")
        .header("trailer", "x-checksum")
        .header("proxy-authorization", "Basic cHJveHk6c2VjcmV0")
        .header("proxy-connection", "keep-alive")
        .header("accept-encoding", "gzip, deflate");
    let mut response = send(gateway.addr, &request).await;
    assert_eq!(response.status, 200);
    response.read_to_end().await;

    let got = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(got.method, "POST");
    assert_eq!(
        got.path, "/agent/run",
        "every POST goes to the upstream URL's path"
    );
    assert_eq!(got.header_all("authorization"), ["Bearer test-token"]);
    assert_eq!(got.header_all("x-trace-id"), ["trace-123"]);
    for hop in [
        "x-drop-me",
        "keep-alive",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
        "upgrade",
    ] {
        assert!(
            !got.has_header(hop),
            "hop-by-hop header {hop:?} was forwarded: {:?}",
            got.headers
        );
    }
    for value in got.header_all("connection") {
        assert!(
            !value.to_ascii_lowercase().contains("x-drop-me"),
            "the client's Connection header was forwarded: {value:?}"
        );
    }
    assert_eq!(got.header_all("accept"), ["text/event-stream"]);
    assert_eq!(got.header_all("accept-encoding"), ["identity"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_receives_the_run_input_as_json() {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hello_run())).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    response.read_to_end().await;

    let got = upstream.wait_for_request(PATIENCE).await;
    let content_type = got.header("content-type").unwrap_or("");
    assert!(
        content_type.starts_with("application/json"),
        "upstream content-type {content_type:?}"
    );
    let body = got.json();
    assert_eq!(body["threadId"], THREAD, "{body}");
    assert_eq!(body["runId"], RUN, "{body}");
    assert!(body["messages"].is_array(), "{body}");
    assert_eq!(body["messages"][0]["content"], "hello", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_optional_arrays_are_defaulted_in_the_upstream_request() {
    // dialects.md row 19: missing `tools`/`context` default to [] in the normalised input.
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hello_run())).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let body = json!({"threadId": THREAD, "runId": RUN, "messages": []});

    let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
    let text = response.text().await;
    assert_eq!(response.status, 200, "body: {text}");

    let sent = upstream.wait_for_request(PATIENCE).await.json();
    assert_eq!(sent["threadId"], THREAD, "{sent}");
    assert_eq!(sent["tools"], json!([]), "{sent}");
    assert_eq!(sent["context"], json!([]), "{sent}");
}

// ---------------------------------------------------------------- built-in demo agent

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_demo_streams_a_complete_run() {
    let gateway = Gateway::spawn(&[
        "--client",
        "ag-ui",
        "--upstream",
        "builtin:demo",
        "--upstream-dialect",
        "ag-ui",
    ]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let events = response.events_to_end().await;
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(
        terminal["type"],
        "RUN_FINISHED",
        "{:?}",
        event_types(&events)
    );
    assert_eq!(terminal["threadId"], THREAD, "{terminal}");
    assert_eq!(terminal["runId"], RUN, "{terminal}");
    assert!(
        events.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"),
        "the demo should stream some text: {:?}",
        event_types(&events)
    );
}
