//! Logs cannot be forged: values from requests (a thread id, a message role) and from upstreams
//! (an error body) reach the log as escaped fields, never as a line of their own, in the text
//! format and in the JSON format (`--log-format json`, every line one JSON object). Real
//! binary, real TCP, its real stderr.

use crate::support;

use serde_json::{json, Value};
use support::{send, Gateway, Request, Script, ScriptedUpstream, PATIENCE};

/// What an attacker would like the log to show as a line of its own.
const FORGED: &str = "2026-01-01T00:00:00Z  INFO forged line";

/// A value that ends a line, then forges one (with a carriage return and an ESC for good measure).
fn forging(prefix: &str) -> String {
    format!("{prefix}\n{FORGED}\r\u{1b}[2K")
}

/// Starts a gateway in front of `upstream` with `format`, logging at debug so refused requests
/// are narrated too.
fn gateway(client: &str, upstream: &str, format: &str) -> Gateway {
    Gateway::spawn_with_env(
        &[
            "--client",
            client,
            "--upstream",
            upstream,
            "--log-format",
            format,
        ],
        &[("RUST_LOG", "debug")],
    )
}

/// Runs `body` to its end (or its refusal).
async fn post(gateway: &Gateway, body: Value) -> u16 {
    let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
    let status = response.status;
    response.read_to_end().await;
    status
}

/// Sends requests with forged values to an AG-UI and a HAI gateway, and a request to a gateway
/// whose upstream answers 500 with a forging body; returns their stderr once each has logged
/// what it was sent.
async fn forged_requests(format: &str) -> Vec<String> {
    let agui = gateway("ag-ui", "builtin:demo", format);
    let hai = gateway("hai", "builtin:demo", format);
    let upstream = ScriptedUpstream::with_script(Script::status_body(
        500,
        "text/plain",
        forging("upstream trouble"),
    ))
    .await;
    let refusing = gateway("ag-ui", &upstream.url("/agent"), format);
    let status = post(
        &refusing,
        json!({"threadId": "t", "runId": "r0", "messages": [], "tools": [], "context": []}),
    )
    .await;
    assert_eq!(status, 502);
    let thread = forging("thread");
    let accepted = post(
        &agui,
        json!({"threadId": thread, "runId": "r1", "messages": [], "tools": [], "context": []}),
    )
    .await;
    assert_eq!(accepted, 200);
    let accepted = post(
        &hai,
        json!({"threadId": thread, "runId": "r2",
               "messages": [{"role": "user", "content": forging("hello")}]}),
    )
    .await;
    assert_eq!(accepted, 200);
    let refused = post(
        &hai,
        json!({"threadId": "t", "runId": "r3",
               "messages": [{"role": forging("user"), "content": "hi"}]}),
    )
    .await;
    assert_eq!(refused, 400);
    let mut logs = Vec::new();
    for gateway in [&agui, &hai] {
        logs.push(gateway.wait_for_stderr("stream ended").await);
    }
    // The refusal is logged after its response is written: give it the same patience.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !hai.stderr().contains("request refused") && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    logs[1] = hai.stderr();
    logs.push(refusing.wait_for_stderr("upstream trouble").await);
    logs
}

fn assert_no_forged_line(log: &str) {
    for line in log.lines() {
        let line = line.trim_start_matches(['\r', '\u{1b}']);
        assert!(
            !line.starts_with(FORGED) && !line.starts_with("[2K"),
            "a request value forged a log line: {line:?}\n--- log ---\n{log}"
        );
        assert!(!line.contains('\u{1b}'), "an ESC reached the log: {line:?}");
        assert!(!line.contains('\r'), "a CR reached the log: {line:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_escape_request_and_upstream_values() {
    let logs = forged_requests("text").await;
    for log in &logs {
        assert_no_forged_line(log);
    }
    // The values did reach the log, escaped: a forged line would have been seen.
    for (log, prefix) in logs.iter().zip(["thread", "thread", "upstream trouble"]) {
        assert!(
            log.contains(&format!("{prefix}\\n{FORGED}\\r\\u{{1b}}[2K")),
            "{prefix:?} should be in the log, escaped:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let logs = forged_requests("json").await;
    for (log, prefix) in logs.iter().zip(["thread", "thread", "upstream trouble"]) {
        assert_no_forged_line(log);
        let mut seen = false;
        for line in log.lines() {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {line:?}"));
            assert!(event["level"].is_string(), "{line}");
            // serde's escape of the newline, inside one string.
            seen |= line.contains(&format!("{prefix}\\n{FORGED}"));
        }
        assert!(seen, "{prefix:?} should be in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_format_comes_from_the_environment_too() {
    let gateway = Gateway::spawn_with_env(
        &["--client", "ag-ui", "--upstream", "builtin:demo"],
        &[("DIALECT_PROXY_LOG_FORMAT", "json")],
    );
    let status = post(
        &gateway,
        json!({"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": []}),
    )
    .await;
    assert_eq!(status, 200);
    let log = gateway.wait_for_stderr("stream ended").await;
    for line in log.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {line:?}"));
        assert!(event["level"].is_string(), "{line}");
    }
}
