//! The official `@ag-ui/client` 1.0.0 `HttpAgent` in front of an AAP v3 agent
//! (`translation.md` §4.3, §4.4, §6.2 A1/A2): the real gateway binary
//! (`--client ag-ui --upstream-dialect aap --agent-name scripted`) between the real client
//! (`tests/node/aap-conversation.mjs`, one thread over several runs, answering what each run left
//! open with ids it learns at run time) and the scripted AAP agent of `support::aap_agent` with
//! its built-in model.
//!
//! - `text_conversation`: two plain runs on one thread; one session, one turn per run, each turn
//!   carrying only the new user message.
//! - `client_tool_round_trip`: `get_weather` declared by the client; the call is pending at the
//!   end of run 1, run 2 brings its result, which the agent receives as one `tool` message.
//! - `permission_through_the_confirm_tool` (A2): `confirmAction` declared; the agent's untrusted
//!   `web_fetch` becomes a pending `confirm:perm:<id>` call, the client's `{"confirmed":true}`
//!   becomes a granted `tool_permission`, nothing `confirm:` reaches the agent.
//! - `permission_through_an_interrupt` (A1): no confirm tool, protocol 1.0; run 1 ends with the
//!   interrupt `perm:<id>`, run 2 resumes it with a denial and a reason.
//!
//! Every run must resolve without a rejection, without any console warning of the client
//! (`[ag-ui]` enforce/compat/protocol warnings included), start with `RUN_STARTED` carrying
//! the thread, the run and `protocolVersion: "1.0"`, and end with exactly one `RUN_FINISHED`;
//! the agent must see no protocol violation. The Node dependencies are installed on first use
//! when missing (a failed install fails the tests); captures of each run go to
//! `target/real-client/aap-upstream/<test>/`.

use crate::support;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::{json, Value};
use support::aap::content_text;
use support::aap_agent::{AapAgent, GET_WEATHER, WEB_FETCH};
use support::node::{ensure_node, node_script};
use support::process::run_command;
use support::{event_types, Gateway};

/// Outer limit for one conversation process; only the point at which a hang is a failure.
const NODE_PATIENCE: Duration = Duration::from_secs(60);
/// Per-run limit handed to `aap-conversation.mjs --timeout` (ms).
const RUN_TIMEOUT_MS: &str = "20000";

/// The confirm tool as `translation.md` §6.1 defines it.
fn confirm_action_tool() -> Value {
    json!({
        "name": "confirmAction",
        "description": "Ask the user to confirm an action before it is performed.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "What needs confirmation"},
                "importance": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            },
            "required": ["action"],
        },
    })
}

fn weather_tool() -> Value {
    json!({
        "name": GET_WEATHER,
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    })
}

// === one gateway in front of one scripted AAP agent ===

struct Scene {
    name: &'static str,
    dir: PathBuf,
    gateway: Gateway,
    agent: AapAgent,
    /// Serves the agent; dropped last.
    _runtime: tokio::runtime::Runtime,
}

impl Scene {
    fn start(name: &'static str) -> Scene {
        ensure_node();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/real-client/aap-upstream")
            .join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let agent = runtime.block_on(AapAgent::start());
        let gateway = Gateway::spawn(&[
            "--client",
            "ag-ui",
            "--upstream",
            &agent.base_url(),
            "--upstream-dialect",
            "aap",
            "--agent-name",
            "scripted",
        ]);
        Scene {
            name,
            dir,
            gateway,
            agent,
            _runtime: runtime,
        }
    }

