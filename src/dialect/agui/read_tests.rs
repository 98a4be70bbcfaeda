//! Tests of the lenient AG-UI reader, one per row of the `dialects.md` checklist that the reader
//! implements (rows 1–3, 6–18, 25–27), plus reader → sequencer combinations for the rows the
//! sequencer repairs (4, 5, 21–24). Inputs are vendor shapes from the checklist and the seed
//! documents (002: CloudBase AG-UI page, 003: the blog variant).

use super::*;
use crate::dialect::agui::fix::Timestamps;
use crate::pipeline::{Input, RunSequencer};
use bytes::Bytes;
use serde_json::json;

const THREAD: &str = "thread-1761819878000";
const RUN: &str = "run-1";

fn ids() -> RunIds {
    RunIds {
        thread_id: THREAD.into(),
        run_id: RUN.into(),
    }
}

fn new_reader() -> AguiReader {
    AguiReader::new(
        &ids(),
        Arc::new(AguiAliases::builtin()),
        ReaderOptions::default(),
    )
}

/// An SSE event with an optional `event:` name and raw data.
fn sse_raw(name: Option<&str>, data: impl Into<Bytes>) -> SseEvent {
    SseEvent {
        name: name.map(Into::into),
        data: data.into(),
    }
}

fn sse(v: &Value) -> SseEvent {
    sse_raw(None, serde_json::to_vec(v).expect("serialisable"))
}

fn values(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).expect("serialisable"))
        .collect()
}

/// Feeds events through one reader; returns what came out, as typed events.
fn read_events(events: &[Value]) -> (Vec<Event>, Vec<Note>) {
    let mut reader = new_reader();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for v in events {
        reader
            .read(&sse(v), &mut out, &mut notes)
            .unwrap_or_else(|f| panic!("{v} was refused: {}", f.message));
    }
    (out, notes)
}

/// Feeds events through one reader; returns what came out as JSON values.
fn read_all(events: &[Value]) -> (Vec<Value>, Vec<Note>) {
    let (out, notes) = read_events(events);
    (values(&out), notes)
}

/// One event through a fresh reader.
fn read_one(event: Value) -> (Vec<Value>, Vec<Note>) {
    read_all(&[event])
}

/// Feeds SSE events through one reader and keeps the output and notes of each apart.
fn read_each(events: Vec<SseEvent>) -> Vec<(Vec<Value>, Vec<Note>)> {
    let mut reader = new_reader();
    events
        .into_iter()
        .map(|e| {
            let (mut out, mut notes) = (Vec::new(), Vec::new());
            reader
                .read(&e, &mut out, &mut notes)
                .unwrap_or_else(|f| panic!("{e:?} was refused: {}", f.message));
            (values(&out), notes)
        })
        .collect()
}

/// Reads raw data with a fresh reader and returns the result of `read` as well.
fn read_data(data: &'static [u8]) -> (Result<(), Failure>, Vec<Value>, Vec<Note>) {
    let mut reader = new_reader();
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let result = reader.read(&sse_raw(None, data), &mut out, &mut notes);
    (result, values(&out), notes)
}

