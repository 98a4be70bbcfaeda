//! Client requests are read as strictly as the protocols say, in every face (AG-UI, HAI, the
//! AAP REST face), over real TCP against the real binary: a body is exactly one JSON value
//! (trailing bytes: 400), an HTTP/1.1 request carries exactly one `Host` (RFC 9112 §3.2), and a
//! protocol field of the wrong type is a 400 that names it, never a value made up in its place.
//! Each refusal is paired with the same request made right, which passes.

use crate::support;

use serde_json::{json, Value};
use support::{send, ConfigFile, Gateway, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIG: &str = r#"
[[routes]]
path = "/agui"
client = "ag-ui"
upstream = "builtin:demo"

[[routes]]
path = "/hai"
client = "hai"
upstream = "builtin:demo"

[[routes]]
path = "/v1"
client = "aap"
upstream = "builtin:demo"

[routes.aap]
name = "demo"
version = "1.0.0"
"#;

fn gateway() -> (Gateway, ConfigFile) {
    let config = ConfigFile::new("strict", CONFIG);
    let gateway = Gateway::spawn(&["--config", config.arg()]);
    (gateway, config)
}

fn agui_body() -> Value {
    json!({"threadId":"t","runId":"r","state":{},"messages":[{"id":"u","role":"user","content":"hi"}],
           "tools":[],"context":[],"forwardedProps":{}})
}

fn hai_body() -> Value {
    json!({"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}]})
}

fn session_body() -> Value {
    json!({"agent":{"name":"demo"}})
}

fn turn_body() -> Value {
    json!({"messages":[{"role":"user","content":"hi"}]})
}

/// A new AAP session's turns path.
async fn turns_path(gateway: &Gateway) -> String {
    let mut created = send(
        gateway.addr,
        &Request::post_json("/v1/sessions", session_body().to_string()),
    )
    .await;
    assert_eq!(created.status, 201);
    let id = created.json().await["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    format!("/v1/sessions/{id}/turns")
}

/// The error text of a refusal, in whichever shape the face writes it.
async fn refusal(gateway: &Gateway, path: &str, body: Vec<u8>) -> (u16, String) {
    let mut response = send(gateway.addr, &Request::post_json(path, body)).await;
    let status = response.status;
    let text = response.text().await;
    let Ok(error) = serde_json::from_str::<Value>(&text) else {
        return (status, text);
    };
    let message = match &error["error"] {
        // AG-UI and HAI: {"error":{"code","message"}}.
        Value::Object(e) => format!(
            "{}: {}",
            e["code"].as_str().unwrap_or(""),
            e["message"].as_str().unwrap_or("")
        ),
        // AAP: {"error":"<CODE>: <message>"}.
        Value::String(e) => e.clone(),
        _ => text,
    };
    (status, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_face_reads_exactly_one_json_value_per_body() {
    let (gateway, _config) = gateway();
    let turns = turns_path(&gateway).await;
    for (path, body) in [
        ("/agui", agui_body()),
        ("/hai", hai_body()),
        ("/v1/sessions", session_body()),
        (turns.as_str(), turn_body()),
    ] {
        for trailing in [" GARBAGE", " {}", "\n\"x\"", "]"] {
            let (status, message) =
                refusal(&gateway, path, format!("{body}{trailing}").into_bytes()).await;
            assert_eq!(status, 400, "{path} with {trailing:?}: {message}");
            assert!(
                message.contains("INVALID_REQUEST") && message.contains("not valid JSON"),
                "{path} with {trailing:?}: {message}"
            );
        }
        // Whitespace after the value is not a second value.
        let response = send(
            gateway.addr,
            &Request::post_json(path, format!("{body} \r\n\t")),
        )
        .await;
        assert!(
            matches!(response.status, 200 | 201),
            "{path}: {}",
            response.status
        );
    }
}

/// Writes `head` (and nothing else) on a new connection; the status line of the answer.
async fn raw_status(gateway: &Gateway, head: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(support::PATIENCE, async {
        let mut buf = [0u8; 4096];
        while !answer.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(read.is_ok(), "no answer to {head:?}");
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_1_request_needs_exactly_one_host_on_every_route() {
    let (gateway, _config) = gateway();
    let agui = agui_body().to_string();
    for (path, body) in [
        ("/agui", agui.as_str()),
        ("/hai", &hai_body().to_string()),
        ("/v1/sessions", &session_body().to_string()),
    ] {
        let request = |version: &str, hosts: &str| {
            format!(
                "POST {path} HTTP/{version}\r\n{hosts}content-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        for (version, hosts, expected) in [
            ("1.1", "", "HTTP/1.1 400 Bad Request"),
            ("1.1", "host: a\r\nhost: b\r\n", "HTTP/1.1 400 Bad Request"),
            ("1.1", "host: a b\r\n", "HTTP/1.1 400 Bad Request"),
            ("1.0", "host: a\r\nhost: a\r\n", "HTTP/1.1 400 Bad Request"),
            // HTTP/1.0 did not have Host; a request of it without one is served.
            ("1.0", "", "HTTP/1.1 20"),
            ("1.1", "host: gateway.example\r\n", "HTTP/1.1 20"),
        ] {
            let status = raw_status(&gateway, &request(version, hosts)).await;
            assert!(
                status.starts_with(expected),
                "{path}, HTTP/{version} with {hosts:?}: {status}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_typed_protocol_field_is_a_400_naming_it_in_every_face() {
    let (gateway, _config) = gateway();
    let turns = turns_path(&gateway).await;
    let with = |mut body: Value, field: &str, value: Value| {
        body[field] = value;
        body
    };
    let cases = [
        (
            "/agui",
            with(agui_body(), "threadId", json!(123)),
            "threadId",
        ),
        ("/agui", with(agui_body(), "runId", json!(null)), "runId"),
        (
            "/agui",
            with(agui_body(), "messages", json!({})),
            "messages",
        ),
        ("/agui", with(agui_body(), "tools", json!("x")), "tools"),
        ("/agui", with(agui_body(), "context", json!(5)), "context"),
        ("/hai", with(hai_body(), "threadId", json!(123)), "threadId"),
        ("/hai", with(hai_body(), "runId", json!(["r"])), "runId"),
        ("/hai", with(hai_body(), "messages", json!("x")), "messages"),
        ("/hai", with(hai_body(), "tools", json!("x")), "tools"),
        ("/hai", with(hai_body(), "context", json!(5)), "context"),
        (
            "/v1/sessions",
            with(session_body(), "agent", json!("demo")),
            "agent",
        ),
        ("/v1/sessions", json!({"agent":{"name":5}}), "agent.name"),
        (
            "/v1/sessions",
            json!({"agent":{"name":"demo","tools":[{"name":"x","trust":"yes"}]}}),
            "agent.tools[0].trust",
        ),
        (
            "/v1/sessions",
            with(session_body(), "messages", json!({})),
            "messages",
        ),
        (
            turns.as_str(),
            with(turn_body(), "stream", json!(5)),
            "stream",
        ),
        (
            turns.as_str(),
            with(turn_body(), "messages", json!("hi")),
            "messages",
        ),
        (
            turns.as_str(),
            with(turn_body(), "agent", json!({"options":[1]})),
            "agent.options",
        ),
    ];
    for (path, body, field) in cases {
        let (status, message) = refusal(&gateway, path, body.to_string().into_bytes()).await;
        assert_eq!(status, 400, "{path} {body}: {message}");
        assert!(
            message.starts_with(&format!("INVALID_REQUEST: {field}: ")),
            "{path} {body}: the message names {field}: {message}"
        );
    }
}
