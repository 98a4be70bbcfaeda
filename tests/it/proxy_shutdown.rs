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
