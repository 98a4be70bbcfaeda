//! The HAI hop: an AG-UI agent → gateway (client `hai`, upstream `ag-ui`) → gateway (client
//! `ag-ui`, upstream `hai` at the first one) → AG-UI client gives back the agent's run in normal
//! form (`tests/fixtures/agui-hai-agui/README.md`).
//!
//! - `fixtures_in_process`: each leg through the pipeline, offline: `NAME.in` → `NAME.hai`,
//!   then that HAI stream → `NAME.out`.
//! - `fixtures_through_two_gateways`: the real binary twice, chained over real TCP; the HAI
//!   stream between them is captured by posting the same request to the first gateway
//!   directly. Each captured HAI stream goes through `tests/node/hai-client.mjs`, and the real
//!   `@ag-ui/client` drives the outer gateway (its capture checked like every real-client run).
//!
//! Comparison: `timestamp` is ignored everywhere; a string delta of a business, collaboration
//! or tool-argument event that holds a JSON object is compared as that object.

use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dialect_proxy::dialect::{read_request, CodecOptions, Dialect};
use dialect_proxy::event::{Clock, RunIds};
use dialect_proxy::pipeline::translate_all;
use dialect_proxy::pipeline::PipelineSpec;
use serde_json::Value;
use support::hai::sse_events;
use support::{send, Gateway, Request, Script, ScriptedUpstream};

const DIR: &str = "agui-hai-agui";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(DIR)
}

fn cases() -> Vec<String> {
    let cases: Vec<String> = support::fixture_inputs(DIR)
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        cases.len() >= 13,
        "expected the hand-written cases, got {cases:?}"
    );
    cases
}

fn read(case: &str, ext: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{case}.{ext}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The comparable form of an event (see the module docs).
fn comparable(mut event: Value) -> Value {
    strip_timestamps(&mut event);
    let ty = event["type"].as_str().unwrap_or_default().to_owned();
    if matches!(
        ty.as_str(),
        "BUSINESS_DATA_CONTENT" | "AGENT_COLLABORATIVE_MESSAGE_CONTENT" | "TOOL_CALL_ARGS"
    ) {
        if let Some(Value::String(text)) = event.get("delta") {
            if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                event["delta"] = serde_json::json!({ "json": parsed });
            }
        }
    }
    event
}

fn strip_timestamps(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.shift_remove("timestamp");
            map.values_mut().for_each(strip_timestamps);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_timestamps),
        _ => {}
    }
}

fn events(bytes: &[u8]) -> Vec<Value> {
    sse_events(bytes).into_iter().map(comparable).collect()
}

/// `Some(report)` when `actual` is not `expected`.
fn differs(what: &str, expected: &[Value], actual: &[Value]) -> Option<String> {
    (expected != actual).then(|| format!("== {what}\n{}", support::diff_events(expected, actual)))
}

fn spec(case: &str, upstream: Dialect, client: Dialect) -> PipelineSpec {
    let body = read(case, "request.json");
    let mut no_ids = || panic!("fixture requests carry their ids");
    let codecs = CodecOptions::default();
    let input = read_request(Dialect::AgUi, &body, &codecs, &mut no_ids).expect("valid request");
    let mut spec = PipelineSpec::new(
        upstream,
        client,
        RunIds {
            thread_id: input.thread_id,
            run_id: input.run_id,
        },
    );
    spec.codecs.tools = input.tools.iter().map(|t| t.name.clone()).collect();
    spec.options.clock = Clock::Fixed(1_760_000_000_000);
    spec
}

#[test]
fn fixtures_in_process() {
    let mut failures = Vec::new();
    for case in cases() {
        let hai = translate_all(spec(&case, Dialect::AgUi, Dialect::Hai), &read(&case, "in"))
            .expect("first leg");
        failures.extend(differs(
            &format!("{case}.hai (in process)"),
            &events(&read(&case, "hai")),
            &events(&hai),
        ));
        let agui =
            translate_all(spec(&case, Dialect::Hai, Dialect::AgUi), &hai).expect("second leg");
        failures.extend(differs(
            &format!("{case}.out (in process)"),
            &events(&read(&case, "out")),
            &events(&agui),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Posts `body` to `path` and returns the whole SSE body.
async fn post(gateway: &Gateway, path: &str, body: &[u8]) -> Vec<u8> {
    let mut response = send(gateway.addr, &Request::post_json(path, body.to_vec())).await;
    assert_eq!(response.status, 200, "{path}");
    response.events_to_end().await;
    response.raw_body().to_vec()
}

#[test]
fn fixtures_through_two_gateways() {
    let cases = cases();
    let bodies: HashMap<String, Vec<u8>> =
        cases.iter().map(|c| (c.clone(), read(c, "in"))).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let agent = runtime.block_on(ScriptedUpstream::start(move |request| {
        match bodies.get(request.path.trim_start_matches('/')) {
            Some(bytes) => Script::sse_headers().bytes(bytes),
            None => Script::status_body(404, "text/plain", format!("no case {}", request.path)),
        }
    }));
    let scratch = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/hai-hop");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch directory");

    let mut failures = Vec::new();
    for case in &cases {
        let inner = Gateway::spawn(&[
            "--client",
            "hai",
            "--upstream",
            &agent.url(&format!("/{case}")),
            "--upstream-dialect",
            "ag-ui",
        ]);
        let outer = Gateway::spawn(&[
            "--client",
            "ag-ui",
            "--upstream",
            &format!("{}/chat", inner.url()),
            "--upstream-dialect",
            "hai",
        ]);
        let request = read(case, "request.json");
        let (hai, agui) = runtime.block_on(async {
            let hai = post(&inner, "/chat", &request).await;
            let agui = post(&outer, "/agent", &request).await;
            (hai, agui)
        });
        failures.extend(differs(
            &format!("{case}.hai (the first gateway)"),
            &events(&read(case, "hai")),
            &events(&hai),
        ));
        failures.extend(differs(
            &format!("{case}.out (the second gateway)"),
            &events(&read(case, "out")),
            &events(&agui),
        ));
        let capture = scratch.join(format!("{case}.hai.sse"));
        std::fs::write(&capture, &hai).expect("capture");
        let request_file = fixture_dir().join(format!("{case}.request.json"));
        if let Some(problem) = crate::hai_client::check_capture(&capture, Some(&request_file)) {
            failures.push(format!("== {case}: hai-client.mjs\n{problem}"));
        }
        for problem in
            crate::real_client::run_clean(&outer.url(), &request_file, &scratch.join(case))
        {
            failures.push(format!("== {case}: @ag-ui/client\n{problem}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
