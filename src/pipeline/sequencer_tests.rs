use super::*;
use serde_json::json;

fn ids() -> RunIds {
    RunIds {
        thread_id: "t-req".into(),
        run_id: "r-req".into(),
    }
}

fn run_finished(ids: &RunIds) -> crate::event::RunFinished {
    serde_json::from_value(json!({"threadId": ids.thread_id, "runId": ids.run_id})).unwrap()
}

fn ev(v: serde_json::Value) -> Event {
    serde_json::from_value(v).expect("valid event")
}

/// Runs inputs through a fresh sequencer; returns the events as JSON values.
fn run(inputs: Vec<Input>) -> Vec<serde_json::Value> {
    let mut seq = RunSequencer::new(ids());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for input in inputs {
        seq.step(input, &mut out, &mut notes);
    }
    out.iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn events(vs: Vec<serde_json::Value>) -> Vec<Input> {
    vs.into_iter().map(|v| Input::Event(ev(v))).collect()
}

fn types(out: &[serde_json::Value]) -> Vec<&str> {
    out.iter().map(|v| v["type"].as_str().unwrap()).collect()
}

#[test]
fn synthesises_run_started_when_missing() {
    let out = run(events(vec![
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"","runId":""}),
    ]));
    assert_eq!(
        out[0],
        json!({"type":"RUN_STARTED","threadId":"t-req","runId":"r-req","protocolVersion":"1.0"})
    );
    assert_eq!(
        out[3],
        json!({"type":"RUN_FINISHED","threadId":"t-req","runId":"r-req"})
    );
}

#[test]
fn rewrites_foreign_run_ids_unless_told_to_keep_them() {
    let input = || {
        events(vec![
            json!({"type":"RUN_STARTED","threadId":"other","runId":"agent-7"}),
            json!({"type":"RUN_FINISHED","threadId":"other","runId":"agent-7"}),
        ])
    };
    let out = run(input());
    assert_eq!(out[0]["runId"], "r-req");
    assert_eq!(out[0]["protocolVersion"], "1.0");
    assert_eq!(out[1]["threadId"], "t-req");

    let mut seq = RunSequencer::new(ids()).keep_upstream_run_ids(true);
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for i in input() {
        seq.step(i, &mut out, &mut notes);
    }
    assert!(matches!(&out[0], Event::RunStarted(s) if s.run_id == "agent-7"));
}

#[test]
fn closes_everything_open_before_run_finished_innermost_first() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"REASONING_START","messageId":"rs"}),
        json!({"type":"REASONING_MESSAGE_START","messageId":"rm","role":"reasoning"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"sa","name":"n"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    assert_eq!(
        types(&out)[7..],
        [
            "SUBAGENT_FINISHED",
            "TOOL_CALL_END",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(out[8], json!({"type":"TOOL_CALL_END","toolCallId":"c"}));
}

#[test]
fn after_an_error_only_a_new_run_may_follow() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_ERROR","message":"boom"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        json!({"type":"CUSTOM","name":"late","value":1}),
        json!({"type":"RUN_ERROR","message":"again"}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r2"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r2"}),
    ]));
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "RUN_ERROR", "RUN_STARTED", "RUN_FINISHED"]
    );
    assert_eq!(out[2]["runId"], "r2", "a later run keeps its own id");
    assert_eq!(out[3]["runId"], "r2");
}

#[test]
fn a_late_error_follows_a_finished_run_and_then_nothing_but_a_new_run() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        json!({"type":"CUSTOM","name":"stray","value":1}),
        json!({"type":"RUN_ERROR","message":"flush failed","code":"E"}),
        json!({"type":"RUN_ERROR","message":"twice"}),
    ]));
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"]);
    assert_eq!(out[2]["message"], "flush failed");
}

#[test]
fn runs_are_tracked_apart_and_the_stream_ends_cleanly_between_runs() {
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"up-1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"up-1"}),
        // The same message id in the next run is a new message there: nothing is open.
        json!({"type":"RUN_STARTED","threadId":"t","runId":""}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"","runId":""}),
    ]);
    inputs.push(Input::UpstreamEnd);
    let out = run(inputs);
    assert_eq!(
        types(&out),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    // The first run answers the request; the second, without an id, gets one minted from it.
    assert_eq!(out[0]["runId"], ids().run_id);
    assert_eq!(out[3]["runId"], ids().run_id);
    let second = format!("{}.run2", ids().run_id);
    assert_eq!(out[4]["runId"], second.as_str());
    assert_eq!(out[7]["runId"], second.as_str());
}

