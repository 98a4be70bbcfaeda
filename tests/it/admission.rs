//! Admission control against hostile or merely numerous clients, each bound shown with its
//! number: open streams (global and per route `max_streams`), the budget of buffered request
//! bytes (`max_buffered_request_bytes`, with the gateway's resident memory read from
//! `/proc`), a declared `Content-Length` above `max_request_bytes`, connections that never send
//! a request head (`request_header_timeout`), `max_connections`, and descriptor exhaustion
//! (the accept loop backs off instead of spinning).

use crate::support;

use std::io::Read as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::aap::{spawn_with_config, user_turn, AapClient};
use support::scrape::{metric, metrics, wait_for_metric};
use support::{run_input, send, Gateway, Request, Script, ScriptedUpstream, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// === helpers ===

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// User plus system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).unwrap_or(100)
}

/// Reads a response head from `stream`: the status and the head's text.
async fn read_head(stream: &mut (impl AsyncReadExt + Unpin)) -> (u16, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut byte))
            .await
            .expect("a response head in time")
            .expect("read the response head");
        assert!(
            n > 0,
            "closed before a response head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad head {text:?}"));
    (status, text.to_ascii_lowercase())
}

/// Asserts a 503 `OVERLOADED` in the AG-UI/HAI shape, with `Retry-After: 1`; its message.
async fn assert_overloaded(mut response: support::Response) -> String {
    assert_eq!(response.status, 503);
    assert_eq!(response.header("retry-after"), Some("1"));
    let body = response.json().await;
    assert_eq!(body["error"]["code"], "OVERLOADED", "{body}");
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// An upstream that finishes runs of threads named `quick*` at once and holds any other open
/// after the headers.
async fn holding_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let thread = body["threadId"].as_str().unwrap_or_default();
        if thread.starts_with("quick") {
            Script::sse_json(&[
                json!({"type": "RUN_STARTED", "threadId": thread, "runId": "r"}),
                json!({"type": "RUN_FINISHED", "threadId": thread, "runId": "r"}),
            ])
        } else {
            Script::sse_headers().stall()
        }
    })
    .await
}

