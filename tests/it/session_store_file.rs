//! The file session store (`[sessions] store = "file"`) in real gateway processes: a session
//! and its committed turns survive `kill -9` in the middle of a turn, the interrupted turn
//! leaves nothing and does not hold the session; an AG-UI thread in front of an AAP agent goes
//! on in the same agent session after a crash (its thread record survives); and a second
//! gateway on a directory in use exits at start-up with a clear error.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    aap::{
        content_text, face_config, roles, spawn_with_config, user_turn, wait_for_event, AapClient,
    },
    aap_agent::AapAgent,
    agui_script::{agui_text_script, last_user_text},
    agui_thread::Thread,
    Gateway, Script, ScriptedUpstream, Step,
};

/// A fresh directory for one gateway's database, removed with it on drop.
struct StoreDir(PathBuf);

impl StoreDir {
    fn new() -> StoreDir {
        let dir = std::env::temp_dir().join(format!(
            "dp-it-file-store-{}",
            uuid::Uuid::new_v4().simple()
        ));
        StoreDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for StoreDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One AAP route at `/v1` in front of `upstream`, its sessions in `dir`.
fn config(upstream: &str, dir: &Path) -> String {
    let sessions = format!("store = \"file\"\npath = \"{}\"", dir.display());
    face_config(upstream, &sessions)
}

/// An upstream that answers `ack: <text>` at once, except to `stall`: it starts the answer
/// and then sends nothing more.
async fn upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|request| {
        let said = last_user_text(&request.json());
        if said != "stall" {
            return agui_text_script(request, &[&format!("ack: {said}")], None);
        }
        let body = request.json();
        let (thread, run) = (body["threadId"].clone(), body["runId"].clone());
        Script::sse_headers()
            .event_json(&json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}))
            .event_json(
                &json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
            )
            .event_json(
                &json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "half an"}),
            )
            .step(Step::Stall)
    })
    .await
}

/// `(role, text)` of each message of a history.
fn texts(history: &[Value]) -> Vec<(String, String)> {
    history
        .iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or_default().to_owned();
            (role, content_text(&m["content"]))
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_kill_9_mid_turn_with_its_committed_turns_only() {
    let dir = StoreDir::new();
    let upstream = upstream().await;
    let toml = config(&upstream.url("/agent"), dir.path());

    let mut gateway = spawn_with_config(&toml);
    let aap = AapClient::new(gateway.addr(), "/v1", None);
    let id = aap.new_session(json!({"agent": {"name": "support"}})).await;
    let first = aap.turn(&id, user_turn("none", "first")).await;
    assert_eq!(first.turn_messages().0, "end_turn");
    let committed = pairs(&[("user", "first"), ("assistant", "ack: first")]);
    assert_eq!(texts(&aap.full_history(&id).await), committed);

    // A second turn is streaming (its first delta is out) when the process dies.
    let mut running = aap.open_turn(&id, &user_turn("delta", "stall")).await;
    assert_eq!(running.status, 200);
    wait_for_event(&mut running, "text_delta").await;
    gateway.kill();
    drop(running);

    let gateway = spawn_with_config(&toml);
    let aap = AapClient::new(gateway.addr(), "/v1", None);
    let session = aap.get_session(&id).await;
    session.expect(200);
    assert_eq!(
        texts(&aap.full_history(&id).await),
        committed,
        "the first turn is there, nothing of the interrupted one"
    );
    let listed = aap.list_sessions(None).await;
    assert!(
        listed.expect_json(200).to_string().contains(&id),
        "listed after the restart"
    );

    // The interrupted turn holds nothing: the next one runs (no 409) and is committed.
    let next = aap.turn(&id, user_turn("none", "again")).await;
    assert_eq!(next.turn_messages().0, "end_turn");
    let history = aap.full_history(&id).await;
    assert_eq!(roles(&history), ["user", "assistant", "user", "assistant"]);
    assert_eq!(
        texts(&history),
        pairs(&[
            ("user", "first"),
            ("assistant", "ack: first"),
            ("user", "again"),
            ("assistant", "ack: again"),
        ])
    );

    // A deletion is as durable.
    aap.delete_session(&id).await.expect(204);
    drop(gateway);
    let gateway = spawn_with_config(&toml);
    let aap = AapClient::new(gateway.addr(), "/v1", None);
    aap.get_session(&id).await.expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agui_thread_goes_on_in_the_same_agent_session_after_a_crash() {
    let dir = StoreDir::new();
    let agent = AapAgent::start().await;
    let toml = format!(
        r#"[[routes]]
path = "/"
client = "ag-ui"
upstream = "{}"
upstream_dialect = "aap"

[sessions]
store = "file"
path = "{}"
"#,
        agent.base_url(),
        dir.path().display()
    );
    let mut thread = Thread::new("t-durable");
    let mut gateway = spawn_with_config(&toml);
    assert_eq!(thread.say(&gateway, "hello").await, "You said: hello");
    gateway.kill();

    let gateway = spawn_with_config(&toml);
    assert_eq!(thread.say(&gateway, "again").await, "You said: again");
    // The record survived: the same agent session, sent only what it had not seen.
    agent.assert_one_session_saw_each_once(&["hello", "again"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_gateway_on_a_directory_in_use_exits_with_a_clear_error() {
    let dir = StoreDir::new();
    let toml = config("builtin:demo", dir.path());
    let _first: Gateway = spawn_with_config(&toml);

    let file = support::ConfigFile::new("file-store", &toml);
    let mut second = Command::new(env!("CARGO_BIN_EXE_dialect-proxy"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config", file.arg()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            panic!("the second gateway is still running on a directory in use");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = second.wait_with_output().expect("its stderr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "exit status {status}");
    assert!(
        stderr.contains("in use by another process")
            && stderr.contains("one gateway per directory")
            && stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
}