#[test]
fn a_failure_between_runs_ends_the_stream_without_an_error() {
    let mut seq = RunSequencer::new(ids());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for input in events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]) {
        seq.step(input, &mut out, &mut notes);
    }
    assert!(!seq.is_finished() && !seq.run_open());
    let failure = Failure::new(ErrorCode::UpstreamIdleTimeout, "quiet");
    seq.step(Input::UpstreamFailed(failure), &mut out, &mut notes);
    assert!(seq.is_finished());
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(seq.failure(), None, "no run failed");
}

#[test]
fn a_run_the_guard_ends_reports_its_code() {
    let mut seq = RunSequencer::new(ids());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for input in events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"a"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"b"}),
    ]) {
        seq.step(input, &mut out, &mut notes);
    }
    assert_eq!(seq.failure(), Some(ErrorCode::UpstreamRunMismatch));
    assert!(seq.is_finished());
}

#[test]
fn a_terminal_naming_another_run_ends_the_run_as_a_mismatch() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"up-1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"up-2"}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"up-3"}),
    ]));
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_ERROR"]
    );
    assert_eq!(out[2]["code"], "UPSTREAM_RUN_MISMATCH");
}

#[test]
fn a_tool_call_id_reused_under_another_name_is_a_conflict() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"delete"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
    ]));
    assert_eq!(
        types(&out),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_END",
            "RUN_ERROR"
        ]
    );
    assert_eq!(out[3]["code"], "UPSTREAM_CONFLICT");
}

/// A client that takes one run per stream: later runs fold into it.
fn folded(inputs: Vec<Input>) -> Vec<serde_json::Value> {
    let mut seq = RunSequencer::new(ids()).runs(Runs::Folded { boundary: "x.run" });
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    for input in inputs {
        seq.step(input, &mut out, &mut notes);
    }
    assert!(seq.is_finished(), "the stream did not end");
    out.iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

#[test]
fn folded_runs_become_one_with_a_boundary_that_keeps_both_events() {
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":{"n":1}}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r2"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r2","outcome":{"type":"cancelled"}}),
    ]);
    inputs.push(Input::UpstreamEnd);
    let out = folded(inputs);
    assert_eq!(
        types(&out),
        [
            "RUN_STARTED",
            "CUSTOM",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(out[1]["name"], "x.run");
    assert_eq!(out[1]["value"]["finished"]["result"], json!({"n":1}));
    assert_eq!(out[1]["value"]["started"]["runId"], "r2");
    assert_eq!(out[4]["outcome"], json!({"type":"cancelled"}));
    assert_eq!(out[4]["runId"], "r2");
}

#[test]
fn folded_errors_are_held_like_finishes_and_the_last_runs_terminal_ends_the_stream() {
    // A late failure joins its run's held finish; the next run's boundary carries both, and
    // the stream's one terminal is the last run's.
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_ERROR","message":"late","code":"LATE"}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r2"}),
        json!({"type":"RUN_ERROR","message":"boom","code":"BOOM"}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r3"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r3"}),
    ]);
    inputs.push(Input::UpstreamEnd);
    let out = folded(inputs);
    assert_eq!(
        types(&out),
        ["RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_FINISHED"]
    );
    assert_eq!(out[1]["value"]["finished"]["runId"], out[0]["runId"]);
    assert_eq!(
        out[1]["value"]["error"],
        json!({"type":"RUN_ERROR","message":"late","code":"LATE"})
    );
    assert_eq!(out[1]["value"]["started"]["runId"], "r2");
    assert!(out[2]["value"].get("finished").is_none());
    assert_eq!(out[2]["value"]["error"]["code"], "BOOM");
    assert_eq!(out[3]["runId"], "r3");

    // A failed last run: its error is the one terminal, the held finish is not written.
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        json!({"type":"RUN_ERROR","message":"late"}),
    ]);
    inputs.push(Input::UpstreamEnd);
    assert_eq!(types(&folded(inputs)), ["RUN_STARTED", "RUN_ERROR"]);

    // A failure the gateway declares ends a folded stream at once.
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
    ]);
    inputs.push(Input::UpstreamEnd);
    let out = folded(inputs);
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert_eq!(out[1]["code"], "UPSTREAM_TRUNCATED");
}

#[test]
fn upstream_end_without_terminal_is_truncation() {
    let mut inputs = events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"half"}),
    ]);
    inputs.push(Input::UpstreamEnd);
    inputs.push(Input::UpstreamEnd);
    let out = run(inputs);
    assert_eq!(
        out.last().unwrap(),
        &json!({"type":"RUN_ERROR","code":"UPSTREAM_TRUNCATED",
                "message":"upstream stream ended without a terminal event"})
    );
    assert_eq!(out.len(), 4);
}

