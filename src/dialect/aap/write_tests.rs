//! The writer's own rules, event by event; whole streams are covered by the golden fixtures
//! (`tests/fixtures/agui-aap/`).

use serde_json::json;

use super::*;
use crate::dialect::aap::transcript::Transcript;

fn ev(v: serde_json::Value) -> Event {
    serde_json::from_value(v).unwrap()
}

fn writer(mode: StreamMode, budget: usize) -> AapWriter {
    AapWriter::new(
        TurnOptions {
            mode,
            client_tools: vec!["get_location".into()],
            confirm_tool: "confirmAction".into(),
            ..TurnOptions::default()
        },
        Transcript::new(Vec::new(), None, budget),
    )
}

/// (event, data) pairs of the AAP wire.
fn frames(out: &BytesMut) -> Vec<(String, serde_json::Value)> {
    std::str::from_utf8(out)
        .unwrap()
        .split_terminator("\n\n")
        .map(|f| {
            let (name, data) = f.split_once('\n').unwrap();
            (
                name.strip_prefix("event: ").unwrap().to_owned(),
                serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
            )
        })
        .collect()
}

fn feed(w: &mut AapWriter, events: &[serde_json::Value]) -> BytesMut {
    let mut out = BytesMut::new();
    for e in events {
        w.write(ev(e.clone()), &mut out).unwrap();
    }
    out
}

#[test]
fn a_second_open_reasoning_message_waits_for_the_first() {
    let mut w = writer(StreamMode::Delta, 1 << 20);
    let out = feed(
        &mut w,
        &[
            json!({"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"r2","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r2","delta":"b1 "}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"a1"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"r2"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"a2"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"r1"}),
        ],
    );
    let deltas: Vec<_> = frames(&out)
        .into_iter()
        .map(|(_, d)| d["delta"].clone())
        .collect();
    // r2 ended while waiting: it comes out whole, after r1.
    assert_eq!(deltas, [json!("a1"), json!("a2"), json!("b1 ")]);
}

#[test]
fn text_open_at_an_error_is_shown_in_message_mode() {
    let mut w = writer(StreamMode::Message, 1 << 20);
    let out = feed(
        &mut w,
        &[
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"half"}),
            json!({"type":"RUN_ERROR","message":"boom"}),
        ],
    );
    assert_eq!(
        frames(&out),
        [
            ("text".to_owned(), json!({"text":"half"})),
            ("turn_stop".to_owned(), json!({"stopReason":"error"})),
        ]
    );
    assert_eq!(w.stop().unwrap().reason, StopReason::Error);
}

/// A whole message is written as serde_json would write its `{"text": …}`, escapes and all.
#[test]
fn a_whole_message_is_written_as_json_would_write_it() {
    let mut w = writer(StreamMode::Message, 1 << 20);
    let text = "say \"hi\"\n\tto é and \u{1}\u{2028}";
    let out = feed(
        &mut w,
        &[
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":text}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        ],
    );
    let expected = format!("event: text\ndata: {}\n\n", json!({ "text": text }));
    assert_eq!(String::from_utf8_lossy(&out), expected);
}

/// The event built as the live message's deltas arrive shows what the transcript holds at its
/// end: a snapshot's text (as long as the deltas it replaces, so that only the text tells them
/// apart), then the deltas after it; nothing when the snapshot dropped the
/// message (its later deltas have nowhere to go); a text and a reasoning message at once.
#[test]
fn a_message_shows_the_transcripts_text_after_a_snapshot() {
    let start = json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"});
    let content = |d: &str| json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":d});
    let end = json!({"type":"TEXT_MESSAGE_END","messageId":"m1"});
    let snapshot = |messages| json!({"type":"MESSAGES_SNAPSHOT","messages":messages});
    let kept = snapshot(json!([{"id":"m1","role":"assistant","content":"x\""}]));
    let dropped = snapshot(json!([{"id":"u1","role":"user","content":"hi"}]));

    let mut w = writer(StreamMode::Message, 1 << 20);
    let out = feed(
        &mut w,
        &[
            start.clone(),
            content("ab"),
            kept,
            content("\n!"),
            end.clone(),
        ],
    );
    assert_eq!(
        frames(&out),
        [("text".to_owned(), json!({"text":"x\"\n!"}))]
    );

    let mut w = writer(StreamMode::Message, 1 << 20);
    let out = feed(&mut w, &[start, content("ab"), dropped, content("c"), end]);
    assert_eq!(frames(&out), []);

    let mut w = writer(StreamMode::Message, 1 << 20);
    let out = feed(
        &mut w,
        &[
            json!({"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"think"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"say"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m2"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"ing"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"r1"}),
        ],
    );
    assert_eq!(
        frames(&out),
        [
            ("text".to_owned(), json!({"text":"say"})),
            ("thinking".to_owned(), json!({"thinking":"thinking"})),
        ]
    );
}

#[test]
fn pending_calls_are_classified_client_or_permission() {
    let mut w = writer(StreamMode::Delta, 1 << 20);
    feed(
        &mut w,
        &[
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"get_location"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"confirmAction"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":"{\"action\":\"x\",\"tool\":\"web_fetch\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c2"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c3","toolCallName":"get_weather"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c3"}),
            json!({"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c3","content":"sunny"}),
            json!({"type":"RUN_FINISHED","threadId":"s","runId":"r"}),
        ],
    );
    let stop = w.stop().unwrap();
    assert_eq!(stop.reason, StopReason::ToolUse);
    assert_eq!(
        stop.pending,
        [
            Pending {
                tool_call_id: "c1".into(),
                name: "get_location".into(),
                kind: PendingKind::ClientTool
            },
            Pending {
                tool_call_id: "c2".into(),
                name: "web_fetch".into(),
                kind: PendingKind::Permission
            },
        ]
    );
}

