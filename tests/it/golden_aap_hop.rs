//! The AAP hop, end to end over real sockets: an AG-UI agent (a scripted upstream replaying
//! `NAME.in`) behind an AAP face with the `agui` extension, and an AG-UI client in front of a
//! second gateway whose upstream is that face. The fixtures of `tests/fixtures/agui-aap-agui/`
//! are hand-written from the AG-UI and AAP specs and the extension's definition (README "The
//! AAP extension"): `NAME.aap` is the turn the face streams (checked by a turn posted
//! straight to the face, delta mode), `NAME.out` what the AG-UI client receives through the
//! hop (checked in delta mode for every case, and in message mode for the cases the README
//! names). Comparison: JSON value equality per event, `timestamp` ignored; in `.aap`, `"*"`
//! stands for the ids the face gives its session and runs.

use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::aap::AapClient;
use support::client::{send, Request};
use support::hai::sse_events;
use support::upstream::{Script, ScriptedUpstream};
use support::{ConfigFile, Gateway};

const DIR: &str = "agui-aap-agui";
/// The cases also run with the AAP client reading the face in `message` mode.
const MESSAGE_MODE: [&str; 2] = ["text-metadata-roles", "several-runs"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(DIR)
}

fn fixture(case: &str, ext: &str) -> PathBuf {
    dir().join(format!("{case}.{ext}"))
}

fn read(case: &str, ext: &str) -> Vec<u8> {
    let path = fixture(case, ext);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the last user message of a run input (AG-UI request or AAP turn alike).
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// Every case, by the user text its request ends with (which picks the upstream's script).
fn cases() -> Vec<(String, String)> {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("fixture directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "in"))
        .collect();
    inputs.sort();
    let cases: Vec<(String, String)> = inputs
        .iter()
        .map(|p| {
            let case = p.file_stem().unwrap().to_string_lossy().into_owned();
            let request: Value = serde_json::from_slice(&read(&case, "request.json")).unwrap();
            (case, last_user_text(&request))
        })
        .collect();
    let mut said: Vec<&String> = cases.iter().map(|(_, s)| s).collect();
    said.sort();
    said.dedup();
    assert_eq!(said.len(), cases.len(), "each case needs its own user text");
    cases
}

/// The face's gateway and the client's gateway in front of it (`mode`: how the client's
/// gateway streams the face's turns). The face writes the extension for the turns that ask
/// for it (the client's gateway always does), not by configuration.
fn gateways(upstream: &str, mode: &str) -> (Gateway, ConfigFile, Gateway, ConfigFile) {
    let face = ConfigFile::new(
        "aap-hop-face",
        &format!(
            r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{upstream}"

[routes.aap]
name = "hop"
"#
        ),
    );
    let face_gw = Gateway::spawn(&["--config", face.arg()]);
    let client = ConfigFile::new(
        "aap-hop-client",
        &format!(
            r#"[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "{}/v1"
upstream_dialect = "aap"

[routes.aap_upstream]
stream_mode = "{mode}"
"#,
            face_gw.url()
        ),
    );
    let client_gw = Gateway::spawn(&["--config", client.arg()]);
    (face_gw, face, client_gw, client)
}

fn without_timestamp(mut event: Value) -> Value {
    if let Some(map) = event.as_object_mut() {
        map.remove("timestamp");
    }
    event
}

/// JSON value equality, where the string `"*"` in `expected` stands for any string (the ids the
/// face gives its own session and runs).
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(e), Value::String(_)) if e == "*" => true,
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av)))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| matches(e, a))
        }
        _ => expected == actual,
    }
}