/// The reader, then the sequencer, then the upstream's end: what a client would see.
fn read_then_sequence(events: &[Value]) -> (Vec<Value>, Vec<Note>) {
    let mut reader = new_reader();
    let mut sequencer = RunSequencer::new(ids());
    let (mut read_out, mut out, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for v in events {
        reader
            .read(&sse(v), &mut read_out, &mut notes)
            .unwrap_or_else(|f| panic!("{v} was refused: {}", f.message));
        for event in read_out.drain(..) {
            sequencer.step(Input::Event(event), &mut out, &mut notes);
        }
    }
    sequencer.step(Input::UpstreamEnd, &mut out, &mut notes);
    (values(&out), notes)
}

fn count(notes: &[Note], note: Note) -> usize {
    notes.iter().filter(|n| **n == note).count()
}

fn types(out: &[Value]) -> Vec<&str> {
    out.iter().map(|v| v["type"].as_str().unwrap()).collect()
}

// === Row 1 ===

#[test]
fn row_01_snake_case_keys() {
    // (input, canonical output, how many keys were renamed)
    let cases = [
        // Seed 003 run ids, Python `model_dump()` without `by_alias`.
        (
            json!({"type":"RUN_STARTED","timestamp":1_761_819_878_000_i64,"rawEvent":{},
                   "thread_id":"1","run_id":"1","parent_run_id":"0"}),
            json!({"type":"RUN_STARTED","threadId":"1","runId":"1","parentRunId":"0",
                   "timestamp":1_761_819_878_000_i64,"rawEvent":{}}),
            3,
        ),
        (
            json!({"type":"TEXT_MESSAGE_START","message_id":"1096311","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"assistant"}),
            1,
        ),
        // Both spellings: camelCase wins, the snake_case key is dropped.
        (
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"1096311","message_id":"stale",
                   "delta":"我正在"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"1096311","delta":"我正在"}),
            1,
        ),
        (
            json!({"type":"TOOL_CALL_START","tool_call_id":"c1","tool_call_name":"应用系统查询",
                   "parent_message_id":"1096311"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"应用系统查询",
                   "parentMessageId":"1096311"}),
            3,
        ),
        // Tool-argument text is opaque.
        (
            json!({"type":"TOOL_CALL_ARGS","tool_call_id":"c1",
                   "delta":"{\"thread_id\":\"1\",\"message_id\":\"x\"}"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1",
                   "delta":"{\"thread_id\":\"1\",\"message_id\":\"x\"}"}),
            1,
        ),
        (
            json!({"type":"TOOL_CALL_END","tool_call_id":"c1"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
            1,
        ),
        (
            json!({"type":"STEP_STARTED","step_name":"plan","subagent_run_id":"sub-1"}),
            json!({"type":"STEP_STARTED","stepName":"plan","subagentRunId":"sub-1"}),
            2,
        ),
        // Seed 003 `raw_event` on CUSTOM: renamed at the top, its content and CUSTOM.value
        // untouched (nested nulls included).
        (
            json!({"type":"CUSTOM","name":"event_name","value":{"thread_id":"1","run_id":"1"},
                   "raw_event":{"raw_event_data":null,"tool_call_id":"c1"}}),
            json!({"type":"CUSTOM","name":"event_name","value":{"thread_id":"1","run_id":"1"},
                   "rawEvent":{"raw_event_data":null,"tool_call_id":"c1"}}),
            1,
        ),
        // Opaque payloads: RAW.event, STATE_SNAPSHOT.snapshot, patch values.
        (
            json!({"type":"RAW","event":{"run_id":"1","message_id":"m"},"source":"python"}),
            json!({"type":"RAW","event":{"run_id":"1","message_id":"m"},"source":"python"}),
            0,
        ),
        (
            json!({"type":"STATE_SNAPSHOT","snapshot":{"message_id":"m","tool_calls":[]}}),
            json!({"type":"STATE_SNAPSHOT","snapshot":{"message_id":"m","tool_calls":[]}}),
            0,
        ),
        (
            json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/last","value":{"run_id":"1"}}]}),
            json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/last","value":{"run_id":"1"}}]}),
            0,
        ),
        (
            json!({"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entity_id":"1096319",
                   "encrypted_value":"gAAAAB"}),
            json!({"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"1096319",
                   "encryptedValue":"gAAAAB"}),
            2,
        ),
        (
            json!({"type":"ACTIVITY_SNAPSHOT","message_id":"act-1","activity_type":"plan",
                   "content":{"step_name":"retrieve"}}),
            json!({"type":"ACTIVITY_SNAPSHOT","messageId":"act-1","activityType":"plan",
                   "content":{"step_name":"retrieve"}}),
            2,
        ),
        // RUN_FINISHED.result is opaque.
        (
            json!({"type":"RUN_FINISHED","thread_id":"1","run_id":"1","result":{"message_id":"m"}}),
            json!({"type":"RUN_FINISHED","threadId":"1","runId":"1","result":{"message_id":"m"}}),
            2,
        ),
    ];
    let inputs = cases.iter().map(|(input, _, _)| sse(input)).collect();
    for ((out, notes), (input, want, renamed)) in read_each(inputs).into_iter().zip(&cases) {
        assert_eq!(out, vec![want.clone()], "{input}");
        assert_eq!(
            count(&notes, Note::Fixup(Rule::SnakeCaseKeys)),
            *renamed,
            "{input}: {notes:?}"
        );
    }
}

// === Row 2 ===

#[test]
fn row_02_type_spelling() {
    let spelling = Note::Fixup(Rule::TypeSpelling);
    let unknown = Note::Dropped(DropKind::UnknownType);
    let cases = [
        // Type only on the SSE `event:` line, lower-case.
        (
            sse_raw(Some("run_started"), r#"{"threadId":"t-up","runId":"r-up"}"#),
            vec![json!({"type":"RUN_STARTED","threadId":"t-up","runId":"r-up"})],
            vec![spelling],
        ),
        // `event` key instead of `type`; the key does not survive as an extra.
        (
            sse(&json!({"event":"text_message_start","messageId":"m1","role":"assistant"})),
            vec![json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"})],
            vec![spelling],
        ),
        // Dotted and dashed.
        (
            sse(&json!({"type":"text.message.content","messageId":"m1","delta":"Hello"})),
            vec![json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"})],
            vec![spelling],
        ),
        (
            sse(&json!({"type":"text-message-end","messageId":"m1"})),
            vec![json!({"type":"TEXT_MESSAGE_END","messageId":"m1"})],
            vec![spelling],
        ),
        // Canonical name on the SSE line: nothing to fix.
        (
            sse_raw(Some("STEP_STARTED"), r#"{"stepName":"search"}"#),
            vec![json!({"type":"STEP_STARTED","stepName":"search"})],
            vec![],
        ),
        // `type` wins over the SSE name.
        (
            sse_raw(
                Some("message"),
                r#"{"type":"STEP_FINISHED","stepName":"search"}"#,
            ),
            vec![json!({"type":"STEP_FINISHED","stepName":"search"})],
            vec![],
        ),
        // Still unknown: dropped and counted (TanStack `CITATIONS`).
        (
            sse(&json!({"type":"CITATIONS","citations":[{"url":"https://example.com"}]})),
            vec![],
            vec![unknown],
        ),
        (
            sse(&json!({"type":"tool.call.progress","toolCallId":"c1"})),
            vec![],
            vec![spelling, unknown],
        ),
        // No type anywhere.
        (sse(&json!({"delta":"no type"})), vec![], vec![unknown]),
        // Umbraco.AI lower-case terminal.
        (
            sse(&json!({"type":"run_error","message":"Rate limit exceeded","code":"429"})),
            vec![json!({"type":"RUN_ERROR","message":"Rate limit exceeded","code":"429"})],
            vec![spelling],
        ),
    ];
    let inputs = cases.iter().map(|(e, _, _)| e.clone()).collect();
    for ((out, notes), (input, want, want_notes)) in read_each(inputs).into_iter().zip(&cases) {
        assert_eq!(&out, want, "{input:?}");
        assert_eq!(&notes, want_notes, "{input:?}");
    }
}

// === Row 3 ===

#[test]
fn row_03_run_error_shapes() {
    let shape = Note::Fixup(Rule::RunErrorShape);
    let cases = [
        // CloudBase AG-UI page (seed 002): nested, code kept verbatim.
        (
            json!({"type":"RUN_ERROR","error":{"code":"TOOL_EXECUTION_ERROR","message":"工具执行失败"}}),
            json!({"type":"RUN_ERROR","message":"工具执行失败","code":"TOOL_EXECUTION_ERROR"}),
            true,
        ),
        // Umbraco.AI: `error` is the text, numeric code.
        (
            json!({"type":"RUN_ERROR","error":"Rate limit exceeded","code":429}),
            json!({"type":"RUN_ERROR","message":"Rate limit exceeded","code":"429"}),
            true,
        ),
        // Seed 003: extra `result:{}` dropped, placeholder timestamp dropped (row 17).
        (
            json!({"type":"RUN_ERROR","timestamp":10_693_854,"rawEvent":{},"message":"系统错误",
                   "code":"400","result":{}}),
            json!({"type":"RUN_ERROR","message":"系统错误","code":"400","rawEvent":{}}),
            true,
        ),
        // TanStack AI < 0.45: nested with a null code.
        (
            json!({"type":"RUN_ERROR","error":{"message":"model overloaded","code":null}}),
            json!({"type":"RUN_ERROR","message":"model overloaded"}),
            true,
        ),
        // A nested numeric code is stringified.
        (
            json!({"type":"RUN_ERROR","error":{"message":"bad request","code":400}}),
            json!({"type":"RUN_ERROR","message":"bad request","code":"400"}),
            true,
        ),
        // Nothing usable: a message is still required.
        (
            json!({"type":"RUN_ERROR","error":{"code":"TIMEOUT"}}),
            json!({"type":"RUN_ERROR","message":"unknown error","code":"TIMEOUT"}),
            true,
        ),
        // A flat, valid error with `code:null` only loses the null (row 9).
        (
            json!({"type":"RUN_ERROR","message":"timeout","code":null}),
            json!({"type":"RUN_ERROR","message":"timeout"}),
            false,
        ),
    ];
    for (input, want, fixed) in cases {
        let (out, notes) = read_one(input.clone());
        assert_eq!(out, vec![want], "{input}");
        assert_eq!(notes.contains(&shape), fixed, "{input}: {notes:?}");
    }
    let (_, notes) = read_one(json!({"type":"RUN_ERROR","message":"timeout","code":null}));
    assert!(notes.contains(&Note::Fixup(Rule::NullsAndEmptyIds)));
}

// === Rows 4 and 5 (sequencer, after the reader) ===

#[test]
fn row_04_extra_terminals_with_sequencer() {
    // AgentScope `emitRunFinishedAfterError`: RUN_FINISHED after RUN_ERROR, then stragglers.
    let (out, notes) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","thread_id":THREAD,"run_id":RUN}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Searching"}),
        json!({"type":"RUN_ERROR","error":{"code":"MODEL_ERROR","message":"model call failed"}}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        json!({"type":"RUN_ERROR","message":"duplicate"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Searching"}),
            json!({"type":"RUN_ERROR","message":"model call failed","code":"MODEL_ERROR"}),
        ]
    );
    assert_eq!(count(&notes, Note::Dropped(DropKind::AfterTerminal)), 3);
    assert!(notes.contains(&Note::Fixup(Rule::RunErrorShape)));
}

#[test]
fn row_05_missing_or_foreign_run_ids_with_sequencer() {
    // Seed 003 RUN_STARTED (`run_id` is an agent id), CloudBase RUN_FINISHED without ids.
    let (out, notes) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","timestamp":10_693_854,"rawEvent":{},"thread_id":"1","run_id":"1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"助手"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"1096311","delta":"我正在"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"1096311"}),
        json!({"type":"RUN_FINISHED"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0",
                   "rawEvent":{}}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"1096311","delta":"我正在"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"1096311"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
    assert!(notes.contains(&Note::Fixup(Rule::RunIds)));
    assert!(notes.contains(&Note::Fixup(Rule::SnakeCaseKeys)));

    // The reader alone leaves the ids empty for the sequencer to fill.
    let (out, notes) = read_one(json!({"type":"RUN_FINISHED"}));
    assert_eq!(
        out,
        vec![json!({"type":"RUN_FINISHED","threadId":"","runId":""})]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::RunIds)), 2);
}

// === Row 6 ===

#[test]
fn row_06_object_tool_args() {
    let object_args = Note::Fixup(Rule::ObjectToolArgs);

    // A single object delta (seed 003 shape) becomes compact JSON text, emitted before the END
    // with the base fields of the delta event; seed 003's literal `delta:{}` becomes "{}".
    let (out, notes) = read_all(&[
        json!({"type":"TOOL_CALL_START","timestamp":10_693_854,"rawEvent":{},"toolCallId":"1096311",
               "toolCallName":"应用系统查询","parentMessageId":"1096311"}),
        json!({"type":"TOOL_CALL_ARGS","timestamp":10_693_854,"rawEvent":{},"toolCallId":"1096311",
               "delta":{"city":"深圳","date":"2025-10-30"}}),
        json!({"type":"TOOL_CALL_END","timestamp":10_693_854,"rawEvent":{},"toolCallId":"1096311"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c-empty","toolCallName":"应用系统查询"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c-empty","delta":{}}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c-empty"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"1096311","toolCallName":"应用系统查询",
                   "parentMessageId":"1096311","rawEvent":{}}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"1096311",
                   "delta":"{\"city\":\"深圳\",\"date\":\"2025-10-30\"}","rawEvent":{}}),
            json!({"type":"TOOL_CALL_END","toolCallId":"1096311","rawEvent":{}}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c-empty","toolCallName":"应用系统查询"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c-empty","delta":"{}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c-empty"}),
        ]
    );
    assert_eq!(count(&notes, object_args), 2);

    // Several object deltas for one call (LangGraph manual tool calls) are held until its END
    // and shallow-merged, later keys winning; a parallel call with string deltas is not held.
    let (out, notes) = read_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"get_weather"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c5","toolCallName":"get_time"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":{"city":"Paris","opts":{"a":1}}}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c5","delta":"{\"tz\":\"CET\"}"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c5"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":{"opts":{"b":2},"unit":"c"}}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c2"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"get_weather"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c5","toolCallName":"get_time"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c5","delta":"{\"tz\":\"CET\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c5"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c2",
                   "delta":"{\"city\":\"Paris\",\"opts\":{\"b\":2},\"unit\":\"c\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c2"}),
        ]
    );
    assert_eq!(count(&notes, object_args), 2);

    // Object then string: what was held is serialised first, then the text is appended (lossy).
    let (out, notes) = read_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"c3","toolCallName":"search"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c3","delta":{"q":"rust"}}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c3","delta":"{\"page\":2}"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c3"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"c3","toolCallName":"search"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c3","delta":"{\"q\":\"rust\"}"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c3","delta":"{\"page\":2}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c3"}),
        ]
    );
    assert_eq!(count(&notes, object_args), 1, "{notes:?}");
    assert_eq!(
        count(&notes, Note::Dropped(DropKind::Lossy)),
        1,
        "{notes:?}"
    );

    // String then object: the object is serialised and appended in place.
    let (out, notes) = read_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"c4","toolCallName":"search"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c4","delta":"{\"q\":"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c4","delta":{"x":1}}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c4"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"c4","toolCallName":"search"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c4","delta":"{\"q\":"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c4","delta":"{\"x\":1}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c4"}),
        ]
    );
    assert_eq!(count(&notes, object_args), 1);
}

