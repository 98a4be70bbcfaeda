//! The gateway's lifecycle as an operator drives it: the SIGTERM sequence (listener closed at
//! once, readiness down, requests waiting for their upstream answered, streams drained, exit
//! within the deadline), `dialect-proxy drain` against the admin's `POST /drain`, and
//! configuration reloads on SIGHUP and on a file change.

use crate::support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    assert_run_envelope, assert_run_error, client::BodyEnd, run_input, send, ConfigFile, Gateway,
    Request, Script, ScriptedUpstream,
};

fn post_run(path: &str, thread: &str) -> Request {
    Request::post_json(path, run_input(thread, "run-1"))
}

/// Connects until the listener refuses; how long that took, or `None` within `limit`.
async fn time_until_refused(addr: SocketAddr, since: Instant, limit: Duration) -> Option<Duration> {
    while since.elapsed() < limit {
        match tokio::net::TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Some(since.elapsed())
            }
            _ => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
    None
}

fn route(path: &str, upstream: &str) -> String {
    format!("[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"{upstream}\"\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_refuses_new_connections_answers_waiting_requests_and_exits_in_time() {
    sigterm_sequence(None).await;
}

/// On one CPU the gateway runs a single-threaded runtime: the same sequence holds there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_cpu_the_gateway_runs_one_thread_and_the_sigterm_sequence_holds() {
    let gateway = sigterm_sequence(Some(0)).await;
    let log = gateway.stderr();
    assert!(
        log.contains("scheduler=\"current-thread\""),
        "no current-thread scheduler in the log:\n{log}"
    );
}

