use super::*;
use crate::event::RunIds;

fn reader(options: ReadOptions) -> AapReader {
    let ids = RunIds {
        thread_id: "t".into(),
        run_id: "r".into(),
    };
    AapReader::new(&ids, options)
}

fn event(name: Option<&str>, data: &str) -> SseEvent {
    SseEvent {
        name: name.map(str::to_owned),
        data: bytes::Bytes::copy_from_slice(data.as_bytes()),
    }
}

#[test]
fn outputs_are_fingerprinted_as_the_client_will_hold_them() {
    let mut r = reader(ReadOptions::default());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for (name, data) in [
        ("text_delta", r#"{"delta":"Hel"}"#),
        ("text_delta", r#"{"delta":"lo"}"#),
        (
            "tool_call",
            r#"{"toolCallId":"c1","name":"f","input":{"a":1}}"#,
        ),
        ("turn_stop", r#"{"stopReason":"tool_use"}"#),
    ] {
        r.read(&event(Some(name), data), &mut out, &mut notes)
            .unwrap();
    }
    r.finish(&mut out);
    let message: crate::event::Message = serde_json::from_value(serde_json::json!({
        "id": "r.m0", "role": "assistant", "content": "Hello",
        "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                      {"id": "confirm:perm:c1", "type": "function", "function": {"name": "confirmAction", "arguments": "{}"}}]
    }))
    .unwrap();
    assert_eq!(r.outputs(), [Forwarded::of(&message)]);
    // The permission is offered as the confirm call, and the stop is kept for the record.
    assert!(out
        .iter()
        .any(|e| matches!(e, Event::ToolCallStart(s) if s.tool_call_id == "confirm:perm:c1")));
    assert_eq!(r.final_stop().unwrap().unresolved.len(), 1);
}

#[test]
fn everything_after_the_first_stop_is_dropped() {
    let mut r = reader(ReadOptions::default());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    r.read(
        &event(Some("turn_stop"), r#"{"stopReason":"end_turn"}"#),
        &mut out,
        &mut notes,
    )
    .unwrap();
    r.read(
        &event(Some("text_delta"), r#"{"delta":"late"}"#),
        &mut out,
        &mut notes,
    )
    .unwrap();
    assert!(out.is_empty());
    assert_eq!(notes, [Note::Dropped(DropKind::AfterTerminal)]);
    assert_eq!(r.stop().unwrap().reason, StopReason::EndTurn);
    // The owner may go on with another turn of the same run: ids continue.
    r.next_turn();
    r.read(
        &event(None, r#"{"event":"text_delta","delta":"more"}"#),
        &mut out,
        &mut notes,
    )
    .unwrap();
    assert!(matches!(&out[0], Event::TextMessageStart(s) if s.message_id == "r.m0"));
}

#[test]
fn args_wrappers_come_off() {
    assert_eq!(
        args_text(&serde_json::json!({"_raw": "not json"})),
        "not json"
    );
    assert_eq!(args_text(&serde_json::json!({"_value": [1, 2]})), "[1,2]");
    assert_eq!(args_text(&serde_json::json!({"a": 1})), "{\"a\":1}");
}

#[test]
fn data_that_is_not_json_is_fatal_and_json_that_is_not_an_object_is_dropped() {
    let mut r = reader(ReadOptions::default());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    r.read(
        &event(Some("text_delta"), r#"{"delta":"fine"}"#),
        &mut out,
        &mut notes,
    )
    .unwrap();
    // One event that is JSON but not an object: dropped, the turn goes on.
    r.read(&event(Some("text_delta"), "[1, 2]"), &mut out, &mut notes)
        .unwrap();
    assert_eq!(notes, vec![Note::Dropped(DropKind::NotAnObject)]);
    // Data that is not JSON: the upstream does not speak AAP; the turn fails as malformed,
    // as it does from an AG-UI upstream, instead of ending in success without the text.
    let failure = r
        .read(
            &event(Some("text_delta"), "Hello, not JSON"),
            &mut out,
            &mut notes,
        )
        .unwrap_err();
    assert_eq!(failure.code, ErrorCode::UpstreamMalformed);
    assert!(
        failure.message.contains("text_delta"),
        "{}",
        failure.message
    );
}
