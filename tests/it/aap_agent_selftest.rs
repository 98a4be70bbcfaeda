//! The scripted AAP v3 agent of `support::aap_agent`, tested on its own over real TCP with the
//! AAP client of `support::aap` (and raw sockets for keep-alive and cancellation), so that it is
//! known-good before the gateway is tested against it (`aap.md` §2–§4, §6, §7).
//!
//! Covered: `/meta` (default and configured), sessions (create, get with secrets redacted,
//! delete, history types), the built-in model in `delta`, `message` and `none` mode (echo,
//! thinking, a client tool round, a trusted server tool, the permission flow granted and
//! denied, with the stored history), a lost session, bearer auth, the validation of turn and
//! create bodies and the violations recorded, every quirk of `TurnReply`, raw status replies,
//! keep-alive, and a peer that leaves a stalled stream.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{
    aap::{event_names, stop_reason, tool_spec, user_turn, AapClient, Reply},
    aap_agent::{model_reply, AapAgent, StreamMode, TurnReply},
    client::BodyEnd,
    send, PATIENCE,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

fn client(agent: &AapAgent) -> AapClient {
    AapClient::new(agent.addr(), agent.base(), None)
}

/// `POST /sessions` (must answer 201); returns the session id.
async fn create(client: &AapClient, body: Value) -> String {
    let reply = client.create_session(body).await;
    let json = reply.expect_json(201);
    json["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {json}"))
        .to_owned()
}

fn weather_session() -> Value {
    json!({"agent": {"name": "scripted"},
           "tools": [tool_spec("get_weather", "The weather in a city")]})
}

/// The raw body text of a turn (for quirks the strict parser would refuse).
async fn raw_turn(client: &AapClient, id: &str, body: Value) -> (String, BodyEnd) {
    let mut response = client.open_turn(id, &body).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let text = response.text().await;
    (text, response.body_end().cloned().unwrap())
}

