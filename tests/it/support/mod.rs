//! Black-box integration harness: a scripted upstream agent, the real gateway binary, and an
//! incremental SSE client, all talking over real TCP on 127.0.0.1 (STYLE.md §6).
//!
//! Declared once, in `tests/it/main.rs`; the test modules `use crate::support;`. Not every
//! module uses every helper.
#![allow(dead_code, unused_imports)]

pub mod aap;
pub mod aap_agent;
pub mod gen11;
pub mod agui_script;
pub mod agui_thread;
pub mod client;
pub mod config_file;
pub mod gateway;
pub mod hai;
pub mod jwt;
pub mod node;
pub mod otlp;
pub mod pairs;
pub mod process;
pub mod python;
pub mod redis;
pub mod random;
pub mod scrape;
pub mod tls;
pub mod upstream;

use std::time::Duration;

use serde_json::Value;

pub use client::{send, Conn, Request, Response, SseItem};
pub use config_file::ConfigFile;
pub use gateway::Gateway;
pub use upstream::{sse_frame, RecordedRequest, Script, ScriptedUpstream, Step};

/// Patience for anything that "should happen soon". Generous on purpose: tests must never depend
/// on machine speed, so this is only the point at which a hang is declared a failure.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A port that refuses connections (bound, not listening) until [`tokio::net::TcpSocket::listen`]
/// is called on the socket, so the same upstream URL can later be served.
pub fn refusing_port() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind 127.0.0.1:0");
    let addr = socket.local_addr().expect("bound address");
    (socket, addr)
}

/// A minimal valid AG-UI `RunAgentInput` body.
pub fn run_input(thread_id: &str, run_id: &str) -> String {
    serde_json::json!({
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
    })
    .to_string()
}

/// The `type` of each event.
pub fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("<no type>").to_string())
        .collect()
}

pub fn is_terminal(event: &Value) -> bool {
    matches!(event["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"))
}

/// Asserts that `actual` contains every field of `expected` with an equal value (recursively for
/// objects). Extra fields in `actual` (e.g. a normalised `timestamp`) are allowed.
pub fn assert_json_subset(actual: &Value, expected: &Value) {
    fn check(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
        match (actual, expected) {
            (Value::Object(a), Value::Object(e)) => {
                for (k, ev) in e {
                    let p = format!("{path}.{k}");
                    match a.get(k) {
                        Some(av) => check(av, ev, &p)?,
                        None => return Err(format!("missing field {p}")),
                    }
                }
                Ok(())
            }
            _ if actual == expected => Ok(()),
            _ => Err(format!("at {path}: expected {expected}, got {actual}")),
        }
    }
    if let Err(e) = check(actual, expected, "$") {
        panic!("JSON subset mismatch {e}\n  actual:   {actual}\n  expected: {expected}");
    }
}

/// Checks the run envelope every successful-headers stream must have: the first event is
/// `RUN_STARTED` carrying the request's ids, there is exactly one terminal event and it is the
/// last one. Returns the terminal event.
pub fn assert_run_envelope<'a>(events: &'a [Value], thread_id: &str, run_id: &str) -> &'a Value {
    let types = event_types(events);
    assert!(!events.is_empty(), "no events at all");
    assert_eq!(
        types[0], "RUN_STARTED",
        "first event must be RUN_STARTED; got {types:?}"
    );
    assert_eq!(
        events[0]["threadId"], thread_id,
        "RUN_STARTED.threadId: {}",
        events[0]
    );
    assert_eq!(
        events[0]["runId"], run_id,
        "RUN_STARTED.runId: {}",
        events[0]
    );
    let terminals = events.iter().filter(|e| is_terminal(e)).count();
    assert_eq!(
        terminals, 1,
        "expected exactly one terminal event; got {types:?}"
    );
    let last = events.last().unwrap();
    assert!(
        is_terminal(last),
        "last event must be terminal; got {types:?}"
    );
    last
}

/// Asserts the stream ended with a `RUN_ERROR` carrying `code` and a non-empty `message`.
pub fn assert_run_error(terminal: &Value, code: &str) {
    assert_eq!(terminal["type"], "RUN_ERROR", "terminal: {terminal}");
    assert_eq!(terminal["code"], code, "RUN_ERROR.code: {terminal}");
    let message = terminal["message"].as_str().unwrap_or("");
    assert!(
        !message.trim().is_empty(),
        "RUN_ERROR needs a human-readable message: {terminal}"
    );
}

/// Finds `needle` in `haystack`.
pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits an HTTP/1.1 head (without the final blank line) into its first line and lowercased
/// header pairs. Used by both the client and the scripted upstream.
pub(crate) fn parse_head(head: &[u8]) -> (String, Vec<(String, String)>) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or("").to_string();
    let headers = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect();
    (first, headers)
}

/// First value of a header (name compared case-insensitively).
pub(crate) fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    header_values(headers, name).into_iter().next()
}

/// Every value of a header, case-insensitively by name, in order.
pub(crate) fn header_values<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Asserts `events` is exactly: each of `expected_before` (field subset match, same order),
/// then one terminal event. Returns the terminal event.
pub fn assert_prefix_then_terminal<'a>(
    events: &'a [Value],
    expected_before: &[Value],
) -> &'a Value {
    let types = event_types(events);
    assert_eq!(
        events.len(),
        expected_before.len() + 1,
        "expected the {} upstream events before the fault, then one terminal; got {types:?}",
        expected_before.len()
    );
    for (actual, expected) in events.iter().zip(expected_before) {
        assert_json_subset(actual, expected);
    }
    events.last().unwrap()
}

/// A line-by-line comparison of two event lists, `!` marking the lines that differ.
pub fn diff_events(expected: &[Value], actual: &[Value]) -> String {
    let mut report = String::new();
    for i in 0..expected.len().max(actual.len()) {
        let (e, a) = (expected.get(i), actual.get(i));
        let mark = if e == a { " " } else { "!" };
        report.push_str(&format!(
            "{mark} {i:>2} expected {}\n{mark}    actual   {}\n",
            e.map_or("<none>".into(), Value::to_string),
            a.map_or("<none>".into(), Value::to_string)
        ));
    }
    report
}

/// The `NAME.in` files of `tests/fixtures/<dir>/`, sorted; at least ten hand-written cases.
pub fn fixture_inputs(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut cases: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("fixture directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "in"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 10,
        "expected the hand-written fixtures in {}",
        dir.display()
    );
    cases
}

/// True if `json` has no whitespace outside string literals.
pub fn is_compact_json(json: &str) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() {
            return false;
        }
    }
    true
}

/// AG-UI text-message events, for scripted upstreams.
pub mod text {
    use serde_json::{json, Value};

    pub fn start(id: &str) -> Value {
        json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
    }

    pub fn content(id: &str, delta: &str) -> Value {
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta})
    }

    pub fn end(id: &str) -> Value {
        json!({"type": "TEXT_MESSAGE_END", "messageId": id})
    }
}
