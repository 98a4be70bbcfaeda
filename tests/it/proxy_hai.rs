//! HAI on either side of the real gateway, over real TCP (`translation.md` §3): what the upstream
//! receives, what the client receives, the confirm-tool round trip (§6 C1), and the core
//! fault cases rendered in HAI (`streaming.md` §5–§7).

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{
    client::BodyEnd, event_types, send, Gateway, Request, Script, ScriptedUpstream, PATIENCE,
};

const THREAD: &str = "thread-hai";
const RUN: &str = "run-hai-1";

/// A HAI client's body with HAI's extras (hai.md §1): message `timestamp`/`extra`, a
/// business-object assistant history, `context` as messages, no `state`, a top-level extra.
fn hai_request(messages: Value) -> String {
    json!({
        "threadId": THREAD, "runId": RUN,
        "messages": messages,
        "context": [{"id": "c0", "role": "user", "content": "earlier"}],
        "tools": [{"name": "confirmAction", "description": "Ask the user to confirm",
                   "parameters": {"type": "object", "properties": {"action": {"type": "string"}}}}],
        "forwardedProps": {},
        "agentName": "ops"
    })
    .to_string()
}

/// The gateway between a `client` and `upstream`, which speaks `upstream_dialect`.
fn gateway(
    client: &str,
    upstream: &ScriptedUpstream,
    upstream_dialect: &str,
    extra: &[&str],
) -> Gateway {
    let url = upstream.url("/agent");
    let mut args = vec![
        "--client",
        client,
        "--upstream",
        &url,
        "--upstream-dialect",
        upstream_dialect,
    ];
    args.extend_from_slice(extra);
    Gateway::spawn(&args)
}

fn hai_gateway(upstream: &ScriptedUpstream, extra: &[&str]) -> Gateway {
    gateway("hai", upstream, "ag-ui", extra)
}

/// Posts, expects a 200 SSE response, reads to the clean end.
async fn hai_run(gateway: &Gateway, body: String) -> Vec<Value> {
    let mut response = send(gateway.addr, &Request::post_json("/chat", body)).await;
    if response.status != 200 {
        let status = response.status;
        panic!("expected 200, got {status}: {}", response.text().await);
    }
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.header("cache-control"), Some("no-cache"));
    let events = response.events_to_end().await;
    assert_eq!(
        response.body_end(),
        Some(&BodyEnd::Clean),
        "{:?}",
        event_types(&events)
    );
    for (i, e) in events.iter().enumerate() {
        assert!(
            e["timestamp"].is_i64(),
            "event {i} has no integer timestamp: {e}"
        );
    }
    events
}