// === Row 7 ===

#[test]
fn row_07_field_aliases() {
    let alias = Note::Fixup(Rule::FieldAlias);

    // Umbraco.AI: `toolName`, `args` (text) on ARGS, `content` on TEXT_MESSAGE_CONTENT.
    let (out, notes) = read_all(&[
        json!({"type":"tool_call_start","toolCallId":"call_1","toolName":"search_docs"}),
        json!({"type":"tool_call_args","toolCallId":"call_1","args":"{\"query\":\"umbraco\"}"}),
        json!({"type":"tool_call_end","toolCallId":"call_1"}),
        json!({"type":"text_message_start","messageId":"m1","role":"assistant"}),
        json!({"type":"text_message_content","messageId":"m1","content":"Found it"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"search_docs"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"call_1","delta":"{\"query\":\"umbraco\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"call_1"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Found it"}),
        ]
    );
    assert_eq!(count(&notes, alias), 3);

    // CloudBase `request_input` (seed 002): `args` on START, no ARGS: one ARGS before the END.
    let (out, notes) = read_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"call-2","toolCallName":"request_input",
               "args":{"prompt":"请输入您的邮箱地址"}}),
        json!({"type":"TOOL_CALL_END","toolCallId":"call-2"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"call-2","toolCallName":"request_input"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"call-2",
                   "delta":"{\"prompt\":\"请输入您的邮箱地址\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"call-2"}),
        ]
    );
    assert_eq!(count(&notes, alias), 1);

    // START `args` are used only when no ARGS arrived: here ARGS did, so they are ignored.
    let (out, _) = read_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"call-3","toolCallName":"request_input",
               "args":{"prompt":"old"}}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"call-3","delta":"{\"prompt\":\"new\"}"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"call-3"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"call-3","toolCallName":"request_input"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"call-3","delta":"{\"prompt\":\"new\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"call-3"}),
        ]
    );

    // Umbraco.AI `args` object on END, and an `args` object on ARGS (alias, then row 6).
    let (out, notes) = read_all(&[
        json!({"type":"tool_call_start","toolCallId":"call_4","toolName":"get_time"}),
        json!({"type":"tool_call_end","toolCallId":"call_4","args":{"tz":"UTC"}}),
        json!({"type":"tool_call_start","toolCallId":"call_5","toolName":"count"}),
        json!({"type":"tool_call_args","toolCallId":"call_5","args":{"n":1}}),
        json!({"type":"tool_call_end","toolCallId":"call_5"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"call_4","toolCallName":"get_time"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"call_4","delta":"{\"tz\":\"UTC\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"call_4"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"call_5","toolCallName":"count"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"call_5","delta":"{\"n\":1}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"call_5"}),
        ]
    );
    assert_eq!(count(&notes, alias), 4);
    assert!(notes.contains(&Note::Fixup(Rule::ObjectToolArgs)));
}

// === Row 8 ===

#[test]
fn row_08_tool_call_result_variants() {
    let shape = Note::Fixup(Rule::ToolResultShape);
    // The seed 003 pseudo-object: it only looks like JSON, so it stays a string.
    let pseudo = "{\n    data:数据\n    type:'logic_chart'\n}";
    let results = read_each(vec![
        // Seed 003: `message_id:""`, `role:"tool"`, placeholder timestamp.
        sse(
            &json!({"type":"TOOL_CALL_RESULT","timestamp":10_693_854,"rawEvent":{},"message_id":"",
                    "toolCallId":"1096311","content":pseudo,"role":"tool"}),
        ),
        // `result` instead of `content`, an object.
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"tr-1","toolCallId":"c1",
                    "result":{"temperature":21,"unit":"c"}}),
        ),
        // Valid content parts are kept.
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"tr-2","toolCallId":"c2",
                    "content":[{"type":"text","text":"done"}]}),
        ),
        // An array that is not parts, a number, snake extras, a foreign role.
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"tr-3","toolCallId":"c3",
                    "content":[{"kind":"row","id":1}]}),
        ),
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"tr-4","toolCallId":"c4","content":42,
                    "tool_name":"calc","tool_call_args":{"a":40,"b":2},"role":"assistant"}),
        ),
        // JSON-looking text stays text; no messageId at all gets the next synthetic one.
        sse(&json!({"type":"TOOL_CALL_RESULT","toolCallId":"c5","content":"{\"ok\":true}"})),
    ]);
    let want = [
        json!({"type":"TOOL_CALL_RESULT","messageId":"run-1.t0","toolCallId":"1096311",
               "content":pseudo,"role":"tool","rawEvent":{}}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"tr-1","toolCallId":"c1",
               "content":"{\"temperature\":21,\"unit\":\"c\"}","role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"tr-2","toolCallId":"c2",
               "content":[{"type":"text","text":"done"}],"role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"tr-3","toolCallId":"c3",
               "content":"[{\"kind\":\"row\",\"id\":1}]","role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"tr-4","toolCallId":"c4","content":"42",
               "role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"run-1.t1","toolCallId":"c5",
               "content":"{\"ok\":true}","role":"tool"}),
    ];
    let fixed = [true, true, false, true, true, true];
    for (((out, notes), want), fixed) in results.into_iter().zip(want).zip(fixed) {
        assert_eq!(out, vec![want.clone()]);
        assert_eq!(notes.contains(&shape), fixed, "{want}: {notes:?}");
    }
}

// === Row 9 ===

#[test]
fn row_09_nulls_and_empty_ids() {
    let nulls = Note::Fixup(Rule::NullsAndEmptyIds);
    let results = read_each(vec![
        // .NET: `parentMessageId:""`; Python: nulls; non-object metadata.
        sse(
            &json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"lookup",
                    "parentMessageId":"","timestamp":null,"rawEvent":null,"metadata":null}),
        ),
        sse(
            &json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant","name":null,
                    "metadata":"n/a","subagentRunId":""}),
        ),
        // Opaque content keeps its nested nulls.
        sse(
            &json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x",
                    "rawEvent":{"choices":[{"delta":{"content":"x"},"finish_reason":null}]},
                    "metadata":{"trace":null}}),
        ),
        // Required fields that may be null stay.
        sse(&json!({"type":"STATE_SNAPSHOT","snapshot":null})),
        sse(&json!({"type":"CUSTOM","name":"ping","value":null})),
        sse(&json!({"type":"RAW","event":null})),
    ]);
    let want = [
        (
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"lookup"}),
            true,
        ),
        (
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            true,
        ),
        (
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x",
                   "rawEvent":{"choices":[{"delta":{"content":"x"},"finish_reason":null}]},
                   "metadata":{"trace":null}}),
            false,
        ),
        (json!({"type":"STATE_SNAPSHOT","snapshot":null}), false),
        (json!({"type":"CUSTOM","name":"ping","value":null}), false),
        (json!({"type":"RAW","event":null}), false),
    ];
    for ((out, notes), (want, fixed)) in results.into_iter().zip(want) {
        assert_eq!(out, vec![want.clone()]);
        assert_eq!(notes.contains(&nulls), fixed, "{want}: {notes:?}");
    }
}

// === Row 10 ===