/// Waits until the upstream has seen `n` connections closed mid-script.
async fn wait_for_cancellations(upstream: &ScriptedUpstream, n: usize) {
    let deadline = Instant::now() + PATIENCE;
    while upstream.cancellations() < n {
        assert!(
            Instant::now() < deadline,
            "{n} upstream cancellations expected"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// === open streams ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_over_a_global_cap_of_2_get_503_with_retry_after_until_one_ends() {
    let upstream = holding_upstream().await;
    let gateway = Gateway::agui(
        &upstream.url("/agent"),
        &["--max-streams", "2", "--admin-listen", "127.0.0.1:0"],
    );
    let admin = gateway.admin_addr();
    let post = |thread: &str| Request::post_json("/", run_input(thread, "r"));

    let first = send(gateway.addr, &post("hold-1")).await;
    assert_eq!(first.status, 200);
    let second = send(gateway.addr, &post("hold-2")).await;
    assert_eq!(second.status, 200);
    let message = assert_overloaded(send(gateway.addr, &post("quick")).await).await;
    assert!(
        message.contains("2 requests open") && message.contains("max_streams"),
        "{message}"
    );
    let text = metrics(admin).await;
    assert_eq!(
        metric(&text, "dialect_proxy_streams_admitted{route=\"/\"}"),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &text,
            "dialect_proxy_admission_rejections_total{reason=\"max_streams\"}"
        ),
        Some(1.0)
    );

    // A client that goes away gives its place back (with the upstream connection).
    first.disconnect();
    wait_for_cancellations(&upstream, 1).await;
    let mut third = send(gateway.addr, &post("quick")).await;
    assert_eq!(third.status, 200);
    let events = third.events_to_end().await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    // And so does a stream that ends: one place is still free next to the held stream.
    let mut fourth = send(gateway.addr, &post("quick")).await;
    assert_eq!(fourth.status, 200);
    fourth.events_to_end().await;
    wait_for_metric(admin, "dialect_proxy_streams_admitted{route=\"/\"}", 1.0).await;
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_a_cap_of_1_preflights_and_401s_take_no_permit_and_the_503_carries_cors() {
    let upstream = holding_upstream().await;
    let origin = "https://app.example";
    let gateway = spawn_with_config(&format!(
        r#"[limits]
max_streams = 1

[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "{}"

[routes.auth]
api_keys = ["k-admitted"]

[routes.cors]
allow_origins = ["{origin}"]
"#,
        upstream.url("/agent")
    ));
    let post = |thread: &str, key: &str| {
        Request::post_json("/agent", run_input(thread, "r"))
            .header("origin", origin)
            .header("authorization", &format!("Bearer {key}"))
    };
    let held = send(gateway.addr, &post("hold-1", "k-admitted")).await;
    assert_eq!(held.status, 200);
    // The one permit is taken: a preflight and an unauthenticated request are still answered
    // as themselves, neither waits for nor takes a permit.
    for _ in 0..3 {
        let preflight = send(
            gateway.addr,
            &Request::new("OPTIONS", "/agent")
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization, content-type",
                ),
        )
        .await;
        assert_eq!(preflight.status, 204);
        assert_eq!(
            preflight.header("access-control-allow-origin"),
            Some(origin)
        );
        let refused = send(gateway.addr, &post("quick", "wrong-key")).await;
        assert_eq!(refused.status, 401);
    }
    // An authenticated request past the cap: 503 a page can read (CORS) with Retry-After.
    let overloaded = send(gateway.addr, &post("quick", "k-admitted")).await;
    assert_eq!(
        overloaded.header("access-control-allow-origin"),
        Some(origin)
    );
    assert_overloaded(overloaded).await;
    held.disconnect();
    wait_for_cancellations(&upstream, 1).await;
    let mut after = send(gateway.addr, &post("quick", "k-admitted")).await;
    assert_eq!(after.status, 200);
    after.events_to_end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_cap_of_1_refuses_its_second_stream_and_aap_requests_in_their_own_shape() {
    let upstream = holding_upstream().await;
    let url = upstream.url("/agent");
    let gateway = spawn_with_config(&format!(
        r#"admin_listen = "127.0.0.1:0"

[limits]
max_streams = 10

[[routes]]
path = "/capped"
client = "ag-ui"
upstream = "{url}"
[routes.limits]
max_streams = 1

[[routes]]
path = "/free"
client = "ag-ui"
upstream = "{url}"

[[routes]]
path = "/aap"
client = "aap"
upstream = "{url}"
[routes.aap]
name = "agent"
[routes.limits]
max_streams = 1
"#
    ));
    let admin = gateway.admin_addr();
    let post = |path: &str, thread: &str| Request::post_json(path, run_input(thread, "r"));

    let held = send(gateway.addr, &post("/capped", "hold-1")).await;
    assert_eq!(held.status, 200);
    let message = assert_overloaded(send(gateway.addr, &post("/capped", "quick")).await).await;
    assert!(
        message.contains("1 requests are open on /capped"),
        "{message}"
    );
    // Other routes are bounded only by the global cap of 10.
    let free_a = send(gateway.addr, &post("/free", "hold-2")).await;
    let free_b = send(gateway.addr, &post("/free", "hold-3")).await;
    assert_eq!((free_a.status, free_b.status), (200, 200));

    // The AAP face counts every request, a turn's stream for as long as it is open.
    let aap = AapClient::new(gateway.addr, "/aap", None);
    let session = aap.new_session(json!({"agent": {"name": "agent"}})).await;
    let turn = aap.open_turn(&session, &user_turn("delta", "hi")).await;
    assert_eq!(turn.status, 200);
    let mut meta = send(gateway.addr, &aap.build("GET", "/meta", b"")).await;
    assert_eq!(meta.status, 503);
    assert_eq!(meta.header("retry-after"), Some("1"));
    let body = meta.json().await;
    assert!(
        body["error"].as_str().is_some_and(|m| m.contains("/aap")),
        "the AAP error shape: {body}"
    );
    let text = metrics(admin).await;
    assert_eq!(
        metric(
            &text,
            "dialect_proxy_admission_rejections_total{reason=\"route_max_streams\"}"
        ),
        Some(2.0)
    );

    // Each route's place comes back when its stream goes.
    let before = upstream.cancellations();
    held.disconnect();
    wait_for_cancellations(&upstream, before + 1).await;
    let mut again = send(gateway.addr, &post("/capped", "quick")).await;
    assert_eq!(again.status, 200);
    again.events_to_end().await;
    turn.disconnect();
    wait_for_metric(admin, "dialect_proxy_streams_admitted{route=\"/aap\"}", 0.0).await;
    assert_eq!(aap.meta().await.status, 200);
    drop((free_a, free_b));
}

// === request bodies ===

/// A `RunAgentInput` padded with spaces to exactly `len` bytes.
fn padded_run_input(len: usize) -> Vec<u8> {
    let mut body = run_input("flood", "r").into_bytes();
    body.resize(len, b' ');
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_40_unfinished_4_mib_bodies_gets_503_beyond_a_16_mib_budget() {
    const CONNECTIONS: usize = 40;
    const DECLARED: usize = 4 << 20;
    const BUDGET: usize = 16 << 20;
    const ADMITTED: usize = BUDGET / DECLARED;
    let budget = BUDGET.to_string();
    let gateway = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--max-buffered-request-bytes",
        &budget,
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    let admin = gateway.admin_addr();
    let pid = gateway.pid();
    // One request first, so that what start-up allocates is in the baseline.
    let mut warm = send(
        gateway.addr,
        &Request::post_json("/", padded_run_input(1 << 20)),
    )
    .await;
    assert_eq!(warm.status, 200);
    drop(warm.read_events(1).await);
    drop(warm);
    let baseline_kib = status_kib(pid, "VmRSS");

    let body = padded_run_input(DECLARED);
    let head = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {DECLARED}\r\n\r\n",
        gateway.addr
    );
    // Every client sends its head and the first KiB, then holds the body unfinished.
    let (answers_tx, mut answers) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for i in 0..CONNECTIONS {
        let stream = TcpStream::connect(gateway.addr).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        writer.write_all(head.as_bytes()).await.unwrap();
        writer.write_all(&body[..1024]).await.unwrap();
        writers.push(Some(writer));
        let answers_tx = answers_tx.clone();
        tokio::spawn(async move {
            let answer = read_head(&mut reader).await;
            let _ = answers_tx.send((i, answer));
        });
    }
    let mut refused = Vec::new();
    while refused.len() < CONNECTIONS - ADMITTED {
        let (i, (status, head)) = tokio::time::timeout(PATIENCE, answers.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "only {} of the bodies beyond the budget were refused",
                    refused.len()
                )
            })
            .unwrap();
        assert_eq!(status, 503, "{head}");
        assert!(head.contains("retry-after: 1\r\n"), "{head}");
        refused.push(i);
    }
    let text = metrics(admin).await;
    assert_eq!(
        metric(&text, "dialect_proxy_request_body_buffered_bytes"),
        Some(BUDGET as f64)
    );
    assert_eq!(
        metric(
            &text,
            "dialect_proxy_admission_rejections_total{reason=\"max_buffered_request_bytes\"}"
        ),
        Some((CONNECTIONS - ADMITTED) as f64)
    );

    // The admitted clients send all but the last bytes (their bodies stay unfinished), then
    // the rest; the gateway has held at most the budget at once.
    for i in &refused {
        writers[*i] = None;
    }
    for writer in writers.iter_mut().flatten() {
        writer
            .write_all(&body[1024..DECLARED - 1024])
            .await
            .unwrap();
    }
    let unfinished_kib = status_kib(pid, "VmRSS");
    for writer in writers.iter_mut().flatten() {
        writer.write_all(&body[DECLARED - 1024..]).await.unwrap();
    }
    for _ in 0..ADMITTED {
        let (_, (status, head)) = tokio::time::timeout(PATIENCE, answers.recv())
            .await
            .expect("every admitted body is answered")
            .unwrap();
        assert_eq!(status, 200, "{head}");
    }
    let peak_kib = status_kib(pid, "VmHWM");
    // 40 bodies of 4 MiB held at once would be 160 MiB; the budget allows 16 MiB of bodies.
    // 64 MiB leaves room for allocator slack and per-connection buffers.
    let grown_mib = peak_kib.saturating_sub(baseline_kib) / 1024;
    assert!(
        grown_mib < 64,
        "peak RSS grew by {grown_mib} MiB over the baseline of {} MiB (unfinished: {} MiB)",
        baseline_kib / 1024,
        unfinished_kib / 1024
    );
    // Parsed bodies give their bytes back: a full-size body is admitted again.
    wait_for_metric(admin, "dialect_proxy_request_body_buffered_bytes", 0.0).await;
    let again = send(
        gateway.addr,
        &Request::post_json("/", padded_run_input(DECLARED)),
    )
    .await;
    assert_eq!(again.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_content_length_of_100_mb_is_refused_with_413_before_the_body_is_sent() {
    let gateway = Gateway::spawn(&["--upstream", "builtin:demo"]);
    let mut stream = TcpStream::connect(gateway.addr).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n",
        gateway.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"{\"threadId\":").await.unwrap();
    // 12 of the 100,000,000 bytes are sent, and the answer is already there.
    let (status, head) = read_head(&mut stream).await;
    assert_eq!(status, 413, "{head}");
    let mut body = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut body)).await;
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
    assert_eq!(body["error"]["code"], "PAYLOAD_TOO_LARGE");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("100000000 bytes declared") && message.contains("8388608"),
        "{message}"
    );
}

