//! An AAP client in front of an AAP agent through the gateway (the ninth pair), over real TCP:
//! the gateway binary with an AAP face whose upstream is the scripted AAP agent of
//! `support::aap_agent`. Each test checks both sides: what the AAP client received (strictly
//! framed turns, one `turn_stop` last) and what the agent was sent (one agent session per face
//! session, each message once, no confirm tool, no violation of the AAP rules).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use support::aap::{
    assistant_text, content_text, event_names, roles, stop_reason, tool_uses, user_turn, AapClient,
    Reply,
};
use support::aap_agent::{AapAgent, TurnReply, GET_WEATHER, WEB_FETCH};
use support::{ConfigFile, Gateway};

/// The face's agent as the scripted agent describes itself (`support::aap_agent`), at `/v1`,
/// in front of `agent`. `face` goes into `[routes.aap]`; `extra` follows the route (its own
/// tables, `[routes.limits]`, `[routes.aap_upstream]`, then top-level ones like `[sessions]`).
fn config(agent: &AapAgent, face: &str, extra: &str) -> String {
    format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "{url}"
upstream_dialect = "aap"

[routes.aap]
name = "scripted"
{face}

[[routes.aap.options]]
type = "text"
name = "model"
default = "fast"

[[routes.aap.options]]
type = "secret"
name = "apiKey"
default = ""

[[routes.aap.tools]]
name = "web_fetch"
description = "Fetch a URL and return its content"
parameters = {{ type = "object", properties = {{ url = {{ type = "string" }} }}, required = ["url"] }}

{extra}
"#,
        url = agent.base_url()
    )
}

/// A gateway with `config`, logging at debug; the file lives as long as the gateway needs it.
fn gateway(toml: &str) -> (Gateway, ConfigFile) {
    let file = ConfigFile::new("aap-aap", toml);
    let gateway = Gateway::spawn_with_env(&["--config", file.arg()], &[("RUST_LOG", "debug")]);
    (gateway, file)
}

fn client(gateway: &Gateway) -> AapClient {
    AapClient::new(gateway.addr, "/v1", None)
}

fn create() -> Value {
    json!({"agent": {"name": "scripted"}})
}