#[test]
fn row_10_text_event_gaps() {
    let gaps = Note::Fixup(Rule::TextEventGaps);

    // CloudBase: START without role; CONTENT/END without messageId resolve to the open message;
    // empty deltas are kept; content with nothing open gets a synthetic START; an END with
    // nothing open is dropped.
    let (out, notes) = read_all(&[
        json!({"type":"TEXT_MESSAGE_START","messageId":"msg-1"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"你好"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":""}),
        json!({"type":"TEXT_MESSAGE_END"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"orphan text"}),
        json!({"type":"TEXT_MESSAGE_END"}),
        json!({"type":"TEXT_MESSAGE_END"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TEXT_MESSAGE_START","messageId":"msg-1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"你好"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":""}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"msg-1"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"run-1.m0","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"run-1.m0","delta":"orphan text"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"run-1.m0"}),
        ]
    );
    assert_eq!(count(&notes, gaps), 5);
    assert_eq!(count(&notes, Note::Dropped(DropKind::Orphan)), 1);

    // Lanes: a missing id resolves within the event's own lane.
    let (out, _) = read_all(&[
        json!({"type":"TEXT_MESSAGE_START","messageId":"s1","subagentRunId":"sub-1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"p1"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"x","subagentRunId":"sub-1"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"y"}),
    ]);
    assert_eq!(
        out[2..],
        [
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"s1","delta":"x","subagentRunId":"sub-1"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"p1","delta":"y"}),
        ]
    );

    // Two open messages in one lane: ambiguous, so a START is synthesised.
    let (out, _) = read_all(&[
        json!({"type":"TEXT_MESSAGE_START","messageId":"a"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"b"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"which?"}),
    ]);
    assert_eq!(
        out[2..],
        [
            json!({"type":"TEXT_MESSAGE_START","messageId":"run-1.m0","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"run-1.m0","delta":"which?"}),
        ]
    );

    // Roles outside the enum (seed 003 `助手`, case-insensitive table, unknown → assistant).
    for (role, want, fixed) in [
        ("助手", "assistant", true),
        ("AI", "assistant", true),
        ("bot", "assistant", true),
        ("model", "assistant", true),
        ("agent", "assistant", true),
        ("human", "user", true),
        ("robot", "assistant", true),
        ("user", "user", false),
        ("system", "system", false),
    ] {
        let (out, notes) =
            read_one(json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":role}));
        assert_eq!(
            out,
            vec![json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":want})],
            "{role}"
        );
        assert_eq!(notes.contains(&gaps), fixed, "{role}");
    }
}

/// Rows 10 + 24: a duplicate START (dropped later by the sequencer) must not make the one open
/// message look like two, so CONTENT without `messageId` still resolves to it.
#[test]
fn row_10_duplicate_start_does_not_hide_the_open_message() {
    let (out, _) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","delta":"hello"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
}

// === Row 11 ===

#[test]
fn row_11_chunks_are_expanded() {
    let (out, notes) = read_all(&[
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        // Chunks go through spelling and key fixes first.
        json!({"type":"text_message_chunk","message_id":"m1","role":"assistant","delta":"Let me "}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"check."}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"get_weather",
               "parentMessageId":"m1","delta":"{\"city\":"}),
        json!({"type":"TOOL_CALL_CHUNK","delta":"\"Paris\"}"}),
        json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"rm1","delta":"thinking"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Let me "}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"check."}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"get_weather",
                   "parentMessageId":"m1"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"city\":"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"\"Paris\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"rm1","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"rm1","delta":"thinking"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"rm1"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::ChunkExpansion)), 5);
    assert!(types(&out).iter().all(|t| !t.ends_with("_CHUNK")));

    // A first text chunk without an id gets a minted one; a non-chunk event closes the stream.
    let (out, _) = read_all(&[
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"a"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TEXT_MESSAGE_START","messageId":"run-1.m0","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"run-1.m0","delta":"a"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"run-1.m0","delta":"b"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"run-1.m0"}),
            json!({"type":"STEP_STARTED","stepName":"s"}),
        ]
    );
}

/// Rows 10 + 11: the role repair of row 10 should apply to a chunk's role as to a START's, so
/// the chunk (and its text) is not lost.
#[test]
fn row_11_chunk_with_vendor_role_keeps_its_text() {
    let (out, notes) = read_all(&[
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"model","delta":"Hi"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":" there"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hi"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":" there"}),
        ]
    );
    assert!(!notes.contains(&Note::Dropped(DropKind::InvalidEvent)));
}

// === Row 12 ===

#[test]
fn row_12_legacy_thinking() {
    let legacy = Note::Fixup(Rule::LegacyThinking);

    // Seed 003: THINKING_TEXT_MESSAGE_* with messageId and role "助手", no span: a synthetic
    // REASONING_START/END pair around it, the given id kept, the role dropped.
    let (out, notes) = read_all(&[
        json!({"type":"THINKING_TEXT_MESSAGE_START","timestamp":10_693_854,"rawEvent":{},
               "messageId":"1096319","role":"助手"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","timestamp":10_693_854,"rawEvent":{},
               "messageId":"1096319","delta":"我正在"}),
        json!({"type":"THINKING_TEXT_MESSAGE_END","timestamp":10_693_854,"rawEvent":{},
               "messageId":"1096319"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"REASONING_START","messageId":"1096319"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"1096319","role":"reasoning",
                   "rawEvent":{}}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"1096319","delta":"我正在",
                   "rawEvent":{}}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"1096319","rawEvent":{}}),
            json!({"type":"REASONING_END","messageId":"1096319"}),
        ]
    );
    assert_eq!(count(&notes, legacy), 3);

    // The 0.0.x shape: span with a title, messages without ids.
    let (out, notes) = read_all(&[
        json!({"type":"THINKING_START","title":"Planning the answer","timestamp":1_761_819_878}),
        json!({"type":"THINKING_TEXT_MESSAGE_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"First, "}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"check the cache."}),
        json!({"type":"THINKING_TEXT_MESSAGE_END"}),
        json!({"type":"THINKING_END"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"REASONING_START","messageId":"run-1.r0",
                   "timestamp":1_761_819_878_000_i64}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"run-1.r0","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"run-1.r0","delta":"First, "}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"run-1.r0",
                   "delta":"check the cache."}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"run-1.r0"}),
            json!({"type":"REASONING_END","messageId":"run-1.r0"}),
        ]
    );
    assert_eq!(count(&notes, legacy), 6);

    // Older THINKING_CONTENT {delta} (lower-case here) opens a message when none is open.
    let (out, _) = read_all(&[
        json!({"type":"thinking_start"}),
        json!({"type":"thinking_content","delta":"a"}),
        json!({"type":"THINKING_CONTENT","delta":"b"}),
        json!({"type":"thinking_end"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"REASONING_START","messageId":"run-1.r0"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"run-1.r0","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"run-1.r0","delta":"a"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"run-1.r0","delta":"b"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"run-1.r0"}),
            json!({"type":"REASONING_END","messageId":"run-1.r0"}),
        ]
    );
    assert!(types(&out).iter().all(|t| !t.starts_with("THINKING")));
}

/// Row 12: two id-less thinking messages inside one THINKING_START span are two messages and
/// must not share a `messageId` (`translation.md` §2.2: synthesised ids are unique per kind).
#[test]
fn row_12_messages_in_one_legacy_span_get_distinct_ids() {
    let (out, _) = read_all(&[
        json!({"type":"THINKING_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"first"}),
        json!({"type":"THINKING_TEXT_MESSAGE_END"}),
        json!({"type":"THINKING_TEXT_MESSAGE_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"second"}),
        json!({"type":"THINKING_TEXT_MESSAGE_END"}),
        json!({"type":"THINKING_END"}),
    ]);
    let starts: Vec<&Value> = out
        .iter()
        .filter(|v| v["type"] == "REASONING_MESSAGE_START")
        .map(|v| &v["messageId"])
        .collect();
    assert_eq!(starts.len(), 2, "{out:?}");
    assert_ne!(starts[0], starts[1], "{out:?}");
}

// === Row 13 ===

#[test]
fn row_13_state_delta_shape() {
    let shape = Note::Fixup(Rule::StateDeltaShape);

    // A single op object and a path without its slash. The `from:""` an `add` does not define
    // is kept: RFC 6902 makes such members part of the patch (HAI's own is removed by the HAI
    // reader, which knows it for a habit of the dialect).
    let (out, notes) = read_one(json!({"type":"STATE_DELTA",
        "delta":{"op":"add","path":"progress","value":75,"from":""}}));
    assert_eq!(
        out,
        vec![json!({"type":"STATE_DELTA",
            "delta":[{"op":"add","path":"/progress","value":75,"from":""}]})]
    );
    assert_eq!(count(&notes, shape), 2);

    // An op list: `from` read (and repaired) as a pointer only on move/copy, kept as it came
    // elsewhere; patch values are opaque (snake keys and nulls kept); root path "" and null
    // values are valid and kept.
    let (out, notes) = read_one(json!({"type":"STATE_DELTA","delta":[
        {"op":"replace","path":"/progress","value":75,"from":""},
        {"op":"move","from":"draft","path":"/final"},
        {"op":"add","path":"results/-","value":{"tool_call_id":"c1","thread_id":null}},
        {"op":"replace","path":"","value":{}},
        {"op":"remove","path":"/tmp"},
        {"op":"replace","path":"/cursor","value":null}
    ]}));
    assert_eq!(
        out,
        vec![json!({"type":"STATE_DELTA","delta":[
            {"op":"replace","path":"/progress","value":75,"from":""},
            {"op":"move","from":"/draft","path":"/final"},
            {"op":"add","path":"/results/-","value":{"tool_call_id":"c1","thread_id":null}},
            {"op":"replace","path":"","value":{}},
            {"op":"remove","path":"/tmp"},
            {"op":"replace","path":"/cursor","value":null}
        ]})]
    );
    assert_eq!(count(&notes, shape), 2);

    // The canonical CloudBase example (seed 002) needs nothing.
    let canonical =
        json!({"type":"STATE_DELTA","delta":[{"op":"replace","path":"/progress","value":75}]});
    let (out, notes) = read_one(canonical.clone());
    assert_eq!(out, vec![canonical]);
    assert!(notes.is_empty(), "{notes:?}");
}

// === Row 14 ===

#[test]
fn row_14_message_snapshot_singular() {
    // HAI's singular name; messages get their own snake-key and null fixes, argument text is
    // opaque.
    let (out, notes) = read_one(json!({"type":"MESSAGE_SNAPSHOT","messages":[
        {"id":"u1","role":"user","content":"北京天气?"},
        {"id":"a1","role":"assistant","content":null,"tool_calls":[
            {"id":"c1","type":"function",
             "function":{"name":"get_weather","arguments":"{\"city_name\":\"北京\"}"}}]},
        {"id":"t1","role":"tool","tool_call_id":"c1","content":"{\"temp\":21}"}
    ]}));
    assert_eq!(
        out,
        vec![json!({"type":"MESSAGES_SNAPSHOT","messages":[
            {"id":"u1","role":"user","content":"北京天气?"},
            {"id":"a1","role":"assistant","toolCalls":[
                {"id":"c1","type":"function",
                 "function":{"name":"get_weather","arguments":"{\"city_name\":\"北京\"}"}}]},
            {"id":"t1","role":"tool","toolCallId":"c1","content":"{\"temp\":21}"}
        ]})]
    );
    assert!(notes.contains(&Note::Fixup(Rule::SnapshotName)));
    assert_eq!(count(&notes, Note::Fixup(Rule::SnakeCaseKeys)), 2);
}

// === Row 15 ===

#[test]
fn row_15_vendor_extras_are_kept_for_the_writer() {
    let (out, _) = read_events(&[
        // HAI: messageId/role on RUN_*.
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r","messageId":"hai-1","role":"assistant"}),
        // TanStack: `model` on every event.
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant","model":"gpt-4o"}),
        // Older Claude Agent SDK integration: run ids on content events.
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi","threadId":"t","runId":"r"}),
        // A self-hosted app's `stage`.
        json!({"type":"STEP_STARTED","stepName":"retrieve","stage":"retrieval"}),
        // `result` on RUN_ERROR is not an extra: row 3 drops it.
        json!({"type":"RUN_ERROR","message":"x","result":{}}),
    ]);
    let extras: Vec<Value> = out
        .iter()
        .map(|e| Value::Object(e.base().extra.to_map()))
        .collect();
    assert_eq!(
        extras,
        vec![
            json!({"messageId":"hai-1","role":"assistant"}),
            json!({"model":"gpt-4o"}),
            json!({"threadId":"t","runId":"r"}),
            json!({"stage":"retrieval"}),
            json!({}),
        ]
    );
    assert_eq!(
        values(&out)[2],
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi","threadId":"t","runId":"r"})
    );
}

// === Row 16 ===

#[test]
fn row_16_action_execution() {
    let (out, notes) = read_events(&[
        json!({"type":"ACTION_EXECUTION_START","actionExecutionId":"ae-1","actionName":"searchFlights",
               "parentMessageId":"m1"}),
        json!({"type":"ACTION_EXECUTION_ARGS","actionExecutionId":"ae-1","args":"{\"from\":\"SFO\""}),
        json!({"type":"ACTION_EXECUTION_ARGS","actionExecutionId":"ae-1","args":",\"to\":\"JFK\"}"}),
        json!({"type":"ACTION_EXECUTION_END","actionExecutionId":"ae-1"}),
        json!({"type":"ACTION_EXECUTION_RESULT","actionExecutionId":"ae-1","actionName":"searchFlights",
               "result":"3 flights found"}),
    ]);
    assert_eq!(
        values(&out),
        vec![
            json!({"type":"TOOL_CALL_START","toolCallId":"ae-1","toolCallName":"searchFlights",
                   "parentMessageId":"m1"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"ae-1","delta":"{\"from\":\"SFO\""}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"ae-1","delta":",\"to\":\"JFK\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"ae-1"}),
            // `actionName` has no canonical home on a result: an extra for the writer (row 15).
            json!({"type":"TOOL_CALL_RESULT","messageId":"run-1.t0","toolCallId":"ae-1",
                   "content":"3 flights found","role":"tool","actionName":"searchFlights"}),
        ]
    );
    assert_eq!(
        Value::Object(out[4].base().extra.to_map()),
        json!({"actionName":"searchFlights"})
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::ActionExecution)), 5);
    assert!(notes.contains(&Note::Fixup(Rule::FieldAlias)));
}

// === Row 17 ===

#[test]
fn row_17_timestamps() {
    let cases = [
        // (input, output, counted)
        (
            json!(1_761_819_878_000_i64),
            Some(1_761_819_878_000_i64),
            false,
        ),
        // Seed 003 integer seconds.
        (json!(1_761_819_878), Some(1_761_819_878_000), true),
        // Python `time.time()`.
        (json!(1_761_819_878.5), Some(1_761_819_878_500), true),
        (json!(1_700_000_000_000.7), Some(1_700_000_000_000), true),
        (json!("2025-10-30T10:24:38Z"), Some(1_761_819_878_000), true),
        (
            json!("2025-10-30T18:24:38.250+08:00"),
            Some(1_761_819_878_250),
            true,
        ),
        // 2000-01-01T00:00:00Z in seconds is the earliest plausible time.
        (json!(946_684_800), Some(946_684_800_000), true),
        (json!(946_684_799), None, true),
        // Seed 003 placeholder.
        (json!(10_693_854), None, true),
        (json!("yesterday"), None, true),
    ];
    for (ts, want, counted) in cases {
        let (out, notes) = read_one(json!({"type":"STEP_STARTED","stepName":"s","timestamp":ts}));
        let want = match want {
            Some(ms) => json!({"type":"STEP_STARTED","stepName":"s","timestamp":ms}),
            None => json!({"type":"STEP_STARTED","stepName":"s"}),
        };
        assert_eq!(out, vec![want], "{ts}");
        assert_eq!(
            notes.contains(&Note::Fixup(Rule::Timestamps)),
            counted,
            "{ts}"
        );
    }
}

// === Row 18 ===

#[test]
fn row_18_framing() {
    // crabmate: several JSON objects joined by `\n` in one data block.
    let (result, out, notes) = read_data(
        b"{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\
          {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"hi\"}\n\
          {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}",
    );
    assert!(result.is_ok());
    assert_eq!(
        out,
        vec![
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        ]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::MultiObjectData)), 1);

    // One object spread over several `data:` lines is one event, not a multi-object block.
    let (result, out, notes) =
        read_data(b"{\n  \"type\": \"STEP_STARTED\",\n  \"stepName\": \"s\"\n}");
    assert!(result.is_ok());
    assert_eq!(out, vec![json!({"type":"STEP_STARTED","stepName":"s"})]);
    assert!(notes.is_empty(), "{notes:?}");

    // JSON that is not an object is not an event: dropped and counted, the run goes on
    // (`dialects.md` processing order, step 2).
    for data in [
        &b"[{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}]"[..],
        b"\"keepalive\"",
        b"42",
        b"null",
    ] {
        let (result, out, notes) = read_data(data);
        assert!(result.is_ok(), "{}", String::from_utf8_lossy(data));
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(notes, vec![Note::Dropped(DropKind::NotAnObject)]);
    }

    // Not JSON (also not line by line) or not UTF-8: the run ends.
    for data in [
        &b"hello world"[..],
        b"{\"type\":\"RUN_STARTED\"}\nnot json",
        b"{\"type\":\"RUN_STARTED\",}",
        b"\xff\xfe{}",
    ] {
        let (result, out, _) = read_data(data);
        let failure = result.expect_err(&String::from_utf8_lossy(data));
        assert_eq!(failure.code, ErrorCode::UpstreamMalformed);
        assert_eq!(failure.code.as_str(), "UPSTREAM_MALFORMED");
        assert!(out.is_empty(), "{out:?}");
    }
}

// === Rows 21–24 (sequencer, after the reader) ===

#[test]
fn row_21_missing_run_started_with_sequencer() {
    // The CloudBase AG-UI page's example stream (seed 002), verbatim.
    let (out, notes) = read_then_sequence(&[
        json!({"type":"TEXT_MESSAGE_START","messageId":"msg-1"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"你好"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"msg-1"}),
        json!({"type":"RUN_FINISHED"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"msg-1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"你好"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"msg-1"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::MissingRunStarted)), 1);
}

#[test]
fn row_22_missing_terminal_with_sequencer() {
    let (out, _) = read_then_sequence(&[
        json!({"event":"run_started","thread_id":THREAD,"run_id":RUN}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"text_message_content","delta":"partial"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"partial"}),
            json!({"type":"RUN_ERROR","message":"upstream stream ended without a terminal event",
                   "code":"UPSTREAM_TRUNCATED"}),
        ]
    );
}

#[test]
fn row_23_unclosed_entities_with_sequencer() {
    // A step, a seed-003 thinking message (synthetic span), a text message and a tool call whose
    // object arguments are still held when RUN_FINISHED arrives: the reader flushes the
    // arguments, the sequencer closes everything innermost first.
    let (out, notes) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"STEP_STARTED","stepName":"answer"}),
        json!({"type":"THINKING_TEXT_MESSAGE_START","messageId":"1096319","role":"助手"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","messageId":"1096319","delta":"我正在"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"助手"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"应用系统查询",
               "parentMessageId":"1096311"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":{"keyword":"报表"}}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"STEP_STARTED","stepName":"answer"}),
            json!({"type":"REASONING_START","messageId":"1096319"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"1096319","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"1096319","delta":"我正在"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"assistant"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"应用系统查询",
                   "parentMessageId":"1096311"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"keyword\":\"报表\"}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"1096311"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"1096319"}),
            json!({"type":"REASONING_END","messageId":"1096319"}),
            json!({"type":"STEP_FINISHED","stepName":"answer"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::UnclosedEntities)), 5);
}

#[test]
fn row_24_out_of_order_with_sequencer() {
    let (out, notes) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN}),
        json!({"type":"TOOL_CALL_START","toolCallId":"1096311","toolCallName":"应用系统查询"}),
        // Seed 003: object delta, then the result before the END, with `message_id:""`.
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"1096311","delta":{}}),
        json!({"type":"TOOL_CALL_RESULT","message_id":"","toolCallId":"1096311","content":"done",
               "role":"tool"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"1096311"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"more"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"ghost","delta":"{}"}),
        json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"1096311","toolCallName":"应用系统查询"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"1096311","delta":"{}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"1096311"}),
            json!({"type":"TOOL_CALL_RESULT","messageId":"run-1.t0","toolCallId":"1096311",
                   "content":"done","role":"tool"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"more"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
            json!({"type":"RUN_FINISHED","threadId":THREAD,"runId":RUN}),
        ]
    );
    assert_eq!(count(&notes, Note::Fixup(Rule::OutOfOrder)), 2);
    assert_eq!(count(&notes, Note::Dropped(DropKind::DuplicateStart)), 1);
    assert_eq!(count(&notes, Note::Dropped(DropKind::Orphan)), 2);
}

// === Rows 25–27 ===

#[test]
fn row_25_system_exception() {
    let exception = Note::Fixup(Rule::SystemException);

    // Seed 003's global exception signal, verbatim shape.
    let (out, notes) = read_one(json!({"type":"CUSTOM","timestamp":1_761_819_878,
        "raw_event":{"name":"系统管理员","raw_event_data":null},
        "name":"SYSTEM_EXCEPTION","value":"系统繁忙，请稍后再试。"}));
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_ERROR","message":"系统繁忙，请稍后再试。","code":"SYSTEM_EXCEPTION"})
        ]
    );
    assert_eq!(count(&notes, exception), 1);

    // A non-string value is stringified; a null one gets a generic message.
    let (out, _) = read_one(json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION",
        "value":{"reason":"overload","retry_after":30}}));
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_ERROR","message":"{\"reason\":\"overload\",\"retry_after\":30}",
                    "code":"SYSTEM_EXCEPTION"})
        ]
    );
    let (out, _) = read_one(json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION","value":null}));
    assert_eq!(out[0]["type"], "RUN_ERROR");
    assert_eq!(out[0]["code"], "SYSTEM_EXCEPTION");

    // Other CUSTOM events are untouched.
    let custom = json!({"type":"CUSTOM","name":"event_name","value":"content"});
    assert_eq!(read_one(custom.clone()).0, vec![custom]);

    // With the sequencer: the exception is the terminal, later events are dropped (row 4).
    let (out, notes) = read_then_sequence(&[
        json!({"type":"RUN_STARTED","thread_id":"1","run_id":"1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"助手"}),
        json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION","value":"系统繁忙，请稍后再试。"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"1096311","delta":"late"}),
        json!({"type":"RUN_FINISHED","thread_id":"1","run_id":"1"}),
    ]);
    assert_eq!(
        out,
        vec![
            json!({"type":"RUN_STARTED","threadId":THREAD,"runId":RUN,"protocolVersion":"1.0"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"1096311","role":"assistant"}),
            json!({"type":"RUN_ERROR","message":"系统繁忙，请稍后再试。","code":"SYSTEM_EXCEPTION"}),
        ]
    );
    assert_eq!(count(&notes, Note::Dropped(DropKind::AfterTerminal)), 2);
}

#[test]
fn row_26_on_interrupt_passes_through() {
    for event in [
        // LangGraph bridge: the interrupt value as JSON text.
        json!({"type":"CUSTOM","name":"on_interrupt",
               "value":"{\"question\":\"Approve transfer?\",\"tool_call_id\":\"c1\"}"}),
        // Mastra-style object value with snake keys inside: opaque, not renamed.
        json!({"type":"CUSTOM","name":"on_interrupt","value":{"question":"Approve transfer?",
               "tool_call_id":"c1","options":["approve","reject"],"expires_at":null}}),
    ] {
        let (out, notes) = read_one(event.clone());
        assert_eq!(out, vec![event]);
        assert!(notes.is_empty(), "{notes:?}");
    }
}

#[test]
fn an_outcome_of_the_wrong_type_is_fatal() {
    for outcome in [
        json!([{"type":"interrupt","interrupts":[{"id":"i1","reason":"approve"}]}]),
        json!({"type":"interrupt","interrupts":[]}),
        json!({"type":"interrupt"}),
        json!({"type":"interrupt","interrupts":["i1"]}),
        json!({"interrupts":[{"id":"i1"}]}),
        // Interrupt objects that do not fit the schema (no id).
        json!({"type":"interrupt","interrupts":[{"reason":"approve"}]}),
        json!("interrupt"),
        json!(7),
    ] {
        let event = json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":outcome});
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        let failure = new_reader()
            .read(&sse(&event), &mut out, &mut notes)
            .expect_err(&event.to_string());
        assert_eq!(failure.code, ErrorCode::UpstreamInvalidOutcome, "{event}");
        assert!(out.is_empty(), "{event}: {out:?}");
    }
    // A cancelled run spelled as the protobuf binding flattens it reads back whole.
    let (out, _) =
        read_one(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":"cancelled"}));
    assert_eq!(out[0]["outcome"], json!({"type":"cancelled"}));
}

#[test]
fn row_27_legacy_nulls_and_outcomes() {
    let outcome = Note::Fixup(Rule::Outcome);
    let nulls = Note::Fixup(Rule::NullsAndEmptyIds);
    let finished = json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"});
    let cases = [
        // (input, output, notes that must be present)
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":null,"outcome":null,
                   "rawEvent":null}),
            finished.clone(),
            vec![nulls],
        ),
        (
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f",
                   "parentMessageId":null}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f"}),
            vec![nulls],
        ),
        // Unknown outcome type: omitted, the run reads as success.
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"paused"}}),
            finished.clone(),
            vec![outcome],
        ),
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":"success"}),
            finished.clone(),
            vec![outcome],
        ),
        // Valid outcomes are kept; snake keys inside the outcome are renamed.
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
                   "outcome":{"type":"success","pending_tool_call_ids":["c1"]}}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
                   "outcome":{"type":"success","pendingToolCallIds":["c1"]}}),
            vec![Note::Fixup(Rule::SnakeCaseKeys)],
        ),
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
                   "outcome":{"type":"interrupt","interrupts":[
                       {"id":"i1","reason":"tool_approval","toolCallId":"c1"}]}}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
                   "outcome":{"type":"interrupt","interrupts":[
                       {"id":"i1","reason":"tool_approval","toolCallId":"c1"}]}}),
            vec![],
        ),
        (
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"cancelled"}}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"cancelled"}}),
            vec![],
        ),
    ];
    for (input, want, want_notes) in cases {
        let (out, notes) = read_one(input.clone());
        assert_eq!(out, vec![want], "{input}");
        for n in &want_notes {
            assert!(notes.contains(n), "{input}: {n:?} not in {notes:?}");
        }
        if want_notes.is_empty() {
            assert!(notes.is_empty(), "{input}: {notes:?}");
        }
    }
}