/// The business outputs of message `id`, parsed the way hai-client does (`}{` split).
fn outputs(events: &[Value], id: &str) -> Vec<Value> {
    let buffer: String = events
        .iter()
        .filter(|e| e["type"] == "BUSINESS_DATA_CONTENT" && e["messageId"] == id)
        .map(|e| e["delta"].as_str().expect("string delta").to_owned())
        .collect();
    serde_json::from_str(&format!("[{}]", buffer.replace("}{", "},{"))).expect("hai-client parse")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hai_client_in_front_of_an_agui_upstream() {
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&[
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"STEP_STARTED","stepName":"plan"}),
        json!({"type":"REASONING_START","messageId":"r1"}),
        json!({"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"thinking {hard}"}),
        json!({"type":"REASONING_MESSAGE_END","messageId":"r1"}),
        json!({"type":"REASONING_END","messageId":"r1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a}{b"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":" done"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"m1"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"\"x}{y\"}"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
        json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/n","value":1}]}),
        json!({"type":"STEP_FINISHED","stepName":"plan"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
    ]))
    .await;
    let gateway = hai_gateway(&upstream, &[]);
    let history = r#"{"output":{"type":"thinking","data":{"content":"hm","elapsed":1,"thinking":false,"collapse":true}}}{"output":{"type":"text","content":"earlier answer"}}"#;
    let events = hai_run(
        &gateway,
        hai_request(json!([
            {"id":"u0","role":"user","content":"first","timestamp":1620000000000_i64,"extra":{"k":1}},
            {"id":"a0","role":"assistant","content":history},
            {"role":"user","content":"again"}
        ])),
    )
    .await;

    // The upstream got a valid AG-UI 1.0 RunAgentInput.
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["protocolVersion"], "1.0");
    assert_eq!(sent["threadId"], THREAD);
    assert!(
        sent.get("agentName").is_none(),
        "HAI extras stay with HAI upstreams"
    );
    assert_eq!(
        sent["messages"][0]["metadata"]["hai"],
        json!({"timestamp":1620000000000_i64,"extra":{"k":1}})
    );
    assert_eq!(
        sent["messages"][1],
        json!({"id":"a0:thinking","role":"reasoning","content":"hm"})
    );
    assert_eq!(sent["messages"][2]["content"], "earlier answer");
    assert_eq!(sent["messages"][3]["id"], format!("{RUN}.h0"));
    assert_eq!(sent["context"][0]["description"], "hai.context");

    // The client got what hai-client renders, and the reasoning span and message as
    // `CUSTOM agui.*` extension events around the business message that holds them.
    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "CUSTOM",
            "CUSTOM",
            "BUSINESS_DATA_START",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_END",
            "CUSTOM",
            "CUSTOM",
            "BUSINESS_DATA_START",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STATE_DELTA",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[0]["messageId"], RUN);
    assert_eq!(events[0]["role"], "assistant");
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "CUSTOM")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "agui.REASONING_START",
            "agui.REASONING_MESSAGE_START",
            "agui.REASONING_MESSAGE_END",
            "agui.REASONING_END"
        ]
    );
    let thinking = outputs(&events, "r1");
    assert_eq!(thinking[0]["output"]["type"], "thinking");
    assert_eq!(thinking[0]["output"]["data"]["content"], "thinking {hard}");
    assert_eq!(thinking[1]["output"]["data"]["thinking"], false);
    let text = outputs(&events, "m1");
    assert_eq!(
        text,
        [
            json!({"output":{"type":"text","content":"a}{b"}}),
            json!({"output":{"type":"text","content":" done"}})
        ]
    );
    // Index 15: the four extension events come before it.
    let args: Value = serde_json::from_str(events[15]["delta"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"q":"x}{y"}));
    assert!(!events[15]["delta"].as_str().unwrap().contains("}{"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_client_in_front_of_a_hai_upstream() {
    let hai = [
        json!({"type":"RUN_STARTED","messageId":"msgId-001","role":"assistant","timestamp":1620000000000_i64}),
        json!({"type":"BUSINESS_DATA_START","messageId":"msg-2","role":"assistant","timestamp":1620000000500_i64}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"msg-2","delta":"HAI是一套","timestamp":1620000001000_i64}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"msg-2","delta":"{\"output\":{\"type\":\"button\",\"data\":{\"name\":\"更多\"}}}","timestamp":1620000001500_i64}),
        json!({"type":"BUSINESS_DATA_END","messageId":"msg-2","timestamp":1620000002000_i64}),
        json!({"type":"STATE_DELTA","delta":{"op":"add","path":"/s","value":"running","from":""},"timestamp":1620000002100_i64}),
        json!({"type":"RUN_FINISHED","messageId":"msgId-001","role":"assistant","timestamp":1620000002500_i64}),
    ];
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&hai)).await;
    let gateway = gateway("ag-ui", &upstream, "hai", &[]);
    let body = json!({"threadId":THREAD,"runId":RUN,"protocolVersion":"1.0","state":{},
        "messages":[{"id":"u1","role":"user","content":"介绍下HAI"},
                    {"id":"r0","role":"reasoning","content":"private"}],
        "tools":[],"context":[],"forwardedProps":{}});
    let mut response = send(gateway.addr, &Request::post_json("/", body.to_string())).await;
    assert_eq!(response.status, 200);
    let events = response.events_to_end().await;

    // The upstream got a HAI request.
    let sent = upstream.requests()[0].json();
    assert_eq!(
        sent["messages"],
        json!([{"id":"u1","role":"user","content":"介绍下HAI"}])
    );
    assert!(sent.get("protocolVersion").is_none());
    assert_eq!(sent["forwardedProps"], json!({}));

    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "CUSTOM",
            "TEXT_MESSAGE_END",
            "STATE_DELTA",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[0]["threadId"], THREAD);
    assert_eq!(events[0]["runId"], RUN);
    assert_eq!(events[0]["metadata"]["hai"]["messageId"], "msgId-001");
    assert_eq!(events[2]["delta"], "HAI是一套");
    assert_eq!(events[3]["name"], "hai.business_data");
    assert_eq!(events[3]["value"]["output"]["data"]["name"], "更多");
    assert_eq!(
        events[5]["delta"],
        json!([{"op":"add","path":"/s","value":"running"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agui_interrupt_reaches_hai_as_a_confirm_call_and_comes_back_as_resume() {
    let upstream = ScriptedUpstream::start(|request| {
        let body = request.json();
        if body.get("resume").is_some() {
            Script::sse_json(&[
                json!({"type":"RUN_STARTED","threadId":THREAD,"runId":"run-2"}),
                json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":"run-2"}),
            ])
        } else {
            Script::sse_json(&[
                json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
                json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN,"outcome":{"type":"interrupt",
                    "interrupts":[{"id":"i1","reason":"tool_call","message":"Deploy {prod}?"}]}}),
            ])
        }
    })
    .await;
    let gateway = hai_gateway(&upstream, &[]);
    let events = hai_run(
        &gateway,
        hai_request(json!([{"id":"u","role":"user","content":"deploy"}])),
    )
    .await;
    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[1]["toolCallId"], "confirm:intr:i1");
    assert_eq!(events[1]["toolCallName"], "confirmAction");
    let args: Value = serde_json::from_str(events[2]["delta"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"action":"Deploy {prod}?","importance":"high"}));

    // hai-client answers the confirm call with a tool message in the next request.
    let mut next: Value = serde_json::from_str(&hai_request(json!([
        {"id":"u","role":"user","content":"deploy"},
        {"id":"a","role":"assistant","toolCalls":[{"id":"confirm:intr:i1","type":"function",
            "function":{"name":"confirmAction","arguments":"{\"action\":\"Deploy {prod}?\"}"}}]},
        {"id":"t","role":"tool","toolCallId":"confirm:intr:i1","content":"true"}
    ])))
    .unwrap();
    next["runId"] = "run-2".into();
    let events = hai_run(&gateway, next.to_string()).await;
    assert_eq!(event_types(&events), ["RUN_STARTED", "RUN_FINISHED"]);
    let sent = upstream.requests()[1].json();
    assert_eq!(
        sent["resume"],
        json!([{"interruptId":"i1","status":"resolved","payload":{"approved":true}}])
    );
    assert_eq!(
        sent["messages"],
        json!([{"id":"u","role":"user","content":"deploy"}])
    );
}

