//! The real clients as validators of the whole gateway (`agui.md` §8): the official
//! `@ag-ui/client` 1.0.0 `HttpAgent` (`tests/node/run-agent.mjs`) talks to the real binary over
//! real TCP, and every byte it received is checked again offline by the client's own stages with
//! the gateway's emission rules (`tests/node/validate-stream.mjs --emission-rules`) and by the
//! official Python SDK `ag-ui-protocol` 1.0.0 (`tests/python/validate_events.py`).
//!
//! - `demo_agent_through_gateway_is_clean`: `--upstream builtin:demo`, a plain turn, then a
//!   frontend-tool turn answered in a second run on the same agent.
//! - `every_hai_backend_fixture_through_gateway_is_clean`: the same for the HAI streams of
//!   `tests/fixtures/hai-agui/`, served by a HAI upstream (the AG-UI side of a HAI backend).
//! - `every_fixture_through_gateway_is_clean`: each hand-written vendor stream of
//!   `tests/fixtures/agui-agui/` served by a scripted upstream, through its own gateway.
//! - `random_streams_after_translation_pass_the_real_client`: random vendor streams after the
//!   gateway's pipeline, checked offline by both real clients.
//!
//! The Node and Python dependencies are installed on first use (once per test process) when they
//! are missing; a failed install fails the tests, they are never skipped. Scratch files (request
//! files, captures) go to `target/real-client/`.

use crate::support;

use std::{
    collections::{HashMap, VecDeque},
    panic::{catch_unwind, AssertUnwindSafe},
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    thread,
    time::Duration,
};

use serde_json::{json, Value};
use support::node::{node_script, provision_node};
use support::process::run_command;
use support::python::{provision_python, python};
use support::{event_types, Gateway, Script, ScriptedUpstream};

/// Outer limit for one validator process; `run-agent.mjs` also gets `--timeout` per run. Only the
/// point at which a hang is declared a failure, never expected to be reached.
const NODE_PATIENCE: Duration = Duration::from_secs(120);
/// Per-run limit handed to `run-agent.mjs --timeout` (ms).
const RUN_TIMEOUT_MS: &str = "60000";
/// Fixture cases checked at once (each one runs a gateway and three validator processes).
const FIXTURE_WORKERS: usize = 2;

// === paths and provisioning ===

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory `target/real-client/<name>/` (stale captures removed).
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target/real-client").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Installs what the validators need, once per test process (`support::node` and
/// `support::python` share one install with the other modules); panics with the installer's
/// output when that fails. A no-op when `.ci/run` has already installed both.
fn provision() {
    if let Err(problem) = provision_node().and_then(|()| provision_python()) {
        panic!("real-client validators are not installed and installing them failed:\n{problem}");
    }
}

// === validators ===

/// A validator's one-line JSON verdict and how the process ended.
struct Verdict {
    json: Value,
    exit_ok: bool,
    /// Exit code and stderr, for failure messages.
    context: String,
}

impl Verdict {
    fn str(&self, key: &str) -> &str {
        self.json[key].as_str().unwrap_or("<missing>")
    }

