//! Nothing internal reaches a client: an upstream's error body, its URL and address, and the
//! Rust types requests are read into stay inside the gateway. Each dialect's face is asked to
//! fail (an upstream answering 500 with a secret in a stack trace, an upstream that cannot be
//! reached, bodies of the wrong shape); the client gets the gateway's code and a sentence, and
//! the details are in the gateway's log. Real binary, real TCP.

use crate::support;

use serde_json::{json, Value};
use support::aap::{user_turn, AapClient};
use support::{run_input, send, Gateway, Request, Script, ScriptedUpstream};

/// What a careless upstream answers: a stack trace with a connection string in it.
const SECRET_BODY: &str = "java.sql.SQLException: login failed for \
     jdbc:postgresql://db.internal:5432/agents?user=svc&password=hunter2\n\
     \tat com.example.agent.Db.connect(Db.java:42)\n\
     \tat com.example.agent.Main.run(Main.java:7)\n";

/// Text of [`SECRET_BODY`] and of the upstream's address that no client may see.
fn secrets(upstream: &ScriptedUpstream) -> Vec<String> {
    let mut secrets: Vec<String> = [
        "hunter2",
        "password",
        "db.internal",
        "SQLException",
        "Db.java",
        "127.0.0.1",
    ]
    .map(str::to_owned)
    .to_vec();
    secrets.push(upstream.addr().port().to_string());
    secrets
}

fn assert_no_secret(what: &str, client_saw: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !client_saw.contains(secret.as_str()),
            "{what}: the client saw {secret:?}: {client_saw}"
        );
    }
}

async fn secret_upstream() -> ScriptedUpstream {
    ScriptedUpstream::with_script(Script::status_body(500, "text/plain", SECRET_BODY)).await
}