// ---------------------------------------------------------------------------------------------
// Meta and sessions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_default_and_configured() {
    let agent = AapAgent::start().await;
    let meta = client(&agent).meta().await.expect_json(200).clone();
    assert_eq!(
        meta,
        json!({"version": 3, "agents": [{
            "name": "scripted", "version": "1.0.0",
            "tools": [{"name": "web_fetch", "description": "Fetch a URL and return its content",
                       "parameters": {"type": "object",
                                      "properties": {"url": {"type": "string"}},
                                      "required": ["url"]}}],
            "options": [{"type": "text", "name": "model", "default": "fast"},
                        {"type": "secret", "name": "apiKey", "default": ""}],
            "capabilities": {"stream": {"delta": {}, "message": {}, "none": {}},
                             "application": {"tools": {}},
                             "history": {"full": {}, "compacted": {}}}}]})
    );
    assert_eq!(agent.meta_calls(), 1);
    agent.assert_no_violations();

    let v4 = AapAgent::builder()
        .version(4)
        .stream_modes(&["message"])
        .image(true, false)
        .start()
        .await;
    let meta = client(&v4).meta().await.expect_json(200).clone();
    assert_eq!(meta["version"], 4);
    assert_eq!(
        meta["agents"][0]["capabilities"]["stream"],
        json!({"message": {}})
    );
    assert_eq!(
        meta["agents"][0]["capabilities"]["image"],
        json!({"http": {}})
    );
    // Using a v4 agent at all is a violation.
    create(&client(&v4), json!({"agent": {"name": "scripted"}})).await;
    assert!(
        v4.violations()[0].contains("meta.version 4"),
        "{:?}",
        v4.violations()
    );

    let none_only = AapAgent::builder().stream_modes(&[]).start().await;
    let meta = client(&none_only).meta().await.expect_json(200).clone();
    assert!(meta["agents"][0]["capabilities"].get("stream").is_none());
    // A streaming turn to a none-only agent is answered (as the SDK would) but recorded.
    let c = client(&none_only);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    c.turn(&id, user_turn("delta", "hi")).await.expect_events();
    assert!(
        none_only.violations()[0].contains("not declared in capabilities.stream"),
        "{:?}",
        none_only.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_created_read_and_deleted() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let seed = json!([{"role": "system", "content": "Be brief."}]);
    let body = json!({"agent": {"name": "scripted", "options": {"model": "slow", "apiKey": "k-1"},
                                "tools": [{"name": "web_fetch", "trust": true}]},
                      "messages": seed,
                      "tools": [tool_spec("get_weather", "The weather")]});
    let first = create(&c, body.clone()).await;
    let second = create(&c, json!({"agent": {"name": "scripted"}})).await;
    assert_eq!((first.as_str(), second.as_str()), ("sess_1", "sess_2"));
    let created = agent.sessions_created();
    assert_eq!(created.len(), 2);
    assert_eq!(created[0].body, body);

    let info = c.get_session(&first).await.expect_json(200).clone();
    assert_eq!(
        info,
        json!({"sessionId": "sess_1",
               "agent": {"name": "scripted", "options": {"model": "slow", "apiKey": "***"},
                         "tools": [{"name": "web_fetch", "trust": true}]},
               "tools": [tool_spec("get_weather", "The weather")]})
    );
    let list = c.list_sessions(None).await.expect_json(200).clone();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(
        c.full_history(&first).await,
        seed.as_array().unwrap().clone()
    );
    assert_eq!(
        agent.session(&first).unwrap().agent["options"]["apiKey"],
        "k-1"
    );

    c.history(&first, None).await.expect_error(400);
    let only_full = AapAgent::builder().history_types(&["full"]).start().await;
    let c2 = client(&only_full);
    let id = create(&c2, json!({"agent": {"name": "scripted"}})).await;
    c2.history(&id, Some("compacted"))
        .await
        .expect_error_naming(404, "Specified history not found");

    let deleted = c.delete_session(&second).await;
    deleted.expect(204);
    assert!(deleted.text.is_empty());
    c.delete_session(&second).await.expect_error(404);
    c.get_session(&second).await.expect_error(404);
    assert_eq!(agent.session_ids(), vec!["sess_1".to_owned()]);
    agent.assert_no_violations();
}

