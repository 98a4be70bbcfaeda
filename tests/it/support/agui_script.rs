//! Scripted AG-UI agents for the tests of the AAP face: runs of one text message, optionally
//! paced, answering what the last user message said.

use std::time::Duration;

use serde_json::{json, Value};

use super::aap::agui_texts;
use super::{RecordedRequest, Script, ScriptedUpstream, Step};

/// The text of the last user message of an AG-UI request body.
pub fn last_user_text(body: &Value) -> String {
    agui_texts(&body["messages"])
        .into_iter()
        .rev()
        .find(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .unwrap_or_default()
}

/// The AG-UI events of a run answering `request`, with its `threadId`/`runId`: `RUN_STARTED`,
/// the text message `chunks` (one `TEXT_MESSAGE_CONTENT` each, `Step::Sleep`s between them where
/// `pause` is set) and `RUN_FINISHED`.
pub fn agui_text_script(
    request: &RecordedRequest,
    chunks: &[&str],
    pause: Option<Duration>,
) -> Script {
    let body = request.json();
    let (thread, run) = (body["threadId"].clone(), body["runId"].clone());
    let message = format!("{}.m0", run.as_str().unwrap_or("run"));
    let mut script = Script::sse_headers()
        .event_json(&json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}))
        .event_json(
            &json!({"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"}),
        );
    for (i, chunk) in chunks.iter().enumerate() {
        if let (Some(pause), true) = (pause, i > 0) {
            script = script.step(Step::Sleep(pause));
        }
        script = script.event_json(
            &json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": chunk}),
        );
    }
    script
        .event_json(&json!({"type": "TEXT_MESSAGE_END", "messageId": message}))
        .event_json(&json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run}))
}

/// An upstream that answers every turn with one text message `ack: <last user text>`.
pub async fn ack_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|request| {
        let said = last_user_text(&request.json());
        agui_text_script(request, &[&format!("ack: {said}")], None)
    })
    .await
}
