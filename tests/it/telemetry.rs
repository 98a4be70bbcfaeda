//! Request ids, JSON log lines and traces, against the real binary over real sockets: the
//! `x-request-id` a client sends (or the UUID the gateway makes up) on the response, at the
//! upstream and on every log line of the request; refusals logged at `info` with their code;
//! the client's `traceparent` continued into the spans an OTLP/HTTP collector (in the test)
//! receives, and into the upstream request.

use crate::support;

use std::time::Duration;

use serde_json::{json, Map, Value};
use support::aap_agent::AapAgent;
use support::otlp::{OtlpReceiver, KIND_CLIENT, KIND_SERVER};
use support::{
    run_input, send, ConfigFile, Gateway, Request, Response, Script, ScriptedUpstream, PATIENCE,
};

const API_KEY: &str = "telemetry-key-1";

/// A client trace: W3C `traceparent` with its trace id and the client's span id.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn client_traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// An upstream answering every run with a short AG-UI run.
async fn upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|_| {
        Script::sse_json(&[
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        ])
    })
    .await
}

/// Two AG-UI routes in front of `upstream`: `/open` without authentication, `/guarded` with
/// the API key [`API_KEY`]; any other path has no route.
fn two_routes(name: &str, upstream: &str) -> ConfigFile {
    let toml = format!(
        r#"
[[routes]]
path = "/open"
client = "ag-ui"
upstream = "{upstream}"

[[routes]]
path = "/guarded"
client = "ag-ui"
upstream = "{upstream}"
[routes.auth]
api_keys = ["{API_KEY}"]
"#
    );
    ConfigFile::new(&format!("telemetry-{name}"), &toml)
}

fn spawn(config: &ConfigFile, env: &[(&str, &str)]) -> Gateway {
    Gateway::spawn_with_env(&["--config", config.arg()], env)
}

const JSON_LOGS: (&str, &str) = ("DIALECT_PROXY_LOG_FORMAT", "json");

/// Every line of `log`, each of which must be one JSON object.
fn json_lines(log: &str) -> Vec<Map<String, Value>> {
    log.lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(object)) => object,
            _ => panic!("a log line that is not one JSON object: {line:?}\n--- log ---\n{log}"),
        })
        .collect()
}

