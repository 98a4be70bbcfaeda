//! What the demo agent says: one deterministic AG-UI 1.0 run per request (`agui.md` §2, §7.1).
//!
//! [`script`] is pure: no clock, no randomness, no I/O. The same input always yields the same
//! events, so tests compare bytes and a client developer sees the same run every time. Ids are
//! derived from the request's `runId`:
//!
//! | id | what |
//! | --- | --- |
//! | `<runId>.m0` | the first assistant text message (the echo, or the tool-reply quote) |
//! | `<runId>.r0`, `<runId>.r1` | the reasoning span and the reasoning message inside it |
//! | `<runId>.c0`, `<runId>.t0` | the backend `get_weather` call and the tool message of its result |
//! | `<runId>.m1` | the closing assistant text message |
//! | `<runId>.c1` | the frontend tool call, when the request declares tools |
//!
//! Three shapes of run, chosen by the request:
//!
//! - **Turn** (the last message is a user message, or anything but a tool message): a step around
//!   the work, a reasoning span, a state snapshot, an assistant message echoing the user's text
//!   followed by a string of multi-byte characters (CJK, accented letters, an emoji) cut into
//!   small deltas, a backend tool call with its `TOOL_CALL_RESULT` in the same run, a state
//!   delta, and a closing message.
//! - **Turn with frontend tools** (`tools` non-empty): the same, then a call of the first listed
//!   tool with arguments `{}` and no result; `RUN_FINISHED` lists it in
//!   `outcome.pendingToolCallIds` (§7.1), and the client is expected to answer it.
//! - **Tool reply** (the last message is a `tool` message): a short run whose only message
//!   quotes the tool's content.
//!
//! Every run starts with `RUN_STARTED` (`protocolVersion` `"1.0"`), closes every message, tool
//! call, reasoning message, span and step it opens, and ends with exactly one `RUN_FINISHED`.
//! Only expanded events are emitted (no `*_CHUNK`), and no optional field is `null`.

use serde_json::json;

use crate::event::{
    ContentPart, Event, EventBase, JsonPatchOp, Message, MessageContent, PatchOpKind, ReasoningEnd,
    ReasoningMessageContent, ReasoningMessageEnd, ReasoningMessageStart, ReasoningRole,
    ReasoningStart, RunAgentInput, RunFinished, RunOutcome, RunStarted, StateDelta, StateSnapshot,
    StepFinished, StepStarted, TextMessageContent, TextMessageEnd, TextMessageStart, TextRole,
    ToolCallArgs, ToolCallEnd, ToolCallResult, ToolCallStart, ToolMessage, ToolRole,
    PROTOCOL_VERSION,
};

/// The tool the demo agent runs itself: a backend tool, answered in the same run.
pub const BACKEND_TOOL: &str = "get_weather";

/// The multi-byte string every turn streams: 3-byte CJK, a 2-byte `ö`, a 4-byte emoji.
pub const MULTI_BYTE_GREETING: &str = "你好, wörld 🌍";

/// Longest user or tool text quoted back, in characters; longer text is cut and ends in `…`,
/// so a large request cannot turn into an endless stream of deltas.
pub const MAX_QUOTE_CHARS: usize = 280;

/// Characters per text delta: small, so every multi-byte character lands in a short delta and
/// several deltas make up each message.
const DELTA_CHARS: usize = 4;

/// The step every turn runs inside.
const STEP_NAME: &str = "answer";

/// `get_weather`'s arguments, in three fragments; the second ends inside the word `Zürich`.
const WEATHER_ARGS: [&str; 3] = [r#"{"city":"#, r#""Zür"#, r#"ich"}"#];

/// What the backend tool returns: JSON text, carried as a string.
const WEATHER_RESULT: &str = r#"{"city":"Zürich","temperatureC":21,"sky":"sunny"}"#;

/// The events of one demo run answering `input`; see the module docs.
pub fn script(input: &RunAgentInput) -> Vec<Event> {
    let mut run = Run::new(input);
    let pending = match input.messages.last() {
        Some(Message::Tool(reply)) => {
            run.quote_tool_reply(reply);
            None
        }
        _ => run.take_turn(),
    };
    run.finish(pending)
}

/// The event list of one run under construction, with the id scheme of the module docs.
struct Run<'a> {
    input: &'a RunAgentInput,
    events: Vec<Event>,
}

