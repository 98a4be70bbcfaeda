//! The transcript of a run: canonical events folded into messages and state, the way the AG-UI
//! client's reducer builds them (`agui.md` §3), for a gateway that owns the history (the AAP face,
//! `translation.md` §4.2).
//!
//! It starts from the history the run was given and appends what the run produces: text and
//! reasoning messages, tool calls on their parent assistant message (a new one when the parent
//! is unknown), tool messages for results. `MESSAGES_SNAPSHOT` replaces the list; state follows
//! `STATE_SNAPSHOT` and `STATE_DELTA` from the state the run was given, or the empty object
//! (AG-UI 1.1, `events/state.mdx`). A patch that does not apply is skipped whole, the prior
//! state kept, and noted for the warning 1.1 requires (`basic/patterns/snapshots.mdx`, "When a
//! patch does not apply"); the next snapshot is adopted whatever was skipped before it.
//!
//! Bounded: content appended by the run counts against a byte budget (a snapshot counts what it
//! adds to the history and gives back what it removes, so the history never holds more than it
//! started with plus the budget), and each call's argument text against [`MAX_ARGS_BYTES`];
//! past either the run must end ([`Transcript::apply`] fails).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::{ErrorCode, Failure};
use crate::event::{
    content_len, history_bytes, remove_calls, AssistantMessage, DropKind, Event, FunctionCall,
    FunctionKind, Message, Note, ReasoningMessage, ToolCall, ToolMessage,
};

/// Argument text one tool call may accumulate (`translation.md` §5).
pub const MAX_ARGS_BYTES: usize = 1 << 20;

/// A tool call this run made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCall {
    pub id: String,
    pub name: String,
    /// The id of the assistant message that holds it.
    pub message_id: String,
    /// `TOOL_CALL_END` arrived.
    pub ended: bool,
    /// A `TOOL_CALL_RESULT` arrived.
    pub resolved: bool,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Transcript {
    messages: Vec<Message>,
    /// Messages before this index were given to the run; the rest it produced.
    prior: usize,
    /// Messages before this index are as the transcript was given them (never past `prior`:
    /// everything that edits in place edits what the run produced).
    unchanged: usize,
    /// Where this run's messages are, by id.
    index: HashMap<String, usize>,
    /// This run's tool calls, in start order.
    calls: Vec<RunCall>,
    /// Where each of them is in `calls`.
    call_at: HashMap<String, usize>,
    /// Content bytes the run may still add.
    budget: usize,
    state: Option<Value>,
    /// What was left aside since the last [`Transcript::take_notes`].
    notes: Vec<Note>,
}

impl Transcript {
    /// A transcript continuing `history`, with `budget` bytes for what the run adds.
    pub fn new(mut history: Vec<Message>, state: Option<Value>, budget: usize) -> Transcript {
        // Held for the whole turn, on every open AAP stream: room for the history and the
        // answer the run starts with, not whatever spare capacity the history was built with
        // (a message is ~300 bytes, and a vector grows to at least four).
        history.shrink_to_fit();
        history.reserve_exact(1);
        Transcript {
            prior: history.len(),
            unchanged: history.len(),
            messages: history,
            index: HashMap::new(),
            calls: Vec::new(),
            call_at: HashMap::new(),
            budget,
            state,
            notes: Vec::new(),
        }
    }

