//! The operators' metrics, read from a running gateway's admin listener after real traffic:
//! time to first event and upstream header times, the process metrics, build info, the session
//! store gauges, admission rejections and refused connections; and the shipped Grafana
//! dashboard, whose every query must name metrics the gateway exposes.

use crate::support;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use support::aap::AapClient;
use support::scrape::{metric, metrics, wait_for_metric};
use support::{run_input, send, ConfigFile, Gateway, Request, Script, ScriptedUpstream, PATIENCE};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A gateway with an AG-UI route to a scripted upstream (`/agent`), an AAP face on the demo
/// agent (`/aap`) and a route that needs an API key (`/locked`), its admin listener on, and a
/// short `request_header_timeout`.
async fn gateway() -> (Gateway, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(|_| {
        Script::sse_json(&[
            json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        ])
    })
    .await;
    let config = format!(
        r#"
[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "{}"

[[routes]]
path = "/aap"
client = "aap"
upstream = "builtin:demo"
[routes.aap]
name = "demo"

[[routes]]
path = "/locked"
client = "ag-ui"
upstream = "builtin:demo"
[routes.auth]
api_keys = ["the-key"]
"#,
        upstream.url("/run")
    );
    let config = ConfigFile::new("metrics", &config);
    let gateway = Gateway::spawn(&[
        "--config",
        config.arg(),
        "--admin-listen",
        "127.0.0.1:0",
        "--request-header-timeout",
        "300ms",
    ]);
    (gateway, upstream)
}

/// One AG-UI run on `/agent`, read to its end.
async fn run_agent(gateway: &Gateway) {
    let mut response = send(
        gateway.addr,
        &Request::post_json("/agent", run_input("t", "r")),
    )
    .await;
    assert_eq!(response.status, 200);
    let events = response.events_to_end().await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}

/// A connection that sends nothing, until the gateway closes it.
async fn silent_connection(gateway: &Gateway) {
    let mut silent = TcpStream::connect(gateway.addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(PATIENCE, silent.read(&mut buf))
        .await
        .expect("a silent connection is closed by request_header_timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// A run on `/locked` without the route's key: refused with a 401.
async fn refused_without_key(gateway: &Gateway) {
    let refused = send(
        gateway.addr,
        &Request::post_json("/locked", run_input("t", "r")),
    )
    .await;
    assert_eq!(refused.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latencies_process_build_sessions_and_refusals_are_measured() {
    let (gateway, _upstream) = gateway().await;
    let admin = gateway.admin_addr();

    // Before any traffic, no stream has been timed.
    let before = metrics(admin).await;
    assert_eq!(
        metric(
            &before,
            "dialect_proxy_time_to_first_event_seconds_count{route=\"/agent\"}"
        ),
        None
    );
    assert_eq!(
        metric(&before, "dialect_proxy_sessions"),
        Some(0.0),
        "{before}"
    );

    run_agent(&gateway).await;
    let text = wait_for_metric(
        admin,
        "dialect_proxy_streams_total{route=\"/agent\",outcome=\"completed\"}",
        1.0,
    )
    .await;
    for series in [
        "dialect_proxy_time_to_first_event_seconds_count{route=\"/agent\"}",
        "dialect_proxy_upstream_headers_seconds_count{route=\"/agent\"}",
    ] {
        assert_eq!(metric(&text, series), Some(1.0), "{series} in\n{text}");
    }
    // The first event came after the upstream's headers, within the run.
    let ttfe = metric(
        &text,
        "dialect_proxy_time_to_first_event_seconds_sum{route=\"/agent\"}",
    )
    .unwrap();
    let headers = metric(
        &text,
        "dialect_proxy_upstream_headers_seconds_sum{route=\"/agent\"}",
    )
    .unwrap();
    assert!(
        ttfe > 0.0 && headers > 0.0 && ttfe < 10.0,
        "{ttfe} {headers}"
    );

    // Process metrics, plausible for a running gateway.
    let value = |name: &str| metric(&text, name).unwrap_or_else(|| panic!("no {name}:\n{text}"));
    assert!(value("process_resident_memory_bytes") > 1e6);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    let open_fds = value("process_open_fds");
    assert!(open_fds >= 3.0, "{open_fds}");
    assert!(value("process_max_fds") >= open_fds);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 600.0,
        "started {started}, now {now}"
    );

    // Build info.
    let build = text
        .lines()
        .find(|l| l.starts_with("dialect_proxy_build_info{"))
        .unwrap_or_else(|| panic!("no build_info:\n{text}"));
    assert!(
        build.starts_with(&format!(
            "dialect_proxy_build_info{{version=\"{}\",commit=\"",
            env!("CARGO_PKG_VERSION")
        )) && build.ends_with("\"} 1"),
        "{build}"
    );

    // An AAP session is counted while it lives; its turn stream is timed too.
    let aap = AapClient::new(gateway.addr, "/aap", None);
    let session = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    wait_for_metric(admin, "dialect_proxy_sessions", 1.0).await;
    aap.turn(&session, support::aap::user_turn("delta", "hi"))
        .await
        .expect(200);
    let text = wait_for_metric(
        admin,
        "dialect_proxy_time_to_first_event_seconds_count{route=\"/aap\"}",
        1.0,
    )
    .await;
    assert!(
        metric(
            &text,
            "dialect_proxy_store_operation_seconds_count{op=\"create\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    aap.delete_session(&session).await.expect(204);
    wait_for_metric(admin, "dialect_proxy_sessions", 0.0).await;

    // A request without the route's key.
    refused_without_key(&gateway).await;
    let text = wait_for_metric(
        admin,
        "dialect_proxy_admission_rejections_total{reason=\"unauthenticated\"}",
        1.0,
    )
    .await;
    assert_eq!(
        metric(
            &text,
            "dialect_proxy_requests_refused_total{route=\"/locked\",code=\"UNAUTHORIZED\"}"
        ),
        Some(1.0)
    );

    // A connection that never sends a request head.
    silent_connection(&gateway).await;
    wait_for_metric(
        admin,
        "dialect_proxy_connections_refused_total{reason=\"header_timeout\"}",
        1.0,
    )
    .await;
}

/// The metric names a PromQL expression reads: identifiers outside label matchers, grouping
/// clauses and strings, that are neither functions (followed by `(`) nor keywords.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "and",
        "or",
        "unless",
    ];
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Set after a grouping keyword: its parenthesised label list is skipped.
    let mut labels_follow = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' || c == '"' || c == '[' || (c == '(' && labels_follow) {
            let close = match c {
                '{' => '}',
                '"' => '"',
                '[' => ']',
                _ => ')',
            };
            i += 1;
            while i < chars.len() && chars[i] != close {
                if chars[i] == '"' && close != '"' {
                    i = after_string(&chars, i);
                } else {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
            labels_follow = false;
            continue;
        }
        if c == '$' {
            // A Grafana variable such as `$__rate_interval`.
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if AGGREGATIONS.contains(&word.as_str()) {
                // `sum by (route) (…)`: an operator, whatever follows it.
            } else if KEYWORDS.contains(&word.as_str()) {
                labels_follow = matches!(
                    word.as_str(),
                    "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
                );
            } else if next != Some(&'(') {
                names.insert(word);
            }
            continue;
        }
        if c.is_ascii_digit() {
            // Numbers, and durations such as `5m`.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    names
}

/// The index after the string literal that opens at `start`.
fn after_string(chars: &[char], start: usize) -> usize {
    let mut i = start + 1;
    while i < chars.len() && chars[i] != '"' {
        i += if chars[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

#[test]
fn the_metric_name_reader_skips_functions_labels_and_variables() {
    let expr = r#"histogram_quantile(0.99, sum by (route, le) (rate(dialect_proxy_x_bucket{instance=~"$instance", a="b{c}"}[$__rate_interval]))) / on (route) group_left process_open_fds offset 5m"#;
    assert_eq!(
        metric_names(expr),
        BTreeSet::from(["dialect_proxy_x_bucket".into(), "process_open_fds".into()])
    );
}

/// Every sample name `/metrics` can expose: the samples present, and for every family its
/// type's sample names (a counter's `_total`, a histogram's `_bucket`, `_sum`, `_count`), so a
/// family that has seen no traffic yet still counts.
fn exposed_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            let (Some(family), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        } else if !line.starts_with('#') {
            if let Some(name) = line.split(['{', ' ']).next().filter(|n| !n.is_empty()) {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Every `expr` of a dashboard's panels (rows' nested panels included).
fn exprs(panels: &[Value], out: &mut Vec<(String, String)>) {
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or_default().to_owned();
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push((title.clone(), expr.to_owned()));
            }
        }
        if let Some(nested) = panel["panels"].as_array() {
            exprs(nested, out);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_queries_only_metrics_the_gateway_exposes() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/dialect-proxy.json"
    );
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(variables.contains(&"datasource"), "{variables:?}");
    let mut queries = Vec::new();
    exprs(dashboard["panels"].as_array().unwrap(), &mut queries);
    assert!(queries.len() >= 15, "{} queries", queries.len());

    let (gateway, _upstream) = gateway().await;
    let admin = gateway.admin_addr();
    run_agent(&gateway).await;
    let aap = AapClient::new(gateway.addr, "/aap", None);
    let session = aap.new_session(json!({"agent": {"name": "demo"}})).await;
    aap.delete_session(&session).await.expect(204);
    refused_without_key(&gateway).await;
    let text = wait_for_metric(
        admin,
        "dialect_proxy_streams_total{route=\"/agent\",outcome=\"completed\"}",
        1.0,
    )
    .await;
    let exposed = exposed_names(&text);

    let mut read = BTreeSet::new();
    for (title, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "panel {title:?} reads no metric: {expr}");
        for name in names {
            assert!(
                exposed.contains(&name),
                "panel {title:?} reads {name}, which /metrics does not expose\n{expr}\nexposed: {exposed:?}"
            );
            read.insert(name);
        }
    }
    // The panels the dashboard promises.
    for name in [
        "dialect_proxy_streams_active",
        "dialect_proxy_streams_total",
        "dialect_proxy_time_to_first_event_seconds_bucket",
        "dialect_proxy_upstream_headers_seconds_bucket",
        "dialect_proxy_requests_refused_total",
        "dialect_proxy_admission_rejections_total",
        "dialect_proxy_connections_refused_total",
        "dialect_proxy_connections_open",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_cpu_seconds_total",
        "dialect_proxy_sessions",
        "dialect_proxy_thread_records",
        "dialect_proxy_store_operation_seconds_bucket",
        "dialect_proxy_config_reloads_total",
        "dialect_proxy_build_info",
    ] {
        assert!(read.contains(name), "no panel reads {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_speaks_plain_http_to_a_tls_listener_is_a_refused_handshake() {
    let pki = support::tls::Pki::new();
    let leaf = pki.server("gateway", &["localhost", "127.0.0.1"]);
    let gateway = Gateway::demo_tls(&leaf.cert, &leaf.key, &["--admin-listen", "127.0.0.1:0"]);
    let admin = gateway.admin_addr();
    let mut plain = TcpStream::connect(gateway.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut plain, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    // Whatever the gateway answers (a TLS alert, or nothing), it closes the connection.
    let _ = tokio::time::timeout(PATIENCE, plain.read_to_end(&mut buf))
        .await
        .expect("the gateway ends a failed handshake");
    let text = wait_for_metric(
        admin,
        "dialect_proxy_connections_refused_total{reason=\"tls_handshake\"}",
        1.0,
    )
    .await;
    assert_eq!(
        metric(
            &text,
            "dialect_proxy_connections_refused_total{reason=\"header_timeout\"}"
        ),
        None,
        "{text}"
    );
}

/// Repairs at the smallest unit (AG-UI 1.1) are counted by kind, and a lossy one is logged once
/// per stream as a warning naming what was lost: on an AG-UI route an unknown patch op, an
/// unknown content part, a media part of an unknown source kind and a message of an unknown
/// role leave, and what holds them passes on; on an AAP face a state patch that does not apply
/// to the session's state is skipped and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repairs_at_the_smallest_unit_are_counted_by_kind() {
    let upstream = ScriptedUpstream::start(|request| {
        let mut events = vec![json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})];
        if request.path == "/aap-run" {
            events.extend([
                json!({"type":"STATE_DELTA","delta":[{"op":"remove","path":"/missing"}]}),
                json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ok"}),
                json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
            ]);
        } else {
            events.extend([
                json!({"type":"STATE_DELTA","delta":[
                    {"op":"add","path":"/a","value":1},
                    {"op":"increment","path":"/n"}]}),
                json!({"type":"MESSAGES_SNAPSHOT","messages":[
                    {"id":"u1","role":"user","content":[
                        {"type":"text","text":"hello"},
                        {"type":"poll","options":[]},
                        {"type":"image","source":{"type":"s3","key":"k"}}]},
                    {"id":"c1","role":"critic","content":"x"}]}),
            ]);
        }
        events.push(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}));
        Script::sse_json(&events)
    })
    .await;
    let config = format!(
        r#"
[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "{}"

[[routes]]
path = "/aap"
client = "aap"
upstream = "{}"
[routes.aap]
name = "helper"
"#,
        upstream.url("/run"),
        upstream.url("/aap-run")
    );
    let config = ConfigFile::new("metrics-repairs", &config);
    let gateway = Gateway::spawn(&["--config", config.arg(), "--admin-listen", "127.0.0.1:0"]);
    let admin = gateway.admin_addr();

    let mut response = send(
        gateway.addr,
        &Request::post_json("/agent", run_input("t", "r")),
    )
    .await;
    assert_eq!(response.status, 200);
    let events = response.events_to_end().await;
    let of = |ty: &str| events.iter().find(|e| e["type"] == ty).cloned().unwrap();
    assert_eq!(
        of("STATE_DELTA")["delta"],
        json!([{"op":"add","path":"/a","value":1}])
    );
    assert_eq!(
        of("MESSAGES_SNAPSHOT")["messages"],
        json!([{"id":"u1","role":"user","content":[{"type":"text","text":"hello"}]}])
    );

    let aap = AapClient::new(gateway.addr, "/aap", None);
    let session = aap.new_session(json!({"agent": {"name": "helper"}})).await;
    aap.turn(&session, support::aap::user_turn("none", "hi"))
        .await
        .expect(200);

    let text = wait_for_metric(
        admin,
        "dialect_proxy_lossy_drops_total{kind=\"patch_not_applied\"}",
        1.0,
    )
    .await;
    for kind in [
        "unknown_patch_op",
        "unknown_content_part",
        "unknown_part_source",
        "unknown_message_role",
    ] {
        let series = format!("dialect_proxy_lossy_drops_total{{kind=\"{kind}\"}}");
        assert_eq!(metric(&text, &series), Some(1.0), "{series} in\n{text}");
    }

    // One warning per stream and kind, saying what was lost; the AG-UI stream's state patch
    // that would not apply anywhere is forwarded as it is (no state is kept on that path).
    let warned_in = |log: &str, kind: &str| {
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains(&format!("kind=\"{kind}\"")))
            .count()
    };
    // The stream's end is logged before it is counted, but stderr is read by a thread.
    let deadline = std::time::Instant::now() + PATIENCE;
    while warned_in(&gateway.stderr(), "patch_not_applied") == 0 {
        assert!(std::time::Instant::now() < deadline, "{}", gateway.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let log = gateway.stderr();
    let warned = |kind: &str| warned_in(&log, kind);
    for kind in [
        "unknown_patch_op",
        "unknown_content_part",
        "unknown_part_source",
        "unknown_message_role",
        "patch_not_applied",
    ] {
        assert_eq!(warned(kind), 1, "{kind}:\n{log}");
    }
    assert!(
        log.contains("removed from its STATE_DELTA or ACTIVITY_DELTA"),
        "{log}"
    );
}