#[test]
fn empty_upstream_still_gets_a_started_and_errored_run() {
    let out = run(vec![Input::UpstreamEnd]);
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
}

#[test]
fn upstream_failures_carry_their_code() {
    for code in [
        ErrorCode::UpstreamIdleTimeout,
        ErrorCode::UpstreamMalformed,
        ErrorCode::UpstreamEventTooLarge,
        ErrorCode::UpstreamTruncated,
    ] {
        let out = run(vec![Input::UpstreamFailed(Failure::new(code, "why"))]);
        assert_eq!(out[1]["code"], code.as_str().as_ref());
        assert_eq!(out[1]["message"], "why");
    }
}

#[test]
fn run_error_first_still_gets_run_started_first() {
    let out = run(events(vec![json!({"type":"RUN_ERROR","message":"nope"})]));
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
}

#[test]
fn out_of_order_tool_and_text_events_are_repaired() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"ghost","delta":"{}"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t0","toolCallId":"c","content":"ok"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"more"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"nope"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    assert_eq!(
        types(&out),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
}

#[test]
fn empty_interrupt_list_reads_as_success() {
    let mut seq = RunSequencer::new(ids());
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let mut finished = run_finished(&ids());
    finished.outcome = Some(RunOutcome::Interrupt { interrupts: vec![] });
    seq.step(
        Input::Event(Event::RunFinished(finished)),
        &mut out,
        &mut notes,
    );
    assert!(matches!(&out[1], Event::RunFinished(f) if f.outcome.is_none()));
    assert!(notes.contains(&Note::Fixup(Rule::Outcome)));
}

#[test]
fn steps_are_per_lane_and_closing_events_keep_the_opener_lane() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"sa","name":"helper"}),
        json!({"type":"STEP_STARTED","stepName":"plan"}),
        json!({"type":"STEP_STARTED","stepName":"plan","subagentRunId":"sa"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"sa"}),
        json!({"type":"STEP_FINISHED","stepName":"plan","subagentRunId":"sa"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    assert_eq!(
        types(&out),
        [
            "RUN_STARTED",
            "SUBAGENT_STARTED",
            "STEP_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "STEP_FINISHED",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "SUBAGENT_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        out[6],
        json!({"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"sa"})
    );
    assert_eq!(out[7], json!({"type":"STEP_FINISHED","stepName":"plan"}));
}

#[test]
fn chunks_never_pass() {
    let out = run(events(vec![
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"x"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_FINISHED"]);
}

pub(crate) fn assert_legal(out: &[Event]) {
    if let Err(v) = crate::pipeline::verify::verify_stream(out) {
        let types: Vec<_> = out.iter().map(|e| e.event_type().as_str()).collect();
        panic!("{v}: {types:?}");
    }
}

/// Any sequence of events, ends and failures comes out legal.
#[test]
fn arbitrary_sequences_come_out_legal() {
    let pool = [
        json!({"type":"RUN_STARTED","threadId":"x","runId":"y"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m1"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m2"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"b"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c1"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c1","content":"r"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"STEP_FINISHED","stepName":"s"}),
        json!({"type":"REASONING_START","messageId":"r"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"z"}),
        json!({"type":"REASONING_MESSAGE_END","messageId":"r"}),
        json!({"type":"REASONING_END","messageId":"r"}),
        json!({"type":"RUN_FINISHED","threadId":"x","runId":"y"}),
        json!({"type":"RUN_ERROR","message":"e"}),
        json!({"type":"CUSTOM","name":"c","value":0}),
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for _ in 0..3000 {
        let len = next(25);
        let mut seq = RunSequencer::new(ids());
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        for _ in 0..len {
            seq.step(
                Input::Event(ev(pool[next(pool.len())].clone())),
                &mut out,
                &mut notes,
            );
        }
        let end = if next(2) == 0 {
            Input::UpstreamEnd
        } else {
            Input::UpstreamFailed(Failure::new(ErrorCode::UpstreamIdleTimeout, "idle"))
        };
        seq.step(end, &mut out, &mut notes);
        assert_legal(&out);
        assert!(seq.is_finished());
    }
}

#[test]
fn continuations_and_closes_carry_the_opener_lane() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r","subagentRunId":"x"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"a"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"1","subagentRunId":"b"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"2"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"b"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","subagentRunId":"a"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"t0","toolCallId":"c","content":"ok","subagentRunId":"b"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"3","subagentRunId":"b"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","subagentRunId":"x"}),
    ]));
    assert!(
        out[0].get("subagentRunId").is_none(),
        "run events are never attributed"
    );
    for i in [2, 3, 4] {
        assert_eq!(out[i]["subagentRunId"], "a", "event {i}: {}", out[i]);
    }
    assert_eq!(
        out[6],
        json!({"type":"TOOL_CALL_END","toolCallId":"c","subagentRunId":"a"})
    );
    // Re-opening a closed message keeps its first owner.
    assert_eq!(out[8]["type"], "TEXT_MESSAGE_START");
    assert_eq!(out[8]["subagentRunId"], "a");
    assert_eq!(out[9]["subagentRunId"], "a");
    assert!(out.last().unwrap().get("subagentRunId").is_none());
}

#[test]
fn subagent_ids_are_single_use_and_parents_must_exist() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}),
        json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"again"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"b","parentSubagentRunId":"ghost"}),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s3","name":"c","parentSubagentRunId":"s1"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    let starts: Vec<_> = out
        .iter()
        .filter(|e| e["type"] == "SUBAGENT_STARTED")
        .collect();
    assert_eq!(starts.len(), 3);
    assert!(
        starts[1].get("parentSubagentRunId").is_none(),
        "unknown parent dropped"
    );
    assert_eq!(
        starts[2]["parentSubagentRunId"], "s1",
        "a finished parent is known"
    );
}

