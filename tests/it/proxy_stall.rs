//! A client that stops reading (streaming.md §6, "downstream stall"): once its socket is full,
//! the gateway's writes block; after `--stall-timeout` the gateway gives the client up and
//! closes the upstream connection instead of holding it forever.

use crate::support;

use serde_json::json;
use support::{run_input, Conn, Gateway, Request, Script, ScriptedUpstream, PATIENCE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_releases_the_upstream() {
    // 48 MB of events: far more than the socket buffers on both sides can hold.
    let filler = "x".repeat(64 * 1024);
    let event = json!({"type":"CUSTOM","name":"bulk","value":filler}).to_string();
    let mut script = Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})]);
    for _ in 0..750 {
        script = script.event(&event);
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--stall-timeout", "500ms"]);

    let mut conn = Conn::open(gateway.addr).await;
    conn.send(&Request::post_json("/", run_input("t", "r")))
        .await;
    // Never read. The gateway must notice the stalled writes and let the upstream go.
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the upstream connection must close once the client stalls past --stall-timeout"
    );
    drop(conn);
}
