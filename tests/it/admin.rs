//! The admin listener: liveness, readiness and Prometheus metrics that reflect real streams.

use crate::support;

use serde_json::json;
use support::{run_input, send, ConfigFile, Gateway, Request, Script, ScriptedUpstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_streams_outcomes_and_fixups() {
    let upstream = ScriptedUpstream::start(|req| {
        if req.path.ends_with("/ok") {
            // snake_case ids: one `snake_case_keys` repair per key.
            Script::sse_json(&[
                json!({"type":"RUN_STARTED","thread_id":"t","run_id":"r"}),
                json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
            ])
        } else {
            Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})])
        }
    })
    .await;
    let config = format!(
        "[[routes]]\npath = \"/ok\"\nclient = \"ag-ui\"\nupstream = \"{}\"\n\n[[routes]]\npath = \"/cut\"\nclient = \"ag-ui\"\nupstream = \"{}\"\n",
        upstream.url("/ok"),
        upstream.url("/cut")
    );
    let config = ConfigFile::new("admin", &config);
    let gateway = Gateway::spawn(&["--config", config.arg(), "--admin-listen", "127.0.0.1:0"]);
    let admin = gateway.admin_addr();

    let live = send(admin, &Request::get("/live")).await;
    assert_eq!(live.status, 200);
    let ready = send(admin, &Request::get("/ready")).await;
    assert_eq!(ready.status, 200);

    for p in ["/ok", "/cut"] {
        let mut r = send(gateway.addr, &Request::post_json(p, run_input("t", "r"))).await;
        assert_eq!(r.status, 200);
        r.events_to_end().await;
    }
    let refused = send(
        gateway.addr,
        &Request::post_json("/nowhere", run_input("t", "r")),
    )
    .await;
    assert_eq!(refused.status, 404);
    let bad = send(gateway.addr, &Request::post_json("/ok", "{}")).await;
    assert_eq!(bad.status, 400);

    let mut metrics = send(admin, &Request::get("/metrics")).await;
    assert_eq!(metrics.status, 200);
    let text = metrics.text().await;
    for line in [
        "dialect_proxy_streams_total{route=\"/ok\",outcome=\"completed\"} 1",
        "dialect_proxy_streams_total{route=\"/cut\",outcome=\"failed\"} 1",
        "dialect_proxy_run_errors_total{route=\"/cut\",code=\"UPSTREAM_TRUNCATED\"} 1",
        "dialect_proxy_dialect_fixups_total{rule=\"snake_case_keys\"} 2",
        "dialect_proxy_requests_refused_total{route=\"\",code=\"NOT_FOUND\"} 1",
        "dialect_proxy_requests_refused_total{route=\"/ok\",code=\"INVALID_REQUEST\"} 1",
        "dialect_proxy_streams_active{route=\"/ok\"} 0",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
}