    fn problems(&self) -> Vec<String> {
        self.json["problems"]
            .as_array()
            .map(|p| {
                p.iter()
                    .map(|v| v.as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_else(|| vec!["<verdict has no problems array>".into()])
    }

    /// The verdict's summary without the (long) event lists, for failure messages.
    fn summary(&self) -> String {
        let mut json = self.json.clone();
        if let Some(runs) = json.get_mut("runs").and_then(Value::as_array_mut) {
            for run in runs {
                if let Some(events) = run.get_mut("events") {
                    *events = json!(event_types(events.as_array().map_or(&[][..], |v| v)));
                }
            }
        }
        if let Some(messages) = json.get_mut("messages") {
            *messages = json!(format!(
                "<{} messages>",
                messages.as_array().map_or(0, Vec::len)
            ));
        }
        format!("{json}\n{}", self.context)
    }
}

/// Runs a validator that prints one JSON line; `Err` when it could not run or printed no JSON.
fn run_validator(mut command: Command, patience: Duration) -> Result<Verdict, String> {
    let what = format!("{command:?}");
    let ran = run_command(&mut command, patience)?;
    let last_line = ran.stdout.lines().rev().find(|l| !l.trim().is_empty());
    let json = last_line
        .and_then(|line| serde_json::from_str::<Value>(line).ok())
        .ok_or_else(|| {
            format!(
                "{what} printed no JSON verdict (exit {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
                ran.code, ran.stdout, ran.stderr
            )
        })?;
    let stderr_tail: String = {
        let lines: Vec<&str> = ran.stderr.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    Ok(Verdict {
        json,
        exit_ok: ran.success,
        context: format!(
            "({what} exited {:?}; stderr tail:\n{stderr_tail})",
            ran.code
        ),
    })
}

/// `run-agent.mjs --url URL --request REQUEST [--runs ...] --capture PREFIX`.
fn run_agent(url: &str, request: &Path, runs: &[&Path], capture: &Path) -> Result<Verdict, String> {
    let mut command = node_script("run-agent.mjs");
    command
        .args(["--url", url, "--timeout", RUN_TIMEOUT_MS, "--request"])
        .arg(request)
        .arg("--capture")
        .arg(capture);
    if !runs.is_empty() {
        command.arg("--runs").args(runs);
    }
    run_validator(command, NODE_PATIENCE)
}

/// Problems of a client verdict: anything but "ok" with exit 0 and no problems.
fn verdict_problems(verdict: &Verdict, what: &str) -> Vec<String> {
    let problems = verdict.problems();
    if verdict.str("verdict") == "ok" && verdict.exit_ok && problems.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{what}: verdict {:?}, problems {problems:?}\n{}",
        verdict.str("verdict"),
        verdict.summary()
    )]
}

/// Checks one captured stream with `validate_events.py` and `validate-stream.mjs
/// --emission-rules` (seeded from `request` when given). Returns the problems found.
fn validate_capture(capture: &Path, request: Option<&Path>) -> Vec<String> {
    let name = capture.display();
    let mut problems = Vec::new();
    match std::fs::metadata(capture) {
        Ok(meta) if meta.len() > 0 => {}
        Ok(_) => return vec![format!("{name}: capture is empty")],
        Err(e) => return vec![format!("{name}: no capture ({e})")],
    }

    let mut python_check = Command::new(python());
    python_check
        .arg(root().join("tests/python/validate_events.py"))
        .arg(capture);
    match run_validator(python_check, NODE_PATIENCE) {
        Err(e) => problems.push(format!("{name}: validate_events.py: {e}")),
        Ok(v) => {
            let count = v.json["count"].as_u64().unwrap_or(0);
            if v.str("verdict") != "ok" || !v.exit_ok || count == 0 || !v.problems().is_empty() {
                problems.push(format!(
                    "{name}: validate_events.py (ag-ui-protocol): verdict {:?}, count {count}, \
                     problems {:?}\n{}",
                    v.str("verdict"),
                    v.problems(),
                    v.context
                ));
            }
        }
    }

    let mut replay = node_script("validate-stream.mjs");
    replay.arg(capture).arg("--emission-rules");
    if let Some(request) = request {
        replay.arg("--request").arg(request);
    }
    match run_validator(replay, NODE_PATIENCE) {
        Err(e) => problems.push(format!("{name}: validate-stream.mjs: {e}")),
        Ok(v) => {
            problems.extend(verdict_problems(
                &v,
                &format!("{name}: validate-stream.mjs --emission-rules"),
            ));
            if v.json["parsedCount"].as_u64().unwrap_or(0) == 0 {
                problems.push(format!("{name}: validate-stream.mjs parsed no event"));
            }
        }
    }
    problems
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap())
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// `PREFIX-N.sse`, as `run-agent.mjs --capture PREFIX` names run N.
fn capture_file(prefix: &Path, run: usize) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!("-{run}.sse"));
    PathBuf::from(name)
}

// === reading verdicts ===