// ---------------------------------------------------------------- faults in HAI

fn hai_error(events: &[Value]) -> &Value {
    let last = events.last().expect("a terminal event");
    assert_eq!(last["type"], "RUN_ERROR", "{:?}", event_types(events));
    assert!(last["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(
        events.iter().filter(|e| e["type"] == "RUN_ERROR").count(),
        1
    );
    last
}

fn agui_prefix() -> Vec<Value> {
    vec![
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_faults_end_hai_streams_with_their_codes() {
    let cases: Vec<(Script, &[&str], &str)> = vec![
        (
            Script::sse_json(&agui_prefix()).close(),
            &[],
            "UPSTREAM_TRUNCATED",
        ),
        (
            Script::sse_json(&agui_prefix()).stall(),
            &["--idle-timeout", "300ms"],
            "UPSTREAM_IDLE_TIMEOUT",
        ),
        (
            Script::sse_json(&agui_prefix()).event("not json").close(),
            &[],
            "UPSTREAM_MALFORMED",
        ),
        (
            Script::sse_json(&agui_prefix()).event_json(
                &json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x".repeat(4096)}),
            ),
            &["--max-event-bytes", "1024"],
            "UPSTREAM_EVENT_TOO_LARGE",
        ),
        (
            Script::sse_json(&agui_prefix()).comments(1000, 16, Duration::from_millis(20)),
            &["--max-stream-duration", "300ms"],
            "STREAM_DURATION_EXCEEDED",
        ),
        (
            Script::sse_json(&agui_prefix())
                .comments(64, 1024, Duration::ZERO)
                .stall(),
            &["--max-stream-bytes", "8192"],
            "STREAM_BYTES_EXCEEDED",
        ),
    ];
    for (script, flags, code) in cases {
        let upstream = ScriptedUpstream::with_script(script).await;
        let gateway = hai_gateway(&upstream, flags);
        let events = hai_run(
            &gateway,
            hai_request(json!([{"id":"u","role":"user","content":"hi"}])),
        )
        .await;
        assert_eq!(
            event_types(&events)[..3],
            [
                "RUN_STARTED",
                "BUSINESS_DATA_START",
                "BUSINESS_DATA_CONTENT"
            ],
            "{code}"
        );
        assert_eq!(hai_error(&events)["code"], code);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_hai_upstream_ends_the_agui_stream_with_upstream_truncated() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_json(&[
            json!({"type":"RUN_STARTED"}),
            json!({"type":"BUSINESS_DATA_START","messageId":"m"}),
            json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"partial"}),
        ])
        .close(),
    )
    .await;
    let gateway = gateway("ag-ui", &upstream, "hai", &[]);
    let mut response = send(
        gateway.addr,
        &Request::post_json("/", support::run_input(THREAD, RUN)),
    )
    .await;
    let events = response.events_to_end().await;
    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "RUN_ERROR"
        ]
    );
    assert_eq!(events[3]["code"], "UPSTREAM_TRUNCATED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_the_stream_are_json_errors() {
    let upstream =
        ScriptedUpstream::with_script(Script::status_body(500, "text/plain", "boom")).await;
    let gateway = hai_gateway(&upstream, &[]);
    let mut response = send(
        gateway.addr,
        &Request::post_json("/chat", hai_request(json!([]))),
    )
    .await;
    assert_eq!(response.status, 502);
    let body: Value = serde_json::from_str(&response.text().await).unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM_HTTP_500");

    let bad =
        json!({"threadId":"t","runId":"r","messages":[{"id":"1","role":"alien","content":"x"}]});
    let mut response = send(gateway.addr, &Request::post_json("/awp", bad.to_string())).await;
    assert_eq!(response.status, 400);
    let text = response.text().await;
    assert!(text.contains("messages[0]"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hai_client_leaving_cancels_the_upstream() {
    let mut script = Script::sse_json(&agui_prefix()[..2]);
    for i in 0..200 {
        script = script
            .event_json(
                &json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":format!("{i} ")}),
            )
            .sleep_ms(100);
    }
    let upstream = ScriptedUpstream::with_script(script).await;
    let mut gateway = hai_gateway(&upstream, &[]);
    let mut response = send(
        gateway.addr,
        &Request::post_json("/chat", hai_request(json!([]))),
    )
    .await;
    let events = response.read_events(3).await;
    assert_eq!(
        event_types(&events),
        [
            "RUN_STARTED",
            "BUSINESS_DATA_START",
            "BUSINESS_DATA_CONTENT"
        ]
    );
    response.disconnect();
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "the upstream stayed open"
    );
    assert!(gateway.is_running());
}

/// Several AG-UI runs on one stream cross a HAI hop whole: the HAI face folds them into the
/// one run a HAI stream carries, each boundary a `CUSTOM hai.run`, and a gateway that reads
/// that HAI stream as its upstream gives the AG-UI client both runs back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_runs_cross_a_hai_hop_whole() {
    let agui = [
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"first run"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN,"result":{"n":1},
               "outcome":{"type":"cancelled"}}),
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":"run-hai-2"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"second run"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m2"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":"run-hai-2"}),
    ];
    let upstream = ScriptedUpstream::with_script(Script::sse_json(&agui)).await;
    let face = hai_gateway(&upstream, &[]);

    // A HAI client sees one run, the boundary as a CUSTOM it may ignore.
    let hai = hai_run(
        &face,
        hai_request(json!([{"id":"u1","role":"user","content":"hi"}])),
    )
    .await;
    let count = |ty: &str| hai.iter().filter(|e| e["type"] == ty).count();
    assert_eq!((count("RUN_STARTED"), count("RUN_FINISHED")), (1, 1));
    let boundary = hai
        .iter()
        .find(|e| e["type"] == "CUSTOM")
        .expect("a boundary");
    assert_eq!(boundary["name"], "hai.run");
    assert_eq!(hai.last().unwrap()["runId"], "run-hai-2");

    // A gateway reading the HAI face restores both runs for its AG-UI client.
    let face_url = format!("{}/chat", face.url());
    let outer = Gateway::spawn(&[
        "--client",
        "ag-ui",
        "--upstream",
        &face_url,
        "--upstream-dialect",
        "hai",
    ]);
    let body = json!({"threadId":THREAD,"runId":RUN,"state":{},"tools":[],"context":[],
        "forwardedProps":{},"messages":[{"id":"u1","role":"user","content":"hi"}]});
    let mut response = send(outer.addr, &Request::post_json("/", body.to_string())).await;
    assert_eq!(response.status, 200);
    let events = response.events_to_end().await;
    let types = event_types(&events);
    let runs: Vec<usize> = (0..types.len())
        .filter(|&i| types[i] == "RUN_STARTED")
        .collect();
    assert_eq!(runs.len(), 2, "{types:?}");
    let first_end = &events[runs[1] - 1];
    assert_eq!(first_end["type"], "RUN_FINISHED", "{types:?}");
    assert_eq!(first_end["result"], json!({"n":1}));
    assert_eq!(first_end["outcome"], json!({"type":"cancelled"}));
    assert_eq!(events[runs[1]]["runId"], "run-hai-2");
    assert_eq!(types.last().map(String::as_str), Some("RUN_FINISHED"));
    assert_eq!(events.last().unwrap()["runId"], "run-hai-2");
    let text: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text.concat(), "first runsecond run");
}