/// The log holds the upstream's excerpt, for the operator, escaped: the whole stack trace on
/// the line that names the password, no line of its own.
async fn assert_logged(gateway: &Gateway) {
    let log = gateway.wait_for_stderr("hunter2").await;
    let line = log.lines().find(|l| l.contains("hunter2")).unwrap_or("");
    assert!(line.contains("Main.java:7"), "{line}");
    assert!(line.contains("\\n\\tat com.example"), "{line}");
    for line in log.lines() {
        assert!(!line.trim_start().starts_with("at com.example"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agui_client_gets_the_code_not_the_upstream_body() {
    let upstream = secret_upstream().await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    assert_eq!(response.status, 502);
    let text = response.text().await;
    assert_no_secret("AG-UI 502", &text, &secrets(&upstream));
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM_HTTP_500");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("HTTP 500"), "{message}");
    assert_logged(&gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hai_client_gets_the_code_not_the_upstream_body() {
    let upstream = secret_upstream().await;
    let gateway = Gateway::spawn(&[
        "--client",
        "hai",
        "--upstream",
        &upstream.url("/agent"),
        "--upstream-dialect",
        "ag-ui",
    ]);
    let body = json!({"threadId": "t", "runId": "r",
                      "messages": [{"role": "user", "content": "hi"}]});
    let mut response = send(gateway.addr, &Request::post_json("/chat", body.to_string())).await;
    assert_eq!(response.status, 502);
    let text = response.text().await;
    assert_no_secret("HAI 502", &text, &secrets(&upstream));
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM_HTTP_500");
    assert_logged(&gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aap_client_gets_the_code_not_the_upstream_body() {
    let upstream = secret_upstream().await;
    let gateway = Gateway::spawn(&[
        "--client",
        "aap",
        "--upstream",
        &upstream.url("/agent"),
        "--agent-name",
        "a",
    ]);
    let aap = AapClient::new(gateway.addr, "", None);
    let sid = aap.new_session(json!({"agent": {"name": "a"}})).await;

    let error = aap
        .turn(&sid, user_turn("none", "hi"))
        .await
        .expect_error(502);
    assert!(error.starts_with("UPSTREAM_HTTP_500: "), "{error}");
    assert_no_secret("AAP 502", &error, &secrets(&upstream));

    let streamed = aap.turn(&sid, user_turn("delta", "hi")).await;
    assert_eq!(
        streamed.expect_events().last().map(|e| e.0.as_str()),
        Some("turn_stop")
    );
    assert_no_secret("AAP stream", &streamed.text, &secrets(&upstream));
    assert_logged(&gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_an_aap_agent_gets_the_code_not_the_agent_body() {
    // Every request of the AAP client (`GET /meta` first) is answered with the stack trace.
    let upstream = secret_upstream().await;
    let gateway = Gateway::spawn(&[
        "--client",
        "ag-ui",
        "--upstream",
        &upstream.url(""),
        "--upstream-dialect",
        "aap",
    ]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    let events = response.events_to_end().await;
    let raw = String::from_utf8_lossy(response.raw_body()).into_owned();
    assert_no_secret("AG-UI stream from AAP", &raw, &secrets(&upstream));
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "RUN_ERROR", "{raw}");
    assert_eq!(last["code"], "UPSTREAM_HTTP_500", "{raw}");
    assert_logged(&gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_not_named() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/internal-agent");
    let gateway = Gateway::agui(&url, &[]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    assert_eq!(response.status, 502);
    let text = response.text().await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM_UNAVAILABLE");
    for secret in [
        port.to_string().as_str(),
        "127.0.0.1",
        "internal-agent",
        "refused",
    ] {
        assert!(!text.contains(secret), "the client saw {secret:?}: {text}");
    }
    gateway
        .wait_for_stderr(&format!("{port}/internal-agent"))
        .await;
}

/// Words that belong to the gateway's Rust code, not to any protocol.
const RUST_WORDS: &[&str] = &[
    "struct",
    "enum",
    "variant",
    "CreateSession",
    "TurnRequest",
    "AapMessage",
    "RunAgentInput",
    "u64",
    "`",
];

fn assert_protocol_words(what: &str, error: &str) {
    for word in RUST_WORDS {
        assert!(!error.contains(word), "{what}: {word:?} in {error:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aap_400s_name_fields_not_rust_types() {
    let gateway = Gateway::spawn(&[
        "--client",
        "aap",
        "--upstream",
        "builtin:demo",
        "--agent-name",
        "demo",
    ]);
    let aap = AapClient::new(gateway.addr, "", None);
    let sid = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    let creates: &[(&[u8], &str)] = &[
        (b"\"a string\"", "the body must be a JSON object"),
        (b"[1, 2]", "the body must be a JSON object"),
        (b"{\"agent\": 5}", "agent: must be a JSON object"),
        (b"{\"agent\": {\"name\": 7}}", "agent.name: must be a string"),
        (b"{}", "agent: is required"),
        (
            b"{\"agent\": {\"name\": \"demo\"}, \"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}",
            "messages[0].role: must be one of",
        ),
    ];
    for (body, expected) in creates {
        let what = String::from_utf8_lossy(body);
        let error = aap
            .request("POST", "/sessions", body)
            .await
            .expect_error(400);
        assert!(
            error.contains(expected),
            "{what}: {error:?} should say {expected:?}"
        );
        assert_protocol_words(&what, &error);
    }
    let turns = [
        (json!({"messages": "hello"}), "messages: must be an array"),
        (json!({"messages": [{"role": "user"}]}), "messages[0]"),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "stream": 3}),
            "stream",
        ),
        (json!(["messages"]), "the body must be a JSON object"),
    ];
    for (body, expected) in turns {
        let error = aap.turn(&sid, body.clone()).await.expect_error(400);
        assert!(
            error.contains(expected),
            "{body}: {error:?} should say {expected:?}"
        );
        assert_protocol_words(&body.to_string(), &error);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_and_hai_400s_name_fields_not_rust_types() {
    let gateway = Gateway::spawn(&["--client", "ag-ui", "--upstream", "builtin:demo"]);
    let hai = Gateway::spawn(&["--client", "hai", "--upstream", "builtin:demo"]);
    let bodies = [
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "tools": 5}),
            "tools: must be an array",
        ),
        (json!("a string"), "the body must be a JSON object"),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "wizard", "content": "x"}]}),
            "messages[0]",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": {}}),
            "messages",
        ),
    ];
    for gateway in [&gateway, &hai] {
        for (body, expected) in &bodies {
            let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
            assert_eq!(response.status, 400, "{body}");
            let reply = response.json().await;
            assert_eq!(reply["error"]["code"], "INVALID_REQUEST");
            let message = reply["error"]["message"].as_str().unwrap_or("").to_owned();
            assert!(
                message.contains(expected),
                "{body}: {message:?} should say {expected:?}"
            );
            assert_protocol_words(&body.to_string(), &message);
        }
    }
}