/// The events the client delivered for run `n` (0-based).
fn run_events(verdict: &Verdict, n: usize) -> Vec<Value> {
    verdict.json["runs"][n]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `(messageId, text)` of every text message in `events`, in start order, from the deltas.
fn streamed_texts(events: &[Value]) -> Vec<(String, String)> {
    let mut texts: Vec<(String, String)> = Vec::new();
    for event in events {
        let id = event["messageId"].as_str().unwrap_or("").to_string();
        match event["type"].as_str() {
            Some("TEXT_MESSAGE_START") => texts.push((id, String::new())),
            Some("TEXT_MESSAGE_CONTENT") => {
                if let Some((_, text)) = texts.iter_mut().rev().find(|(m, _)| *m == id) {
                    text.push_str(event["delta"].as_str().unwrap_or(""));
                }
            }
            _ => {}
        }
    }
    texts
}

/// The message with `id` in the reducer's `messages`.
fn message<'a>(verdict: &'a Verdict, id: &str) -> Option<&'a Value> {
    verdict.json["messages"]
        .as_array()?
        .iter()
        .find(|m| m["id"] == id)
}

/// Asserts every streamed text message reached the reducer's `messages` as an assistant message
/// with exactly the streamed text; returns the texts.
fn assert_texts_reduced(verdict: &Verdict, events: &[Value], what: &str) -> Vec<String> {
    let texts = streamed_texts(events);
    assert!(!texts.is_empty(), "{what}: no text message streamed");
    for (id, text) in &texts {
        let reduced = message(verdict, id).unwrap_or_else(|| {
            panic!(
                "{what}: text message {id} is not in the client's messages\n{}",
                verdict.json["messages"]
            )
        });
        assert_eq!(reduced["role"], "assistant", "{what}: message {reduced}");
        assert_eq!(
            reduced["content"].as_str(),
            Some(text.as_str()),
            "{what}: the reducer's message {id} differs from its deltas"
        );
    }
    texts.into_iter().map(|(_, text)| text).collect()
}

