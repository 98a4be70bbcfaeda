//! An AG-UI client's side of a thread, for the tests of AG-UI clients in front of AAP agents:
//! it sends the thread's messages, checks each run against the AG-UI sequence rules and folds
//! the events back into its messages, as a client's reducer does.

use dialect_proxy::event::Event;
use dialect_proxy::pipeline::verify::verify_run;
use serde_json::{json, Value};

use super::{send, Gateway, Request};

/// An AG-UI client's side of a thread: its messages, reduced from the events it received.
pub struct Thread {
    pub id: String,
    pub messages: Vec<Value>,
    pub tools: Vec<Value>,
    pub runs: usize,
    pub protocol_version: Option<&'static str>,
}

impl Thread {
    pub fn new(id: &str) -> Thread {
        Thread {
            id: id.into(),
            messages: Vec::new(),
            tools: Vec::new(),
            runs: 0,
            protocol_version: None,
        }
    }

    pub fn user(&mut self, text: &str) {
        let id = format!("u{}", self.messages.len());
        self.messages
            .push(json!({"id": id, "role": "user", "content": text}));
    }

    pub fn tool_result(&mut self, call_id: &str, content: &str) {
        let id = format!("tr{}", self.messages.len());
        self.messages
            .push(json!({"id": id, "role": "tool", "toolCallId": call_id, "content": content}));
    }

    /// Runs the thread once; the events, checked against the 1.0 sequence rules and folded
    /// into the messages.
    pub async fn run(&mut self, gateway: &Gateway, extra: Value) -> Vec<Value> {
        self.runs += 1;
        let mut input = json!({
            "threadId": self.id,
            "runId": format!("run-{}", self.runs),
            "messages": self.messages,
            "tools": self.tools,
            "context": [],
        });
        if let Some(v) = self.protocol_version {
            input["protocolVersion"] = json!(v);
        }
        if let (Value::Object(input), Value::Object(extra)) = (&mut input, extra) {
            input.extend(extra);
        }
        let mut response = send(gateway.addr(), &Request::post_json("/", input.to_string())).await;
        assert_eq!(response.status(), 200);
        let events = response.events_to_end().await;
        let typed: Vec<Event> = events
            .iter()
            .map(|e| serde_json::from_value(e.clone()).unwrap_or_else(|err| panic!("{e}: {err}")))
            .collect();
        verify_run(&typed).unwrap_or_else(|v| panic!("{v:?} in {events:#?}"));
        self.reduce(&events);
        events
    }

    /// What the AG-UI reducer does with the events this gateway writes.
    pub fn reduce(&mut self, events: &[Value]) {
        for e in events {
            let id = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            match e["type"].as_str().unwrap_or_default() {
                "TEXT_MESSAGE_START" => self
                    .messages
                    .push(json!({"id": id("messageId"), "role": "assistant", "content": ""})),
                "REASONING_MESSAGE_START" => self
                    .messages
                    .push(json!({"id": id("messageId"), "role": "reasoning", "content": ""})),
                "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                    let m = self.find(&id("messageId"));
                    let text = m["content"].as_str().unwrap_or_default().to_owned();
                    m["content"] = json!(text + e["delta"].as_str().unwrap());
                }
                "TOOL_CALL_START" => {
                    let parent = id("parentMessageId");
                    if !self.messages.iter().any(|m| m["id"] == parent.as_str()) {
                        self.messages
                            .push(json!({"id": parent, "role": "assistant"}));
                    }
                    let call = json!({"id": id("toolCallId"), "type": "function",
                        "function": {"name": id("toolCallName"), "arguments": ""}});
                    let m = self.find(&parent);
                    match m["toolCalls"].as_array_mut() {
                        Some(calls) => calls.push(call),
                        None => m["toolCalls"] = json!([call]),
                    }
                }
                "TOOL_CALL_ARGS" => {
                    let call_id = id("toolCallId");
                    let call = self
                        .messages
                        .iter_mut()
                        .flat_map(|m| m["toolCalls"].as_array_mut().into_iter().flatten())
                        .find(|c| c["id"] == call_id.as_str())
                        .expect("ARGS of a started call");
                    let args = call["function"]["arguments"].as_str().unwrap().to_owned();
                    call["function"]["arguments"] = json!(args + e["delta"].as_str().unwrap());
                }
                "TOOL_CALL_RESULT" => self.messages.push(json!({"id": id("messageId"),
                    "role": "tool", "toolCallId": id("toolCallId"), "content": e["content"]})),
                _ => {}
            }
        }
    }

    pub fn find(&mut self, id: &str) -> &mut Value {
        self.messages
            .iter_mut()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no message {id}"))
    }

    /// Adds a user message saying `text`, runs the thread on `gateway` and returns the
    /// assistant's last text.
    pub async fn say(&mut self, gateway: &Gateway, text: &str) -> String {
        self.user(text);
        self.run(gateway, json!({})).await;
        self.last_assistant_text()
    }

    pub fn last_assistant_text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| {
                m["role"] == "assistant" && m["content"].as_str().is_some_and(|c| !c.is_empty())
            })
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    }
}
