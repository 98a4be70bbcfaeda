use super::*;
use serde_json::json;

fn round_trip(v: serde_json::Value) -> serde_json::Value {
    let event: Event = serde_json::from_value(v).expect("parses");
    serde_json::to_value(&event).expect("serialises")
}

#[test]
fn there_are_31_event_types_with_unique_wire_names() {
    assert_eq!(EventType::ALL.len(), 31);
    let mut names: Vec<_> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 31);
    for t in EventType::ALL {
        assert_eq!(EventType::from_wire(t.as_str()), Some(*t));
    }
}

#[test]
fn every_event_type_round_trips_and_omits_absent_fields() {
    let samples = [
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":{"ok":true},
               "outcome":{"type":"success","pendingToolCallIds":["c1"]}}),
        json!({"type":"RUN_ERROR","message":"boom","code":"X"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"STEP_FINISHED","stepName":"s"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"x"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\""}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","delta":"{}"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t0","toolCallId":"c","content":"ok","role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c","role":"tool",
               "content":[{"type":"text","text":"a"},
                          {"type":"image","source":{"type":"url","value":"https://x/y.png"}}]}),
        json!({"type":"STATE_SNAPSHOT","snapshot":null}),
        json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":null},
                                               {"op":"move","path":"/b","from":"/a"}]}),
        json!({"type":"MESSAGES_SNAPSHOT","messages":[
            {"id":"1","role":"user","content":"hi"},
            {"id":"2","role":"assistant","toolCalls":[{"id":"c","type":"function",
                "function":{"name":"f","arguments":"{not json"}}]},
            {"id":"3","role":"tool","toolCallId":"c","content":"r","error":"failed"},
            {"id":"4","role":"reasoning","content":"hmm"},
            {"id":"5","role":"activity","activityType":"plan","content":{"steps":[]}},
            {"id":"6","role":"system","content":"be brief"},
            {"id":"7","role":"developer","content":"dev"}]}),
        json!({"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"plan","content":{},"replace":false}),
        json!({"type":"ACTIVITY_DELTA","messageId":"a","activityType":"plan",
               "patch":[{"op":"replace","path":"/x","value":1}]}),
        json!({"type":"REASONING_START","messageId":"r"}),
        json!({"type":"REASONING_MESSAGE_START","messageId":"r","role":"reasoning"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"think"}),
        json!({"type":"REASONING_MESSAGE_END","messageId":"r"}),
        json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r","delta":"x"}),
        json!({"type":"REASONING_END","messageId":"r"}),
        json!({"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"zz"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"helper","parentToolCallId":"c"}),
        json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"suspended","interruptIds":["i"]}}),
        json!({"type":"SUBAGENT_ERROR","subagentRunId":"s","message":"bad"}),
        json!({"type":"RAW","event":{"any":[1,null]},"source":"vendor"}),
        json!({"type":"CUSTOM","name":"n","value":null,"timestamp":1700000000000_i64,
               "metadata":{"k":"v"},"rawEvent":{"x":1}}),
    ];
    let mut seen = std::collections::HashSet::new();
    for sample in samples {
        assert_eq!(round_trip(sample.clone()), sample);
        let event: Event = serde_json::from_value(sample).unwrap();
        seen.insert(event.event_type().as_str());
    }
    assert_eq!(seen.len(), 31, "every event type has a sample");
}

#[test]
fn text_message_start_always_writes_a_role() {
    let v = round_trip(json!({"type":"TEXT_MESSAGE_START","messageId":"m"}));
    assert_eq!(
        v,
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"})
    );
}

#[test]
fn nulls_read_as_absent_and_are_never_written() {
    let v = round_trip(
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f",
                             "parentMessageId":null,"rawEvent":null,"timestamp":null}),
    );
    assert_eq!(
        v,
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"})
    );
    let text = serde_json::to_string(
        &serde_json::from_value::<Event>(
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":null,"outcome":null}),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(!text.contains("null"), "{text}");
}

#[test]
fn unknown_fields_are_kept_on_events_and_messages() {
    let v = round_trip(
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x",
                             "futureField":{"a":1}}),
    );
    assert_eq!(v["futureField"], json!({"a":1}));
    let v = round_trip(json!({"type":"MESSAGES_SNAPSHOT","messages":[
        {"id":"1","role":"user","content":"hi","mood":"happy"}]}));
    assert_eq!(v["messages"][0]["mood"], json!("happy"));
}

#[test]
fn outcome_is_a_real_tagged_union() {
    let ok: Event = serde_json::from_value(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
        "outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"tool_call","toolCallId":"c"}]}}))
        .unwrap();
    let Event::RunFinished(f) = ok else {
        panic!("wrong variant")
    };
    assert!(
        matches!(f.outcome, Some(RunOutcome::Interrupt { ref interrupts }) if interrupts.len() == 1)
    );
    // An interrupt outcome without its list is not an interrupt.
    assert!(serde_json::from_value::<Event>(
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
        "outcome":{"type":"interrupt"}})
    )
    .is_err());
    assert!(serde_json::from_value::<Event>(
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
        "outcome":{"type":"cancelled"}})
    )
    .is_ok());
}

#[test]
fn required_fields_are_required() {
    for bad in [
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":{}}),
        json!({"type":"STATE_SNAPSHOT"}),
        json!({"type":"CUSTOM","name":"x"}),
        json!({"type":"RUN_STARTED","threadId":"t"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"助手"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","timestamp":1.5}),
    ] {
        assert!(
            serde_json::from_value::<Event>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn run_agent_input_defaults_and_keeps_extras() {
    let input: RunAgentInput = serde_json::from_value(json!({
        "threadId":"t","runId":"r","messages":[],"botId":"b"}))
    .unwrap();
    assert!(input.tools.is_empty() && input.context.is_empty());
    assert_eq!(input.extra["botId"], json!("b"));
}

#[test]
fn patch_operations_keep_what_they_do_not_define() {
    // RFC 6902 §4: members an operation does not define are ignored, so they are kept, and
    // `from` is a pointer only where move and copy define it.
    let ops = json!([
        {"op":"remove","path":"/a","value":"leftover"},
        {"op":"add","path":"/b","value":null,"from":5,"x-note":{"k":[1]}},
        {"op":"copy","path":"/c","from":"/b"}
    ]);
    let typed: Vec<JsonPatchOp> = serde_json::from_value(ops.clone()).unwrap();
    assert_eq!(typed[1].from, None);
    assert_eq!(typed[1].value, Some(Value::Null));
    assert_eq!(typed[1].extra["from"], json!(5));
    assert_eq!(typed[2].from.as_deref(), Some("/b"));
    assert_eq!(serde_json::to_value(&typed).unwrap(), ops);
    // A `from` of the wrong type where it is defined is malformed.
    let bad = json!({"op":"move","path":"/c","from":1});
    assert!(serde_json::from_value::<JsonPatchOp>(bad).is_err());
}