/// The `outcome.pendingToolCallIds` the client reported for run `n`.
fn pending_tool_calls(verdict: &Verdict, n: usize) -> Vec<String> {
    verdict.json["runs"][n]["outcome"]["pendingToolCallIds"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .map(|id| id.as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_clean(verdict: &Verdict, what: &str) {
    let problems = verdict_problems(verdict, what);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn assert_validated(capture: &Path, request: Option<&Path>) {
    let problems = validate_capture(capture, request);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

// === the demo agent ===

const TOOL_RESULT: &str = "confirmed ✓ — delete the draft";

fn confirm_action_tool() -> Value {
    json!({
        "name": "confirmAction",
        "description": "Ask the user to confirm a dangerous action",
        "parameters": {
            "type": "object",
            "properties": {"action": {"type": "string"}},
            "required": ["action"],
        },
    })
}

/// What a demo turn must contain, as the client saw it.
const TURN_TYPES: &[&str] = &[
    "RUN_STARTED",
    "STATE_SNAPSHOT",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_DELTA",
    "RUN_FINISHED",
];

/// Checks one demo turn (run `n` of `verdict`): expected events, a backend tool answered in the
/// run and reduced into a tool message, text reduced, state snapshot + delta applied.
fn check_demo_turn(verdict: &Verdict, n: usize, user_text: &str, what: &str) {
    let events = run_events(verdict, n);
    let types = event_types(&events);
    for expected in TURN_TYPES {
        assert!(
            types.iter().any(|t| t == expected),
            "{what}: no {expected} among {types:?}"
        );
    }
    assert_eq!(types.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(types.last().map(String::as_str), Some("RUN_FINISHED"));
    let http = &verdict.json["runs"][n]["http"];
    assert_eq!(http["status"], 200, "{what}: {http}");
    assert!(
        http["contentType"]
            .as_str()
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "{what}: {http}"
    );

    // The backend tool: its result came in the same run and became a tool message.
    for result in events.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT") {
        let call = result["toolCallId"].as_str().unwrap_or("");
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == call),
            "{what}: TOOL_CALL_RESULT for a call never started: {result}"
        );
        let id = result["messageId"].as_str().unwrap_or("");
        let reduced = message(verdict, id)
            .unwrap_or_else(|| panic!("{what}: tool result {id} not in the client's messages"));
        assert_eq!(reduced["role"], "tool", "{what}: {reduced}");
        assert_eq!(reduced["toolCallId"], call, "{what}: {reduced}");
        assert_eq!(reduced["content"], result["content"], "{what}: {reduced}");
    }

    // The assistant's text reached `messages`; the echo quotes the user.
    let texts = assert_texts_reduced(verdict, &events, what);
    assert!(
        texts.iter().any(|t| t.contains(user_text)),
        "{what}: no assistant text quotes the user's {user_text:?}: {texts:?}"
    );

    // The reasoning message reached `messages` too.
    let reasoning_id = events
        .iter()
        .find(|e| e["type"] == "REASONING_MESSAGE_START")
        .and_then(|e| e["messageId"].as_str())
        .unwrap_or("");
    let reasoning = message(verdict, reasoning_id)
        .unwrap_or_else(|| panic!("{what}: reasoning message {reasoning_id} not reduced"));
    assert_eq!(reasoning["role"], "reasoning", "{what}: {reasoning}");
    assert!(
        reasoning["content"].as_str().is_some_and(|c| !c.is_empty()),
        "{what}: {reasoning}"
    );

    // Snapshot then delta: every added/replaced path of the last delta is in the final state.
    let state = &verdict.json["state"];
    assert!(
        state.as_object().is_some_and(|s| !s.is_empty()),
        "{what}: client state is {state}"
    );
    let delta = events
        .iter()
        .rev()
        .find(|e| e["type"] == "STATE_DELTA")
        .unwrap();
    for op in delta["delta"].as_array().into_iter().flatten() {
        if matches!(op["op"].as_str(), Some("add" | "replace")) {
            let path = op["path"].as_str().unwrap_or("");
            assert_eq!(
                state.pointer(path),
                Some(&op["value"]),
                "{what}: STATE_DELTA op {op} not applied to the client state {state}"
            );
        }
    }
}

#[test]
fn demo_agent_through_gateway_is_clean() {
    provision();
    let dir = scratch("demo");
    let gateway = Gateway::spawn(&["--upstream", "builtin:demo"]);
    let url = gateway.url();

    // 1. A plain turn, no client tools.
    let plain_text = "Hello from the real client, grüß dich 👋";
    let plain = dir.join("plain.request.json");
    write_json(
        &plain,
        &json!({
            "threadId": "rc-demo-plain",
            "runId": "rc-plain-1",
            "messages": [{"id": "rc-user-1", "role": "user", "content": plain_text}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }),
    );
    let prefix = dir.join("plain");
    let verdict = run_agent(&url, &plain, &[], &prefix).unwrap_or_else(|e| panic!("{e}"));
    assert_clean(&verdict, "demo, plain turn");
    check_demo_turn(&verdict, 0, plain_text, "demo, plain turn");
    assert_eq!(
        pending_tool_calls(&verdict, 0),
        Vec::<String>::new(),
        "demo, plain turn: nothing may be pending without client tools"
    );
    assert_validated(&capture_file(&prefix, 1), Some(&plain));

    // 2. A turn with the frontend tool `confirmAction` declared: the run ends with the call
    //    pending. First run alone, to learn the pending call id.
    let tool_text = "Please delete the draft";
    let tool_thread = "rc-demo-tool";
    let tool_messages = json!([{"id": "rc-user-2", "role": "user", "content": tool_text}]);
    let turn = dir.join("tool.request.json");
    write_json(
        &turn,
        &json!({
            "threadId": tool_thread,
            "runId": "rc-tool-1",
            "messages": tool_messages,
            "tools": [confirm_action_tool()],
            "context": [],
            "forwardedProps": {},
        }),
    );
    let prefix_a = dir.join("tool-a");
    let first = run_agent(&url, &turn, &[], &prefix_a).unwrap_or_else(|e| panic!("{e}"));
    assert_clean(&first, "demo, tool turn");
    check_demo_turn(&first, 0, tool_text, "demo, tool turn");
    let pending = pending_tool_calls(&first, 0);
    assert_eq!(
        pending.len(),
        1,
        "demo, tool turn: expected one pending frontend call, got {pending:?}\n{}",
        first.summary()
    );
    let call_id = pending[0].clone();
    let events = run_events(&first, 0);
    assert!(
        events.iter().any(|e| e["type"] == "TOOL_CALL_START"
            && e["toolCallId"] == call_id.as_str()
            && e["toolCallName"] == "confirmAction"),
        "demo, tool turn: pending {call_id} is not a confirmAction call: {:?}",
        event_types(&events)
    );
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == call_id.as_str()),
        "demo, tool turn: the frontend call {call_id} must not get a TOOL_CALL_RESULT"
    );
    assert_validated(&capture_file(&prefix_a, 1), Some(&turn));

    // Then the same turn and a second run on the same agent answering the pending call.
    let tool_message = json!({
        "id": "rc-tool-result-1",
        "role": "tool",
        "toolCallId": call_id,
        "content": TOOL_RESULT,
    });
    let reply = dir.join("tool.run2.json");
    write_json(
        &reply,
        &json!({
            "runId": "rc-tool-2",
            "tools": [confirm_action_tool()],
            "context": [],
            "forwardedProps": {},
            "appendMessages": [tool_message],
        }),
    );
    let prefix_b = dir.join("tool-b");
    let both = run_agent(&url, &turn, &[&reply], &prefix_b).unwrap_or_else(|e| panic!("{e}"));
    assert_clean(&both, "demo, tool turn + reply");
    let runs = both.json["runs"].as_array().map_or(0, Vec::len);
    assert_eq!(runs, 2, "demo, tool turn + reply: {}", both.summary());
    assert_eq!(
        pending_tool_calls(&both, 0),
        vec![call_id.clone()],
        "demo: the replayed turn must leave the same call pending"
    );
    assert_eq!(
        pending_tool_calls(&both, 1),
        Vec::<String>::new(),
        "demo, reply run: nothing pending after the tool result"
    );
    let reply_events = run_events(&both, 1);
    let reply_types = event_types(&reply_events);
    assert_eq!(reply_types.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(reply_types.last().map(String::as_str), Some("RUN_FINISHED"));
    let texts = assert_texts_reduced(&both, &reply_events, "demo, reply run");
    assert!(
        texts.iter().any(|t| t.contains(TOOL_RESULT)),
        "demo, reply run: no text quotes the tool result {TOOL_RESULT:?}: {texts:?}"
    );
    let reduced = message(&both, "rc-tool-result-1").expect("the tool message stays in messages");
    assert_eq!(reduced["toolCallId"], call_id.as_str());
    let last = both.json["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["role"], "assistant", "last message: {last}");
    assert!(
        last["content"]
            .as_str()
            .is_some_and(|c| c.contains(TOOL_RESULT)),
        "the last message must quote the tool result: {last}"
    );

    assert_validated(&capture_file(&prefix_b, 1), Some(&turn));
    // The reply run's capture, seeded with the history the agent sent for it.
    let mut history = first.json["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    history.push(tool_message);
    let reply_seed = dir.join("tool.run2.request.json");
    write_json(
        &reply_seed,
        &json!({
            "threadId": tool_thread,
            "runId": "rc-tool-2",
            "messages": history,
            "tools": [confirm_action_tool()],
            "context": [],
        }),
    );
    assert_validated(&capture_file(&prefix_b, 2), Some(&reply_seed));
}

// === the hand-written fixtures ===

/// A directory of hand-written fixtures served by an upstream of `upstream_dialect`.
#[derive(Clone, Copy)]
struct FixtureSet {
    dir: &'static str,
    upstream_dialect: &'static str,
}

const AGUI_FIXTURES: FixtureSet = FixtureSet {
    dir: "agui-agui",
    upstream_dialect: "ag-ui",
};

const HAI_FIXTURES: FixtureSet = FixtureSet {
    dir: "hai-agui",
    upstream_dialect: "hai",
};

fn fixture_dir(set: FixtureSet) -> PathBuf {
    root().join("tests/fixtures").join(set.dir)
}

/// Case names (`NAME` of `NAME.in`), sorted.
fn fixture_cases(set: FixtureSet) -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(fixture_dir(set))
        .expect("fixture directory")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".in"))
                .map(str::to_string)
        })
        .collect();
    cases.sort();
    cases
}

