//! What ZTE's `hai-client` would make of the gateway's HAI streams (`hai.md` §6). The client is
//! not public, so `tests/node/hai-client.mjs` reads a stream the way it and its demo UI do (the
//! `}{` buffer parse after every business-data event, `JSON.parse` of collaboration and
//! tool-argument buffers, `fast-json-patch` for state deltas, ...) and fails on anything they
//! would choke on; it prints a JSON summary of what the UI would show.
//!
//! - `harness_accepts_good_samples_and_rejects_bad_ones`: the checker itself, on the hand-written
//!   streams of `tests/node/hai-samples/`.
//! - `every_agui_hai_fixture_output_satisfies_hai_client`: every expected HAI stream of
//!   `tests/fixtures/agui-hai/` written with the default writer profile.
//! - `demo_agent_through_gateway_satisfies_hai_client`: `--client hai --upstream builtin:demo`
//!   over real TCP, a plain turn and a turn declaring a frontend tool.
//!
//! The Node dependencies are installed on first use when missing (`support::node`); a failed
//! install fails the tests. Scratch files (request bodies, captures) go to `target/hai-client/`.

use crate::support;

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    time::Duration,
};

use dialect_proxy::demo::script::{BACKEND_TOOL, MULTI_BYTE_GREETING};
use serde_json::{json, Value};
use support::node::{ensure_node, node_dir, node_script};
use support::process::run_command;
use support::Gateway;

