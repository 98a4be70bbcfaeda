//! `dialect-proxy translate` runs the proxy's pipeline offline: a recorded upstream stream in,
//! exactly what a client would have received out.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agui-agui")
        .join(name)
}

fn events(bytes: &[u8]) -> Vec<serde_json::Value> {
    std::str::from_utf8(bytes)
        .unwrap()
        .split_terminator("\n\n")
        .map(|f| serde_json::from_str(f.strip_prefix("data: ").expect("data frame")).unwrap())
        .collect()
}

#[test]
fn translate_a_file_with_its_request() {
    for case in ["blog-variant-run", "framing-mixed", "truncated"] {
        let out = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
            .args(["translate", "--from", "ag-ui", "--to", "ag-ui", "--request"])
            .arg(fixture(&format!("{case}.request.json")))
            .arg(fixture(&format!("{case}.in")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = std::fs::read(fixture(&format!("{case}.out"))).unwrap();
        assert_eq!(events(&out.stdout), events(&expected), "{case}");
    }
}

#[test]
fn translate_stdin_with_ids_from_flags() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
        .args([
            "translate",
            "--from",
            "ag-ui",
            "--to",
            "ag-ui",
            "--thread-id",
            "T",
            "--run-id",
            "R",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"data: {\"type\":\"text_message_chunk\",\"message_id\":\"m\",\"delta\":\"hi\"}\r\n\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let types: Vec<_> = events(&out.stdout)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "RUN_ERROR"
        ]
    );
    assert_eq!(events(&out.stdout)[0]["runId"], "R");
}

#[test]
fn an_aap_turn_translates_offline() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aap-agui");
    let out = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
        .args(["translate", "--from", "aap", "--to", "ag-ui", "--request"])
        .arg(dir.join("parallel-client-tools.request.json"))
        .arg(dir.join("parallel-client-tools.in"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(&out.stdout);
    assert_eq!(events[0]["type"], "RUN_STARTED");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert!(!last["outcome"]["pendingToolCallIds"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn an_aap_turn_translates_to_an_aap_turn_offline() {
    // Every pair translates, AAP to AAP too: an agent's permission request reaches the AAP
    // client as the agent's own call, the stop unchanged.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aap-aap");
    let out = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
        .args(["translate", "--from", "aap", "--to", "aap"])
        .arg(dir.join("permission.in"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = support::aap::parse_aap_stream(&out.stdout);
    assert_eq!(
        support::aap::event_names(&events),
        ["turn_start", "tool_call", "turn_stop"]
    );
    assert_eq!(events[1].1["name"], "web_fetch");
    assert_eq!(support::aap::stop_reason(&events), "tool_use");
}
