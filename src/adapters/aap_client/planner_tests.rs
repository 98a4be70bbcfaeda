use serde_json::json;

use super::*;
use crate::session::PendingCall;

fn input(messages: serde_json::Value) -> RunAgentInput {
    serde_json::from_value(json!({
        "threadId": "t", "runId": "r", "messages": messages, "tools": [], "context": []
    }))
    .unwrap()
}

fn options() -> PlanOptions {
    PlanOptions {
        confirm_tool: "confirmAction".into(),
        fork_on_divergence: false,
        context_as_system: true,
        images: ImageCaps::default(),
        default_server_tools: None,
        default_options: Map::new(),
    }
}

/// A record that has seen `messages`.
fn seen(messages: &serde_json::Value) -> ThreadRecord {
    ThreadRecord {
        session_id: "s".into(),
        agent: "a".into(),
        forwarded: input(messages.clone())
            .messages
            .iter()
            .map(Forwarded::of)
            .collect(),
        ..ThreadRecord::default()
    }
}

#[test]
fn a_first_run_seeds_the_history_and_sends_the_trailing_input() {
    let messages = json!([
        {"id": "s1", "role": "system", "content": "be brief"},
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": "hello"},
        {"id": "u2", "role": "user", "content": "bye"}
    ]);
    let plan = plan(None, &input(messages), &options()).unwrap();
    let SessionPlan::Create { seed, seed_ids, .. } = &plan.session else {
        panic!("a new session");
    };
    assert_eq!(seed.len(), 3);
    assert_eq!(seed_ids.len(), 3);
    assert_eq!(plan.users.len(), 1);
    assert!(plan.answers.is_empty());
}

#[test]
fn only_unseen_messages_go_and_edits_are_divergence() {
    let history = json!([
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": "hello"}
    ]);
    let record = seen(&history);
    let mut next = history.as_array().unwrap().clone();
    next.push(json!({"id": "u2", "role": "user", "content": "more"}));
    let plan = plan(Some(&record), &input(json!(next.clone())), &options()).unwrap();
    assert_eq!(plan.session, SessionPlan::Existing);
    assert_eq!(plan.users.len(), 1);
    // Front trimming is fine.
    let trimmed = json!(next[1..].to_vec());
    assert!(super::plan(Some(&record), &input(trimmed), &options()).is_ok());
    // An edit, a removed latest message, an inserted assistant message: refused (reject).
    let mut edited = next.clone();
    edited[1]["content"] = json!("changed");
    let mut removed = next.clone();
    removed.remove(1);
    let mut inserted = next.clone();
    inserted.push(json!({"id": "a9", "role": "assistant", "content": "mine"}));
    for (what, messages) in [
        ("edited", edited),
        ("removed", removed),
        ("inserted", inserted),
    ] {
        let err = super::plan(Some(&record), &input(json!(messages.clone())), &options())
            .expect_err(what);
        assert_eq!(err.code, ErrorCode::HistoryDiverged, "{what}");
        // With fork, a new session seeded with the edited history.
        let fork = PlanOptions {
            fork_on_divergence: true,
            ..options()
        };
        let plan = super::plan(Some(&record), &input(json!(messages)), &fork).unwrap();
        assert!(
            matches!(
                plan.session,
                SessionPlan::Create {
                    divergence: Some(_),
                    ..
                }
            ),
            "{what}"
        );
    }
}

#[test]
fn answers_must_all_come_and_become_permissions() {
    let history = json!([
        {"id": "u1", "role": "user", "content": "go"},
        {"id": "r.m0", "role": "assistant", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "client_tool", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "web_fetch", "arguments": "{}"}},
            {"id": "confirm:perm:c2", "type": "function", "function": {"name": "confirmAction", "arguments": "{}"}}
        ]}
    ]);
    let mut record = seen(&history);
    record.pending = vec![
        PendingCall {
            id: "c1".into(),
            name: "client_tool".into(),
            client: true,
            held: None,
        },
        PendingCall {
            id: "c2".into(),
            name: "web_fetch".into(),
            client: false,
            held: None,
        },
    ];
    let mut partial = history.as_array().unwrap().clone();
    partial.push(json!({"id": "t1", "role": "tool", "toolCallId": "c1", "content": "ok"}));
    let err = plan(Some(&record), &input(json!(partial.clone())), &options()).unwrap_err();
    assert_eq!(err.code, ErrorCode::IncompleteToolResults);
    assert!(err.message.contains("c2"));
    let mut full = partial;
    full.push(
        json!({"id": "t2", "role": "tool", "toolCallId": "confirm:perm:c2",
                     "content": "{\"confirmed\":false,\"reason\":\"no\"}"}),
    );
    let plan = plan(Some(&record), &input(json!(full)), &options()).unwrap();
    assert_eq!(
        serde_json::to_value(&plan.answers).unwrap(),
        json!([{"role": "tool", "toolCallId": "c1", "content": "ok"},
               {"role": "tool_permission", "toolCallId": "c2", "granted": false, "reason": "no"}])
    );
}

#[test]
fn the_record_keeps_what_the_history_keeps_as_the_history_keeps_it() {
    let history: Vec<Message> = serde_json::from_value(json!([
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "r.m0", "role": "assistant", "content": "calling", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"id": "r.t0", "role": "tool", "toolCallId": "c1", "content": "ok"}
    ]))
    .unwrap();
    let mut record = ThreadRecord {
        session_id: "sess_1".into(),
        forwarded: vec![
            Forwarded::new("u1".into(), "user"),
            // Streamed with other text than the history keeps: refreshed.
            Forwarded::new("r.m0".into(), "assistant"),
            Forwarded::new("r.t0".into(), "tool"),
            Forwarded::new("r.t0".into(), "tool"),
            // The interrupted step the face dropped.
            Forwarded::new("r.m1".into(), "assistant"),
        ],
        ..ThreadRecord::default()
    };
    reconcile(&mut record, &history);
    let ids: Vec<&str> = record.forwarded.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["u1", "r.m0", "r.t0"]);
    for (f, m) in record.forwarded.iter().zip(&history) {
        assert!(f.matches(m), "{} is recorded as the history holds it", f.id);
    }
}