    /// What the AAP agent received, for failure messages (the gateway prints its own stderr
    /// when a test panics).
    fn requests(&self) -> String {
        self.agent
            .requests()
            .iter()
            .map(|r| {
                format!(
                    "  {} {} → {} {}",
                    r.method,
                    r.path,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs `aap-conversation.mjs` on `threadId` with `runs`; panics unless every run is clean
    /// and well formed.
    fn converse(&self, thread_id: &str, runs: Value) -> Conversation {
        let file = self.dir.join("conversation.json");
        let conversation = json!({"threadId": thread_id, "runs": runs});
        std::fs::write(&file, serde_json::to_vec_pretty(&conversation).unwrap())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
        let mut command = node_script("aap-conversation.mjs");
        command
            .args(["--url", &self.gateway.url(), "--timeout", RUN_TIMEOUT_MS])
            .arg("--conversation")
            .arg(&file)
            .arg("--capture")
            .arg(self.dir.join("run"));
        let ran = run_command(&mut command, NODE_PATIENCE).unwrap_or_else(|e| panic!("{e}"));
        let json = ran
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|line| serde_json::from_str::<Value>(line).ok())
            .unwrap_or_else(|| {
                panic!(
                    "{}: aap-conversation.mjs printed no JSON verdict (exit {:?})\n\
                     --- stdout ---\n{}\n--- stderr ---\n{}",
                    self.name, ran.code, ran.stdout, ran.stderr
                )
            });
        let conversation = Conversation {
            json,
            name: self.name,
        };
        let problems = conversation.json["problems"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            conversation.json["verdict"] == "ok" && ran.success && problems.is_empty(),
            "{}: the client's verdict is {} (exit {:?}), problems:\n  {}\n{}\n\
             --- client stderr ---\n{}\n--- AAP requests ---\n{}",
            self.name,
            conversation.json["verdict"],
            ran.code,
            problems
                .iter()
                .map(|p| p.as_str().unwrap_or("?"))
                .collect::<Vec<_>>()
                .join("\n  "),
            conversation.summary(),
            ran.stderr,
            self.requests()
        );
        let count = runs.as_array().map_or(0, Vec::len);
        assert_eq!(
            conversation.runs().len(),
            count,
            "{}: {}",
            self.name,
            conversation.summary()
        );
        for n in 0..count {
            conversation.assert_well_formed(n, thread_id, &self.requests());
        }
        conversation
    }

    /// The one session the gateway created: its id and its `POST /sessions` body.
    fn only_session(&self) -> (String, Value) {
        let created = self.agent.sessions_created();
        assert_eq!(
            created.len(),
            1,
            "{}: expected exactly one session creation\n{}",
            self.name,
            self.requests()
        );
        (created[0].session_id.clone(), created[0].body.clone())
    }

    /// The `messages` of each turn request to `session`, in order.
    fn turn_inputs(&self, session: &str) -> Vec<Vec<Value>> {
        self.agent
            .turns(session)
            .iter()
            .map(|turn| turn["messages"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// The session was created without a seed, with exactly `tools` as client tools.
    fn assert_created_without_seed(&self, body: &Value, tools: &[&str]) {
        let seed = body["messages"].as_array().map_or(0, Vec::len);
        assert_eq!(seed, 0, "{}: unexpected seed in {body}", self.name);
        assert_eq!(body["agent"]["name"], "scripted", "{}: {body}", self.name);
        let names: Vec<&str> = body["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(names, tools, "{}: client tools of {body}", self.name);
    }

    fn finish(&self) {
        self.agent.assert_no_violations();
    }
}

// === what the client reported ===

struct Conversation {
    json: Value,
    name: &'static str,
}

impl Conversation {
    fn runs(&self) -> &[Value] {
        self.json["runs"].as_array().map_or(&[], Vec::as_slice)
    }

    fn run(&self, n: usize) -> &Value {
        &self.json["runs"][n]
    }

    fn events(&self, n: usize) -> &[Value] {
        self.run(n)["events"].as_array().map_or(&[], Vec::as_slice)
    }

    fn outcome(&self, n: usize) -> &Value {
        &self.run(n)["outcome"]
    }

    fn pending(&self, n: usize) -> Vec<String> {
        self.outcome(n)["pendingToolCallIds"]
            .as_array()
            .map(|ids| {
                ids.iter()
                    .map(|id| id.as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The reducer's messages at the end.
    fn messages(&self) -> &[Value] {
        self.json["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The contents of the reducer's assistant messages with text, in order.
    fn assistant_texts(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"].as_str())
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The `TOOL_CALL_START` of run `n` for `name`; panics unless there is exactly one.
    fn call_start(&self, n: usize, name: &str) -> &Value {
        let starts: Vec<&Value> = self
            .events(n)
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == name)
            .collect();
        assert_eq!(
            starts.len(),
            1,
            "{}: run {}: expected one {name} call\n{}",
            self.name,
            n + 1,
            self.summary()
        );
        starts[0]
    }

    /// The concatenated `TOOL_CALL_ARGS` of `call` in run `n`, parsed.
    fn call_args(&self, n: usize, call: &str) -> Value {
        let text: String = self
            .events(n)
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_ARGS" && e["toolCallId"] == call)
            .filter_map(|e| e["delta"].as_str())
            .collect();
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: args of {call} are not JSON ({e}): {text}", self.name))
    }

    /// Run `n`: HTTP 200 SSE, the request the client sent, `RUN_STARTED` with the ids and
    /// protocol 1.0 first, one `RUN_FINISHED` last, no error, no rejection, no warning.
    fn assert_well_formed(&self, n: usize, thread_id: &str, requests: &str) {
        let run = self.run(n);
        let what = format!("{}: run {}", self.name, n + 1);
        let context = format!("{}\n--- AAP requests ---\n{requests}", self.summary());
        assert!(run.get("rejection").is_none(), "{what} rejected\n{context}");
        assert_eq!(
            run["warnings"],
            json!([]),
            "{what}: client warnings\n{context}"
        );
        assert!(
            run["runError"].is_null(),
            "{what}: RUN_ERROR {}\n{context}",
            run["runError"]
        );
        assert_eq!(run["http"]["status"], 200, "{what}: {}", run["http"]);
        assert!(
            run["http"]["contentType"]
                .as_str()
                .is_some_and(|c| c.starts_with("text/event-stream")),
            "{what}: {}",
            run["http"]
        );
        let request = &run["request"];
        assert_eq!(request["threadId"], thread_id, "{what}: sent {request}");
        assert_eq!(request["protocolVersion"], "1.0", "{what}: sent {request}");

        let events = self.events(n);
        let types = event_types(events);
        assert_eq!(
            types.first().map(String::as_str),
            Some("RUN_STARTED"),
            "{what}: {types:?}\n{context}"
        );
        let started = &events[0];
        assert_eq!(started["threadId"], thread_id, "{what}: {started}");
        assert_eq!(started["runId"], run["runId"], "{what}: {started}");
        assert_eq!(started["protocolVersion"], "1.0", "{what}: {started}");
        assert_eq!(
            types.last().map(String::as_str),
            Some("RUN_FINISHED"),
            "{what}: {types:?}\n{context}"
        );
        let terminals = types
            .iter()
            .filter(|t| *t == "RUN_FINISHED" || *t == "RUN_ERROR")
            .count();
        assert_eq!(terminals, 1, "{what}: {types:?}");
        let finished = events.last().unwrap();
        assert_eq!(finished["threadId"], thread_id, "{what}: {finished}");
        assert_eq!(finished["runId"], run["runId"], "{what}: {finished}");
    }

    /// The verdict without the long parts, with each run's event types.
    fn summary(&self) -> String {
        let runs: Vec<Value> = self
            .runs()
            .iter()
            .map(|run| {
                json!({
                    "runId": run["runId"],
                    "types": event_types(run["events"].as_array().map_or(&[], Vec::as_slice)),
                    "outcome": run["outcome"],
                    "runError": run["runError"],
                    "rejection": run["rejection"],
                    "appended": run["appended"],
                    "resume": run["request"]["resume"],
                })
            })
            .collect();
        format!(
            "runs: {}\nmessages: {}",
            serde_json::to_string_pretty(&runs).unwrap(),
            json!(self.messages())
        )
    }
}

/// One turn input: exactly one message with `role` (and `text` as its text content).
fn assert_single_input(input: &[Value], role: &str, text: &str, what: &str) {
    assert_eq!(input.len(), 1, "{what}: turn input {input:?}");
    assert_eq!(input[0]["role"], role, "{what}: {}", input[0]);
    assert_eq!(
        content_text(&input[0]["content"]),
        text,
        "{what}: {}",
        input[0]
    );
}

// === the conversations ===

#[test]
fn text_conversation() {
    let scene = Scene::start("text");
    let conversation = scene.converse(
        "aap-rc-text",
        json!([
            {"tools": [], "user": "hello"},
            {"tools": [], "user": "again"},
        ]),
    );
    for n in 0..2 {
        assert_eq!(
            conversation.outcome(n)["type"],
            "success",
            "run {}: {}",
            n + 1,
            conversation.summary()
        );
        assert_eq!(conversation.pending(n), Vec::<String>::new());
    }
    assert_eq!(
        conversation.assistant_texts(),
        ["You said: hello", "You said: again"],
        "{}",
        conversation.summary()
    );
    let roles: Vec<&str> = conversation
        .messages()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);

    // The agent saw each message exactly once: one session, one turn per run.
    let (session, created) = scene.only_session();
    scene.assert_created_without_seed(&created, &[]);
    let inputs = scene.turn_inputs(&session);
    assert_eq!(inputs.len(), 2, "turns:\n{}", scene.requests());
    assert_single_input(&inputs[0], "user", "hello", "turn 1");
    assert_single_input(&inputs[1], "user", "again", "turn 2");
    scene.finish();
}

#[test]
fn client_tool_round_trip() {
    let scene = Scene::start("client-tool");
    let conversation = scene.converse(
        "aap-rc-weather",
        json!([
            {"tools": [weather_tool()], "user": "weather in Paris"},
            {"tools": [weather_tool()], "answer": {GET_WEATHER: "sunny"}},
        ]),
    );

    // Run 1: the call streamed and left pending for the client.
    let start = conversation.call_start(0, GET_WEATHER);
    let call = start["toolCallId"].as_str().unwrap().to_string();
    assert_eq!(
        conversation.call_args(0, &call),
        json!({"city": "Paris"}),
        "{}",
        conversation.summary()
    );
    assert_eq!(
        conversation.outcome(0)["type"],
        "success",
        "{}",
        conversation.summary()
    );
    assert_eq!(conversation.pending(0), [call.as_str()]);
    assert!(
        !conversation
            .events(0)
            .iter()
            .any(|e| e["type"] == "TOOL_CALL_RESULT"),
        "a client call gets no TOOL_CALL_RESULT: {}",
        conversation.summary()
    );

    // Run 2: the result went up as one tool message; the agent answered with it.
    assert_eq!(conversation.outcome(1)["type"], "success");
    assert_eq!(conversation.pending(1), Vec::<String>::new());
    assert_eq!(
        conversation.assistant_texts().last().map(String::as_str),
        Some("Weather: sunny"),
        "{}",
        conversation.summary()
    );

    let (session, created) = scene.only_session();
    scene.assert_created_without_seed(&created, &[GET_WEATHER]);
    let turns = scene.agent.turns(&session);
    let inputs = scene.turn_inputs(&session);
    assert_eq!(inputs.len(), 2, "turns:\n{}", scene.requests());
    assert_single_input(&inputs[0], "user", "weather in Paris", "turn 1");
    assert_single_input(&inputs[1], "tool", "sunny", "turn 2");
    assert_eq!(
        inputs[1][0]["toolCallId"],
        call.as_str(),
        "{}",
        inputs[1][0]
    );
    assert!(
        turns[1].get("tools").is_none(),
        "unchanged tools are not sent again: {}",
        turns[1]
    );
    scene.finish();
}

#[test]
fn permission_through_the_confirm_tool() {
    let scene = Scene::start("confirm-tool");
    let conversation = scene.converse(
        "aap-rc-confirm",
        json!([
            {"tools": [confirm_action_tool()], "user": "fetch https://example.com"},
            {"tools": [confirm_action_tool()], "answer": {"confirmAction": "{\"confirmed\":true}"}},
        ]),
    );

    // Run 1: the agent's call, then the confirm call standing for its permission.
    let fetch = conversation.call_start(0, WEB_FETCH);
    let call = fetch["toolCallId"].as_str().unwrap().to_string();
    let confirm = conversation.call_start(0, "confirmAction");
    let confirm_id = format!("confirm:perm:{call}");
    assert_eq!(confirm["toolCallId"], confirm_id.as_str(), "{confirm}");
    assert_eq!(
        confirm["parentMessageId"], fetch["parentMessageId"],
        "the confirm call shares its call's parent: {confirm} / {fetch}"
    );
    assert_eq!(
        conversation.call_args(0, &confirm_id),
        json!({
            "action": "Run tool \"web_fetch\" with arguments {\"url\":\"https://example.com\"}",
            "importance": "high",
        })
    );
    assert_eq!(
        conversation.outcome(0)["type"],
        "success",
        "{}",
        conversation.summary()
    );
    assert_eq!(conversation.pending(0), [confirm_id.as_str()]);

    // Run 2: the confirmation became a granted permission; the agent fetched.
    assert_eq!(conversation.outcome(1)["type"], "success");
    assert_eq!(conversation.pending(1), Vec::<String>::new());
    assert_eq!(
        conversation.assistant_texts().last().map(String::as_str),
        Some("Fetched."),
        "{}",
        conversation.summary()
    );

    let (session, created) = scene.only_session();
    scene.assert_created_without_seed(&created, &[]);
    let inputs = scene.turn_inputs(&session);
    assert_eq!(inputs.len(), 2, "turns:\n{}", scene.requests());
    assert_single_input(&inputs[0], "user", "fetch https://example.com", "turn 1");
    assert_eq!(
        inputs[1],
        [json!({"role": "tool_permission", "toolCallId": call, "granted": true})],
        "turn 2"
    );
    for request in scene.agent.requests() {
        let body = String::from_utf8_lossy(&request.body);
        assert!(
            !body.contains("confirm:") && !body.contains("confirmAction"),
            "the confirm tool reached the agent: {} {} {body}",
            request.method,
            request.path
        );
    }
    scene.finish();
}

#[test]
fn permission_through_an_interrupt() {
    let scene = Scene::start("interrupt");
    let conversation = scene.converse(
        "aap-rc-interrupt",
        json!([
            {"tools": [], "user": "fetch https://example.com"},
            {"tools": [], "resume": {"status": "resolved",
                                     "payload": {"approved": false, "reason": "not now"}}},
        ]),
    );

    // Run 1: the call, then an interrupt asking for its permission.
    let fetch = conversation.call_start(0, WEB_FETCH);
    let call = fetch["toolCallId"].as_str().unwrap().to_string();
    assert_eq!(
        conversation.call_args(0, &call),
        json!({"url": "https://example.com"})
    );
    let interrupt_id = format!("perm:{call}");
    assert_eq!(
        conversation.outcome(0),
        &json!({
            "type": "interrupt",
            "interrupts": [{
                "id": interrupt_id,
                "reason": "tool_call",
                "toolCallId": call,
                "message": "Allow web_fetch?",
                "responseSchema": {
                    "type": "object",
                    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
                    "required": ["approved"],
                },
            }],
        }),
        "{}",
        conversation.summary()
    );
    assert!(
        !conversation
            .events(0)
            .iter()
            .any(|e| e["toolCallName"] == "confirmAction"),
        "no confirm call without a confirm tool: {}",
        conversation.summary()
    );

    // Run 2: the client resumed with a denial; the agent heard the reason.
    assert_eq!(
        conversation.run(1)["request"]["resume"],
        json!([{"interruptId": interrupt_id, "status": "resolved",
                "payload": {"approved": false, "reason": "not now"}}])
    );
    assert_eq!(conversation.outcome(1)["type"], "success");
    assert_eq!(conversation.pending(1), Vec::<String>::new());
    assert_eq!(
        conversation.assistant_texts().last().map(String::as_str),
        Some("Understood: not now"),
        "{}",
        conversation.summary()
    );

    let (session, created) = scene.only_session();
    scene.assert_created_without_seed(&created, &[]);
    let inputs = scene.turn_inputs(&session);
    assert_eq!(inputs.len(), 2, "turns:\n{}", scene.requests());
    assert_single_input(&inputs[0], "user", "fetch https://example.com", "turn 1");
    assert_eq!(
        inputs[1],
        [json!({"role": "tool_permission", "toolCallId": call,
                "granted": false, "reason": "not now"})],
        "turn 2"
    );
    scene.finish();
}