/// Outer limit for one checker process; with `--url` it also gets `--timeout`. Only the point at
/// which a hang is declared a failure, never expected to be reached.
const NODE_PATIENCE: Duration = Duration::from_secs(120);
/// Limit handed to `hai-client.mjs --timeout` (ms) for one request.
const RUN_TIMEOUT_MS: &str = "60000";
/// The line of a `bad-*` sample naming the text its error must contain (an SSE comment).
const EXPECT_PREFIX: &str = ": expect: ";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory `target/hai-client/<name>/` (stale captures removed).
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target/hai-client").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The files `*.<extension>` directly in `dir`, sorted.
fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn write_json(path: &Path, value: &Value) {
    let bytes = serde_json::to_vec_pretty(value).expect("a serde_json::Value always serialises");
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

// === running the checker ===

/// One run of `hai-client.mjs`: its JSON summary and how it ended.
struct Check {
    summary: Value,
    code: Option<i32>,
    stderr: String,
    /// The command line, for failure messages.
    what: String,
}

impl Check {
    fn errors(&self) -> Vec<String> {
        strings(&self.summary["errors"])
    }

    fn passed(&self) -> bool {
        self.code == Some(0) && self.errors().is_empty()
    }

    /// The summary without the parsed outputs, then the exit code and stderr, for failure
    /// messages.
    fn report(&self) -> String {
        let mut summary = self.summary.clone();
        if let Some(messages) = summary.get_mut("messages") {
            *messages = json!(format!(
                "<{} business messages>",
                messages.as_array().map_or(0, Vec::len)
            ));
        }
        let pretty = serde_json::to_string_pretty(&summary).unwrap_or_else(|_| summary.to_string());
        format!(
            "{pretty}\n({} exited {:?}; stderr:\n{})",
            self.what,
            self.code,
            self.stderr.trim_end()
        )
    }

    /// `summary[key]` as an object's values (`text`, `thinking`).
    fn texts(&self, key: &str) -> Vec<String> {
        self.summary[key]
            .as_object()
            .map(|map| {
                map.values()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn tool_calls(&self) -> Vec<Value> {
        self.summary["toolCalls"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// The strings of a JSON array (anything else as its JSON text).
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `node tests/node/hai-client.mjs <args>`; panics if it cannot run or prints no summary
/// (a crash, or a usage error).
fn hai_client(args: &[OsString]) -> Check {
    let mut command = node_script("hai-client.mjs");
    command.args(args);
    let what = format!("{command:?}");
    let ran = run_command(&mut command, NODE_PATIENCE).unwrap_or_else(|e| panic!("{e}"));
    let summary = ran
        .stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| {
            panic!(
                "{what} printed no JSON summary (exit {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
                ran.code, ran.stdout, ran.stderr
            )
        });
    Check {
        summary,
        code: ran.code,
        stderr: ran.stderr,
        what,
    }
}

// === the checker on its own samples ===

/// The texts of the `: expect: …` lines of a sample.
fn expectations(sample: &Path) -> Vec<String> {
    let bytes =
        std::fs::read(sample).unwrap_or_else(|e| panic!("cannot read {}: {e}", sample.display()));
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| line.strip_prefix(EXPECT_PREFIX))
        .map(|text| text.trim_end().to_owned())
        .filter(|text| !text.is_empty())
        .collect()
}

/// What is wrong with the checker's verdict on one sample (`ok-*` must pass, `bad-*` must fail
/// with an error, also printed on stderr, containing each of its `: expect:` texts).
fn sample_problems(sample: &Path) -> Vec<String> {
    let name = file_stem(sample);
    let expected = expectations(sample);
    if name.starts_with("ok-") {
        let check = hai_client(&[OsString::from(sample)]);
        return match (check.passed(), expected.is_empty()) {
            (true, true) => Vec::new(),
            (false, _) => vec![format!(
                "{name}: a valid stream was rejected\n{}",
                check.report()
            )],
            (true, false) => vec![format!("{name}: an ok- sample has `{EXPECT_PREFIX}` lines")],
        };
    }
    if !name.starts_with("bad-") {
        return vec![format!("{name}: sample names start with ok- or bad-")];
    }
    if expected.is_empty() {
        return vec![format!(
            "{name}: no `{EXPECT_PREFIX}<text>` line naming the error it must cause"
        )];
    }
    let check = hai_client(&[OsString::from(sample)]);
    let errors = check.errors();
    let mut problems = Vec::new();
    if check.code != Some(1) || errors.is_empty() {
        problems.push(format!(
            "{name}: expected exit 1 with errors, got exit {:?} with {} error(s)",
            check.code,
            errors.len()
        ));
    }
    for text in &expected {
        if !errors.iter().any(|e| e.contains(text.as_str()))
            || !check.stderr.contains(text.as_str())
        {
            problems.push(format!("{name}: no error mentions {text:?}"));
        }
    }
    if !problems.is_empty() {
        problems.push(check.report());
    }
    problems
}

#[test]
fn harness_accepts_good_samples_and_rejects_bad_ones() {
    ensure_node();
    let dir = node_dir().join("hai-samples");
    let samples = files_with_extension(&dir, "sse");
    let count = |prefix: &str| {
        samples
            .iter()
            .filter(|s| file_stem(s).starts_with(prefix))
            .count()
    };
    assert!(
        count("ok-") >= 3 && count("bad-") >= 10,
        "expected the hand-written samples in {}, found {samples:?}",
        dir.display()
    );

    let problems: Vec<String> = samples.iter().flat_map(|s| sample_problems(s)).collect();
    assert!(
        problems.is_empty(),
        "the HAI checker misjudges its samples:\n\n{}",
        problems.join("\n\n")
    );
}

// === the agui-hai fixtures ===

#[test]
fn every_agui_hai_fixture_output_satisfies_hai_client() {
    ensure_node();
    let dir = root().join("tests/fixtures/agui-hai");
    let outputs = files_with_extension(&dir, "out");
    assert!(
        outputs.len() >= 5,
        "expected the AG-UI → HAI fixtures in {}, found {outputs:?}",
        dir.display()
    );

    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for output in &outputs {
        let case = file_stem(output);
        // `NAME.options.json` picks a non-default writer profile (`translation.md` §0.1:
        // `plain_text` deltas, streamed tool arguments, ...). Only the default profile promises
        // what hai-client needs (`hai.md` §6, §9).
        if dir.join(format!("{case}.options.json")).exists() {
            continue;
        }
        let mut args = vec![OsString::from(output)];
        let request = dir.join(format!("{case}.request.json"));
        if request.is_file() {
            args.push("--request".into());
            args.push(request.into());
        }
        let check = hai_client(&args);
        if !check.passed() {
            failures.push(format!("=== {case} ===\n{}", check.report()));
        }
        checked.push(case);
    }
    assert!(
        checked.len() >= 5,
        "expected at least 5 default-profile fixtures in {}, checked {checked:?}",
        dir.display()
    );
    assert!(
        failures.is_empty(),
        "{} of {} AG-UI → HAI fixture outputs would break hai-client:\n\n{}",
        failures.len(),
        checked.len(),
        failures.join("\n\n")
    );
}

// === the demo agent through the gateway ===

/// `hai.md` §4's frontend confirm tool.
fn confirm_action_tool() -> Value {
    json!({
        "name": "confirmAction",
        "description": "Ask the user to confirm an action",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string"},
                "importance": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            },
            "required": ["action"],
        },
    })
}

/// POSTs one HAI request (`tools` declared) to `url` through the checker, which must accept the
/// response; the request body and the captured stream are kept in `dir` as `<name>.*`.
fn demo_turn(dir: &Path, url: &str, name: &str, tools: Value) -> Check {
    let body = dir.join(format!("{name}.request.json"));
    write_json(
        &body,
        &json!({
            "threadId": format!("hai-demo-{name}"),
            "runId": format!("hai-{name}-1"),
            "messages": [
                {"id": format!("hai-user-{name}"), "role": "user", "content": "hello", "timestamp": 1760000000000_u64},
            ],
            "context": [],
            "tools": tools,
        }),
    );
    let capture = dir.join(format!("{name}.sse"));
    let args = [
        OsString::from("--url"),
        OsString::from(url),
        OsString::from("--body"),
        OsString::from(body),
        OsString::from("--timeout"),
        OsString::from(RUN_TIMEOUT_MS),
        OsString::from("--capture"),
        OsString::from(&capture),
    ];
    let check = hai_client(&args);
    assert!(
        check.passed(),
        "demo, {name} turn: hai-client would choke (stream in {}):\n{}",
        capture.display(),
        check.report()
    );
    assert_eq!(
        check.summary["http"]["status"],
        200,
        "demo, {name} turn:\n{}",
        check.report()
    );
    assert_eq!(
        check.summary["terminal"]["type"],
        "RUN_FINISHED",
        "demo, {name} turn:\n{}",
        check.report()
    );
    check
}

/// What every demo turn shows: the echo, the reasoning, the backend tool answered in the run
/// with its arguments merged into one object, state snapshot + delta applied, the step.
fn check_demo_turn(check: &Check, what: &str) {
    let report = || check.report();
    let texts = check.texts("text");
    assert!(
        texts.iter().any(|t| t.contains("hello")),
        "{what}: no text quotes the user's \"hello\": {texts:?}\n{}",
        report()
    );
    assert!(
        texts.iter().any(|t| t.contains(MULTI_BYTE_GREETING)),
        "{what}: the multi-byte greeting {MULTI_BYTE_GREETING:?} did not survive: {texts:?}\n{}",
        report()
    );
    assert!(
        check.texts("thinking").iter().any(|t| !t.is_empty()),
        "{what}: no thinking content\n{}",
        report()
    );

    let calls = check.tool_calls();
    assert!(
        calls.iter().any(|c| c["args"].is_object()),
        "{what}: no tool call with object arguments\n{}",
        report()
    );
    let backend = calls
        .iter()
        .find(|c| c["name"] == BACKEND_TOOL)
        .unwrap_or_else(|| panic!("{what}: no {BACKEND_TOOL} call\n{}", report()));
    // The demo streams these arguments in three fragments; hai-client needs them as one object.
    assert_eq!(
        backend["args"],
        json!({"city": "Zürich"}),
        "{what}: {backend}"
    );
    assert!(
        backend["result"].is_string(),
        "{what}: the backend call has no TOOL_CALL_RESULT: {backend}"
    );

    let state = &check.summary["state"];
    assert!(
        state.as_object().is_some_and(|s| !s.is_empty()),
        "{what}: no state\n{}",
        report()
    );
    assert_eq!(
        state["status"], "answering",
        "{what}: the STATE_DELTA was not applied to the snapshot: {state}"
    );
    assert!(
        state["weather"].is_object(),
        "{what}: the STATE_DELTA was not applied to the snapshot: {state}"
    );
    assert!(
        !strings(&check.summary["steps"]).is_empty(),
        "{what}: no step\n{}",
        report()
    );
}

/// The tool calls the run left for the UI (no `TOOL_CALL_RESULT`).
fn unanswered_calls(check: &Check) -> Vec<Value> {
    check
        .tool_calls()
        .into_iter()
        .filter(|c| c.get("result").is_none())
        .collect()
}

#[test]
fn demo_agent_through_gateway_satisfies_hai_client() {
    ensure_node();
    let dir = scratch("demo");
    let gateway = Gateway::spawn(&["--client", "hai", "--upstream", "builtin:demo"]);
    let url = format!("{}/chat", gateway.url());

    // 1. A plain turn: nothing is left for the UI.
    let plain = demo_turn(&dir, &url, "plain", json!([]));
    check_demo_turn(&plain, "demo, plain turn");
    assert_eq!(
        unanswered_calls(&plain),
        Vec::<Value>::new(),
        "demo, plain turn: nothing may be pending without frontend tools"
    );

    // 2. A turn declaring the frontend tool `confirmAction`: the demo calls the first declared
    //    tool with arguments `{}` after its closing message, and leaves it to the UI.
    let tool = demo_turn(&dir, &url, "frontend-tool", json!([confirm_action_tool()]));
    check_demo_turn(&tool, "demo, frontend-tool turn");
    let pending = unanswered_calls(&tool);
    assert_eq!(
        pending.len(),
        1,
        "demo, frontend-tool turn: expected one call left for the UI, got {pending:?}\n{}",
        tool.report()
    );
    assert_eq!(pending[0]["name"], "confirmAction", "{}", pending[0]);
    assert_eq!(
        pending[0]["args"],
        json!({}),
        "demo, frontend-tool turn: the frontend call's arguments: {}",
        pending[0]
    );
    let texts = tool.texts("text");
    assert!(
        texts.iter().any(|t| t.contains("`confirmAction`")),
        "demo, frontend-tool turn: the closing message does not name the frontend tool: {texts:?}"
    );
}

/// What `hai-client.mjs` says of the HAI stream in `capture` (with the request beside it, when
/// given): `None` when it would accept it. For other modules' captures.
pub(crate) fn check_capture(capture: &Path, request: Option<&Path>) -> Option<String> {
    ensure_node();
    let mut args = vec![OsString::from(capture)];
    if let Some(request) = request {
        args.push("--request".into());
        args.push(request.into());
    }
    let check = hai_client(&args);
    (!check.passed()).then(|| check.report())
}
