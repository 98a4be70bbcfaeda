//! Lossless hops, as a property: generated AG-UI 1.1 runs (`support::gen11`) go from a scripted
//! agent through the real binary three ways, and what the AG-UI client gets must be the same
//! run each way, up to the normal form of the README's "Lossless hops":
//!
//! - `direct`: agent → gateway (AG-UI → AG-UI) → client;
//! - `via-hai`: agent → gateway as HAI server → gateway as HAI client → client;
//! - `via-aap`: agent → gateway's AAP face → gateway as AAP client → client.
//!
//! `direct` must give back the agent's own stream (chunks expanded, the version declared); the
//! hops must give back what `direct` gives.
//!
//! Two gateway processes: the first serves `direct`, the HAI route and the AAP face in front of
//! the agent; the second serves the two AG-UI routes whose upstream is the first. Every stream
//! is compared event by event in normal form here, and the official `@ag-ui/client` then runs
//! every case on all three routes (`tests/node/hops.mjs`): the messages, state and outcomes it
//! reconstructs must agree, with no warning.
//!
//! `HOPS_CASES` (default 2000) and `HOPS_SEED` choose the cases; a failure names the case
//! number, which reproduces alone with `HOPS_FROM=<n> HOPS_CASES=1` (`HOPS_DUMP=1` prints the
//! agent's stream and both normal forms).

use crate::support;

use std::collections::HashMap;
use std::net::SocketAddr;

use serde_json::{json, Value};
use support::gen11::{case, case_of};
use support::{Gateway, Request, Script, ScriptedUpstream};

const DEFAULT_CASES: usize = 2000;
const DEFAULT_SEED: u64 = 0x001e_550f_b0a7;
/// Concurrent cases (each one run on the three routes in turn).
const WORKERS: usize = 8;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The cases to run: `HOPS_FROM..HOPS_FROM+HOPS_CASES`, and the seed.
pub fn selection() -> (std::ops::Range<usize>, u64) {
    let from = env_number("HOPS_FROM", 0) as usize;
    let count = env_number("HOPS_CASES", DEFAULT_CASES as u64) as usize;
    (from..from + count, env_number("HOPS_SEED", DEFAULT_SEED))
}

/// The agent: answers each request with the generated case its prompt names.
async fn agent(seed: u64) -> ScriptedUpstream {
    ScriptedUpstream::start(move |request| match case_of(&request.json()) {
        Some(n) => Script::sse_json(&case(seed, n).events),
        None => Script::status_body(400, "text/plain", "no case named"),
    })
    .await
}

/// The routes in front of the agent: `/direct`, `/hai` and the AAP face `/aap`.
fn front(agent: &str) -> String {
    format!(
        r#"[[routes]]
path = "/direct"
client = "ag-ui"
upstream = "{agent}"

[[routes]]
path = "/hai"
client = "hai"
upstream = "{agent}"

[[routes]]
path = "/aap"
client = "aap"
upstream = "{agent}"

[routes.aap]
name = "gen"

[sessions]
max_sessions = 1000000
max_sessions_per_principal = 1000000
"#
    )
}

/// The AG-UI routes whose upstream is the front gateway: `/via-hai` and `/via-aap`.
fn back(front: &str) -> String {
    format!(
        r#"[[routes]]
path = "/via-hai"
client = "ag-ui"
upstream = "{front}/hai"
upstream_dialect = "hai"

[[routes]]
path = "/via-aap"
client = "ag-ui"
upstream = "{front}/aap"
upstream_dialect = "aap"

[routes.aap_upstream]
agent = "gen"

[sessions]
max_sessions = 1000000
max_sessions_per_principal = 1000000
"#
    )
}

/// Both gateways, started in order.
pub struct Hops {
    /// Kept alive for as long as the gateways call it.
    _agent: ScriptedUpstream,
    pub front: Gateway,
    pub back: Gateway,
    _configs: [support::ConfigFile; 2],
}

impl Hops {
    pub async fn start(seed: u64) -> Hops {
        let agent = agent(seed).await;
        let front_config = support::ConfigFile::new("hops-front", &front(&agent.url("/")));
        let front = Gateway::spawn(&["--config", front_config.arg()]);
        let back_config = support::ConfigFile::new("hops-back", &back(&front.url()));
        let back = Gateway::spawn(&["--config", back_config.arg()]);
        Hops {
            _agent: agent,
            front,
            back,
            _configs: [front_config, back_config],
        }
    }

    /// `(name, address, path)` of the three ways to the agent.
    pub fn routes(&self) -> [(&'static str, SocketAddr, &'static str); 3] {
        [
            ("direct", self.front.addr(), "/direct"),
            ("via-hai", self.back.addr(), "/via-hai"),
            ("via-aap", self.back.addr(), "/via-aap"),
        ]
    }
}