impl<'a> Run<'a> {
    fn new(input: &'a RunAgentInput) -> Run<'a> {
        let mut run = Run {
            input,
            events: Vec::with_capacity(64),
        };
        run.push(RunStarted {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            protocol_version: Some(PROTOCOL_VERSION.to_owned()),
            parent_run_id: input.parent_run_id.clone(),
            input: None,
            base: EventBase::default(),
        });
        run
    }

    /// `<runId>.<suffix>`.
    fn id(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.input.run_id)
    }

    fn push(&mut self, event: impl Into<Event>) {
        self.events.push(event.into());
    }

    /// A normal turn; returns the frontend tool calls left for the client.
    fn take_turn(&mut self) -> Option<Vec<String>> {
        let turn = self
            .input
            .messages
            .iter()
            .filter(|m| matches!(m, Message::User(_)))
            .count()
            .max(1);
        self.push(StepStarted {
            step_name: STEP_NAME.to_owned(),
            base: EventBase::default(),
        });
        self.push(StateSnapshot {
            snapshot: json!({"turn": turn, "status": "thinking"}),
            base: EventBase::default(),
        });
        self.think(&[
            "The user wrote something; ",
            "I will echo it and check the weather in Zürich.",
        ]);

        let echo_id = self.id("m0");
        let said = last_user_text(&self.input.messages);
        self.text_message(&echo_id, &echo_text(said.as_deref()));

        let call_id = self.id("c0");
        self.tool_call(&call_id, BACKEND_TOOL, &echo_id, &WEATHER_ARGS);
        self.push(ToolCallResult {
            message_id: self.id("t0"),
            tool_call_id: call_id,
            content: MessageContent::Text(WEATHER_RESULT.to_owned()),
            role: ToolRole::Tool,
            base: EventBase::default(),
        });
        self.push(StateDelta {
            delta: vec![
                patch(PatchOpKind::Replace, "/status", json!("answering")),
                patch(
                    PatchOpKind::Add,
                    "/weather",
                    json!({"city": "Zürich", "temperatureC": 21}),
                ),
            ],
            base: EventBase::default(),
        });

        let closing_id = self.id("m1");
        let frontend_tool = self.input.tools.first();
        let closing = match frontend_tool {
            Some(tool) => format!(
                "In Zürich it is 21 °C and sunny. Now your app runs `{}`.",
                tool.name
            ),
            None => "In Zürich it is 21 °C and sunny.".to_owned(),
        };
        self.text_message(&closing_id, &closing);

        let pending = frontend_tool.map(|tool| {
            let call_id = self.id("c1");
            self.tool_call(&call_id, &tool.name, &closing_id, &["{}"]);
            vec![call_id]
        });
        self.push(StepFinished {
            step_name: STEP_NAME.to_owned(),
            base: EventBase::default(),
        });
        pending
    }

    /// The short run answering the client's result of a frontend tool call.
    fn quote_tool_reply(&mut self, reply: &ToolMessage) {
        let tool_name = called_tool_name(&self.input.messages, &reply.tool_call_id);
        let mut text = format!(
            "Your app answered `{}`: “{}”",
            tool_name.unwrap_or("the tool call"),
            truncate(&content_text(&reply.content), MAX_QUOTE_CHARS),
        );
        if let Some(error) = &reply.error {
            text.push_str(&format!(
                " (it reported an error: {})",
                truncate(error, MAX_QUOTE_CHARS)
            ));
        }
        let message_id = self.id("m0");
        self.text_message(&message_id, &text);
    }