    /// Moves what was left aside since the last call (patches that did not apply) into `into`.
    pub fn take_notes(&mut self, into: &mut Vec<Note>) {
        into.append(&mut self.notes);
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages this run produced.
    pub fn generated(&self) -> &[Message] {
        &self.messages[self.prior..]
    }

    pub fn state(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    pub fn calls(&self) -> &[RunCall] {
        &self.calls
    }

    pub fn call(&self, id: &str) -> Option<&RunCall> {
        self.call_at.get(id).map(|&i| &self.calls[i])
    }

    fn call_mut(&mut self, id: &str) -> Option<&mut RunCall> {
        self.call_at.get(id).map(|&i| &mut self.calls[i])
    }

    /// The text so far of one of this run's text or reasoning messages.
    pub fn text_of(&self, message_id: &str) -> &str {
        match self.index.get(message_id).map(|&i| &self.messages[i]) {
            Some(Message::Assistant(m)) => m.content.as_deref().unwrap_or(""),
            Some(Message::Reasoning(m)) => &m.content,
            _ => "",
        }
    }

    /// Sets the metadata of one of this run's calls.
    pub fn set_call_metadata(&mut self, call_id: &str, metadata: serde_json::Map<String, Value>) {
        if let Some(call) = self.find_call_mut(call_id) {
            call.metadata = Some(metadata);
        }
    }

    /// One of this run's calls as the transcript holds it.
    pub fn tool_call(&self, call_id: &str) -> Option<&ToolCall> {
        self.find_call(call_id)
    }

    /// How many leading messages are still those the transcript was given: a snapshot that
    /// rewrote the history, or a truncation, lowers it.
    pub fn unchanged(&self) -> usize {
        self.unchanged
    }

    /// Splits into the whole history and the state.
    pub fn into_parts(self) -> (Vec<Message>, Option<Value>) {
        (self.messages, self.state)
    }

    /// Folds one canonical event in.
    pub fn apply(&mut self, event: &Event) -> Result<(), Failure> {
        match event {
            Event::TextMessageStart(e) => {
                self.open_assistant(&e.message_id);
            }
            Event::TextMessageContent(e) => self.append_text(&e.message_id, &e.delta)?,
            Event::ReasoningMessageStart(e) => {
                self.push(Message::Reasoning(ReasoningMessage {
                    id: e.message_id.clone(),
                    content: String::new(),
                    encrypted_value: None,
                    metadata: None,
                    subagent_run_id: None,
                    extra: Default::default(),
                }));
            }
            Event::ReasoningMessageContent(e) => self.append_reasoning(&e.message_id, &e.delta)?,
            Event::ToolCallStart(e) => {
                let parent = e
                    .parent_message_id
                    .clone()
                    .unwrap_or_else(|| e.tool_call_id.clone());
                let at = self.assistant_for(&parent);
                if let Message::Assistant(m) = &mut self.messages[at] {
                    m.tool_calls.get_or_insert_with(Vec::new).push(ToolCall {
                        id: e.tool_call_id.clone(),
                        kind: FunctionKind::Function,
                        function: FunctionCall {
                            name: e.tool_call_name.clone(),
                            arguments: String::new(),
                        },
                        encrypted_value: None,
                        encrypted_value_type: None,
                        metadata: None,
                    });
                }
                self.call_at
                    .insert(e.tool_call_id.clone(), self.calls.len());
                self.calls.push(RunCall {
                    id: e.tool_call_id.clone(),
                    name: e.tool_call_name.clone(),
                    message_id: parent,
                    ended: false,
                    resolved: false,
                });
            }
            Event::ToolCallArgs(e) => {
                self.spend(e.delta.len())?;
                let Some(call) = self.find_call_mut(&e.tool_call_id) else {
                    return Ok(());
                };
                if call.function.arguments.len() + e.delta.len() > MAX_ARGS_BYTES {
                    return Err(Failure::new(
                        ErrorCode::InvalidToolArgs,
                        format!("the arguments of a tool call exceed {MAX_ARGS_BYTES} bytes"),
                    ));
                }
                call.function.arguments.push_str(&e.delta);
            }
            Event::ToolCallEnd(e) => {
                if let Some(c) = self.call_mut(&e.tool_call_id) {
                    c.ended = true;
                }
            }
            Event::ToolCallResult(e) => {
                self.spend(content_len(&e.content))?;
                if let Some(c) = self.call_mut(&e.tool_call_id) {
                    c.resolved = true;
                }
                self.push(Message::Tool(ToolMessage {
                    id: e.message_id.clone(),
                    tool_call_id: e.tool_call_id.clone(),
                    content: e.content.clone(),
                    error: None,
                    encrypted_value: None,
                    metadata: None,
                    subagent_run_id: None,
                    extra: Default::default(),
                }));
            }
            Event::StateSnapshot(e) => self.state = Some(e.snapshot.clone()),
            Event::StateDelta(e) => self.patch_state(&e.delta),
            Event::MessagesSnapshot(e) => {
                let (now, next) = (history_bytes(&self.messages), history_bytes(&e.messages));
                if next > now {
                    self.spend(next - now)?;
                } else {
                    self.budget += now - next;
                }
                let before: std::collections::HashSet<&str> = self.messages[..self.prior]
                    .iter()
                    .map(Message::id)
                    .collect();
                let prior = e
                    .messages
                    .iter()
                    .take_while(|m| before.contains(m.id()))
                    .count();
                let same = self
                    .messages
                    .iter()
                    .zip(&e.messages)
                    .take(self.unchanged)
                    .take_while(|(a, b)| a == b)
                    .count();
                self.messages = e.messages.clone();
                self.prior = prior;
                self.unchanged = same.min(prior);
                self.reindex();
            }
            _ => {}
        }
        Ok(())
    }

    /// Removes this run's tool calls that never got a result (and the assistant messages left
    /// empty), so a run that failed leaves no call without its stop.
    pub fn drop_unresolved_calls(&mut self) {
        let unresolved = self.unresolved();
        if unresolved.is_empty() {
            return;
        }
        self.unchanged = self.unchanged.min(self.prior);
        let mut tail = self.messages.split_off(self.prior);
        remove_calls(&mut tail, |id| unresolved.contains(id));
        self.messages.extend(tail);
        self.calls.retain(|c| c.resolved);
        self.reindex();
    }

    /// What the run produced, less its calls left without a result.
    pub fn generated_resolved(&self) -> Vec<Message> {
        let mut generated = self.generated().to_vec();
        let unresolved = self.unresolved();
        if !unresolved.is_empty() {
            remove_calls(&mut generated, |id| unresolved.contains(id));
        }
        generated
    }

    fn unresolved(&self) -> HashSet<String> {
        self.calls
            .iter()
            .filter(|c| !c.resolved)
            .map(|c| c.id.clone())
            .collect()
    }

    /// Cuts what the run produced after its last tool result: the assistant step a failure
    /// interrupted, so the history never holds half an answer.
    pub fn truncate_to_last_tool_round(&mut self) {
        let keep = self.messages[self.prior..]
            .iter()
            .rposition(|m| matches!(m, Message::Tool(_)))
            .map_or(self.prior, |i| self.prior + i + 1);
        self.messages.truncate(keep);
        self.unchanged = self.unchanged.min(keep);
        self.drop_unresolved_calls();
    }

    /// Folds in a text delta of message `id` (`TEXT_MESSAGE_CONTENT`).
    pub fn append_text(&mut self, id: &str, delta: &str) -> Result<(), Failure> {
        self.spend(delta.len())?;
        if let Some(Message::Assistant(m)) = self.get_mut(id) {
            m.content.get_or_insert_with(String::new).push_str(delta);
        }
        Ok(())
    }

    /// Folds in a reasoning delta of message `id` (`REASONING_MESSAGE_CONTENT`).
    pub fn append_reasoning(&mut self, id: &str, delta: &str) -> Result<(), Failure> {
        self.spend(delta.len())?;
        if let Some(Message::Reasoning(m)) = self.get_mut(id) {
            m.content.push_str(delta);
        }
        Ok(())
    }

    fn spend(&mut self, bytes: usize) -> Result<(), Failure> {
        self.budget = self.budget.checked_sub(bytes).ok_or_else(|| {
            Failure::new(
                ErrorCode::HistoryLimitExceeded,
                "the session history reached its size limit (max_history_bytes); start a new session",
            )
        })?;
        Ok(())
    }

    fn push(&mut self, message: Message) {
        self.index
            .insert(message.id().to_owned(), self.messages.len());
        self.messages.push(message);
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Message> {
        // A delta nearly always goes to the message the run produced last, which the index
        // names too (it holds the last of an id): found without hashing the id.
        let last = self.messages.len().checked_sub(1)?;
        let i = if last >= self.prior && self.messages[last].id() == id {
            last
        } else {
            *self.index.get(id)?
        };
        self.messages.get_mut(i)
    }

    /// The assistant message `id`, created when the run has none.
    fn open_assistant(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            if matches!(self.messages[i], Message::Assistant(_)) {
                return i;
            }
        }
        self.push(Message::Assistant(AssistantMessage {
            id: id.to_owned(),
            content: None,
            tool_calls: None,
            name: None,
            encrypted_value: None,
            metadata: None,
            subagent_run_id: None,
            extra: Default::default(),
        }));
        self.messages.len() - 1
    }

    /// Where a call with parent `id` goes: that assistant message of the run, else a new one.
    fn assistant_for(&mut self, id: &str) -> usize {
        match self.index.get(id) {
            Some(&i) if matches!(self.messages[i], Message::Assistant(_)) => i,
            _ => self.open_assistant(id),
        }
    }

    fn find_call(&self, id: &str) -> Option<&ToolCall> {
        let call = self.call(id)?;
        let i = *self.index.get(&call.message_id)?;
        match &self.messages[i] {
            Message::Assistant(m) => m.tool_calls.as_ref()?.iter().find(|c| c.id == id),
            _ => None,
        }
    }

    fn find_call_mut(&mut self, id: &str) -> Option<&mut ToolCall> {
        let i = *self.index.get(&self.call(id)?.message_id)?;
        match &mut self.messages[i] {
            Message::Assistant(m) => m.tool_calls.as_mut()?.iter_mut().find(|c| c.id == id),
            _ => None,
        }
    }

    fn patch_state(&mut self, ops: &[crate::event::JsonPatchOp]) {
        // Members an operation does not define are ignored here, as RFC 6902 §4 says.
        let patch = serde_json::to_value(ops).and_then(serde_json::from_value::<json_patch::Patch>);
        let mut next = self
            .state
            .clone()
            .unwrap_or_else(|| Value::Object(Default::default()));
        // Atomic: applied to a copy, which replaces the state only when every operation applied.
        match patch.map(|patch| json_patch::patch(&mut next, &patch)) {
            Ok(Ok(())) => self.state = Some(next),
            _ => self.notes.push(Note::Dropped(DropKind::PatchNotApplied)),
        }
    }

    fn reindex(&mut self) {
        self.call_at = self
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.clone(), i))
            .collect();
        self.index = self.messages[self.prior..]
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id().to_owned(), self.prior + i))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(history: serde_json::Value, events: serde_json::Value) -> Transcript {
        let history: Vec<Message> = serde_json::from_value(history).unwrap();
        let mut t = Transcript::new(history, Some(json!({"n": 1})), 1 << 20);
        for e in events.as_array().unwrap() {
            t.apply(&serde_json::from_value(e.clone()).unwrap())
                .unwrap();
        }
        t
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(Message::id).collect()
    }

    fn step() -> serde_json::Value {
        json!([
            {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"},
            {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Checking."},
            {"type":"TEXT_MESSAGE_END","messageId":"m1"},
            {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"w","parentMessageId":"m1"},
            {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"a\":"},
            {"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"1}"},
            {"type":"TOOL_CALL_END","toolCallId":"c1"},
            {"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c1","content":"ok"},
            {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]},
            {"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"},
            {"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"Half"},
            {"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"x","parentMessageId":"m2"}
        ])
    }

    #[test]
    fn a_run_folds_into_messages_and_state() {
        let t = run(json!([{"id":"u","role":"user","content":"hi"}]), step());
        assert_eq!(ids(t.messages()), ["u", "m1", "t1", "m2"]);
        assert_eq!(ids(t.generated()), ["m1", "t1", "m2"]);
        assert_eq!(t.tool_call("c1").unwrap().function.arguments, r#"{"a":1}"#);
        assert_eq!(t.state(), Some(&json!({"n": 2})));
        assert!(t.call("c1").unwrap().resolved && !t.call("c2").unwrap().resolved);
    }

    #[test]
    fn a_failed_run_keeps_only_completed_tool_rounds() {
        let mut t = run(json!([{"id":"u","role":"user","content":"hi"}]), step());
        t.truncate_to_last_tool_round();
        assert_eq!(ids(t.messages()), ["u", "m1", "t1"]);
        let mut t = run(json!([{"id":"u","role":"user","content":"hi"}]), step());
        t.drop_unresolved_calls();
        let last = serde_json::to_value(t.messages().last().unwrap()).unwrap();
        assert_eq!(last, json!({"role":"assistant","id":"m2","content":"Half"}));
    }

    #[test]
    fn a_patch_that_does_not_apply_keeps_the_state() {
        let mut t = run(
            json!([]),
            json!([
                // The first operation would apply; the patch is atomic, so it does not.
                {"type":"STATE_DELTA","delta":[
                    {"op":"replace","path":"/n","value":5},
                    {"op":"remove","path":"/missing"}]},
                {"type":"STATE_DELTA","delta":[{"op":"test","path":"/n","value":2}]}
            ]),
        );
        assert_eq!(t.state(), Some(&json!({"n": 1})));
        let mut notes = Vec::new();
        t.take_notes(&mut notes);
        assert_eq!(notes, [Note::Dropped(DropKind::PatchNotApplied); 2]);
        t.take_notes(&mut notes);
        assert_eq!(notes.len(), 2, "taken once");

        // The next snapshot is adopted, and patches apply against it again.
        for e in [
            json!({"type":"STATE_SNAPSHOT","snapshot":{"n":7}}),
            json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/m","value":8}]}),
        ] {
            t.apply(&serde_json::from_value(e).unwrap()).unwrap();
        }
        assert_eq!(t.state(), Some(&json!({"n": 7, "m": 8})));
        t.take_notes(&mut notes);
        assert_eq!(notes.len(), 2, "{notes:?}");
    }

    #[test]
    fn without_a_given_state_patches_start_from_the_empty_object() {
        let mut t = Transcript::new(Vec::new(), None, 1 << 20);
        // Members an operation does not define are ignored, not a reason to refuse it.
        let delta = json!({"type":"STATE_DELTA","delta":[
            {"op":"add","path":"/plan","value":["a"],"from":"","note":"x"},
            {"op":"remove","path":"/plan/0","value":"leftover"},
            {"op":"add","path":"/done","value":true}]});
        t.apply(&serde_json::from_value(delta).unwrap()).unwrap();
        assert_eq!(t.state(), Some(&json!({"plan": [], "done": true})));
        let mut notes = Vec::new();
        t.take_notes(&mut notes);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_snapshot_replaces_the_history() {
        let t = run(
            json!([{"id":"u","role":"user","content":"hi"}]),
            json!([{"type":"MESSAGES_SNAPSHOT","messages":[
                {"id":"u","role":"user","content":"hi"},
                {"id":"a","role":"assistant","content":"hello"}]}]),
        );
        assert_eq!(ids(t.messages()), ["u", "a"]);
        assert_eq!(ids(t.generated()), ["a"]);
    }

    #[test]
    fn what_a_run_leaves_unchanged_is_counted_for_the_store() {
        let two = json!([
            {"id":"u","role":"user","content":"hi"},
            {"id":"v","role":"user","content":"there"}]);
        // A run that only appends leaves everything it was given.
        let t = run(two.clone(), step());
        assert_eq!(t.unchanged(), 2);
        // A snapshot that edits the second message keeps only the first.
        let t = run(
            two.clone(),
            json!([{"type":"MESSAGES_SNAPSHOT","messages":[
                {"id":"u","role":"user","content":"hi"},
                {"id":"v","role":"user","content":"edited"}]}]),
        );
        assert_eq!(t.unchanged(), 1);
        // A snapshot that repeats everything keeps everything it was given, not more.
        let mut t = run(two.clone(), step());
        let all: Vec<Message> = t.messages().to_vec();
        let snapshot = json!({"type":"MESSAGES_SNAPSHOT","messages": all});
        t.apply(&serde_json::from_value(snapshot).unwrap()).unwrap();
        assert_eq!(t.unchanged(), 2);
        // A failure truncates only what the run produced.
        let mut t = run(two, step());
        t.truncate_to_last_tool_round();
        assert_eq!(t.unchanged(), 2);
    }

    #[test]
    fn a_snapshot_spends_what_it_adds_and_returns_what_it_removes() {
        let history: Vec<Message> =
            serde_json::from_value(json!([{"id":"u","role":"user","content":"hi"}])).unwrap();
        let mut t = Transcript::new(history, None, 5);
        let snapshot = |text: &str| -> Event {
            serde_json::from_value(json!({"type":"MESSAGES_SNAPSHOT","messages":[
                {"id":"u","role":"user","content":"hi"},
                {"id":"a","role":"assistant","content":text}]}))
            .unwrap()
        };
        let refused = t.apply(&snapshot("six b.")).unwrap_err();
        assert_eq!(refused.code, ErrorCode::HistoryLimitExceeded);
        assert_eq!(
            ids(t.messages()),
            ["u"],
            "a refused snapshot is not applied"
        );
        t.apply(&snapshot("five!")).unwrap();
        assert_eq!(history_bytes(t.messages()), 2 + 5);
        // Shrinking gives the bytes back: the history may grow to the same bound again.
        t.apply(&snapshot("")).unwrap();
        t.apply(&snapshot("five!")).unwrap();
        assert!(t.apply(&snapshot("five!!")).is_err());
    }
}