async fn run(addr: SocketAddr, path: &str, request: &Value) -> Vec<Value> {
    let mut response = support::send(
        addr,
        &Request::post_json(path, request.to_string()).header("accept", "text/event-stream"),
    )
    .await;
    assert_eq!(response.status(), 200, "{path}: {}", response.text().await);
    response.events_to_end().await
}

// === the normal form ===

/// The normal form of a client's stream: no `timestamp`/`rawEvent`, run ids out of the way
/// (they follow each request), consecutive deltas of one message merged, a call whole where it
/// ends (`TOOL_CALL_START`, one `TOOL_CALL_ARGS`, `TOOL_CALL_END`). Every other id must come
/// back as it was sent.
pub fn normal_form(events: &[Value]) -> Vec<Value> {
    normalise(events, true)
}

/// [`normal_form`]; `calls_whole` false keeps each call's events where they are (consecutive
/// argument fragments merged), for the comparison of the plain route with the agent's stream.
fn normalise(events: &[Value], calls_whole: bool) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut args: HashMap<String, String> = HashMap::new();
    // A call's start, held until its end: AAP carries a call whole, so whatever happened
    // while it was open comes back before it.
    let mut starts: HashMap<String, Value> = HashMap::new();
    for event in events {
        let mut e = event.clone();
        let Some(map) = e.as_object_mut() else {
            out.push(e);
            continue;
        };
        map.remove("timestamp");
        map.remove("rawEvent");
        // The HAI reader's own notes for the HAI round trip (`metadata.hai`) are not the run's.
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            metadata.remove("hai");
            if metadata.is_empty() {
                map.remove("metadata");
            }
        }
        let ty = map["type"].as_str().unwrap_or_default().to_owned();
        if ty.starts_with("RUN_") {
            map.remove("threadId");
            map.remove("runId");
        }
        match ty.as_str() {
            "TOOL_CALL_START" if calls_whole => {
                let id = map["toolCallId"].as_str().unwrap_or_default().to_owned();
                starts.insert(id, e);
                continue;
            }
            "TOOL_CALL_ARGS" if calls_whole => {
                let id = map["toolCallId"].as_str().unwrap_or_default().to_owned();
                let delta = map["delta"].as_str().unwrap_or_default();
                args.entry(id).or_default().push_str(delta);
                continue;
            }
            "TOOL_CALL_END" if calls_whole => {
                let id = map["toolCallId"].as_str().unwrap_or_default().to_owned();
                if let Some(start) = starts.remove(&id) {
                    out.push(start);
                }
                if let Some(delta) = args.remove(&id) {
                    out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": delta}));
                }
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" | "TOOL_CALL_ARGS" => {
                let key = if ty == "TOOL_CALL_ARGS" {
                    "toolCallId"
                } else {
                    "messageId"
                };
                if let Some(prev) = out.last_mut() {
                    if prev["type"] == ty.as_str() && prev[key] == map[key] {
                        let joined = format!(
                            "{}{}",
                            prev["delta"].as_str().unwrap_or_default(),
                            map["delta"].as_str().unwrap_or_default()
                        );
                        prev["delta"] = joined.into();
                        continue;
                    }
                }
            }
            _ => {}
        }
        out.push(e);
    }
    // A call that never ended (a cut stream) keeps its start, at the end.
    let mut unended: Vec<(String, Value)> = starts.into_iter().collect();
    unended.sort_by(|a, b| a.0.cmp(&b.0));
    out.extend(unended.into_iter().map(|(_, start)| start));
    out
}

/// The agent's own stream as an AG-UI client is owed it, for the plain route: chunks expanded
/// (the first chunk of an id opens it with its role or name), `protocolVersion` declared on each
/// run start, and `role: "tool"` on results. Where a chunk stream ends is the client's rule
/// (`@ag-ui/client`), which the gateway applies: the `*_END` events are compared apart.
fn as_owed(events: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut opened: std::collections::HashSet<String> = std::collections::HashSet::new();
    for event in events {
        let mut e = event.clone();
        let ty = e["type"].as_str().unwrap_or_default().to_owned();
        let keep = |e: &Value, keys: &[&str]| {
            let mut kept = serde_json::Map::new();
            for key in keys {
                if let Some(v) = e.get(*key) {
                    kept.insert((*key).to_owned(), v.clone());
                }
            }
            kept
        };
        let (start, content, id_key) = match ty.as_str() {
            "TEXT_MESSAGE_CHUNK" => ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "messageId"),
            "TOOL_CALL_CHUNK" => ("TOOL_CALL_START", "TOOL_CALL_ARGS", "toolCallId"),
            "REASONING_MESSAGE_CHUNK" => (
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "messageId",
            ),
            "RUN_STARTED" => {
                e["protocolVersion"] = "1.0".into();
                out.push(e);
                continue;
            }
            _ => {
                out.push(e);
                continue;
            }
        };
        let id = e[id_key].as_str().unwrap_or_default().to_owned();
        if opened.insert(id.clone()) {
            let mut first = keep(
                &e,
                &[
                    id_key,
                    "role",
                    "toolCallName",
                    "parentMessageId",
                    "metadata",
                    "subagentRunId",
                ],
            );
            first.insert("type".into(), start.into());
            if start == "REASONING_MESSAGE_START" {
                first.insert("role".into(), "reasoning".into());
            }
            out.push(Value::Object(first));
        }
        let mut next = keep(&e, &[id_key, "delta", "subagentRunId"]);
        next.insert("type".into(), content.into());
        out.push(Value::Object(next));
    }
    out
}