// ---------------------------------------------------------------------------------------------
// The built-in model in each mode

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_turn_is_framed_exactly() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    let mut response = c.open_turn(&id, &user_turn("delta", "hello")).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(
        response.text().await,
        "event: turn_start\ndata: {}\n\n\
         event: text_delta\ndata: {\"delta\":\"You said: \"}\n\n\
         event: text_delta\ndata: {\"delta\":\"hello\"}\n\n\
         event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n"
    );
    assert_eq!(response.body_end(), Some(&BodyEnd::Clean));
    assert_eq!(
        c.full_history(&id).await,
        vec![
            json!({"role": "user", "content": "hello"}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "You said: hello"}]}),
        ]
    );
    assert_eq!(agent.turns(&id), vec![user_turn("delta", "hello")]);
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_and_none_turns_carry_whole_blocks() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    let reply = c.turn(&id, user_turn("message", "think hard")).await;
    let events = reply.expect_events();
    assert_eq!(
        events,
        &[
            ("turn_start".to_owned(), json!({})),
            (
                "thinking".to_owned(),
                json!({"thinking": "Thinking about: think hard"})
            ),
            ("text".to_owned(), json!({"text": "You said: think hard"})),
            ("turn_stop".to_owned(), json!({"stopReason": "end_turn"})),
        ]
    );

    let reply = c.turn(&id, user_turn("none", "plain")).await;
    assert_eq!(
        reply.expect_json(200),
        &json!({"stopReason": "end_turn", "messages": [
            {"role": "assistant", "content": [{"type": "text", "text": "You said: plain"}]}]})
    );
    // Absent and unknown stream values answer JSON too.
    let reply = c
        .turn(&id, json!({"messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(reply.expect_json(200)["stopReason"], "end_turn");
    assert_eq!(agent.session(&id).unwrap().turns, 3);
    agent.assert_no_violations();

    let reply = c
        .turn(
            &id,
            json!({"stream": "weird", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(reply.expect_json(200)["stopReason"], "end_turn");
    assert_eq!(agent.violations().len(), 1, "{:?}", agent.violations());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_round_trip() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, weather_session()).await;
    let reply = c
        .turn(&id, user_turn("delta", "What is the weather in Paris?"))
        .await;
    let events = reply.expect_events();
    assert_eq!(
        event_names(events),
        ["turn_start", "tool_call", "turn_stop"]
    );
    assert_eq!(
        events[1].1,
        json!({"toolCallId": "call_1", "name": "get_weather", "input": {"city": "Paris"}})
    );
    assert_eq!(stop_reason(events), "tool_use");

    let answer = json!({"stream": "none", "messages": [
        {"role": "tool", "toolCallId": "call_1", "content": "sunny"}]});
    let (stop, messages) = c.turn(&id, answer).await.turn_messages();
    assert_eq!(stop, "end_turn");
    assert_eq!(
        messages,
        vec![json!({"role": "assistant", "content": [{"type": "text", "text": "Weather: sunny"}]})]
    );
    let history = c.full_history(&id).await;
    assert_eq!(
        support::aap::roles(&history),
        ["user", "assistant", "tool", "assistant"]
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_server_tool_runs_inline() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(
        &c,
        json!({"agent": {"name": "scripted", "tools": [{"name": "web_fetch", "trust": true}]}}),
    )
    .await;
    let reply = c
        .turn(&id, user_turn("delta", "fetch https://a.example/x"))
        .await;
    let events = reply.expect_events();
    assert_eq!(
        event_names(events),
        [
            "turn_start",
            "tool_call",
            "tool_result",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(events[2].1["content"], "Content of https://a.example/x");
    assert_eq!(stop_reason(events), "end_turn");

    let (stop, messages) = c
        .turn(&id, user_turn("none", "fetch again"))
        .await
        .turn_messages();
    assert_eq!(stop, "end_turn");
    assert_eq!(
        support::aap::roles(&messages),
        ["assistant", "tool", "assistant"]
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_granted_then_denied() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(
        &c,
        json!({"agent": {"name": "scripted", "tools": [{"name": "web_fetch"}]}}),
    )
    .await;

    let events = c.turn(&id, user_turn("delta", "please fetch")).await;
    let events = events.expect_events();
    assert_eq!(
        event_names(events),
        ["turn_start", "tool_call", "turn_stop"]
    );
    assert_eq!(stop_reason(events), "tool_use");
    let call = events[1].1["toolCallId"].as_str().unwrap().to_owned();

    // Granted: no tool_result (SDK deviation 1), the output is stored.
    let grant = json!({"stream": "delta", "messages": [
        {"role": "tool_permission", "toolCallId": call, "granted": true}]});
    let reply = c.turn(&id, grant).await;
    let events = reply.expect_events();
    assert_eq!(
        event_names(events),
        ["turn_start", "text_delta", "turn_stop"]
    );
    assert_eq!(events[1].1["delta"], "Fetched.");
    let history = c.full_history(&id).await;
    assert_eq!(
        history[2],
        json!({"role": "tool", "toolCallId": call, "content": "Content of https://example.com"})
    );

    // Denied, in message mode.
    let events = c.turn(&id, user_turn("message", "fetch it")).await;
    let call = events.expect_events()[1].1["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deny = json!({"stream": "message", "messages": [
        {"role": "tool_permission", "toolCallId": call, "granted": false, "reason": "not now"}]});
    let reply = c.turn(&id, deny).await;
    assert_eq!(
        reply.expect_events()[1].1,
        json!({"text": "Understood: not now"})
    );
    let history = c.full_history(&id).await;
    assert_eq!(
        history[history.len() - 2],
        json!({"role": "tool", "toolCallId": call, "content": "Tool use denied: not now"})
    );
    assert!(history.iter().all(|m| m["role"] != "tool_permission"));
    agent.assert_no_violations();

    // A permission for a call that is not pending: no turn_stop (SDK deviation 4) and a violation.
    let stray = json!({"stream": "delta", "messages": [
        {"role": "tool_permission", "toolCallId": "call_99", "granted": true}]});
    let (text, end) = raw_turn(&c, &id, stray).await;
    assert_eq!(end, BodyEnd::Clean);
    assert_eq!(text, "event: turn_start\ndata: {}\n\n");
    assert!(
        agent.violations()[0].contains("not pending"),
        "{:?}",
        agent.violations()
    );
}

// ---------------------------------------------------------------------------------------------
// Lost sessions, auth, validation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_answers_404() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    c.turn(&id, user_turn("delta", "one")).await.expect_events();
    assert!(agent.lose_session(&id));
    c.turn(&id, user_turn("delta", "two"))
        .await
        .expect_error_naming(404, "Session not found");
    let turns = agent.turn_requests(&id);
    assert_eq!(
        turns.iter().map(|t| t.status).collect::<Vec<_>>(),
        [200, 404]
    );
    assert_eq!(
        create(&c, json!({"agent": {"name": "scripted"}})).await,
        "sess_2"
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_auth_is_required_when_configured() {
    let agent = AapAgent::builder().require_bearer("sk-1").start().await;
    let anonymous = client(&agent);
    anonymous.meta().await.expect_error(401);
    anonymous
        .with_key(Some("wrong"))
        .create_session(json!({"agent": {"name": "scripted"}}))
        .await
        .expect_error(401);
    let keyed = anonymous.with_key(Some("sk-1"));
    keyed.meta().await.expect_json(200);
    create(&keyed, json!({"agent": {"name": "scripted"}})).await;
    assert_eq!(agent.requests().len(), 4);
    assert_eq!(
        agent.requests()[3].header("authorization"),
        Some("Bearer sk-1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_bodies_get_400_and_are_violations() {
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, weather_session()).await;
    let bad = [
        json!({"messages": []}),
        json!({"stream": "delta"}),
        json!({"stream": true, "messages": [{"role": "user", "content": "x"}]}),
        json!({"messages": [{"role": "assistant", "content": "x"}]}),
        json!({"messages": [{"role": "tool_permission", "toolCallId": "c", "granted": "yes"}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]}),
    ];
    for body in &bad {
        c.turn(&id, body.clone()).await.expect_error(400);
    }
    c.request("POST", &format!("/sessions/{id}/turns"), b"{not json")
        .await
        .expect_error(400);
    c.create_session(json!({"messages": []}))
        .await
        .expect_error(400);
    let violations = agent.violations();
    for needle in [
        "messages must not be empty",
        "messages is required",
        "stream must be a string",
        "messages[0].role \"assistant\" is not one of user/tool/tool_permission",
        "messages[0].granted must be a boolean",
        "tools[0].description is required",
        "tools[0].parameters is required",
        "the body is not JSON",
        "POST /v1/sessions: agent is required",
    ] {
        assert!(
            violations.iter().any(|v| v.contains(needle)),
            "no violation naming {needle:?}: {violations:#?}"
        );
    }
    assert_eq!(violations.len(), 9, "{violations:#?}");
    assert_eq!(agent.session(&id).unwrap().turns, 0);

    // Accepted, but never what the gateway should send.
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(
        &c,
        json!({"agent": {"name": "scripted", "options": {"apiKey": "***"}},
               "tools": [tool_spec("confirmAction", "Confirm")]}),
    )
    .await;
    let turn = json!({"stream": "delta", "messages": [
        {"role": "user", "content": "hi", "id": "u1"}]});
    c.turn(&id, turn).await.expect_events();
    let violations = agent.violations();
    assert_eq!(violations.len(), 3, "{violations:#?}");
    assert!(violations[0].contains("\"***\""));
    assert!(violations[1].contains("confirm tool"));
    assert!(violations[2].contains("messages[0].id"));

    // Answers that break the batch rule.
    let agent = AapAgent::start().await;
    let c = client(&agent);
    let id = create(&c, weather_session()).await;
    c.turn(&id, user_turn("none", "weather in Rome")).await;
    let turn = json!({"stream": "none", "messages": [{"role": "user", "content": "never mind"}]});
    c.turn(&id, turn).await.expect_json(200);
    let violations = agent.violations();
    assert!(violations[0].contains("is not answered"), "{violations:#?}");
    assert!(
        violations[1].contains("a user message in the turn"),
        "{violations:#?}"
    );
    let turn = json!({"stream": "none", "messages": [
        {"role": "tool", "toolCallId": "confirm:perm:call_1", "content": "{}"}]});
    c.turn(&id, turn).await.expect_json(200);
    let violations = agent.violations();
    assert!(violations[2].contains("a gateway confirm id reached the agent"));
    assert!(
        violations[3].contains("which is not pending"),
        "{violations:#?}"
    );

    // A turn without `stream` asks for none, which a message-only agent does not declare.
    let agent = AapAgent::builder().stream_modes(&["message"]).start().await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    c.turn(&id, json!({"messages": [{"role": "user", "content": "x"}]}))
        .await
        .expect_json(200);
    assert!(agent.violations()[0].contains("does not declare none"));
}

// ---------------------------------------------------------------------------------------------
// Scripts and quirks

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_sees_the_turn_and_chooses_the_reply() {
    let agent = AapAgent::scripted(|ctx| match ctx.turn_index {
        0 => TurnReply::new()
            .thinking_deltas(&["a", "b"])
            .text_deltas(&["c", "d"])
            .tool_call("x1", "lookup", json!({"q": 1}))
            .tool_result("x1", "found")
            .text(&format!("history {}", ctx.history.len()))
            .stop("max_tokens"),
        1 => TurnReply::status(500, json!({"error": "boom"})),
        _ => model_reply(ctx),
    })
    .await;
    let c = client(&agent);
    let id = create(
        &c,
        json!({"agent": {"name": "scripted"}, "messages": [{"role": "system", "content": "s"}]}),
    )
    .await;
    let reply = c.turn(&id, user_turn("delta", "go")).await;
    let events = reply.expect_events();
    assert_eq!(
        event_names(events),
        [
            "turn_start",
            "thinking_delta",
            "thinking_delta",
            "text_delta",
            "text_delta",
            "tool_call",
            "tool_result",
            "text_delta",
            "turn_stop"
        ]
    );
    assert_eq!(events[7].1, json!({"delta": "history 1"}));
    assert_eq!(stop_reason(events), "max_tokens");
    let history = c.full_history(&id).await;
    assert_eq!(
        support::aap::roles(&history),
        ["system", "user", "assistant", "tool", "assistant"]
    );

    c.turn(&id, user_turn("delta", "again"))
        .await
        .expect_error(500);
    assert_eq!(
        c.full_history(&id).await.len(),
        5,
        "a raw reply stores nothing"
    );
    let (stop, messages) = c
        .turn(&id, user_turn("none", "third"))
        .await
        .turn_messages();
    assert_eq!(stop, "end_turn");
    assert_eq!(support::aap::assistant_text(&messages), "You said: third");
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quirks_are_rendered_as_asked() {
    let agent = AapAgent::scripted(|ctx| {
        let text = ctx.user_text().unwrap_or_default();
        let reply = TurnReply::new().text("hi");
        match text.as_str() {
            "double" => reply.double_stop(),
            "omit" => reply.omit_stop(),
            "cut" => reply.cut(),
            "junk" => reply.junk_after_stop("event: text_delta\ndata: {\"delta\":\"late\"}\n\n"),
            "name" => reply.name_in_data(),
            "pause" => reply.pause(Duration::from_millis(50)),
            "json" => reply.mode(StreamMode::None),
            "nostart" => reply.omit_start().stop("error"),
            _ => reply,
        }
    })
    .await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    let start = "event: turn_start\ndata: {}\n\n";
    let hi = "event: text_delta\ndata: {\"delta\":\"hi\"}\n\n";
    let stop = "event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n";

    let (text, end) = raw_turn(&c, &id, user_turn("delta", "double")).await;
    assert_eq!(
        (text, end),
        (format!("{start}{hi}{stop}{stop}"), BodyEnd::Clean)
    );
    let (text, end) = raw_turn(&c, &id, user_turn("delta", "omit")).await;
    assert_eq!((text, end), (format!("{start}{hi}"), BodyEnd::Clean));
    let (text, end) = raw_turn(&c, &id, user_turn("delta", "cut")).await;
    assert_eq!(text, format!("{start}{hi}"));
    assert!(matches!(end, BodyEnd::Truncated(_)), "{end:?}");
    let (text, _) = raw_turn(&c, &id, user_turn("delta", "junk")).await;
    assert_eq!(
        text,
        format!("{start}{hi}{stop}event: text_delta\ndata: {{\"delta\":\"late\"}}\n\n")
    );
    let (text, _) = raw_turn(&c, &id, user_turn("message", "name")).await;
    assert_eq!(
        text,
        "data: {\"event\":\"turn_start\"}\n\n\
         data: {\"event\":\"text\",\"text\":\"hi\"}\n\n\
         data: {\"event\":\"turn_stop\",\"stopReason\":\"end_turn\"}\n\n"
    );
    let started = std::time::Instant::now();
    let (text, _) = raw_turn(&c, &id, user_turn("delta", "pause")).await;
    assert_eq!(text, format!("{start}{hi}{stop}"));
    assert!(started.elapsed() >= Duration::from_millis(100));
    let (text, _) = raw_turn(&c, &id, user_turn("delta", "nostart")).await;
    assert_eq!(
        text,
        format!("{hi}event: turn_stop\ndata: {{\"stopReason\":\"error\"}}\n\n")
    );

    let reply = c.turn(&id, user_turn("delta", "json")).await;
    assert_eq!(
        reply.expect_json(200),
        &json!({"stopReason": "end_turn", "messages": [
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]})
    );
    // In none mode, a turn without turn_stop is a 500 (SDK deviation 4).
    let reply: Reply = c.turn(&id, user_turn("none", "omit")).await;
    reply.expect_error(500);
    agent.assert_no_violations();
}

// ---------------------------------------------------------------------------------------------
// Connections

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_serves_several_requests() {
    let agent = AapAgent::start().await;
    let mut stream = TcpStream::connect(agent.addr()).await.unwrap();
    let body = json!({"agent": {"name": "scripted"}}).to_string();
    let requests = format!(
        "GET /v1/meta HTTP/1.1\r\nhost: x\r\n\r\n\
         POST /v1/sessions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}\
         GET /v1/sessions/sess_1 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut received))
        .await
        .expect("the agent closes after connection: close")
        .unwrap();
    let text = String::from_utf8(received).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(text.matches("HTTP/1.1 201 Created").count(), 1, "{text}");
    assert!(text.ends_with(r#"{"sessionId":"sess_1","agent":{"name":"scripted"}}"#));
    assert_eq!(agent.requests().len(), 3);
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_leaving_a_stalled_stream_is_a_cancellation() {
    let agent = AapAgent::scripted(|_| TurnReply::new().text("partial").stall()).await;
    let c = client(&agent);
    let id = create(&c, json!({"agent": {"name": "scripted"}})).await;
    let mut response = send(agent.addr(), &c.turn_request(&id, &user_turn("delta", "x"))).await;
    support::aap::wait_for_event(&mut response, "text_delta").await;
    assert_eq!(agent.cancellations(), 0);
    response.disconnect();
    assert!(agent.wait_for_cancellation(PATIENCE).await);
    agent.wait_for_requests(2, PATIENCE).await;
}