/// A stream, a request waiting for its upstream's head, then SIGTERM, with the gateway on the
/// CPU `cpu` only when given; the exited gateway, for its log.
async fn sigterm_sequence(cpu: Option<usize>) -> Gateway {
    // `/stream` has started streaming and then goes quiet; `/wait` never sends headers.
    let upstream = ScriptedUpstream::start(|req| {
        if req.path.ends_with("/wait") {
            Script::no_headers()
        } else {
            Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t-stream","runId":"run-1"})])
                .stall()
        }
    })
    .await;
    let config = ConfigFile::new(
        "sigterm",
        &format!(
            "{}{}",
            route("/stream", &upstream.url("/stream")),
            route("/wait", &upstream.url("/wait"))
        ),
    );
    let drain = Duration::from_millis(1500);
    let args = [
        "--config",
        config.arg(),
        "--admin-listen",
        "127.0.0.1:0",
        "--drain-timeout",
        "1500ms",
    ];
    let mut gateway = match cpu {
        Some(cpu) => Gateway::spawn_on_cpu(&args, cpu),
        None => Gateway::spawn(&args),
    };
    let admin = gateway.admin_addr();
    let mut stream = send(gateway.addr, &post_run("/stream", "t-stream")).await;
    assert_eq!(stream.status, 200);
    let first = stream.read_events(1).await;
    let waiting = tokio::spawn({
        let addr = gateway.addr;
        async move { send(addr, &post_run("/wait", "t-wait")).await }
    });
    upstream.wait_for_requests(2, support::PATIENCE).await;

    let signalled = Instant::now();
    gateway.terminate();
    let refused = time_until_refused(gateway.addr, signalled, Duration::from_secs(2))
        .await
        .expect("new connections are refused after SIGTERM");
    assert!(
        refused < Duration::from_millis(100),
        "refused only {refused:?} after SIGTERM"
    );
    assert_eq!(send(admin, &Request::get("/ready")).await.status, 503);
    assert_eq!(send(admin, &Request::get("/live")).await.status, 200);

    // The request still waiting for its upstream's headers is answered at the deadline.
    let mut waited = waiting.await.unwrap();
    assert_eq!(waited.status, 503);
    assert!(
        signalled.elapsed() >= drain - Duration::from_millis(100),
        "answered before the drain deadline: {:?}",
        signalled.elapsed()
    );
    let body = waited.json().await;
    assert_eq!(body["error"]["code"], "GATEWAY_SHUTDOWN", "{body}");

    // The open stream ends with its terminal event.
    let events = stream.events_to_end().await;
    assert_eq!(stream.body_end(), Some(&BodyEnd::Clean));
    let all: Vec<_> = first.into_iter().chain(events).collect();
    let terminal = assert_run_envelope(&all, "t-stream", "run-1");
    assert_run_error(terminal, "GATEWAY_SHUTDOWN");

    let status = gateway
        .wait_exit(drain + Duration::from_secs(3))
        .expect("the gateway exits");
    let exited = signalled.elapsed();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        exited <= drain + Duration::from_secs(1),
        "exited {exited:?} after SIGTERM with a {drain:?} drain"
    );
    gateway
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_command_waits_for_open_streams_and_the_gateway_exits_at_its_sigterm() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t-drain","runId":"run-1"})])
            .sleep_ms(800)
            .events_json(&[json!({"type":"RUN_FINISHED","threadId":"t-drain","runId":"run-1"})]),
    )
    .await;
    let mut gateway = Gateway::agui(
        &upstream.url("/agent"),
        &["--admin-listen", "127.0.0.1:0", "--drain-timeout", "20s"],
    );
    let admin = gateway.admin_addr();
    let mut stream = send(gateway.addr, &post_run("/", "t-drain")).await;
    let first = stream.read_events(1).await;

    let started = Instant::now();
    let drain = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
            .args(["drain", "--admin", &admin.to_string()])
            .output()
            .unwrap()
    });
    // Draining: no new connections, not ready, while the stream runs on.
    time_until_refused(gateway.addr, Instant::now(), Duration::from_secs(2))
        .await
        .expect("the listener closes when the drain starts");
    assert_eq!(send(admin, &Request::get("/ready")).await.status, 503);

    let events = stream.events_to_end().await;
    let all: Vec<_> = first.into_iter().chain(events).collect();
    let terminal = assert_run_envelope(&all, "t-drain", "run-1");
    assert_eq!(
        terminal["type"], "RUN_FINISHED",
        "the stream finished normally"
    );

    let output = drain.await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "drain failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("drained"), "{stdout}");
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "drain returned before the stream ended: {:?}",
        started.elapsed()
    );

    // Drained, the process waits for its own SIGTERM (in a pod, after the agent has stopped).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        gateway.is_running(),
        "a drain by POST /drain does not end the process"
    );
    let signalled = Instant::now();
    gateway.terminate();
    let status = gateway
        .wait_exit(Duration::from_secs(5))
        .expect("a drained gateway exits at SIGTERM");
    assert!(status.success());
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "took {:?} with nothing to drain",
        signalled.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_takes_post_only_and_the_command_reports_an_unreachable_gateway() {
    let upstream = ScriptedUpstream::with_script(Script::sse(&[])).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--admin-listen", "127.0.0.1:0"]);
    let admin = gateway.admin_addr();
    let get = send(admin, &Request::get("/drain")).await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    assert_eq!(
        send(admin, &Request::get("/ready")).await.status,
        200,
        "a GET drains nothing"
    );

    // Nothing listens on the gateway's data port's neighbour... use a port just released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
        .args(["drain", "--admin", &closed.to_string(), "--timeout", "5s"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/drain"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_routes_for_new_requests_while_open_streams_keep_theirs() {
    let old = ScriptedUpstream::with_script(
        Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t-old","runId":"run-1"})])
            .sleep_ms(1500)
            .events_json(&[json!({"type":"RUN_FINISHED","threadId":"t-old","runId":"run-1"})]),
    )
    .await;
    let new = ScriptedUpstream::with_script(Script::sse_json(&[
        json!({"type":"RUN_STARTED","threadId":"t-new","runId":"run-1"}),
        json!({"type":"RUN_FINISHED","threadId":"t-new","runId":"run-1"}),
    ]))
    .await;
    let config = ConfigFile::new("sighup", &route("/a", &old.url("/agent")));
    let gateway = Gateway::spawn(&["--config", config.arg(), "--admin-listen", "127.0.0.1:0"]);
    let admin = gateway.admin_addr();
    let mut open = send(gateway.addr, &post_run("/a", "t-old")).await;
    let first = open.read_events(1).await;

    config.write(&format!(
        "{}{}",
        route("/a", &new.url("/agent")),
        route("/b", &new.url("/agent"))
    ));
    hangup(&gateway);
    gateway.wait_for_stderr("configuration reloaded").await;

    for path in ["/a", "/b"] {
        let mut response = send(gateway.addr, &post_run(path, "t-new")).await;
        assert_eq!(response.status, 200, "{path}");
        let events = response.events_to_end().await;
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{path}");
    }
    assert_eq!(
        new.requests().len(),
        2,
        "new requests reach the new upstream"
    );
    assert_eq!(old.requests().len(), 1);

    // The stream opened before the reload runs to its end on the old upstream.
    let events = open.events_to_end().await;
    let all: Vec<_> = first.into_iter().chain(events).collect();
    let terminal = assert_run_envelope(&all, "t-old", "run-1");
    assert_eq!(terminal["type"], "RUN_FINISHED");

    // An invalid file is rejected; the running configuration stays, and both are counted.
    config.write(&route("/a", &new.url("/agent")).replace("ag-ui", "klingon"));
    hangup(&gateway);
    let log = gateway.wait_for_stderr("configuration rejected").await;
    assert!(log.contains("klingon"), "the log names the problem:\n{log}");
    let mut response = send(gateway.addr, &post_run("/b", "t-new")).await;
    assert_eq!(response.status, 200, "the old configuration still serves");
    response.events_to_end().await;
    let metrics = send(admin, &Request::get("/metrics")).await.text().await;
    assert!(
        metrics.contains("dialect_proxy_config_reloads_total{result=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dialect_proxy_config_reloads_total{result=\"error\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_config_file_is_reloaded_when_it_changes() {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&[
        json!({"type":"RUN_STARTED","threadId":"t-w","runId":"run-1"}),
        json!({"type":"RUN_FINISHED","threadId":"t-w","runId":"run-1"}),
    ]))
    .await;
    let config = ConfigFile::new("watch", &route("/a", &upstream.url("/agent")));
    let gateway = Gateway::spawn(&["--config", config.arg(), "--watch-config"]);
    assert_eq!(send(gateway.addr, &post_run("/b", "t-w")).await.status, 404);
    config.write(&format!(
        "{}{}",
        route("/a", &upstream.url("/agent")),
        route("/b", &upstream.url("/agent"))
    ));
    gateway.wait_for_stderr("configuration reloaded").await;
    let mut response = send(gateway.addr, &post_run("/b", "t-w")).await;
    assert_eq!(response.status, 200);
    response.events_to_end().await;
}

fn hangup(gateway: &Gateway) {
    let status = Command::new("kill")
        .args(["-HUP", &gateway.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}