/// The first difference between two event lists, if any.
fn difference(expected: &[Value], actual: &[Value]) -> Option<String> {
    let at = expected
        .iter()
        .zip(actual)
        .position(|(e, a)| !matches(e, a))
        .unwrap_or(expected.len().min(actual.len()));
    (at < expected.len() || at < actual.len()).then(|| {
        format!(
            "event {at} differs\nexpected: {}\nactual:   {}\nwhole actual:\n{}",
            expected.get(at).map_or("<none>".into(), Value::to_string),
            actual.get(at).map_or("<none>".into(), Value::to_string),
            actual
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// `event: NAME\ndata: JSON` frames as `{"event": NAME, "data": JSON}`; strict: one `event:`
/// and one `data:` line per frame.
fn aap_frames(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).expect("UTF-8 stream");
    text.split_terminator("\n\n")
        .map(|frame| {
            let lines: Vec<&str> = frame.split('\n').collect();
            assert_eq!(lines.len(), 2, "an AAP event is two lines: {frame:?}");
            let event = lines[0].strip_prefix("event: ").expect("event line");
            let data = lines[1].strip_prefix("data: ").expect("data line");
            let data: Value = serde_json::from_str(data).expect("JSON data");
            json!({"event": event, "data": data})
        })
        .collect()
}

async fn upstream() -> ScriptedUpstream {
    let scripts: HashMap<String, Vec<u8>> = cases()
        .into_iter()
        .map(|(case, said)| (said, read(&case, "in")))
        .collect();
    ScriptedUpstream::start(
        move |request| match scripts.get(&last_user_text(&request.json())) {
            Some(bytes) => Script::sse_headers().bytes(bytes),
            None => Script::status_body(404, "text/plain", "no such case"),
        },
    )
    .await
}

/// The AG-UI client's stream for `case` through the hop.
async fn through_hop(client_gw: &Gateway, case: &str) -> Vec<Value> {
    let mut response = send(
        client_gw.addr,
        &Request::post_json("/agent", read(case, "request.json")),
    )
    .await;
    assert_eq!(response.status(), 200, "{case}");
    sse_events(response.read_to_end().await)
        .into_iter()
        .map(without_timestamp)
        .collect()
}

/// How the client's stream for `case` through the hop differs from `NAME.out`, if it does.
async fn hop_difference(client_gw: &Gateway, case: &str) -> Option<String> {
    let expected: Vec<Value> = sse_events(&read(case, "out"))
        .into_iter()
        .map(without_timestamp)
        .collect();
    difference(&expected, &through_hop(client_gw, case).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_runs_come_back_through_the_aap_hop() {
    let upstream = upstream().await;
    let (face_gw, _face, client_gw, _client) = gateways(&upstream.url("/agent"), "delta");
    let aap = AapClient::new(face_gw.addr, "/v1", None);
    let mut failures = Vec::new();
    let all = cases();
    assert!(all.len() >= 10, "expected the hand-written cases");
    for (case, said) in &all {
        // The middle: a turn posted straight to the face.
        let session = aap.new_session(json!({"agent": {"name": "hop"}})).await;
        let body = json!({"stream": "delta", "messages": [{"role": "user", "content": said}]});
        let request = aap
            .turn_request(&session, &body)
            .header("x-aap-extensions", "other, agui");
        let mut turn = send(face_gw.addr, &request).await;
        assert_eq!(turn.status(), 200, "{case}");
        let expected = aap_frames(&read(case, "aap"));
        let actual = aap_frames(turn.read_to_end().await);
        if let Some(d) = difference(&expected, &actual) {
            failures.push(format!("{case}.aap: {d}"));
        }
        // A turn that does not ask gets plain AAP: no extension event, no `agui` member.
        let session = aap.new_session(json!({"agent": {"name": "hop"}})).await;
        let mut plain = send(face_gw.addr, &aap.turn_request(&session, &body)).await;
        for frame in aap_frames(plain.read_to_end().await) {
            let name = frame["event"].as_str().unwrap_or_default();
            if name.starts_with("agui.") || frame["data"].get("agui").is_some() {
                failures.push(format!("{case}: a turn that did not ask got {frame}"));
            }
        }
        // The whole hop.
        if let Some(d) = hop_difference(&client_gw, case).await {
            failures.push(format!("{case}.out: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_runs_come_back_through_the_aap_hop_in_message_mode() {
    let upstream = upstream().await;
    let (_face_gw, _face, client_gw, _client) = gateways(&upstream.url("/agent"), "message");
    let mut failures = Vec::new();
    for case in MESSAGE_MODE {
        if let Some(d) = hop_difference(&client_gw, case).await {
            failures.push(format!("{case}.out (message mode): {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_wrong_expectation_is_a_difference() {
    let expected = sse_events(&read("run-error", "out"));
    let mut actual = expected.clone();
    actual[4]["code"] = json!("AAP_ERROR");
    assert!(difference(&expected, &actual).is_some());
    assert!(difference(&expected, &expected[..4]).is_some());
    assert!(difference(&expected, &expected).is_none());
    // `"*"` stands for any string, nothing else.
    assert!(matches(&json!({"runId": "*"}), &json!({"runId": "r-9"})));
    assert!(!matches(&json!({"runId": "*"}), &json!({"runId": 9})));
    assert!(!matches(&json!({"runId": "*"}), &json!({})));
}

/// Every expected client stream passes the real `@ag-ui/client` 1.0.0 (its own stages, the
/// gateway's emission rules, no console warning), seeded with the case's request.
#[test]
fn every_expected_client_stream_passes_the_real_client() {
    support::node::ensure_node();
    let mut failures = Vec::new();
    for (case, _) in cases() {
        let output = support::node::node_script("validate-stream.mjs")
            .arg(fixture(&case, "out"))
            .arg("--request")
            .arg(fixture(&case, "request.json"))
            .arg("--emission-rules")
            .output()
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let verdict: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        if !output.status.success() || verdict["verdict"] != "ok" {
            failures.push(format!(
                "{case}: {stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