#[test]
fn an_interrupt_is_a_permission_answered_with_resume() {
    let mut w = writer(StreamMode::None, 1 << 20);
    let out = feed(
        &mut w,
        &[
            json!({"type":"RUN_FINISHED","threadId":"s","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"approval","message":"Deploy?"}]}}),
        ],
    );
    let stop = w.stop().unwrap();
    assert_eq!(stop.reason, StopReason::ToolUse);
    assert_eq!(
        stop.pending,
        [Pending {
            tool_call_id: "intr:i1".into(),
            name: "interrupt:approval".into(),
            kind: PendingKind::Interrupt {
                interrupt_id: "i1".into(),
                synthetic: true,
            }
        }]
    );
    let body: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        body,
        json!({"stopReason":"tool_use","messages":[{"role":"assistant","content":[
            {"type":"tool_use","toolCallId":"intr:i1","name":"interrupt:approval","input":{"message":"Deploy?"}}]}]})
    );
}

#[test]
fn the_history_budget_ends_the_run() {
    let mut w = writer(StreamMode::Delta, 8);
    let mut out = BytesMut::new();
    w.write(
        ev(json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"})),
        &mut out,
    )
    .unwrap();
    let refused = w
        .write(
            ev(json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"more than eight"})),
            &mut out,
        )
        .unwrap_err();
    assert_eq!(refused.code, crate::error::ErrorCode::HistoryLimitExceeded);
}

#[test]
fn call_view_shows_the_tool_a_confirm_call_names() {
    let call = |name: &str, args: &str| ToolCall {
        id: "c".into(),
        kind: Default::default(),
        function: crate::event::FunctionCall {
            name: name.into(),
            arguments: args.into(),
        },
        encrypted_value: None,
        encrypted_value_type: None,
        metadata: None,
    };
    let client = ["confirmAction".to_owned()];
    let named = call(
        "confirmAction",
        r#"{"action":"a","tool":"web_fetch","arguments":{"url":"u"}}"#,
    );
    let (name, input) = call_view(&named, "confirmAction", &[]);
    assert_eq!(
        (name.as_str(), Value::Object(input)),
        ("web_fetch", json!({"url":"u"}))
    );
    // A client tool of that name is the client's: shown as it is.
    let (name, _) = call_view(&named, "confirmAction", &client);
    assert_eq!(name, "confirmAction");
    let (name, input) = call_view(&call("x", "[1]"), "confirmAction", &[]);
    assert_eq!(
        (name.as_str(), Value::Object(input)),
        ("x", json!({"_value":[1]}))
    );
}

#[test]
fn what_a_plain_turn_leaves_out_is_noted_and_an_extended_turn_leaves_nothing_out() {
    let events = [
        json!({"type":"STATE_SNAPSHOT","snapshot":{"a":1}}),
        json!({"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"PLAN","content":{}}),
        json!({"type":"CUSTOM","name":"x","value":1}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"MESSAGES_SNAPSHOT","messages":[]}),
    ];
    let notes_of = |mut w: AapWriter| {
        feed(&mut w, &events);
        let mut notes = Vec::new();
        crate::dialect::Writer::take_notes(&mut w, &mut notes);
        notes
    };
    let lost = Note::Dropped(DropKind::NoHome);
    // Plain delta: state, activity, the custom event and the snapshot; a step only structures.
    assert_eq!(notes_of(writer(StreamMode::Delta, 1 << 20)), vec![lost; 4]);
    // `none` answers with the transcript, which the snapshot corrected.
    assert_eq!(notes_of(writer(StreamMode::None, 1 << 20)), vec![lost; 3]);
    let extended = AapWriter::new(
        TurnOptions {
            mode: StreamMode::Delta,
            extension: true,
            ..TurnOptions::default()
        },
        Transcript::new(Vec::new(), None, 1 << 20),
    );
    assert_eq!(notes_of(extended), vec![]);
}
