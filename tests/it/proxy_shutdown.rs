//! Graceful shutdown (streaming.md §9): on SIGTERM the gateway stops accepting, lets open
//! streams finish within the drain timeout, ends the rest with a `GATEWAY_SHUTDOWN` terminal
//! event (never a cut connection), and exits.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{
    assert_run_envelope, assert_run_error, client::BodyEnd, run_input, send, Gateway, Request,
    Script, ScriptedUpstream,
};

const THREAD: &str = "thread-shutdown";
const RUN: &str = "run-1";

fn post_run() -> Request {
    Request::post_json("/", run_input(THREAD, RUN))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_still_open_at_the_drain_deadline_ends_with_gateway_shutdown() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN})]).stall(),
    )
    .await;
    let mut gateway = Gateway::agui(&upstream.url("/agent"), &["--drain-timeout", "500ms"]);
    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let first = response.read_events(1).await;
    assert_eq!(first[0]["type"], "RUN_STARTED");

    gateway.terminate();
    let events = response.events_to_end().await;
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));
    let all: Vec<_> = first.into_iter().chain(events).collect();
    let terminal = assert_run_envelope(&all, THREAD, RUN);
    assert_run_error(terminal, "GATEWAY_SHUTDOWN");

    let status = gateway
        .wait_exit(Duration::from_secs(10))
        .expect("the gateway exits after draining");
    assert!(status.success(), "exit status {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_finishes_within_the_drain_timeout_completes_normally() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN})])
            .sleep_ms(600)
            .events_json(&[json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN})]),
    )
    .await;
    let mut gateway = Gateway::agui(&upstream.url("/agent"), &["--drain-timeout", "10s"]);
    let mut response = send(gateway.addr, &post_run()).await;
    let first = response.read_events(1).await;
    gateway.terminate();
    let events = response.events_to_end().await;
    let all: Vec<_> = first.into_iter().chain(events).collect();
    let terminal = assert_run_envelope(&all, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED");
    let status = gateway
        .wait_exit(Duration::from_secs(10))
        .expect("the gateway exits once idle");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_request_under_way_do_not_hold_the_drain() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    let upstream = ScriptedUpstream::with_script(Script::sse_json(&[])).await;
    // Far above what the test waits: only a connection holding the drain would reach it.
    let mut gateway = Gateway::agui(&upstream.url("/agent"), &["--drain-timeout", "60s"]);
    // One connection that never says anything, one kept alive after its answer.
    let mut silent = TcpStream::connect(gateway.addr).await.unwrap();
    let mut kept = TcpStream::connect(gateway.addr).await.unwrap();
    // A GET on the run route: refused (405) without a stream, and the connection stays.
    kept.write_all(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), kept.read(&mut answer))
        .await
        .expect("an answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(!answer.contains("connection: close"), "{answer}");

    gateway.terminate();
    for (name, socket) in [("silent", &mut silent), ("kept alive", &mut kept)] {
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut rest))
            .await
            .unwrap_or_else(|_| panic!("the {name} connection was not closed by the drain"))
            .unwrap();
    }
    let status = gateway
        .wait_exit(Duration::from_secs(5))
        .expect("the gateway exits without waiting for idle connections");
    assert!(status.success(), "exit status {status:?}");
}
