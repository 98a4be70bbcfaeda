//! Upstream faults after the response headers, heartbeats, and cancellation on client disconnect
//! (streaming.md §5–§7, agui.md §6). Everything runs over real TCP against the real binary.

use crate::support;

use serde_json::{json, Value};
use support::{
    assert_json_subset, assert_prefix_then_terminal, assert_run_envelope, assert_run_error,
    client::BodyEnd, event_types, run_input, send, text, Conn, Gateway, Request, Script,
    ScriptedUpstream, SseItem, PATIENCE,
};

const THREAD: &str = "thread-faults";
const RUN: &str = "run-1";

fn run_started() -> Value {
    json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": RUN})
}

fn run_finished() -> Value {
    json!({"type": "RUN_FINISHED", "threadId": THREAD, "runId": RUN})
}

/// A complete, self-contained prefix: nothing is left open when the fault happens.
fn complete_prefix() -> Vec<Value> {
    vec![
        run_started(),
        text::start("m1"),
        text::content("m1", "Hello"),
        text::content("m1", ", world"),
        text::end("m1"),
    ]
}

fn post_run() -> Request {
    Request::post_json("/", run_input(THREAD, RUN))
}

/// Sends the run, expects 200, reads the stream to its end and checks the body ended cleanly.
async fn run_to_end(gateway: &Gateway) -> Vec<Value> {
    let mut response = send(gateway.addr, &post_run()).await;
    if response.status != 200 {
        let text = response.text().await;
        panic!("expected 200, got {}: {text}", response.status);
    }
    let events = response.events_to_end().await;
    assert_eq!(
        response.body_end(),
        Some(&BodyEnd::Clean),
        "the gateway must end the body properly after the terminal event; events: {:?}",
        event_types(&events)
    );
    events
}