/// Rows 1 + 27: a Python `model_dump()` without `by_alias` writes interrupts with snake keys;
/// the row-1 table applies inside `outcome.interrupts` too, or `Interrupt` (which ignores unknown
/// fields) would silently lose the tool call link.
#[test]
fn row_27_snake_case_interrupt_fields_are_renamed() {
    let (out, _) = read_one(json!({"type":"RUN_FINISHED","thread_id":"t","run_id":"r",
        "outcome":{"type":"interrupt","interrupts":[
            {"id":"i1","reason":"tool_approval","tool_call_id":"c1"}]}}));
    assert_eq!(
        out,
        vec![json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
               "outcome":{"type":"interrupt","interrupts":[
                   {"id":"i1","reason":"tool_approval","toolCallId":"c1"}]}})]
    );
}

// === Per-route alternatives (rows 13, 17, 25) ===

fn read_with(options: ReaderOptions, events: &[Value]) -> Vec<Value> {
    let mut reader = AguiReader::new(&ids(), Arc::new(AguiAliases::builtin()), options);
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for v in events {
        reader.read(&sse(v), &mut out, &mut notes).unwrap();
    }
    values(&out)
}

#[test]
fn alternatives_of_rows_13_17_and_25() {
    let event = json!({"type":"CUSTOM","name":"n","value":1,"timestamp":1_761_819_878});
    let drop = ReaderOptions {
        timestamps: Timestamps::Drop,
        ..ReaderOptions::default()
    };
    assert!(read_with(drop, std::slice::from_ref(&event))[0]
        .get("timestamp")
        .is_none());
    let keep = ReaderOptions {
        timestamps: Timestamps::Passthrough,
        ..ReaderOptions::default()
    };
    assert_eq!(
        read_with(keep, std::slice::from_ref(&event))[0]["timestamp"],
        1_761_819_878
    );
    assert_eq!(
        read_with(ReaderOptions::default(), &[event])[0]["timestamp"],
        1_761_819_878_000_i64
    );

    let unrooted = json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"a","value":1}]});
    let strict_paths = ReaderOptions {
        drop_unrooted_patches: true,
        ..ReaderOptions::default()
    };
    assert!(read_with(strict_paths, std::slice::from_ref(&unrooted)).is_empty());
    assert_eq!(
        read_with(ReaderOptions::default(), &[unrooted])[0]["delta"][0]["path"],
        "/a"
    );

    let exception = json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION","value":"busy"});
    let pass = ReaderOptions {
        system_exception_passthrough: true,
        ..ReaderOptions::default()
    };
    assert_eq!(
        read_with(pass, std::slice::from_ref(&exception))[0]["type"],
        "CUSTOM"
    );
    assert_eq!(
        read_with(ReaderOptions::default(), &[exception])[0]["type"],
        "RUN_ERROR"
    );
}