fn weather_tool() -> Value {
    json!({"name": GET_WEATHER, "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})
}

/// The `(stopReason, assistant text)` of a turn, whatever its mode.
fn said(reply: &Reply) -> (String, String) {
    let (stop, messages) = reply.turn_messages();
    (stop, assistant_text(&messages))
}

/// The number of `turn_stop` events of a streamed turn.
fn stops(reply: &Reply) -> usize {
    event_names(reply.expect_events())
        .iter()
        .filter(|n| **n == "turn_stop")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_face_session_talks_to_one_agent_session_in_every_mode() {
    let agent = AapAgent::start().await;
    let (gw, _file) = gateway(&config(&agent, "", ""));
    let aap = client(&gw);
    for mode in ["delta", "message", "none"] {
        let before = agent.sessions_created().len();
        let one = aap.new_session(create()).await;
        let two = aap.new_session(create()).await;
        // Nothing reaches the agent before a session's first turn.
        assert_eq!(agent.sessions_created().len(), before, "{mode}");

        let first = aap.turn(&one, user_turn(mode, "think about hello")).await;
        assert_eq!(
            said(&first),
            ("end_turn".into(), "You said: think about hello".into()),
            "{mode}"
        );
        let other = aap.turn(&two, user_turn(mode, "hi")).await;
        assert_eq!(said(&other).1, "You said: hi", "{mode}");
        let again = aap.turn(&one, user_turn(mode, "again")).await;
        assert_eq!(said(&again).1, "You said: again", "{mode}");

        // Two face sessions, two agent sessions; the second turn of `one` went to the same
        // agent session and carried only its new message.
        let created = agent.sessions_created();
        assert_eq!(created.len(), before + 2, "{mode}");
        let (agent_one, agent_two) = (&created[before].session_id, &created[before + 1].session_id);
        assert_ne!(agent_one, agent_two);
        let messages = |s: &str| -> Vec<Value> {
            agent
                .turns(s)
                .iter()
                .map(|t| t["messages"].clone())
                .collect()
        };
        assert_eq!(
            messages(agent_one),
            [
                json!([{"role": "user", "content": "think about hello"}]),
                json!([{"role": "user", "content": "again"}])
            ],
            "{mode}"
        );
        assert_eq!(
            messages(agent_two),
            [json!([{"role": "user", "content": "hi"}])],
            "{mode}"
        );
        // The face keeps the whole conversation, thinking included.
        let history = aap.full_history(&one).await;
        assert_eq!(
            roles(&history),
            ["user", "assistant", "user", "assistant"],
            "{mode}"
        );
        let blocks: Vec<&str> = history[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert!(blocks.contains(&"thinking"), "{mode}: {history:?}");
        assert_eq!(content_text(&history[3]["content"]), "You said: again");
    }
    assert_eq!(agent.meta_calls(), 1, "/meta is cached");
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_round_trips() {
    let agent = AapAgent::start().await;
    let (gw, _file) = gateway(&config(&agent, "", ""));
    let aap = client(&gw);
    let id = aap
        .new_session(json!({
            "agent": {"name": "scripted", "options": {"model": "slow", "apiKey": "k-123"}},
            "tools": [weather_tool()]}))
        .await;
    let asked = aap.turn(&id, user_turn("delta", "weather in Paris")).await;
    let events = asked.expect_events();
    assert_eq!(
        event_names(events),
        ["turn_start", "tool_call", "turn_stop"]
    );
    assert_eq!(stop_reason(events), "tool_use");
    let call = &events[1].1;
    assert_eq!(call["name"], GET_WEATHER);
    assert_eq!(call["input"], json!({"city": "Paris"}));
    let call_id = call["toolCallId"].as_str().unwrap().to_owned();

    // The result and a new question in one turn: the agent gets the result, then (its turn
    // having ended) the question, both streamed into the client's one turn.
    let answered = aap
        .turn(
            &id,
            json!({"stream": "none", "messages": [
                {"role": "tool", "toolCallId": call_id, "content": "sunny"},
                {"role": "user", "content": "thanks"}]}),
        )
        .await;
    let (stop, text) = said(&answered);
    assert_eq!(stop, "end_turn");
    assert!(
        text.contains("Weather: sunny") && text.contains("You said: thanks"),
        "{text}"
    );

    // The agent got the tool and the options once, at creation, and the answers as given.
    let created = agent.sessions_created();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].body["tools"][0]["name"], GET_WEATHER);
    assert_eq!(
        created[0].body["agent"]["options"],
        json!({"model": "slow", "apiKey": "k-123"})
    );
    let turns = agent.turns(&created[0].session_id);
    assert_eq!(turns.len(), 3);
    assert_eq!(
        turns[1]["messages"],
        json!([{"role": "tool", "toolCallId": call_id, "content": "sunny"}])
    );
    assert_eq!(
        turns[2]["messages"],
        json!([{"role": "user", "content": "thanks"}])
    );
    assert!(turns
        .iter()
        .all(|t| t.get("tools").is_none() && t.get("agent").is_none()));
    let history = aap.full_history(&id).await;
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "user", "assistant"]
    );
    assert_eq!(tool_uses(&history[1..2])[0]["toolCallId"], call_id.as_str());
    // The next turn goes on in the same agent session.
    let next = aap.turn(&id, user_turn("message", "bye")).await;
    assert_eq!(said(&next).1, "You said: bye");
    assert_eq!(agent.sessions_created().len(), 1);
    assert_eq!(agent.turns(&created[0].session_id).len(), 4);
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_is_the_agents_own_call_and_its_answers_go_back() {
    let agent = AapAgent::start().await;
    // The face's permission settings are for agents that ask through the confirm tool: an AAP
    // agent asks itself, and its denials keep their reasons.
    let face = "denial_as = \"cancelled\"\ninject_confirm_tool = true";
    let (gw, _file) = gateway(&config(&agent, face, ""));
    let aap = client(&gw);
    // `web_fetch` enabled without trust: the agent asks before it runs it.
    let id = aap
        .new_session(json!({"agent": {"name": "scripted", "tools": [{"name": WEB_FETCH}]}}))
        .await;
    let asked = aap
        .turn(&id, user_turn("delta", "fetch https://example.org"))
        .await;
    let events = asked.expect_events();
    assert_eq!(
        event_names(events),
        ["turn_start", "tool_call", "turn_stop"],
        "the client sees the agent's call itself, no confirm tool"
    );
    assert_eq!(events[1].1["name"], WEB_FETCH);
    assert_eq!(events[1].1["input"], json!({"url": "https://example.org"}));
    assert_eq!(stop_reason(events), "tool_use");
    let call_id = events[1].1["toolCallId"].as_str().unwrap().to_owned();
    // An answer of the wrong kind is refused by the face, before the agent hears of it.
    aap.turn(
        &id,
        json!({"stream": "none", "messages": [
            {"role": "tool", "toolCallId": call_id, "content": "x"}]}),
    )
    .await
    .expect_error_naming(400, "tool_permission");

    let granted = aap
        .turn(
            &id,
            json!({"stream": "message", "messages": [
                {"role": "tool_permission", "toolCallId": call_id, "granted": true}]}),
        )
        .await;
    assert_eq!(said(&granted), ("end_turn".into(), "Fetched.".into()));

    // Asked again, in `none` mode, and denied with a reason.
    let asked = aap
        .turn(&id, user_turn("none", "fetch https://example.net"))
        .await;
    let (stop, messages) = asked.turn_messages();
    assert_eq!(stop, "tool_use");
    let uses = tool_uses(&messages);
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0]["name"], WEB_FETCH);
    let second = uses[0]["toolCallId"].as_str().unwrap().to_owned();
    let denied = aap
        .turn(
            &id,
            json!({"stream": "delta", "messages": [
                {"role": "tool_permission", "toolCallId": second, "granted": false,
                 "reason": "not now"}]}),
        )
        .await;
    assert_eq!(said(&denied).1, "Understood: not now");

    let created = agent.sessions_created();
    assert_eq!(created.len(), 1);
    assert_eq!(
        created[0].body["agent"]["tools"],
        json!([{"name": WEB_FETCH, "trust": false}]),
        "the session's server tools reach the agent as the client enabled them"
    );
    assert!(
        created[0].body.get("tools").is_none(),
        "no confirm tool is declared"
    );
    let turns = agent.turns(&created[0].session_id);
    assert_eq!(turns.len(), 4, "the refused answer never reached the agent");
    assert_eq!(
        turns[1]["messages"],
        json!([{"role": "tool_permission", "toolCallId": call_id, "granted": true}])
    );
    assert_eq!(
        turns[3]["messages"],
        json!([{"role": "tool_permission", "toolCallId": second, "granted": false,
                "reason": "not now"}])
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_error_reaches_the_client_as_one_turn_stop() {
    // Turn 0: text, then `turn_stop: error` twice (SDK 0.8.0 does); turn 1 of each session:
    // a normal answer.
    let agent = AapAgent::scripted(|ctx| {
        if ctx.turn_index == 0 {
            TurnReply::new().text("partial").stop("error").double_stop()
        } else {
            TurnReply::new().text("fine")
        }
    })
    .await;
    let (gw, _file) = gateway(&config(&agent, "", ""));
    let aap = client(&gw);
    for mode in ["delta", "message"] {
        let id = aap.new_session(create()).await;
        let failed = aap.turn(&id, user_turn(mode, "go")).await;
        assert_eq!(stops(&failed), 1, "{mode}: {}", failed.text);
        assert_eq!(said(&failed), ("error".into(), "partial".into()), "{mode}");
        // The session takes the next turn, on the same agent session.
        let next = aap.turn(&id, user_turn(mode, "again")).await;
        assert_eq!(said(&next), ("end_turn".into(), "fine".into()), "{mode}");
    }
    let id = aap.new_session(create()).await;
    let failed = aap.turn(&id, user_turn("none", "go")).await;
    assert_eq!(failed.turn_messages().0, "error");
    assert_eq!(agent.sessions_created().len(), 3);
    for created in agent.sessions_created() {
        assert!(!agent.turns(&created.session_id).is_empty());
    }
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_fails_before_answering_leaves_nothing_behind() {
    let agent = AapAgent::scripted(|_| TurnReply::status(500, json!({"error": "boom"}))).await;
    let (gw, _file) = gateway(&config(&agent, "", ""));
    let aap = client(&gw);
    let id = aap.new_session(create()).await;
    // `none`: a 502; streamed: `turn_start`, `turn_stop: error`.
    aap.turn(&id, user_turn("none", "go"))
        .await
        .expect_error(502);
    let streamed = aap.turn(&id, user_turn("delta", "go")).await;
    assert_eq!(
        event_names(streamed.expect_events()),
        ["turn_start", "turn_stop"]
    );
    assert_eq!(stop_reason(streamed.expect_events()), "error");
    // The face session is as it was, and no agent session is left that it does not name.
    assert!(aap.full_history(&id).await.is_empty());
    assert_eq!(agent.sessions_created().len(), 2);
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    while !agent.session_ids().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(agent.session_ids(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_agent_event_ends_the_turn_once_within_the_limit() {
    let big = "x".repeat(64 * 1024);
    let agent = AapAgent::scripted(move |ctx| match ctx.user_text().as_deref() {
        Some("big") => TurnReply::new().text("before").text(&big),
        _ => TurnReply::new().text("small"),
    })
    .await;
    let (gw, _file) = gateway(&config(
        &agent,
        "",
        "[routes.limits]\nmax_event_bytes = 16384\n",
    ));
    let aap = client(&gw);
    let id = aap.new_session(create()).await;
    let cut = aap.turn(&id, user_turn("delta", "big")).await;
    assert_eq!(stops(&cut), 1, "{}", cut.text);
    let (stop, messages) = cut.turn_messages();
    assert_eq!(stop, "error");
    assert!(
        !assistant_text(&messages).contains("xxxx"),
        "nothing of the oversized event reached the client"
    );
    gw.wait_for_stderr("UPSTREAM_EVENT_TOO_LARGE").await;
    let next = aap.turn(&id, user_turn("delta", "small?")).await;
    assert_eq!(said(&next), ("end_turn".into(), "small".into()));
    assert_eq!(agent.sessions_created().len(), 1);
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_bearer_secret_never_reaches_the_log() {
    const AGENT_SECRET: &str = "agent-bearer-8f2c1e9d";
    const FACE_KEY: &str = "face-key-5b7a90c3";
    let agent = AapAgent::builder()
        .require_bearer(AGENT_SECRET)
        .start()
        .await;
    let (gw, _file) = gateway(&config(
        &agent,
        &format!("api_keys = [\"{FACE_KEY}\"]"),
        &format!("[routes.aap_upstream]\napi_key = \"{AGENT_SECRET}\"\n"),
    ));
    let aap = AapClient::new(gw.addr, "/v1", Some(FACE_KEY));
    let id = aap
        .new_session(
            json!({"agent": {"name": "scripted", "tools": [{"name": WEB_FETCH}]},
                            "tools": [weather_tool()]}),
        )
        .await;
    assert_eq!(
        said(&aap.turn(&id, user_turn("delta", "hello")).await).1,
        "You said: hello"
    );
    let asked = aap.turn(&id, user_turn("none", "weather in Oslo")).await;
    let call = tool_uses(&asked.turn_messages().1)[0]["toolCallId"].clone();
    aap.turn(
        &id,
        json!({"stream": "delta", "messages": [
            {"role": "tool", "toolCallId": call, "content": "cold"}]}),
    )
    .await;
    aap.delete_session(&id).await.expect(204);
    // Without the face's key nothing reaches the agent.
    let refused = aap.with_key(None).create_session(create()).await;
    assert_eq!(refused.status, 401);

    let requests = agent.requests();
    assert!(requests.len() >= 5, "{requests:?}");
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {AGENT_SECRET}").as_str()),
            "{} {}",
            request.method,
            request.path
        );
        assert!(!format!("{:?}", request.headers).contains(FACE_KEY));
    }
    let log = gw.wait_for_stderr("session deleted").await;
    assert!(
        log.contains("turn committed"),
        "the turns were narrated:\n{log}"
    );
    for secret in [AGENT_SECRET, FACE_KEY] {
        assert!(!log.contains(secret), "{secret} reached the log:\n{log}");
    }
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_quotas_and_deletion_hold_for_the_pair() {
    let agent = AapAgent::start().await;
    let (gw, _file) = gateway(&config(
        &agent,
        "api_keys = [\"k1\", \"k2\"]",
        "[sessions]\nmax_sessions_per_principal = 1\n",
    ));
    let one = AapClient::new(gw.addr, "/v1", Some("k1"));
    let two = one.with_key(Some("k2"));
    let id = one.new_session(create()).await;
    assert_eq!(
        said(&one.turn(&id, user_turn("none", "mine")).await).1,
        "You said: mine"
    );
    // Another principal's session is a missing one, and its turn never reaches the agent.
    two.turn(&id, user_turn("none", "theirs"))
        .await
        .expect_error(404);
    two.delete_session(&id).await.expect_error(404);
    // The principal's quota holds.
    one.create_session(create()).await.expect_error(429);
    let agent_session = agent.sessions_created()[0].session_id.clone();
    assert_eq!(agent.turns(&agent_session).len(), 1);

    // Deleting the face session deletes the agent session with it.
    one.delete_session(&id).await.expect(204);
    assert!(agent.session_ids().is_empty(), "{:?}", agent.session_ids());
    assert!(agent
        .requests()
        .iter()
        .any(|r| r.method == "DELETE" && r.session.as_deref() == Some(agent_session.as_str())));
    one.turn(&id, user_turn("none", "gone?"))
        .await
        .expect_error(404);
    // The quota came back with the session.
    let next = one.new_session(create()).await;
    assert_eq!(
        said(&one.turn(&next, user_turn("none", "new")).await).1,
        "You said: new"
    );
    assert_eq!(agent.sessions_created().len(), 2);
    agent.assert_no_violations();
}

/// A fresh directory for one gateway's database, removed on drop.
struct StoreDir(PathBuf);

impl StoreDir {
    fn new() -> StoreDir {
        StoreDir(
            std::env::temp_dir().join(format!("dp-it-aap-aap-{}", uuid::Uuid::new_v4().simple())),
        )
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mapping_survives_a_restart_and_a_lost_agent_session_is_recreated() {
    let dir = StoreDir::new();
    let agent = AapAgent::start().await;
    let toml = config(
        &agent,
        "",
        &format!(
            "[sessions]\nstore = \"file\"\npath = \"{}\"\n",
            dir.path().display()
        ),
    );
    let (mut gw, file) = gateway(&toml);
    let id = client(&gw).new_session(create()).await;
    let first = client(&gw).turn(&id, user_turn("delta", "hello")).await;
    assert_eq!(said(&first).1, "You said: hello");
    gw.kill();

    // The face session and its agent session survive together.
    let (gw, _file2) = gateway(&toml);
    drop(file);
    let aap = client(&gw);
    assert_eq!(
        said(&aap.turn(&id, user_turn("delta", "again")).await).1,
        "You said: again"
    );
    agent.assert_one_session_saw_each_once(&["hello", "again"]);

    // The agent forgets the session (its own restart): the next turn recreates it, seeded
    // with the face's history, and goes on.
    let lost = agent.sessions_created()[0].session_id.clone();
    assert!(agent.lose_session(&lost));
    let after = aap.turn(&id, user_turn("none", "still there?")).await;
    assert_eq!(
        said(&after),
        ("end_turn".into(), "You said: still there?".into())
    );
    let created = agent.sessions_created();
    assert_eq!(created.len(), 2);
    let seed: Vec<String> = created[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| content_text(&m["content"]))
        .collect();
    assert_eq!(
        seed,
        ["hello", "You said: hello", "again", "You said: again"]
    );
    let turns = agent.turns(&created[1].session_id);
    assert_eq!(
        turns[0]["messages"],
        json!([{"role": "user", "content": "still there?"}])
    );
    // And it is the mapping from now on.
    aap.turn(&id, user_turn("none", "last")).await;
    assert_eq!(agent.turns(&created[1].session_id).len(), 2);
    agent.assert_no_violations();
}