// ---------------------------------------------------------------- truncation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_drop_mid_stream_ends_with_upstream_truncated() {
    let prefix = complete_prefix();
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&prefix).close()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_TRUNCATED");
    assert_prefix_then_terminal(&events, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_drop_mid_event_discards_the_partial_event_and_ends_truncated() {
    let prefix = complete_prefix();
    let script = Script::sse_json(&prefix)
        .bytes(br#"data: {"type":"TEXT_MESSAGE_START","messageId":"m2","ro"#)
        .close();
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_TRUNCATED");
    assert_prefix_then_terminal(&events, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_clean_eof_without_terminal_ends_truncated() {
    let prefix = complete_prefix();
    // The body ends properly (terminating chunk) but the run never finished.
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&prefix)).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_TRUNCATED");
    assert_prefix_then_terminal(&events, &prefix);
}

// ---------------------------------------------------------------- idle timeout

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_stall_ends_with_upstream_idle_timeout() {
    let prefix = complete_prefix();
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&prefix).stall()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--idle-timeout", "500ms"]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_IDLE_TIMEOUT");
    assert_prefix_then_terminal(&events, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_idle_timeout_closes_the_upstream_connection() {
    let upstream =
        ScriptedUpstream::with_script(Script::sse_json(&complete_prefix()).stall()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--idle-timeout", "500ms"]);

    let events = run_to_end(&gateway).await;
    assert_run_error(events.last().unwrap(), "UPSTREAM_IDLE_TIMEOUT");

    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "after an idle timeout the gateway must close the upstream connection (streaming.md §6)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_measures_gaps_not_total_time() {
    // 15 events 200 ms apart (3 s in all) under a 2 s idle timeout: no gap comes close.
    let mut script = Script::sse_json(&[run_started(), text::start("m1")]);
    let mut expected = vec![run_started(), text::start("m1")];
    for i in 0..15 {
        let ev = text::content("m1", &format!("{i} "));
        script = script.sleep_ms(200).event_json(&ev);
        expected.push(ev);
    }
    let tail = [text::end("m1"), run_finished()];
    script = script.events_json(&tail);
    expected.extend(tail);
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--idle-timeout", "2s"]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED", "terminal: {terminal}");
    assert_eq!(events.len(), expected.len(), "{:?}", event_types(&events));
    for (actual, expected) in events.iter().zip(&expected) {
        assert_json_subset(actual, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_comments_reset_the_idle_timer_and_are_not_forwarded() {
    // 3 s of upstream comments every 200 ms under a 2 s idle timeout.
    let mut script = Script::sse_json(&[run_started()]);
    for _ in 0..15 {
        script = script.sleep_ms(200).bytes(": keepalive\n\n");
    }
    let upstream = ScriptedUpstream::with_script(script.event_json(&run_finished())).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--idle-timeout", "2s"]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let items = response.items_to_end().await;
    let events: Vec<Value> = items.iter().filter_map(|i| i.as_event().cloned()).collect();

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED", "terminal: {terminal}");
    for item in &items {
        assert!(
            matches!(item, SseItem::Event(_)) || item.is_comment("ok") || item.is_comment("ping"),
            "upstream comments must not be forwarded; got {item:?}"
        );
    }
}

// ---------------------------------------------------------------- malformed / too large

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_data_ends_with_upstream_malformed() {
    let prefix = complete_prefix();
    let script = Script::sse_json(&prefix)
        .bytes("data: not json\n\n")
        .events_json(&[
            text::start("m2"),
            text::content("m2", "after"),
            text::end("m2"),
        ])
        .event_json(&run_finished());
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_MALFORMED");
    assert_prefix_then_terminal(&events, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_event_ends_with_upstream_event_too_large() {
    // A 1000-byte delta fits in 4096; a 20 000-byte one does not.
    let mut prefix = complete_prefix();
    prefix.insert(4, text::content("m1", &"a".repeat(1000)));
    let script = Script::sse_json(&prefix)
        .event_json(&text::content("m1", &"b".repeat(20_000)))
        .events_json(&[text::end("m1"), run_finished()]);
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--max-event-bytes", "4096"]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_EVENT_TOO_LARGE");
    assert_prefix_then_terminal(&events, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_unterminated_event_is_rejected_without_waiting_for_its_end() {
    // 20 KB of one event that never ends, then silence: a bounded decoder must give up at the
    // limit instead of buffering until the event (or the connection) ends.
    let prefix = complete_prefix();
    let mut script = Script::sse_json(&prefix)
        .bytes(r#"data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""#);
    for _ in 0..10 {
        script = script.bytes("c".repeat(2048));
    }
    let upstream = ScriptedUpstream::with_script(script.stall()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--max-event-bytes", "4096"]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "UPSTREAM_EVENT_TOO_LARGE");
    assert_prefix_then_terminal(&events, &prefix);
}

// ---------------------------------------------------------------- bounded runs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_max_stream_duration_ends_with_its_code_and_closes_the_upstream() {
    // Events every 20 ms for 20 s: the route lets a run last 400 ms.
    let prefix = complete_prefix();
    let mut script = Script::sse_json(&prefix).event_json(&text::start("m2"));
    for i in 0..1000 {
        script = script
            .event_json(&text::content("m2", &format!("tick {i} ")))
            .sleep(std::time::Duration::from_millis(20));
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--max-stream-duration", "400ms"]);

    let started = std::time::Instant::now();
    let events = run_to_end(&gateway).await;
    let lasted = started.elapsed();

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "STREAM_DURATION_EXCEEDED");
    assert!(
        lasted >= std::time::Duration::from_millis(400)
            && lasted < std::time::Duration::from_secs(3),
        "ended after {lasted:?}"
    );
    let ticks = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT" && e["messageId"] == "m2")
        .count();
    assert!(
        ticks >= 5,
        "the events within the bound were relayed: {ticks}"
    );
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the upstream connection is closed when the run is ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_max_stream_bytes_ends_with_its_code_and_closes_the_upstream() {
    // The prefix, then 16 MiB of events as fast as the upstream can write them: the route lets
    // a stream carry 64 KiB.
    let prefix = complete_prefix();
    let chunk: String = (0..64)
        .map(|i| {
            let event = text::content("m2", &format!("{i:04}{}", "x".repeat(1000)));
            format!("data: {event}\n\n")
        })
        .collect();
    let mut script = Script::sse_json(&prefix).event_json(&text::start("m2"));
    for _ in 0..256 {
        script = script.bytes(&chunk);
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--max-stream-bytes", "65536"]);

    let events = run_to_end(&gateway).await;

    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_run_error(terminal, "STREAM_BYTES_EXCEEDED");
    let relayed: usize = events
        .iter()
        .map(|e| e["delta"].as_str().map_or(0, str::len))
        .sum();
    assert!(
        (50_000..=65_536).contains(&relayed),
        "about the bound's worth of deltas was relayed, never more: {relayed} bytes"
    );
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the upstream connection is closed when the run is ended"
    );
}

// ---------------------------------------------------------------- heartbeats

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_fill_upstream_silence() {
    let script = Script::sse_json(&[run_started(), text::start("m1")])
        .sleep_ms(800)
        .events_json(&[text::content("m1", "late"), text::end("m1"), run_finished()]);
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &["--heartbeat-interval", "100ms"]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let items = response.items_to_end().await;
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));

    assert_eq!(
        items.first(),
        Some(&SseItem::Comment("ok".into())),
        "{items:?}"
    );
    let position = |ty: &str| {
        items
            .iter()
            .position(|i| i.as_event().is_some_and(|e| e["type"] == ty))
            .unwrap_or_else(|| panic!("no {ty} in {items:?}"))
    };
    let (start, content) = (
        position("TEXT_MESSAGE_START"),
        position("TEXT_MESSAGE_CONTENT"),
    );
    assert!(start < content, "{items:?}");
    let pings = items[start..content]
        .iter()
        .filter(|i| i.is_comment("ping"))
        .count();
    assert!(
        pings >= 1,
        "expected `: ping` during 800 ms of upstream silence with a 100 ms heartbeat; got {items:?}"
    );
    for item in &items {
        assert!(
            matches!(item, SseItem::Event(_)) || item.is_comment("ok") || item.is_comment("ping"),
            "unexpected item {item:?}"
        );
    }

    let events: Vec<Value> = items.iter().filter_map(|i| i.as_event().cloned()).collect();
    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED", "terminal: {terminal}");
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
}

// ---------------------------------------------------------------- cancellation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_mid_stream_closes_the_upstream_connection() {
    // The upstream keeps trickling events for ~20 s; the client leaves after three.
    let mut script = Script::sse_json(&[run_started(), text::start("m1")]);
    for i in 0..200 {
        script = script
            .event_json(&text::content("m1", &format!("{i} ")))
            .sleep_ms(100);
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let mut gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    let events = response.read_events(3).await;
    assert_eq!(
        event_types(&events),
        ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    );
    assert_eq!(
        upstream.cancellations(),
        0,
        "upstream closed before the client left"
    );
    response.disconnect();

    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "client went away mid-stream but the upstream connection stayed open"
    );
    assert!(
        gateway.is_running(),
        "gateway exited after a client disconnect"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_while_upstream_stalls_closes_the_upstream_connection() {
    let script = Script::sse_json(&[run_started(), text::start("m1")]).stall();
    let upstream = ScriptedUpstream::with_script(script).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut response = send(gateway.addr, &post_run()).await;
    assert_eq!(response.status, 200);
    response.read_events(2).await;
    assert_eq!(
        upstream.cancellations(),
        0,
        "upstream closed before the client left"
    );
    response.disconnect();

    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "client went away during an upstream stall but the upstream connection stayed open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_before_first_upstream_byte_closes_the_upstream_connection() {
    // streaming.md §7 phase 2: the upstream has the request but has sent nothing at all.
    let upstream = ScriptedUpstream::with_script(Script::no_headers()).await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut conn = Conn::open(gateway.addr).await;
    conn.send(&post_run()).await;
    let request = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(request.method, "POST");
    assert_eq!(
        upstream.cancellations(),
        0,
        "upstream closed before the client left"
    );
    drop(conn);

    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "client went away before the upstream's first byte but the upstream connection \
         stayed open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_keeps_serving_after_a_cancelled_stream() {
    // First run stalls and is abandoned; the second completes.
    let upstream = ScriptedUpstream::start(|req| {
        let run_id = serde_json::from_slice::<Value>(&req.body).map(|v| v["runId"].clone());
        if run_id.is_ok_and(|r| r == "abandoned") {
            Script::sse_json(&[
                json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "abandoned"}),
            ])
            .stall()
        } else {
            Script::sse_json(&[run_started(), run_finished()])
        }
    })
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    let mut first = send(
        gateway.addr,
        &Request::post_json("/", run_input(THREAD, "abandoned")),
    )
    .await;
    assert_eq!(first.status, 200);
    first.read_events(1).await;
    first.disconnect();
    assert!(upstream.wait_for_cancellation(PATIENCE).await);

    let events = run_to_end(&gateway).await;
    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED", "terminal: {terminal}");
}
