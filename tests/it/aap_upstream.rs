//! AG-UI and HAI clients in front of an AAP v3 agent (`translation.md` §4.3–4.4, §6.2), over
//! real TCP: the gateway binary, the scripted agent of `support::aap_agent`, and conversations
//! of several runs on one thread. Each test checks both sides: what the client received (a
//! valid AG-UI 1.0 run) and what the agent was sent (each message exactly once, no confirm
//! calls, no violation of the AAP rules).

use crate::support;

use serde_json::{json, Value};
use support::aap_agent::{AapAgent, TurnReply};
use support::agui_thread::Thread;
use support::{send, Gateway, Request};

fn gateway(agent: &AapAgent, extra: &[&str]) -> Gateway {
    let url = agent.base_url();
    let mut args = vec![
        "--client",
        "ag-ui",
        "--upstream",
        url.as_str(),
        "--upstream-dialect",
        "aap",
        "--agent-name",
        "scripted",
    ];
    args.extend_from_slice(extra);
    Gateway::spawn(&args)
}

fn terminal(events: &[Value]) -> &Value {
    events.last().expect("events")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_in_each_stream_mode_sends_every_message_once() {
    for mode in ["delta", "message", "none"] {
        let agent = AapAgent::builder().stream_modes(&[mode]).start().await;
        let gw = gateway(&agent, &[]);
        let mut thread = Thread::new("t-modes");
        thread.user("hello");
        let events = thread.run(&gw, json!({})).await;
        assert_eq!(events[0]["type"], "RUN_STARTED", "{mode}");
        assert_eq!(terminal(&events)["type"], "RUN_FINISHED", "{mode}");
        assert_eq!(thread.last_assistant_text(), "You said: hello", "{mode}");
        thread.user("again");
        thread.run(&gw, json!({})).await;
        assert_eq!(thread.last_assistant_text(), "You said: again", "{mode}");
        // One session; each turn carries only the new user message, in the mode asked.
        assert_eq!(agent.sessions_created().len(), 1, "{mode}");
        assert_eq!(
            agent.turn_messages(),
            [
                json!([{"role": "user", "content": "hello"}]),
                json!([{"role": "user", "content": "again"}])
            ],
            "{mode}"
        );
        for turn in agent.all_turns() {
            assert_eq!(turn.body_json()["stream"], mode);
        }
        assert_eq!(agent.meta_calls(), 1, "/meta is cached");
        agent.assert_no_violations();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_round_trip_then_a_trusted_server_tool() {
    let agent = AapAgent::start().await;
    let gw = gateway(&agent, &[]);
    let mut thread = Thread::new("t-tools");
    thread.tools = vec![
        json!({"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}),
    ];
    thread.user("weather in Paris");
    let events = thread.run(&gw, json!({})).await;
    let pending = terminal(&events)["outcome"]["pendingToolCallIds"].clone();
    let call_id = pending[0]
        .as_str()
        .expect("a pending client call")
        .to_owned();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    thread.tool_result(&call_id, "sunny");
    thread.run(&gw, json!({})).await;
    assert_eq!(thread.last_assistant_text(), "Weather: sunny");
    let turns = agent.turn_messages();
    assert_eq!(
        turns[1],
        json!([{"role": "tool", "toolCallId": call_id, "content": "sunny"}])
    );
    // Tools are sent when the session is created, not again while unchanged.
    let created = &agent.sessions_created()[0].body;
    assert_eq!(created["tools"][0]["name"], "get_weather");
    assert!(agent
        .all_turns()
        .iter()
        .all(|t| t.body_json().get("tools").is_none()));

    // Trusted through forwardedProps: the agent runs it inline; the client sees the result.
    thread.user("fetch https://example.com");
    let trusted =
        json!({"forwardedProps": {"aap": {"tools": [{"name": "web_fetch", "trust": true}]}}});
    let events = thread.run(&gw, trusted).await;
    let result = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .expect("a result");
    assert_eq!(result["content"], "Content of https://example.com");
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
    assert!(terminal(&events)["outcome"]["pendingToolCallIds"].is_null());
    // The changed server tools rode on that turn.
    let last = agent.all_turns().last().unwrap().body_json().clone();
    assert_eq!(
        last["agent"]["tools"],
        json!([{"name": "web_fetch", "trust": true}])
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_through_the_confirm_tool_and_interrupts() {
    let agent = AapAgent::start().await;
    let gw = gateway(&agent, &[]);

    // A2: the client declares the confirm tool.
    let mut thread = Thread::new("t-confirm");
    thread.tools = vec![
        json!({"name": "confirmAction", "description": "Ask the user",
        "parameters": {"type": "object", "properties": {"action": {"type": "string"}}}}),
    ];
    thread.user("fetch https://example.com");
    let events = thread.run(&gw, json!({})).await;
    let pending = terminal(&events)["outcome"]["pendingToolCallIds"].clone();
    let confirm = pending[0].as_str().unwrap().to_owned();
    let call = confirm
        .strip_prefix("confirm:perm:")
        .expect("a confirm call")
        .to_owned();
    let start = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == confirm.as_str())
        .unwrap();
    assert_eq!(start["toolCallName"], "confirmAction");
    thread.tool_result(&confirm, "{\"confirmed\":true}");
    thread.run(&gw, json!({})).await;
    assert_eq!(thread.last_assistant_text(), "Fetched.");
    assert_eq!(
        agent.turn_messages().last().unwrap(),
        &json!([{"role": "tool_permission", "toolCallId": call, "granted": true}])
    );
    // The confirm tool never reached the agent.
    assert!(agent.sessions_created()[0].body.get("tools").is_none());

    // A1: an AG-UI 1.0 client without the confirm tool gets an interrupt, answers with resume.
    let mut thread = Thread::new("t-interrupt");
    thread.protocol_version = Some("1.0");
    thread.user("fetch https://example.org");
    let events = thread.run(&gw, json!({})).await;
    let interrupt = &terminal(&events)["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "tool_call");
    let interrupt_id = interrupt["id"].as_str().unwrap().to_owned();
    let call = interrupt["toolCallId"].as_str().unwrap().to_owned();
    assert_eq!(interrupt_id, format!("perm:{call}"));
    let resume = json!({"resume": [{"interruptId": interrupt_id, "status": "resolved",
        "payload": {"approved": false, "reason": "not now"}}]});
    thread.run(&gw, resume).await;
    assert_eq!(thread.last_assistant_text(), "Understood: not now");
    assert_eq!(
        agent.turn_messages().last().unwrap(),
        &json!([{"role": "tool_permission", "toolCallId": call, "granted": false, "reason": "not now"}])
    );
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_of_one_stop_come_together_and_before_the_next_question() {
    let agent = AapAgent::scripted(|ctx| {
        if ctx.turn_index == 0 {
            TurnReply::new()
                .tool_call("call_w", "get_weather", json!({"city": "Oslo"}))
                .tool_call("call_f", "web_fetch", json!({"url": "https://example.com"}))
                .stop("tool_use")
        } else {
            TurnReply::new()
                .text(&format!("turn {}", ctx.turn_index))
                .stop("end_turn")
        }
    })
    .await;
    let gw = gateway(&agent, &[]);
    let mut thread = Thread::new("t-batch");
    thread.tools = vec![
        json!({"name": "get_weather", "description": "w", "parameters": {"type": "object", "properties": {}}}),
        json!({"name": "confirmAction", "description": "c", "parameters": {"type": "object", "properties": {}}}),
    ];
    thread.user("go");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(
        terminal(&events)["outcome"]["pendingToolCallIds"],
        json!(["call_w", "confirm:perm:call_f"])
    );
    // Only the client result: refused, and nothing reaches the agent.
    thread.tool_result("call_w", "cold");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(terminal(&events)["type"], "RUN_ERROR");
    assert_eq!(terminal(&events)["code"], "INCOMPLETE_TOOL_RESULTS");
    assert!(terminal(&events)["message"]
        .as_str()
        .unwrap()
        .contains("call_f"));
    assert_eq!(agent.all_turns().len(), 1);
    // Both answers and a new question: one answers turn, then the question in its own turn.
    thread.tool_result("confirm:perm:call_f", "true");
    thread.user("and now?");
    thread.run(&gw, json!({})).await;
    let turns = agent.turn_messages();
    assert_eq!(turns.len(), 3);
    assert_eq!(
        turns[1],
        json!([{"role": "tool", "toolCallId": "call_w", "content": "cold"},
               {"role": "tool_permission", "toolCallId": "call_f", "granted": true}])
    );
    assert_eq!(turns[2], json!([{"role": "user", "content": "and now?"}]));
    assert_eq!(thread.last_assistant_text(), "turn 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_history_forks_and_a_lost_session_is_recreated() {
    let agent = AapAgent::start().await;
    let gw = gateway(&agent, &[]);
    let mut thread = Thread::new("t-edit");
    thread.user("hello");
    thread.run(&gw, json!({})).await;
    thread.user("again");
    thread.run(&gw, json!({})).await;
    // The client edits its first message: a new session, seeded with the edited history.
    thread.messages[0]["content"] = json!("hello, edited");
    thread.user("third");
    thread.run(&gw, json!({})).await;
    let created = agent.sessions_created();
    assert_eq!(created.len(), 2);
    let seed = created[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(seed.len(), 4);
    assert_eq!(seed[0], json!({"role": "user", "content": "hello, edited"}));
    assert_eq!(seed[3]["role"], "assistant");
    assert_eq!(
        agent.turns(&created[1].session_id)[0]["messages"],
        json!([{"role": "user", "content": "third"}])
    );
    // Logs reach the harness through a pipe, a moment after the gateway wrote them.
    gw.wait_for_stderr("diverged").await;

    // The agent forgets the session: the gateway recreates it from the client's history.
    assert!(agent.lose_session(&created[1].session_id));
    thread.user("fourth");
    thread.run(&gw, json!({})).await;
    assert_eq!(thread.last_assistant_text(), "You said: fourth");
    let created = agent.sessions_created();
    assert_eq!(created.len(), 3);
    assert_eq!(created[2].body["messages"].as_array().unwrap().len(), 6);
    gw.wait_for_stderr("lost the session").await;
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_reference_sdk_quirks_end_runs_cleanly() {
    // Version 4: refused before any session.
    let v4 = AapAgent::builder().version(4).start().await;
    let gw = gateway(&v4, &[]);
    let mut thread = Thread::new("t-v4");
    thread.user("hello");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(events.len(), 2);
    assert_eq!(terminal(&events)["code"], "AAP_VERSION_UNSUPPORTED");
    assert!(v4.sessions_created().is_empty());

    // SDK quirks: a doubled `turn_stop: error`, then an end without `turn_stop`; the thread
    // goes on afterwards.
    let agent = AapAgent::scripted(|ctx| match ctx.user_text().as_deref() {
        Some("one") => TurnReply::new()
            .text_deltas(&["Hm", "m"])
            .stop("error")
            .double_stop(),
        Some("two") => TurnReply::new().text("cut").omit_stop(),
        _ => TurnReply::new().text("fine").stop("end_turn"),
    })
    .await;
    let gw = gateway(&agent, &[]);
    let mut thread = Thread::new("t-quirks");
    thread.user("one");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(terminal(&events)["code"], "AAP_ERROR");
    assert_eq!(
        events.iter().filter(|e| e["type"] == "RUN_ERROR").count(),
        1
    );
    thread.user("two");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(terminal(&events)["code"], "UPSTREAM_TRUNCATED");
    thread.user("three");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
    assert_eq!(thread.last_assistant_text(), "fine");
    // The cut turn's partial message is in the client's history but was never confirmed by a
    // stop: the gateway cannot know what the agent kept, so it continues in a session seeded
    // with what the client holds.
    assert_eq!(agent.sessions_created().len(), 2);
    assert_eq!(
        agent.turns(&agent.sessions_created()[1].session_id)[0]["messages"],
        json!([{"role": "user", "content": "three"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hai_client_that_cannot_confirm_gets_a_denial_in_the_same_run() {
    let agent = AapAgent::start().await;
    let url = agent.base_url();
    let gw = Gateway::spawn(&[
        "--client",
        "hai",
        "--upstream",
        url.as_str(),
        "--upstream-dialect",
        "aap",
    ]);
    let request = json!({
        "threadId": "t-hai", "runId": "r-1",
        "messages": [{"id": "m1", "role": "user", "content": "fetch https://example.com"}],
        "tools": [], "context": [], "forwardedProps": {}
    });
    let mut response = send(gw.addr(), &Request::post_json("/", request.to_string())).await;
    assert_eq!(response.status(), 200);
    let events = response.events_to_end().await;
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED", "{events:#?}");
    // HAI carries text as business data; the agent's answer to the denial is in it.
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "BUSINESS_DATA_CONTENT")
        .map(|e| e["delta"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        text.contains("Understood: the user could not be asked for permission"),
        "{events:#?}"
    );
    let turns = agent.turn_messages();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1][0]["role"], "tool_permission");
    assert_eq!(turns[1][0]["granted"], false);
    agent.assert_no_violations();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_event_whose_data_is_not_json_fails_the_run_as_malformed() {
    // As from an AG-UI agent: the run ends in RUN_ERROR UPSTREAM_MALFORMED, not in a success
    // that silently lost the text.
    let agent = AapAgent::scripted(|_| {
        TurnReply::raw(
            200,
            "text/event-stream",
            "event: turn_start\ndata: {}\n\n\
             event: text_delta\ndata: {\"delta\":\"Hel\"}\n\n\
             event: text_delta\ndata: lo, not JSON\n\n\
             event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n",
        )
    })
    .await;
    let gw = gateway(&agent, &[]);
    let mut thread = Thread::new("t-malformed");
    thread.user("hello");
    let events = thread.run(&gw, json!({})).await;
    assert_eq!(terminal(&events)["type"], "RUN_ERROR", "{events:#?}");
    assert_eq!(terminal(&events)["code"], "UPSTREAM_MALFORMED");
}