// === The fast path ===

/// Every SSE event of `input` through a reader, fast path on or off; the events out, as JSON.
fn read_stream(input: &[u8], fast: bool) -> Vec<Value> {
    let mut reader = new_reader();
    reader.fast_path = fast;
    let mut decoder = crate::sse::SseDecoder::default();
    let mut buf = bytes::BytesMut::from(input);
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    while let Ok(Some(item)) = decoder.decode_eof(&mut buf) {
        if let crate::sse::SseItem::Event(e) = item {
            if reader.read(&e, &mut out, &mut notes).is_err() {
                break;
            }
        }
    }
    values(&out)
}

/// For anything the fast path accepts it must give what the slow path gives: checked on every
/// hand-written fixture and on canonical streams with every event type and odd-but-legal values.
#[test]
fn fast_and_slow_paths_agree() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agui-agui");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "in"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let canonical = [
        json!({"type":"RUN_STARTED","threadId":"x","runId":"y","protocolVersion":"1.0"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"user","name":"n","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"","metadata":{"k":[1]},"rawEvent":{"a":1}}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"s"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\":"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"1}","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","messageId":"m","delta":"x"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"q\"é\\\n","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","toolCallId":"c","delta":"x"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"","delta":"x"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"z"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"text","text":"x"}],"role":"tool"}),
        json!({"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2]}}),
        json!({"type":"STATE_DELTA","delta":[{"op":"move","path":"/b","from":"/a"},{"op":"add","path":"","value":{}}]}),
        json!({"type":"STATE_DELTA","delta":[{"op":"remove","path":"/a","value":1},{"op":"add","path":"/b","value":2,"from":5,"x-why":"n"}]}),
        json!({"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[{"op":"test","path":"/n","value":0,"from":"/n"}]}),
        json!({"type":"MESSAGES_SNAPSHOT","messages":[{"id":"1","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"k","delta":"x"}),
        json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r","delta":"y"}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"d","toolCallName":"g","delta":"{}"}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"e","toolCallName":"g","parentMessageId":"","delta":"{}"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"n","parentToolCallId":"c"}),
        json!({"type":"CUSTOM","name":"SYSTEM_EXCEPTION","value":"busy"}),
        json!({"type":"CUSTOM","name":"n","value":{"snake_key":1}}),
        json!({"type":"RAW","event":{"thread_id":1},"source":"s"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":1_732_460_000_000_000_000_u64}),
        json!({"type":"TEXT_MESSAGE_CONTENT","timestamp":1_700_000_000_000_i64,"messageId":"m","delta":"py"}),
        json!({"type":"TOOL_CALL_ARGS","timestamp":1_700_000_000_000_i64,"toolCallId":"c","delta":"{}","k":"v\n"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","timestamp":5,"messageId":"m","delta":"early"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"s"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":1,"content":"c"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","timestamp":1_700_000_000_000_i64,"timestamp":1_700_000_000_001_i64}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"x","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","model":"g\"p\u{1}t/é","n":-3,"ts":1}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"z","content":"c","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","args":"a"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","event":"e","role":""}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","parentMessageId":""}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","run_id":"r"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","big":99_999_999_999_999_999_999.0_f64}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","flag":true,"list":[1]}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y","result":{"answer":[1,{"k_v":2}]}}),
        json!({"type":"RUN_STARTED","threadId":"x","runId":"y2","parentRunId":""}),
        json!({"type":"RUN_ERROR","message":"boom","code":"E1","timestamp":1_700_000_000_000_i64}),
        json!({"type":"RUN_STARTED","threadId":"x","runId":"y3","parentRunId":"y"}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y3","usage":[{"model":"m","input_tokens":3}]}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y","outcome":{"type":"interrupt","interrupts":[]}}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y","outcome":{"type":"success","pending_tool_call_ids":["c"]}}),
        json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s1","outcome":{"type":"suspended","interrupt_ids":["i"]}}),
        json!({"type":"RUN_STARTED","threadId":"x","runId":"y4","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"x"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m2","timestamp":1_700_000_000_000_i64}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m\u{e9}","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m\u{e9}"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":""}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y4"}),
    ];
    let mut stream = Vec::new();
    for v in &canonical {
        stream.extend_from_slice(format!("data: {v}\n\n").as_bytes());
    }
    inputs.push(stream);
    // The same events with a vendor twist each, to be sure the fast path declines them.
    let mut twisted = Vec::new();
    for v in &canonical {
        let mut v = v.clone();
        v["timestamp"] = json!(1_761_819_878);
        twisted.extend_from_slice(format!("data: {v}\n\n").as_bytes());
        let mut w = v.clone();
        w["thread_id"] = json!("snake");
        twisted.extend_from_slice(format!("data: {w}\n\n").as_bytes());
    }
    inputs.push(twisted);
    for input in &inputs {
        assert_eq!(
            read_stream(input, true),
            read_stream(input, false),
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

/// A run's lifecycle events without nested typed objects (what nearly every run sends) take the
/// fast path; with an input echo, an outcome or token usage they still go the slow way.
#[test]
fn plain_lifecycle_events_take_the_fast_path() {
    let mut scratch = fast::Scratch::new(&AguiAliases::builtin());
    let options = ReaderOptions::default();
    let fast = |data: &str, scratch: &mut fast::Scratch| {
        fast::read(
            &Bytes::from(data.to_owned()),
            options,
            scratch,
            &mut Vec::new(),
        )
    };
    for data in [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","parentRunId":"p"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","result":{"a":1}}"#,
        r#"{"type":"RUN_ERROR","message":"m","code":"c"}"#,
    ] {
        assert!(fast(data, &mut scratch), "{data}");
    }
    for data in [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[]}}"#,
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","parentRunId":""}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[]}"#,
        r#"{"type":"RUN_ERROR","message":"m","usage":[]}"#,
        r#"{"type":"RUN_ERROR","message":"m","error":{"code":"c"}}"#,
    ] {
        assert!(!fast(data, &mut scratch), "{data}");
    }
}

/// The events that open and close runs and messages, in their plain shape, are read by hand
/// into what the general decoder makes of them; any other shape is left to it.
#[test]
fn run_and_message_bounds_are_read_by_hand_as_the_decoder_reads_them() {
    let options = ReaderOptions::default();
    for data in [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","timestamp":1700000000000}"#,
        r#"{"runId":"r","type":"RUN_FINISHED","threadId":""}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
        r#"{ "type" : "TEXT_MESSAGE_END", "messageId" : "m" }"#,
        r#"{"type":"TEXT_MESSAGE_END","timestamp":1700000000000,"messageId":""}"#,
    ] {
        let by_hand = fast::lifecycle_event(data.as_bytes(), options);
        let decoded: Event = serde_json::from_str(data).unwrap();
        assert_eq!(by_hand, Some(decoded), "{data}");
    }
    for data in [
        // Escapes, a role other than the assistant's, a name, a field of another type, a
        // field the model does not know, a key twice, an implausible timestamp, null.
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m\u0031"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"user"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","name":"n"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m","runId":"r"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","ts":1}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","runId":"s"}"#,
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":5}"#,
        r#"{"type":"RUN_STARTED","threadId":"t","runId":null}"#,
        r#"{"type":"RUN_STARTED","threadId":"t"}"#,
        r#"{"type":"STEP_STARTED","stepName":"s"}"#,
    ] {
        assert_eq!(
            fast::lifecycle_event(data.as_bytes(), options),
            None,
            "{data}"
        );
    }
}

/// A terminal event read on the fast path ends an open thinking block as the slow path does.
#[test]
fn a_fast_terminal_event_closes_thinking_as_the_slow_one_does() {
    let mut stream = String::new();
    for v in [
        json!({"type":"RUN_STARTED","threadId":"x","runId":"a"}),
        json!({"type":"THINKING_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"hm"}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"a"}),
        json!({"type":"RUN_STARTED","threadId":"x","runId":"b"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"again"}),
        json!({"type":"THINKING_END"}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"b"}),
    ] {
        stream.push_str(&format!("data: {v}\n\n"));
    }
    assert_eq!(
        read_stream(stream.as_bytes(), true),
        read_stream(stream.as_bytes(), false)
    );
}

/// Content events carrying fields the model does not know keep them (as the slow path keeps
/// them) without leaving the fast path; what the slow path would rename, drop or repair still
/// goes there.
#[test]
fn content_events_with_unknown_fields_take_the_fast_path() {
    let mut scratch = fast::Scratch::new(&AguiAliases::builtin());
    let options = ReaderOptions::default();
    for (data, extra) in [
        (
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":1732460000000000000}"#,
            json!({"ts":1_732_460_000_000_000_000_u64}),
        ),
        (
            r#"{ "type":"TOOL_CALL_ARGS", "model":"g\u0070t\/4", "toolCallId":"c","delta":"{}","n":-7 }"#,
            json!({"model":"gpt/4","n":-7}),
        ),
        (
            r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"z","content":"c"}"#,
            json!({"content":"c"}),
        ),
    ] {
        let mut out = Vec::new();
        assert!(
            fast::read(&Bytes::from(data), options, &mut scratch, &mut out),
            "declined {data}"
        );
        assert_eq!(Value::Object(out[0].base().extra.to_map()), extra, "{data}");
    }
    for data in [
        // Renamed (row 1, row 7), dropped (row 9), repaired (row 17), or not flat.
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","run_id":"r"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","args":"a"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","parentMessageId":""}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","timestamp":"2025-01-01T00:00:00Z"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","meta":{"a":1}}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":1,"ts":2}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","metadata":"m"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":-0}"#,
    ] {
        assert!(
            !fast::read(&Bytes::from(data), options, &mut scratch, &mut Vec::new()),
            "{data}"
        );
    }
}

// === AG-UI 1.1: unrecognised members leave at the smallest unit ===

#[test]
fn an_unknown_patch_op_leaves_its_patch_and_the_other_ops_stay() {
    let (out, notes) = read_one(json!({"type":"STATE_DELTA","delta":[
        {"op":"add","path":"/items/-","value":{"id":1}},
        {"op":"increment","path":"/count","by":1},
        {"op":"remove","path":"/draft","value":"a leftover RFC 6902 ignores"},
        {"op":"replace","path":"/status","value":"done","x-reason":"kept: ops are open"}
    ]}));
    assert_eq!(
        out,
        vec![json!({"type":"STATE_DELTA","delta":[
            {"op":"add","path":"/items/-","value":{"id":1}},
            {"op":"remove","path":"/draft","value":"a leftover RFC 6902 ignores"},
            {"op":"replace","path":"/status","value":"done","x-reason":"kept: ops are open"}
        ]})]
    );
    assert_eq!(notes, [Note::Dropped(DropKind::UnknownPatchOp)]);

    let (out, notes) = read_one(json!({"type":"ACTIVITY_DELTA","messageId":"act-1",
        "activityType":"web_search","patch":[
            {"op":"append","path":"/results","value":[3]},
            {"op":"replace","path":"/found","value":3}]}));
    assert_eq!(
        out,
        vec![
            json!({"type":"ACTIVITY_DELTA","messageId":"act-1","activityType":"web_search",
            "patch":[{"op":"replace","path":"/found","value":3}]})
        ]
    );
    assert_eq!(notes, [Note::Dropped(DropKind::UnknownPatchOp)]);
}

/// An empty patch is a valid no-op (1.1 schema, `JsonPatch`) and the list rule keeps the list:
/// the event stays. For `ACTIVITY_DELTA` it still carries the activity's type, which a delta
/// may change.
/// With `state_path_repair = "drop_event"`, an unrooted path drops the event, but not the path
/// of an op that leaves the patch anyway.
#[test]
fn an_unknown_op_does_not_cost_its_patch_an_unrooted_path_drop() {
    let strict = ReaderOptions {
        drop_unrooted_patches: true,
        ..ReaderOptions::default()
    };
    let event = json!({"type":"STATE_DELTA","delta":[
        {"op":"increment","path":"count"},
        {"op":"replace","path":"/status","value":"done"}]});
    assert_eq!(
        read_with(strict, &[event]),
        vec![
            json!({"type":"STATE_DELTA","delta":[{"op":"replace","path":"/status","value":"done"}]})
        ]
    );
}

#[test]
fn a_patch_left_empty_keeps_its_event() {
    let (out, notes) = read_one(json!({"type":"STATE_DELTA","delta":[{"op":"merge","path":""}]}));
    assert_eq!(out, vec![json!({"type":"STATE_DELTA","delta":[]})]);
    assert_eq!(notes, [Note::Dropped(DropKind::UnknownPatchOp)]);

    let (out, notes) = read_one(json!({"type":"ACTIVITY_DELTA","messageId":"a",
        "activityType":"checklist","patch":{"op":"merge","path":""}}));
    assert_eq!(
        out,
        vec![
            json!({"type":"ACTIVITY_DELTA","messageId":"a","activityType":"checklist",
            "patch":[]})
        ]
    );
    assert_eq!(count(&notes, Note::Dropped(DropKind::UnknownPatchOp)), 1);
}

/// Malformed is not unrecognised: an op without `op`, an `op` that is not a string, a `path`
/// that is not a string, a `from` of the wrong type where move or copy define it. None of them
/// is stripped as an unknown op; the event does not decode and is dropped as invalid, as every
/// known event with a field of the wrong type is.
#[test]
fn a_malformed_patch_op_is_not_taken_for_an_unknown_one() {
    for op in [
        json!({"path":"/a","value":1}),
        json!({"op":3,"path":"/a","value":1}),
        json!({"op":"add","path":7,"value":1}),
        json!({"op":"move","path":"/b","from":7}),
    ] {
        let (out, notes) = read_one(json!({"type":"STATE_DELTA","delta":[op.clone()]}));
        assert!(out.is_empty(), "{op}: {out:?}");
        assert_eq!(notes, [Note::Dropped(DropKind::InvalidEvent)], "{op}");
    }
}

#[test]
fn a_snapshot_loses_only_what_it_cannot_carry() {
    let (out, notes) = read_one(json!({"type":"MESSAGES_SNAPSHOT","messages":[
        {"id":"u1","role":"user","content":[
            {"type":"text","text":"Compare these"},
            {"type":"poll","options":["a","b"]},
            {"type":"image","source":{"type":"s3","bucket":"b","key":"k"}},
            {"type":"image","source":{"type":"url","value":"https://x/y.png"}}]},
        {"id":"c1","role":"critic","content":"Not a role AG-UI describes."},
        {"id":"a1","role":"assistant","content":"They differ.","toolCalls":[
            {"id":"t1","type":"function","function":{"name":"chart","arguments":"{}"}}]},
        {"id":"r1","role":"tool","toolCallId":"t1","content":[
            {"type":"chart","spec":{}},
            {"type":"document","source":{"type":"file","value":"file-1","provider":"openai"}}]}
    ]}));
    assert_eq!(
        out,
        vec![json!({"type":"MESSAGES_SNAPSHOT","messages":[
            {"id":"u1","role":"user","content":[
                {"type":"text","text":"Compare these"},
                {"type":"image","source":{"type":"url","value":"https://x/y.png"}}]},
            {"id":"a1","role":"assistant","content":"They differ.","toolCalls":[
                {"id":"t1","type":"function","function":{"name":"chart","arguments":"{}"}}]},
            {"id":"r1","role":"tool","toolCallId":"t1","content":[
                {"type":"document","source":{"type":"file","value":"file-1","provider":"openai"}}]}
        ]})]
    );
    assert_eq!(
        count(&notes, Note::Dropped(DropKind::UnknownContentPart)),
        2
    );
    assert_eq!(count(&notes, Note::Dropped(DropKind::UnknownPartSource)), 1);
    assert_eq!(
        count(&notes, Note::Dropped(DropKind::UnknownMessageRole)),
        1
    );
    assert_eq!(notes.len(), 4, "{notes:?}");
}

/// A message whose role is missing is malformed, not of an unknown role: the snapshot does
/// not decode and is dropped whole, as before.
#[test]
fn a_snapshot_message_without_a_role_is_malformed() {
    let (out, notes) = read_one(json!({"type":"MESSAGES_SNAPSHOT","messages":[
        {"id":"u1","role":"user","content":"hi"},
        {"id":"x","content":"no role"}
    ]}));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(notes, [Note::Dropped(DropKind::InvalidEvent)]);
}

#[test]
fn a_tool_result_loses_only_its_unknown_parts() {
    let results = read_each(vec![
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"r1","toolCallId":"c1","content":[
            {"type":"text","text":"3 hits"},
            {"type":"table","rows":[]},
            {"type":"audio","source":{"type":"stream","value":"x"}}]}),
        ),
        // A legacy `binary` part is a retired shape: upgraded (row 19), not stripped.
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"r2","toolCallId":"c2","content":[
            {"type":"text","text":"see"},
            {"type":"binary","mimeType":"image/png","data":"AAAA"}]}),
        ),
        // No element is a part AG-UI describes: the tool's own data, text whole (row 8).
        sse(
            &json!({"type":"TOOL_CALL_RESULT","messageId":"r3","toolCallId":"c3",
            "content":[{"type":"row","id":1}]}),
        ),
    ]);
    let want = [
        json!({"type":"TOOL_CALL_RESULT","messageId":"r1","toolCallId":"c1",
            "content":[{"type":"text","text":"3 hits"}],"role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"r2","toolCallId":"c2","content":[
            {"type":"text","text":"see"},
            {"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}}],
            "role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"r3","toolCallId":"c3",
            "content":"[{\"type\":\"row\",\"id\":1}]","role":"tool"}),
    ];
    let dropped = [
        vec![
            Note::Dropped(DropKind::UnknownContentPart),
            Note::Dropped(DropKind::UnknownPartSource),
        ],
        vec![Note::Fixup(Rule::VendorExtras)],
        vec![Note::Fixup(Rule::ToolResultShape)],
    ];
    for (((out, notes), want), dropped) in results.into_iter().zip(want).zip(dropped) {
        assert_eq!(out, vec![want]);
        assert_eq!(notes, dropped);
    }
}