/// `events` without the `*_END` events of messages and calls (see [`as_owed`]).
fn without_ends(events: &[Value]) -> Vec<Value> {
    let ends = ["TEXT_MESSAGE_END", "TOOL_CALL_END", "REASONING_MESSAGE_END"];
    events
        .iter()
        .filter(|e| !ends.contains(&e["type"].as_str().unwrap_or_default()))
        .cloned()
        .collect()
}

/// The first event where `got` leaves `want`, with a little context.
fn first_difference(want: &[Value], got: &[Value]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let show = |list: &[Value]| {
        list.iter()
            .skip(at.saturating_sub(1))
            .take(3)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n      ")
    };
    format!(
        "first difference at event {at} (of {} / {}):\n    want {}\n    got  {}",
        want.len(),
        got.len(),
        show(want),
        show(got)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_runs_survive_both_hops() {
    let (cases, seed) = selection();
    let hops = Hops::start(seed).await;
    let routes = hops.routes();
    let mut failures: HashMap<&'static str, Vec<String>> = HashMap::new();
    let all: Vec<usize> = cases.clone().collect();
    for batch in all.chunks(WORKERS) {
        let mut runs = tokio::task::JoinSet::new();
        for &n in batch {
            let request = case(seed, n).request;
            runs.spawn(async move {
                let mut got = Vec::new();
                for (name, addr, path) in routes {
                    got.push((name, run(addr, path, &request).await));
                }
                (n, got)
            });
        }
        let mut done = Vec::new();
        while let Some(result) = runs.join_next().await {
            done.push(result.expect("a case's task"));
        }
        done.sort_by_key(|(n, _)| *n);
        for (n, got) in done {
            let direct = normal_form(&got[0].1);
            // The plain route gives back the agent's own run.
            let owed = without_ends(&normalise(&as_owed(&case(seed, n).events), false));
            let plain = without_ends(&normalise(&got[0].1, false));
            if plain != owed {
                failures
                    .entry("direct")
                    .or_default()
                    .push(format!("case {n}: {}", first_difference(&owed, &plain)));
            }
            for (name, events) in &got[1..] {
                let hop = normal_form(events);
                if hop != direct {
                    if std::env::var_os("HOPS_DUMP").is_some() {
                        let lines = |list: &[Value]| {
                            list.iter()
                                .map(|e| e.to_string())
                                .collect::<Vec<_>>()
                                .join("\n")
                        };
                        eprintln!(
                            "case {n} agent:\n{}\ndirect:\n{}\n{name}:\n{}",
                            lines(&case(seed, n).events),
                            lines(&direct),
                            lines(&hop)
                        );
                    }
                    failures
                        .entry(name)
                        .or_default()
                        .push(format!("case {n}: {}", first_difference(&direct, &hop)));
                }
            }
        }
    }
    let mut report = String::new();
    for (name, list) in &failures {
        report.push_str(&format!(
            "\n{name}: {} of {} cases differ; the first:\n  {}\n",
            list.len(),
            cases.len(),
            list.iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }
    assert!(failures.is_empty(), "seed {seed:#x}{report}");
}

/// Outer limit for the client's whole pass over the cases: only where a hang becomes a failure.
const NODE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_client_sees_the_same_run_on_every_hop() {
    support::node::ensure_node();
    let (cases, seed) = selection();
    let hops = Hops::start(seed).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-client");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("hops-{}.jsonl", std::process::id()));
    let lines: Vec<String> = cases.map(|n| case(seed, n).request.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let mut node = support::node::node_script("hops.mjs");
    node.arg("--cases").arg(&file);
    for (name, addr, path) in hops.routes() {
        node.arg("--route")
            .arg(format!("{name}=http://{addr}{path}"));
    }
    let ran = tokio::task::spawn_blocking(move || {
        support::process::run_command(&mut node, NODE_PATIENCE)
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&file);
    let ran = ran.unwrap_or_else(|problem| panic!("hops.mjs did not run: {problem}"));
    let verdict: Value = ran
        .stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("hops.mjs printed no verdict:\n{}", ran.stderr));
    assert_eq!(
        verdict["verdict"],
        "ok",
        "seed {seed:#x}: {}",
        serde_json::to_string_pretty(&verdict).unwrap()
    );
}