/// The status of a run posted with one header of `padding` bytes, on a fresh connection.
async fn status_with_header(gateway: &Gateway, padding: usize) -> u16 {
    let mut stream = TcpStream::connect(gateway.addr).await.unwrap();
    let body = run_input("t", "r").into_bytes();
    let head = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         x-padding: {}\r\ncontent-length: {}\r\n\r\n",
        gateway.addr,
        "p".repeat(padding),
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(&body);
    // A refused head is answered and the connection closed before the rest is read, so the
    // write may fail; the answer is still there to read.
    let _ = stream.write_all(&request).await;
    read_head(&mut stream).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_max_request_head_bytes_gets_431_and_the_limit_can_be_raised() {
    let gateway = Gateway::spawn(&["--upstream", "builtin:demo"]);
    assert_eq!(status_with_header(&gateway, 7_000).await, 200);
    assert_eq!(status_with_header(&gateway, 10_000).await, 431);
    // The gateway is still serving.
    assert_eq!(status_with_header(&gateway, 100).await, 200);

    let raised = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--max-request-head-bytes",
        "16384",
    ]);
    assert_eq!(status_with_header(&raised, 10_000).await, 200);
    assert_eq!(status_with_header(&raised, 20_000).await, 431);
}

// === connections ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_closed_after_a_500ms_header_timeout_while_requests_are_served() {
    let gateway = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--request-header-timeout",
        "500ms",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    let admin = gateway.admin_addr();
    let opened = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(TcpStream::connect(gateway.addr).await.unwrap());
    }
    // Half a head, never finished.
    let mut partial = TcpStream::connect(gateway.addr).await.unwrap();
    partial
        .write_all(b"POST / HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    silent.push(partial);
    // A client that sends its request is answered meanwhile.
    let request = Request::post_json("/", run_input("t", "r")).header("connection", "close");
    let mut served = send(gateway.addr, &request).await;
    assert_eq!(served.status, 200);
    let events = served.events_to_end().await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");

    for (i, stream) in silent.iter_mut().enumerate() {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("silent connection {i} still open after {PATIENCE:?}"));
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "connection {i} got bytes: {:?}",
            read.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
        );
    }
    assert!(
        opened.elapsed() >= Duration::from_millis(500),
        "closed before the timeout: {:?}",
        opened.elapsed()
    );
    wait_for_metric(admin, "dialect_proxy_request_header_timeouts_total", 21.0).await;

    // A keep-alive connection idle after its answer is closed after the same timeout.
    let mut idle = TcpStream::connect(gateway.addr).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, head) = read_head(&mut idle).await;
    assert_eq!(status, 405, "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a content-length");
    let mut body = vec![0u8; length];
    idle.read_exact(&mut body).await.unwrap();
    let answered = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(PATIENCE, idle.read(&mut buf))
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(answered.elapsed() >= Duration::from_millis(490));
    wait_for_metric(admin, "dialect_proxy_request_header_timeouts_total", 22.0).await;
}