/// The lines logged for the request `id`, after waiting for one whose message is `last`.
async fn lines_of(gateway: &Gateway, id: &str, last: &str) -> Vec<Map<String, Value>> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let lines: Vec<_> = json_lines(&gateway.stderr())
            .into_iter()
            .filter(|l| l.get("request_id").and_then(Value::as_str) == Some(id))
            .collect();
        if lines.iter().any(|l| l["message"] == last) {
            return lines;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {last:?} line for request {id}:\n{}",
            gateway.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn run(path: &str) -> Request {
    Request::post_json(path, run_input("t-tel", "r-tel"))
}

fn is_uuid_v4(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok_and(|u| u.get_version_num() == 4)
}

/// Reads a 200 event stream to its end; panics with the body otherwise.
async fn expect_stream(mut response: Response) {
    if response.status != 200 {
        let status = response.status;
        panic!("status {status}: {}", response.text().await);
    }
    let events = response.events_to_end().await;
    assert_eq!(
        events.last().and_then(|e| e["type"].as_str()),
        Some("RUN_FINISHED"),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_request_id_is_echoed_sent_upstream_and_on_every_line_of_the_request() {
    let upstream = upstream().await;
    let config = two_routes("given", &upstream.url("/agent"));
    let gateway = spawn(&config, &[JSON_LOGS]);
    let id = "req-42_abc.DEF:~!";
    let response = send(
        gateway.addr,
        &run("/guarded")
            .header("authorization", &format!("Bearer {API_KEY}"))
            .header("x-request-id", id)
            .header("traceparent", &client_traceparent()),
    )
    .await;
    assert_eq!(response.header("x-request-id"), Some(id));
    expect_stream(response).await;

    let seen = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(seen.header_all("x-request-id"), [id]);
    // Trace export is off: the client's trace context passes as it came.
    assert_eq!(
        seen.header("traceparent"),
        Some(client_traceparent().as_str())
    );

    let lines = lines_of(&gateway, id, "stream ended").await;
    let end = lines
        .iter()
        .find(|l| l["message"] == "stream ended")
        .expect("the end line");
    for key in ["timestamp", "level", "message"] {
        assert!(end[key].is_string(), "{key} in {end:?}");
    }
    assert_eq!(end["level"], "INFO");
    assert_eq!(end["route"], "/guarded");
    assert_eq!(end["thread_id"], "t-tel");
    assert_eq!(end["run_id"], "r-tel");
    assert_eq!(end["outcome"], "completed");
    let principal = end["principal"].as_str().expect("a principal");
    assert!(
        !principal.is_empty() && !principal.contains(API_KEY),
        "{principal:?}"
    );
    assert!(
        !end.contains_key("span") && !end.contains_key("spans"),
        "{end:?}"
    );
    // Every line logged inside the request span carries its id: none is without it.
    let stray: Vec<_> = json_lines(&gateway.stderr())
        .into_iter()
        .filter(|l| l.contains_key("route") && !l.contains_key("request_id"))
        .collect();
    assert!(
        stray.is_empty(),
        "lines of a request without its id: {stray:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_invalid_request_id_is_replaced_by_a_uuid_on_every_response() {
    let upstream = upstream().await;
    let config = two_routes("made-up", &upstream.url("/agent"));
    let gateway = spawn(&config, &[]);
    let too_long = "a".repeat(300);
    let mut generated = Vec::new();
    for given in [None, Some("has space"), Some(too_long.as_str())] {
        let mut request = run("/open");
        if let Some(given) = given {
            request = request.header("x-request-id", given);
        }
        let response = send(gateway.addr, &request).await;
        let echoed = response
            .header("x-request-id")
            .unwrap_or_default()
            .to_owned();
        assert!(is_uuid_v4(&echoed), "{given:?} gave {echoed:?}");
        expect_stream(response).await;
        let seen = upstream
            .wait_for_requests(generated.len() + 1, PATIENCE)
            .await;
        assert_eq!(
            seen.header_all("x-request-id"),
            [echoed.as_str()],
            "{given:?}"
        );
        generated.push(echoed);
    }
    generated.dedup();
    assert_eq!(generated.len(), 3, "every request gets its own id");

    // Refusals carry it too: no route (404), no credential (401), a wrong method (405).
    for (request, status) in [
        (run("/nowhere"), 404),
        (run("/guarded"), 401),
        (Request::get("/open"), 405),
    ] {
        let response = send(gateway.addr, &request).await;
        assert_eq!(response.status, status);
        let echoed = response.header("x-request-id").unwrap_or_default();
        assert!(is_uuid_v4(echoed), "{status} gave {echoed:?}");
        let response = send(gateway.addr, &request.header("x-request-id", "mine-1")).await;
        assert_eq!(response.status, status);
        assert_eq!(response.header("x-request-id"), Some("mine-1"), "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_at_info_with_their_code() {
    let upstream = upstream().await;
    let config = two_routes("refusals", &upstream.url("/agent"));
    let gateway = spawn(&config, &[JSON_LOGS]);
    let cases = [
        ("refused-404", run("/nowhere"), "/nowhere", 404, "NOT_FOUND"),
        (
            "refused-401",
            run("/guarded"),
            "/guarded",
            401,
            "UNAUTHORIZED",
        ),
        (
            "refused-405",
            Request::get("/open"),
            "/open",
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            "refused-400",
            Request::post_json("/open", "{not json"),
            "/open",
            400,
            "INVALID_REQUEST",
        ),
    ];
    for (id, request, path, status, code) in cases {
        let response = send(gateway.addr, &request.header("x-request-id", id)).await;
        assert_eq!(response.status, status, "{id}");
        let lines = lines_of(&gateway, id, "request refused").await;
        let refused = lines
            .iter()
            .find(|l| l["message"] == "request refused")
            .unwrap();
        assert_eq!(refused["level"], "INFO", "{refused:?}");
        assert_eq!(refused["code"], code, "{refused:?}");
        assert_eq!(refused["status"], status, "{refused:?}");
        assert_eq!(refused["outcome"], "refused", "{refused:?}");
        assert_eq!(refused["path"], path, "{refused:?}");
        assert!(
            refused["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{refused:?}"
        );
    }
    assert!(
        upstream.requests().is_empty(),
        "no refused request reached the upstream"
    );
}

/// `(trace id, parent id)` of a `traceparent` value.
fn parse_traceparent(value: &str) -> (String, String) {
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "{value:?}");
    assert_eq!(parts[0], "00", "{value:?}");
    (parts[1].to_owned(), parts[2].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_trace_continues_through_the_request_and_upstream_spans() {
    let collector = OtlpReceiver::start().await;
    let upstream = upstream().await;
    let config = two_routes("otlp", &upstream.url("/agent"));
    let endpoint = collector.endpoint();
    let gateway = spawn(
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    let response = send(
        gateway.addr,
        &run("/open")
            .header("traceparent", &client_traceparent())
            .header("tracestate", "vendor=1"),
    )
    .await;
    expect_stream(response).await;

    let request = collector
        .wait_for_span("request", CLIENT_TRACE, PATIENCE)
        .await;
    let call = collector
        .wait_for_span("upstream", CLIENT_TRACE, PATIENCE)
        .await;
    assert_eq!(request.parent_span_id, CLIENT_SPAN, "{request:?}");
    assert_eq!(request.kind, KIND_SERVER, "{request:?}");
    assert_eq!(call.parent_span_id, request.span_id, "{call:?}");
    assert_eq!(call.kind, KIND_CLIENT, "{call:?}");
    assert_ne!(call.span_id, request.span_id);
    assert_eq!(
        request.resource.get("service.name").map(String::as_str),
        Some("dialect-proxy"),
        "{request:?}"
    );
    assert_eq!(
        request.attributes.get("route").map(String::as_str),
        Some("/open")
    );

    let seen = upstream.wait_for_request(PATIENCE).await;
    let traceparents = seen.header_all("traceparent");
    assert_eq!(traceparents.len(), 1, "{traceparents:?}");
    let (trace_id, parent_id) = parse_traceparent(traceparents[0]);
    assert_eq!(trace_id, CLIENT_TRACE);
    assert_eq!(
        parent_id, call.span_id,
        "the upstream's parent is the upstream call"
    );
    assert_eq!(seen.header("tracestate"), Some("vendor=1"));
    assert!(
        collector.rejected().is_empty(),
        "{:?}",
        collector.rejected()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_spans_are_sent_at_exit() {
    let collector = OtlpReceiver::start().await;
    let upstream = upstream().await;
    let config = two_routes("flush", &upstream.url("/agent"));
    let endpoint = collector.endpoint();
    // A batch interval far beyond the test: only the flush at exit can send the spans.
    let mut gateway = spawn(
        &config,
        &[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                &format!("{endpoint}/v1/traces"),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
            ("OTEL_SERVICE_NAME", "proxy-under-test"),
        ],
    );
    let response = send(
        gateway.addr,
        &run("/open").header("traceparent", &client_traceparent()),
    )
    .await;
    expect_stream(response).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(collector.spans().is_empty(), "sent before the exit");
    gateway.terminate();
    assert!(gateway.wait_exit(PATIENCE).is_some(), "the gateway exits");
    let request = collector
        .wait_for_span("request", CLIENT_TRACE, PATIENCE)
        .await;
    assert_eq!(
        request.resource.get("service.name").map(String::as_str),
        Some("proxy-under-test")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_to_an_aap_agent_carries_the_request_id_and_its_own_span() {
    let collector = OtlpReceiver::start().await;
    let agent = AapAgent::start().await;
    let url = agent.base_url();
    let endpoint = collector.endpoint();
    let gateway = Gateway::spawn_with_env(
        &[
            "--client",
            "ag-ui",
            "--upstream",
            url.as_str(),
            "--upstream-dialect",
            "aap",
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    let id = "aap-run-7";
    let response = send(
        gateway.addr,
        &Request::post_json("/", run_input("t-aap", "r-aap"))
            .header("x-request-id", id)
            .header("traceparent", &client_traceparent()),
    )
    .await;
    assert_eq!(response.header("x-request-id"), Some(id));
    expect_stream(response).await;

    let calls = agent.requests();
    assert!(calls.len() >= 2, "{calls:?}");
    let request = collector
        .wait_for_span("request", CLIENT_TRACE, PATIENCE)
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let upstream_spans = loop {
        let spans: Vec<_> = collector
            .spans()
            .into_iter()
            .filter(|s| s.name == "upstream" && s.trace_id == CLIENT_TRACE)
            .collect();
        if spans.len() >= calls.len() || tokio::time::Instant::now() > deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(upstream_spans.len(), calls.len(), "{upstream_spans:#?}");
    for call in &calls {
        assert_eq!(
            call.header("x-request-id"),
            Some(id),
            "{} {}",
            call.method,
            call.path
        );
        let (trace_id, parent_id) =
            parse_traceparent(call.header("traceparent").expect("a traceparent"));
        assert_eq!(trace_id, CLIENT_TRACE);
        let span = upstream_spans
            .iter()
            .find(|s| s.span_id == parent_id)
            .unwrap_or_else(|| panic!("no upstream span {parent_id}: {upstream_spans:#?}"));
        assert_eq!(span.parent_span_id, request.span_id, "{span:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_up_neither_requests_nor_the_exit() {
    // Connections to it complete in the listen backlog; nothing is ever read or answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let upstream = upstream().await;
    let config = two_routes("silent", &upstream.url("/agent"));
    // An export would wait a minute for its answer: far beyond the exit this test allows.
    let mut gateway = spawn(
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    for _ in 0..5 {
        let response = send(
            gateway.addr,
            &run("/open").header("traceparent", &client_traceparent()),
        )
        .await;
        expect_stream(response).await;
    }
    assert_eq!(upstream.requests().len(), 5);
    gateway.terminate();
    assert!(
        gateway.wait_exit(PATIENCE).is_some(),
        "the exit waited for the collector:\n{}",
        gateway.stderr()
    );
    // The export in flight was given up at the bound, not finished.
    gateway.wait_for_stderr("spans not exported at exit").await;
    drop(silent);
}