    /// A reasoning span holding one reasoning message streamed in `deltas`.
    fn think(&mut self, deltas: &[&str]) {
        let span_id = self.id("r0");
        let message_id = self.id("r1");
        self.push(ReasoningStart {
            message_id: span_id.clone(),
            base: EventBase::default(),
        });
        self.push(ReasoningMessageStart {
            message_id: message_id.clone(),
            role: ReasoningRole::Reasoning,
            base: EventBase::default(),
        });
        for delta in deltas {
            self.push(ReasoningMessageContent {
                message_id: message_id.clone(),
                delta: (*delta).to_owned(),
                base: EventBase::default(),
            });
        }
        self.push(ReasoningMessageEnd {
            message_id,
            base: EventBase::default(),
        });
        self.push(ReasoningEnd {
            message_id: span_id,
            base: EventBase::default(),
        });
    }

    /// An assistant message whose text is streamed [`DELTA_CHARS`] characters at a time.
    fn text_message(&mut self, message_id: &str, text: &str) {
        self.push(TextMessageStart {
            message_id: message_id.to_owned(),
            role: TextRole::Assistant,
            name: None,
            base: EventBase::default(),
        });
        for delta in char_chunks(text, DELTA_CHARS) {
            self.push(TextMessageContent {
                message_id: message_id.to_owned(),
                delta: delta.to_owned(),
                base: EventBase::default(),
            });
        }
        self.push(TextMessageEnd {
            message_id: message_id.to_owned(),
            base: EventBase::default(),
        });
    }

    /// START, one ARGS per fragment, END; the call belongs to `parent_message_id`.
    fn tool_call(&mut self, call_id: &str, name: &str, parent_message_id: &str, args: &[&str]) {
        self.push(ToolCallStart {
            tool_call_id: call_id.to_owned(),
            tool_call_name: name.to_owned(),
            parent_message_id: Some(parent_message_id.to_owned()),
            base: EventBase::default(),
        });
        for fragment in args {
            self.push(ToolCallArgs {
                tool_call_id: call_id.to_owned(),
                delta: (*fragment).to_owned(),
                base: EventBase::default(),
            });
        }
        self.push(ToolCallEnd {
            tool_call_id: call_id.to_owned(),
            base: EventBase::default(),
        });
    }

    /// Appends the one terminal event and hands the run over.
    fn finish(mut self, pending_tool_call_ids: Option<Vec<String>>) -> Vec<Event> {
        self.push(RunFinished {
            thread_id: self.input.thread_id.clone(),
            run_id: self.input.run_id.clone(),
            result: None,
            outcome: Some(RunOutcome::Success {
                pending_tool_call_ids,
            }),
            usage: None,
            base: EventBase::default(),
        });
        self.events
    }
}

/// The echo message of a turn: the user's text (cut to [`MAX_QUOTE_CHARS`]), then
/// [`MULTI_BYTE_GREETING`].
fn echo_text(said: Option<&str>) -> String {
    match said {
        Some(said) => format!(
            "You said “{}”. In return: {MULTI_BYTE_GREETING}",
            truncate(said, MAX_QUOTE_CHARS)
        ),
        None => format!("Nothing said yet. In return: {MULTI_BYTE_GREETING}"),
    }
}

/// The text of the last user message, if there is one.
fn last_user_text(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| match m {
        Message::User(user) => Some(content_text(&user.content)),
        _ => None,
    })
}

/// The name of the tool call `call_id` in the assistant messages of the history.
fn called_tool_name<'m>(messages: &'m [Message], call_id: &str) -> Option<&'m str> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant(assistant) => assistant
            .tool_calls
            .iter()
            .flatten()
            .find(|call| call.id == call_id)
            .map(|call| call.function.name.as_str()),
        _ => None,
    })
}

/// String content as is; content parts as their text parts joined by newlines (media skipped).
fn content_text(content: &MessageContent) -> String {
    match content {
        MessageContent::Text(text) => text.clone(),
        MessageContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// At most `max_chars` characters of `text`, followed by `…` when something was cut.
fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `text` in pieces of `chars_per_chunk` characters, cut on character boundaries.
fn char_chunks(text: &str, chars_per_chunk: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(chars_per_chunk)
            .map_or(rest.len(), |(i, _)| i);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

fn patch(op: PatchOpKind, path: &str, value: serde_json::Value) -> JsonPatchOp {
    JsonPatchOp {
        op,
        path: path.to_owned(),
        from: None,
        value: Some(value),
        extra: Default::default(),
    }
}