/// A blocking socket that can be checked for the peer's close without waiting.
fn closed_by_peer(stream: &mut std::net::TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    let closed = match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_4_connections_allowed_a_fifth_client_waits_for_a_slot_and_is_answered() {
    let gateway = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--max-connections",
        "4",
        "--request-header-timeout",
        "1s",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    let admin = gateway.admin_addr();
    let mut idle: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(gateway.addr).unwrap())
        .collect();
    wait_for_metric(admin, "dialect_proxy_connections_open", 4.0).await;

    // The fifth client's connect succeeds (the listen backlog), its request waits.
    let addr = gateway.addr;
    let fifth = tokio::spawn(async move {
        let mut response = send(addr, &Request::post_json("/", run_input("t", "r"))).await;
        let status = response.status;
        (status, response.events_to_end().await)
    });
    let open = metric(&metrics(admin).await, "dialect_proxy_connections_open").unwrap();
    assert!(
        open <= 4.0,
        "{open} connections open with max_connections = 4"
    );

    let (status, events) = tokio::time::timeout(PATIENCE, fifth)
        .await
        .expect("the fifth client is answered once a slot frees")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    // It was let in because an idle connection was closed (by the header timeout) first.
    let closed = idle.iter_mut().map(closed_by_peer).filter(|c| *c).count();
    assert!(
        closed >= 1,
        "the fifth was answered while all 4 idle connections were open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_at_64_the_accept_loop_backs_off_and_recovers() {
    let gateway = Gateway::spawn_with_nofile(
        &[
            "--upstream",
            "builtin:demo",
            "--request-header-timeout",
            "1s",
        ],
        64,
    );
    let pid = gateway.pid();
    // More idle connections than the gateway has descriptors.
    let idle: Vec<std::net::TcpStream> = (0..120)
        .map(|_| std::net::TcpStream::connect(gateway.addr).unwrap())
        .collect();
    let deadline = Instant::now() + PATIENCE;
    while !gateway.stderr().contains("accept failed") {
        assert!(
            Instant::now() < deadline,
            "no accept failure under 64 descriptors"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let logged = |gateway: &Gateway| gateway.stderr().matches("accept failed").count();
    let (lines_before, cpu_before, started) = (logged(&gateway), cpu_ticks(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (lines_after, cpu_after) = (logged(&gateway), cpu_ticks(pid));
    let elapsed = started.elapsed();
    let cpu = Duration::from_millis((cpu_after - cpu_before) * 1000 / ticks_per_second());
    // A spinning accept loop burns a whole core: ~1 s of CPU per second.
    assert!(
        cpu < elapsed / 4,
        "the gateway used {cpu:?} of CPU in {elapsed:?} while out of descriptors"
    );
    assert!(
        lines_after - lines_before <= 2,
        "accept failures logged {} times in {elapsed:?}",
        lines_after - lines_before
    );

    // The header timeout closes the idle connections; then a client is answered again.
    let mut served = tokio::time::timeout(
        PATIENCE,
        send(gateway.addr, &Request::post_json("/", run_input("t", "r"))),
    )
    .await
    .expect("answered once the idle connections are closed");
    assert_eq!(served.status, 200);
    assert_eq!(
        served.events_to_end().await.last().unwrap()["type"],
        "RUN_FINISHED"
    );
    drop(idle);
}