#[test]
fn a_tool_calls_parent_must_be_an_assistant_message_of_its_lane() {
    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"u","role":"user"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"a"}),
        json!({"type":"REASONING_MESSAGE_START","messageId":"rm","role":"reasoning"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"u"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"f","parentMessageId":"rm"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c3","toolCallName":"f","parentMessageId":"a","subagentRunId":"s"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c4","toolCallName":"f","parentMessageId":"a"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c5","toolCallName":"f","parentMessageId":"unseen"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]));
    let parent = |id: &str| {
        out.iter()
            .find(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == id)
            .map(|e| e.get("parentMessageId").cloned())
            .unwrap()
    };
    assert_eq!(parent("c1"), None, "a user message is no parent");
    assert_eq!(parent("c2"), None, "a reasoning message is no parent");
    assert_eq!(parent("c3"), None, "another lane's message is no parent");
    assert_eq!(parent("c4"), Some(json!("a")));
    assert_eq!(
        parent("c5"),
        Some(json!("unseen")),
        "unknown ids are the client's to create"
    );
}

#[test]
fn too_many_open_entities_or_huge_ids_end_the_run() {
    let mut inputs = vec![json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})];
    for i in 0..=MAX_OPEN_ENTITIES {
        inputs.push(json!({"type":"STEP_STARTED","stepName": format!("s{i}")}));
    }
    let out = run(events(inputs));
    assert_eq!(out.len(), MAX_OPEN_ENTITIES + 2);
    assert_eq!(out.last().unwrap()["code"], "UPSTREAM_LIMIT_EXCEEDED");

    let out = run(events(vec![
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_START","messageId": "m".repeat(MAX_ID_BYTES + 1)}),
    ]));
    assert_eq!(types(&out), ["RUN_STARTED", "RUN_ERROR"]);
    assert_eq!(out[1]["code"], "UPSTREAM_LIMIT_EXCEEDED");
}

/// `continues` is a shortcut of `step`: whenever it says yes, stepping the event gives that
/// event alone (with the lane it applied) and no note; and it says yes to the deltas of open
/// messages and calls.
#[test]
fn a_continuing_delta_steps_to_itself_alone() {
    let stream = vec![
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m0","delta":"before the run"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b","subagentRunId":"s"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"n","delta":"not open"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"closed"}),
        json!({"type":"REASONING_MESSAGE_START","messageId":"r"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"z"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"closed"}),
        json!({"type":"RUN_FINISHED","threadId":"","runId":""}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"n","delta":"after the run"}),
    ];
    let mut seq = RunSequencer::new(ids());
    let mut shortcuts = Vec::new();
    for (i, v) in stream.into_iter().enumerate() {
        let mut probe = ev(v.clone());
        let continues = seq.continues(&mut probe);
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        seq.step(Input::Event(ev(v)), &mut out, &mut notes);
        if continues {
            shortcuts.push(i);
            assert_eq!(out, [probe], "event {i}");
            assert!(notes.is_empty(), "event {i}: {notes:?}");
        }
    }
    assert_eq!(shortcuts, [2, 3, 6, 10]);
}
