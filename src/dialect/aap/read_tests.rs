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
        name: name.map(Into::into),
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

/// Reads `frames` as one turn and ends the run: the events and the notes.
fn read_turn(frames: &[(&str, &str)]) -> (Vec<Event>, Vec<Note>) {
    let mut r = reader(ReadOptions::default());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for (name, data) in frames {
        r.read(&event(Some(name), data), &mut out, &mut notes)
            .unwrap();
    }
    r.finish(&mut out);
    (out, notes)
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.event_type().as_str()).collect()
}

#[test]
fn the_extension_gives_back_ids_boundaries_and_the_terminal() {
    let (out, notes) = read_turn(&[
        (
            "agui.TEXT_MESSAGE_START",
            r#"{"messageId":"m-1","role":"user","subagentRunId":"sa"}"#,
        ),
        ("text_delta", r#"{"delta":"Hi"}"#),
        (
            "agui.TEXT_MESSAGE_END",
            r#"{"messageId":"m-1","subagentRunId":"sa"}"#,
        ),
        ("agui.STATE_SNAPSHOT", r#"{"snapshot":{"a":1}}"#),
        (
            "turn_stop",
            r#"{"stopReason":"error","agui":{"type":"RUN_ERROR","message":"boom","code":"X"}}"#,
        ),
    ]);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        types(&out),
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STATE_SNAPSHOT",
            "RUN_ERROR"
        ]
    );
    // The delta belongs to the bracketing message, attributed like its start.
    let Event::TextMessageContent(content) = &out[1] else {
        panic!("{out:?}")
    };
    assert_eq!(content.message_id, "m-1");
    assert_eq!(content.base.subagent_run_id.as_deref(), Some("sa"));
    let Event::RunError(error) = &out[4] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (error.message.as_str(), error.code.as_deref()),
        ("boom", Some("X"))
    );
}

#[test]
fn a_malformed_extension_is_dropped_and_the_event_read_as_plain_aap() {
    let (out, notes) = read_turn(&[
        // Not the event it names, no AG-UI type, a type the extension never carries.
        ("agui.STATE_DELTA", r#"{"delta":7}"#),
        ("agui.NOPE", r#"{}"#),
        ("agui.TOOL_CALL_ARGS", r#"{"toolCallId":"c","delta":"x"}"#),
        // A member that is not an object; one whose arguments are not text.
        (
            "tool_call",
            r#"{"toolCallId":"c1","name":"f","input":{"a":1},"agui":5}"#,
        ),
        (
            "tool_call",
            r#"{"toolCallId":"c2","name":"g","input":{},"agui":{"arguments":3}}"#,
        ),
        (
            "tool_result",
            r#"{"toolCallId":"c1","content":"ok","agui":{"messageId":7}}"#,
        ),
        (
            "tool_result",
            r#"{"toolCallId":"c2","content":"ok","agui":{"messageId":"res-2"}}"#,
        ),
        // A terminal that contradicts the stop.
        (
            "turn_stop",
            r#"{"stopReason":"error","agui":{"type":"RUN_FINISHED"}}"#,
        ),
    ]);
    let dropped = notes
        .iter()
        .filter(|n| matches!(n, Note::Dropped(_)))
        .count();
    assert_eq!(dropped, 7, "{notes:?}");
    // Both calls and both results still arrive; the run ends as a plain AAP error.
    let calls: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStart(s) => Some(s.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["c1", "c2"]);
    let results: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallResult(r) => Some(r.message_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1], "res-2", "the well-formed member is read");
    assert!(
        matches!(out.last(), Some(Event::RunError(e)) if e.code.as_deref() == Some("AAP_ERROR"))
    );
}

#[test]
fn a_call_made_up_for_an_interrupt_is_no_event() {
    let (out, notes) = read_turn(&[
        (
            "tool_call",
            r#"{"toolCallId":"intr:i-1","name":"interrupt:confirmation","input":{},"agui":{"interrupt":"i-1"}}"#,
        ),
        (
            "turn_stop",
            r#"{"stopReason":"tool_use","agui":{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"i-1","reason":"confirmation"}]}}}"#,
        ),
    ]);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(types(&out), ["RUN_FINISHED"]);
    let Event::RunFinished(f) = &out[0] else {
        panic!()
    };
    assert_eq!((f.thread_id.as_str(), f.run_id.as_str()), ("t", "r"));
    assert!(matches!(
        &f.outcome,
        Some(RunOutcome::Interrupt { interrupts }) if interrupts[0].id == "i-1"
    ));
}

/// The hand-read deltas give what the general path reads from the same data: the `delta`
/// string, whatever else the data holds.
#[test]
fn plain_deltas_read_as_the_general_path_reads_them() {
    for data in [
        r#"{"delta":"plain"}"#,
        r#"{"delta":"q\"é\\\n\u00e9"}"#,
        r#"{"delta":"x","ts":1732460000000000000}"#,
        r#"{"delta":"x","ts":"s","n":-1}"#,
        r#"{"ts":1,"delta":"x"}"#,
        r#"{ "delta" : "spaced" }"#,
        r#"{"delta":"x","delta":"y"}"#,
        r#"{"delta":"x","nested":{"a":1}}"#,
        r#"{"delta":7}"#,
        r#"{"other":"x"}"#,
    ] {
        let fast = plain_delta(&event(Some("text_delta"), data)).map(|(_, d)| d.into_owned());
        let general: serde_json::Value = serde_json::from_str(data).unwrap();
        if let Some(fast) = fast {
            assert_eq!(general["delta"].as_str(), Some(fast.as_str()), "{data}");
        }
    }
    for (data, expected) in [
        (r#"{"delta":"x","ts":1732460000000000000}"#, Some("x")),
        (r#"{"delta":"x","delta":"y"}"#, None),
        (r#"{"delta":7}"#, None),
    ] {
        let fast = plain_delta(&event(Some("text_delta"), data)).map(|(_, d)| d.into_owned());
        assert_eq!(fast.as_deref(), expected, "{data}");
    }
}
