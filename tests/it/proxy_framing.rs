//! Upstream framings other than SSE (dialects.md row 18): NDJSON bodies are read line by line;
//! a protobuf, compressed or HTML answer is refused before the stream, with a reason.

use crate::support;

use support::{
    assert_run_envelope, event_types, run_input, send, Gateway, Request, Script, ScriptedUpstream,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ndjson_upstream_is_read_line_by_line() {
    let body = concat!(
        "{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n",
        "{\"type\":\"TEXT_MESSAGE_CHUNK\",\"messageId\":\"m\",\"delta\":\"data: not a prefix\"}\r\n",
        "\n",
        "{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}"
    );
    let upstream = ScriptedUpstream::with_script(
        Script::new(200)
            .header("content-type", "application/x-ndjson")
            .bytes(&body[..70])
            .bytes(&body[70..]),
    )
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let events = response.events_to_end().await;
    assert_run_envelope(&events, "t", "r");
    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[2]["delta"], "data: not a prefix");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_answer_is_refused_before_the_stream() {
    let upstream = ScriptedUpstream::with_script(
        Script::new(200)
            .header("content-type", "application/vnd.ag-ui.event+proto")
            .bytes([0, 0, 0, 2, 8, 1]),
    )
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    assert_eq!(response.status, 502);
    let body = response.json().await;
    assert_eq!(body["error"]["code"], "UPSTREAM_MALFORMED");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("protobuf"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_is_refused_before_the_stream() {
    for content_type in [
        "text/html; charset=utf-8",
        "TEXT/HTML",
        "application/xhtml+xml",
    ] {
        let upstream = ScriptedUpstream::with_script(
            Script::new(200)
                .header("content-type", content_type)
                .bytes("<!doctype html><html><body>Sign in</body></html>")
                .stall(),
        )
        .await;
        let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
        let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
        assert_eq!(response.status, 502, "{content_type}");
        let body = response.json().await;
        assert_eq!(
            body["error"]["code"], "UPSTREAM_MALFORMED",
            "{content_type}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("web page"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_answer_is_refused_before_the_stream() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_headers()
            .header("content-encoding", "gzip")
            .bytes([0x1f, 0x8b, 8, 0]),
    )
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let mut response = send(gateway.addr, &Request::post_json("/", run_input("t", "r"))).await;
    assert_eq!(response.status, 502);
    let body = response.json().await;
    assert_eq!(body["error"]["code"], "UPSTREAM_MALFORMED");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("compressed"), "{message}");
    assert!(
        !message.contains("gzip"),
        "what the upstream sent is for the log: {message}"
    );
    gateway.wait_for_stderr("gzip").await;
}