/// The `data:` payloads of canonical `data: <json>\n\n` SSE, parsed.
fn sse_events(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    text.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .filter_map(|frame| {
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .map(|json| serde_json::from_str(&json).map_err(|e| format!("bad JSON {json}: {e}")))
        .collect()
}

/// Runs one fixture through its own gateway; returns what went wrong.
fn check_fixture(set: FixtureSet, case: &str, upstream: &str, dir: &Path) -> Vec<String> {
    let request = fixture_dir(set).join(format!("{case}.request.json"));
    let expected_bytes = std::fs::read(fixture_dir(set).join(format!("{case}.out")))
        .unwrap_or_else(|e| panic!("{case}.out: {e}"));
    let expected = sse_events(&expected_bytes).unwrap_or_else(|e| panic!("{case}.out: {e}"));
    let expected = without_truncation_text(expected);
    let expected_types = event_types(&expected);

    let gateway = Gateway::spawn(&[
        "--client",
        "ag-ui",
        "--upstream",
        &format!("{upstream}/{case}"),
        "--upstream-dialect",
        set.upstream_dialect,
    ]);
    let prefix = dir.join(case);
    let verdict = match run_agent(&gateway.url(), &request, &[], &prefix) {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let mut problems = verdict_problems(&verdict, "@ag-ui/client HttpAgent");

    let seen = event_types(&run_events(&verdict, 0));
    if seen != expected_types {
        problems.push(format!(
            "the client saw\n    {seen:?}\n  expected the types of {case}.out\n    {expected_types:?}"
        ));
    }

    let capture = capture_file(&prefix, 1);
    match std::fs::read(&capture)
        .map_err(|e| e.to_string())
        .and_then(|b| sse_events(&b))
        .map(without_truncation_text)
    {
        Ok(wire) if wire != expected => problems.push(format!(
            "the gateway's bytes differ from {case}.out:\n{}",
            support::diff_events(&expected, &wire)
        )),
        Ok(_) => {}
        Err(e) => problems.push(format!("capture {}: {e}", capture.display())),
    }
    problems.extend(validate_capture(&capture, Some(&request)));

    if !problems.is_empty() {
        let log = gateway.stderr();
        let lines: Vec<&str> = log.lines().collect();
        problems.push(format!(
            "gateway stderr (tail):\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n")
        ));
    }
    problems
}

/// The message of a synthesised `UPSTREAM_TRUNCATED` error is free text, not part of the contract.
fn without_truncation_text(mut events: Vec<Value>) -> Vec<Value> {
    for e in &mut events {
        if e["type"] == "RUN_ERROR" && e["code"] == "UPSTREAM_TRUNCATED" {
            if let Some(map) = e.as_object_mut() {
                map.remove("message");
            }
        }
    }
    events
}

#[test]
fn every_fixture_through_gateway_is_clean() {
    fixtures_through_gateway(AGUI_FIXTURES);
}

/// The AG-UI side of a HAI backend (`translation.md` §3.3): each hand-written HAI stream served
/// by a HAI upstream, read by the real client through the gateway.
#[test]
fn every_hai_backend_fixture_through_gateway_is_clean() {
    fixtures_through_gateway(HAI_FIXTURES);
}

fn fixtures_through_gateway(set: FixtureSet) {
    provision();
    let dir = scratch(&format!("fixtures-{}", set.dir));
    let cases = fixture_cases(set);
    assert!(
        cases.len() >= 10,
        "expected the hand-written fixtures in {}, found {cases:?}",
        fixture_dir(set).display()
    );

    // One upstream for all cases: `POST /<case>` replays `<case>.in` byte for byte.
    let bodies: HashMap<String, Vec<u8>> = cases
        .iter()
        .map(|case| {
            let path = fixture_dir(set).join(format!("{case}.in"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (case.clone(), bytes)
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let upstream = runtime.block_on(ScriptedUpstream::start(move |request| {
        match bodies.get(request.path.trim_start_matches('/')) {
            Some(bytes) => Script::sse_headers().bytes(bytes),
            None => Script::status_body(404, "text/plain", format!("no fixture {}", request.path)),
        }
    }));
    let upstream_url = upstream.url("");

    let queue = Mutex::new(cases.iter().cloned().collect::<VecDeque<_>>());
    let failures = Mutex::new(Vec::<(String, Vec<String>)>::new());
    thread::scope(|scope| {
        for _ in 0..FIXTURE_WORKERS {
            scope.spawn(|| loop {
                let Some(case) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let problems = catch_unwind(AssertUnwindSafe(|| {
                    check_fixture(set, &case, &upstream_url, &dir)
                }))
                .unwrap_or_else(|panic| {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "<non-string panic>".into());
                    vec![format!("panicked: {text}")]
                });
                if !problems.is_empty() {
                    failures.lock().unwrap().push((case, problems));
                }
            });
        }
    });

    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    if !failures.is_empty() {
        let report: Vec<String> = failures
            .iter()
            .map(|(case, problems)| format!("=== {case} ===\n{}", problems.join("\n")))
            .collect();
        panic!(
            "{} of {} fixtures are not clean through the gateway:\n\n{}",
            failures.len(),
            cases.len(),
            report.join("\n\n")
        );
    }
}

/// Random vendor streams (`support::random`, the generator `tests/it/robustness.rs` runs thousands
/// of times against the Rust checker) translated by the gateway's pipeline: a sample goes to the
/// real client and the Python SDK, so the checker and the real thing are seen to agree.
#[test]
fn random_streams_after_translation_pass_the_real_client() {
    use dialect_proxy::dialect::Dialect;
    use dialect_proxy::event::RunIds;
    use dialect_proxy::pipeline::translate_all;
    use dialect_proxy::pipeline::PipelineSpec;
    use support::random::{structured_stream, Rng};

    provision();
    let dir = scratch("random");
    let request = dir.join("request.json");
    write_json(
        &request,
        &json!({"threadId":"thread","runId":"run","messages":[],"tools":[],"context":[]}),
    );
    let mut rng = Rng(0x5A_4D_1E);
    let files: Vec<PathBuf> = (0..40)
        .map(|i| {
            let input = structured_stream(&mut rng);
            let ids = RunIds {
                thread_id: "thread".into(),
                run_id: "run".into(),
            };
            let spec = PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids);
            let output = translate_all(spec, input.as_bytes()).expect("ag-ui → ag-ui is built");
            let path = dir.join(format!("{i}.sse"));
            std::fs::write(dir.join(format!("{i}.in.sse")), &input).unwrap();
            std::fs::write(&path, &output).unwrap();
            path
        })
        .collect();
    let queue = Mutex::new(files.into_iter().collect::<VecDeque<_>>());
    let failures = Mutex::new(Vec::<String>::new());
    thread::scope(|scope| {
        for _ in 0..FIXTURE_WORKERS {
            scope.spawn(|| loop {
                let Some(file) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let problems = validate_capture(&file, Some(&request));
                failures.lock().unwrap().extend(problems);
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} problem(s) (inputs beside the outputs in {}):\n{}",
        failures.len(),
        dir.display(),
        failures.join("\n")
    );
}

/// Drives the gateway at `url` with the real `@ag-ui/client` for `request` and checks what it
/// received like every run here (the client's verdict, then both offline validators on the
/// capture `<prefix>-1.sse`). The problems found; empty when clean. For other modules.
pub(crate) fn run_clean(url: &str, request: &Path, prefix: &Path) -> Vec<String> {
    provision();
    let verdict = match run_agent(url, request, &[], prefix) {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let mut problems = verdict_problems(&verdict, "@ag-ui/client HttpAgent");
    problems.extend(validate_capture(&capture_file(prefix, 1), Some(request)));
    problems
}
