//! What a turn answers ([`TurnReply`]) and how it goes on the wire in each stream mode
//! (`aap.md` §3): SSE frames for `delta` / `message`, the `{stopReason, messages}` JSON for
//! `none`, plus the quirks a test may ask for (a doubled or missing `turn_stop`, a cut
//! connection, junk after the stop, name-in-data framing, pauses).

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::super::aap::events_to_messages;

/// The turn mode a request asks for (`aap.md` §3.1): `"delta"`, `"message"`, anything else
/// (absent, `"none"`, unknown) is `None` — the reference SDK answers unknown values with JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamMode {
    Delta,
    Message,
    None,
}

impl StreamMode {
    /// The mode of a turn request body.
    pub fn of_request(body: &Value) -> StreamMode {
        match body.get("stream").and_then(Value::as_str) {
            Some("delta") => StreamMode::Delta,
            Some("message") => StreamMode::Message,
            _ => StreamMode::None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Delta => "delta",
            StreamMode::Message => "message",
            StreamMode::None => "none",
        }
    }
}

/// How a streamed turn ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// `turn_stop`, then the terminating chunk (the normal end).
    Stop,
    /// No `turn_stop`; the body still ends cleanly (SDK deviation 4 of `aap.md` §7). In `none`
    /// mode: a 500.
    OmitStop,
    /// No `turn_stop`; the TCP connection is dropped without the terminating chunk. In `none`
    /// mode: a 500.
    Cut,
    /// No `turn_stop`; the connection stays open, silent, until the peer closes it. In `none`
    /// mode: no response at all.
    Stall,
}

/// One piece of a turn, rendered according to the stream mode.
#[derive(Clone, Debug)]
enum Item {
    /// Text: one `text_delta` per chunk in `delta` mode, one `text` in `message` mode.
    Text(Vec<String>),
    /// Reasoning, likewise with `thinking_delta` / `thinking`.
    Thinking(Vec<String>),
    /// An event written as given whatever the mode (`tool_call`, `tool_result`, or anything a
    /// test wants verbatim).
    Event(String, Value),
    /// A pause before the next item.
    Pause(Duration),
}

#[derive(Clone, Debug)]
struct Raw {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// The answer to one `POST /sessions/:id/turns`: either a raw HTTP reply (status and body), or
/// the turn's content (text, thinking, tool calls and results, raw events), a stop reason and
/// quirk flags. Built with chained methods:
///
/// ```ignore
/// TurnReply::new().thinking("Hmm.").text_deltas(&["Hel", "lo"]).stop("end_turn").double_stop()
/// ```
#[derive(Clone, Debug)]
pub struct TurnReply {
    raw: Option<Raw>,
    items: Vec<Item>,
    stop: String,
    ending: Ending,
    double_stop: bool,
    omit_start: bool,
    after_stop: Vec<u8>,
    name_in_data: bool,
    pause: Duration,
    mode: Option<StreamMode>,
}

impl Default for TurnReply {
    fn default() -> Self {
        TurnReply::new()
    }
}

impl TurnReply {
    /// An empty turn ending `end_turn`.
    pub fn new() -> TurnReply {
        TurnReply {
            raw: None,
            items: Vec::new(),
            stop: "end_turn".to_owned(),
            ending: Ending::Stop,
            double_stop: false,
            omit_start: false,
            after_stop: Vec::new(),
            name_in_data: false,
            pause: Duration::ZERO,
            mode: None,
        }
    }

    /// A raw `application/json` reply, e.g. `TurnReply::status(500, json!({"error": "boom"}))`.
    /// Nothing is stored in the session's history.
    pub fn status(status: u16, body: Value) -> TurnReply {
        TurnReply::raw(status, "application/json", body.to_string())
    }

    /// A raw reply with any content type and body. Nothing is stored in the history.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> TurnReply {
        TurnReply {
            raw: Some(Raw {
                status,
                content_type: content_type.to_owned(),
                body: body.into(),
            }),
            ..TurnReply::new()
        }
    }

    /// `404 {"error":"Session not found"}`, as the SDK answers a session it does not know.
    pub fn session_not_found() -> TurnReply {
        TurnReply::status(404, json!({"error": "Session not found"}))
    }

    /// Whole text: one `text_delta` (delta mode) or one `text` event (message mode).
    pub fn text(self, text: &str) -> TurnReply {
        self.text_deltas(&[text])
    }

    /// Text sent as several `text_delta`s in delta mode (joined into one `text` otherwise).
    pub fn text_deltas(mut self, chunks: &[&str]) -> TurnReply {
        self.items
            .push(Item::Text(chunks.iter().map(|c| c.to_string()).collect()));
        self
    }

    /// Whole reasoning: one `thinking_delta` or one `thinking` event.
    pub fn thinking(self, thinking: &str) -> TurnReply {
        self.thinking_deltas(&[thinking])
    }

    /// Reasoning sent as several `thinking_delta`s in delta mode.
    pub fn thinking_deltas(mut self, chunks: &[&str]) -> TurnReply {
        self.items.push(Item::Thinking(
            chunks.iter().map(|c| c.to_string()).collect(),
        ));
        self
    }

    /// `tool_call {toolCallId, name, input}`.
    pub fn tool_call(self, id: &str, name: &str, input: Value) -> TurnReply {
        self.event(
            "tool_call",
            json!({"toolCallId": id, "name": name, "input": input}),
        )
    }

    /// `tool_result {toolCallId, content}` (`content`: a string or content blocks).
    pub fn tool_result(self, id: &str, content: impl Into<Value>) -> TurnReply {
        self.event(
            "tool_result",
            json!({"toolCallId": id, "content": content.into()}),
        )
    }

    /// Any event, written verbatim in both stream modes (and folded into messages for `none`).
    pub fn event(mut self, name: &str, data: Value) -> TurnReply {
        self.items.push(Item::Event(name.to_owned(), data));
        self
    }

    /// A pause at this point of the stream (in `none` mode: before the JSON answer).
    pub fn pause_here(mut self, pause: Duration) -> TurnReply {
        self.items.push(Item::Pause(pause));
        self
    }

    /// The stop reason of `turn_stop` (default `end_turn`).
    pub fn stop(mut self, reason: &str) -> TurnReply {
        self.stop = reason.to_owned();
        self
    }

    /// Quirk: `turn_stop` twice (SDK deviation 3).
    pub fn double_stop(mut self) -> TurnReply {
        self.double_stop = true;
        self
    }

    /// Quirk: no `turn_stop`, clean end of the body (SDK deviation 4).
    pub fn omit_stop(mut self) -> TurnReply {
        self.ending = Ending::OmitStop;
        self
    }

    /// Quirk: no `turn_stop`, the connection is dropped mid-body.
    pub fn cut(mut self) -> TurnReply {
        self.ending = Ending::Cut;
        self
    }

    /// Quirk: no `turn_stop`, the connection stays open and silent.
    pub fn stall(mut self) -> TurnReply {
        self.ending = Ending::Stall;
        self
    }

    /// Quirk: no `turn_start`.
    pub fn omit_start(mut self) -> TurnReply {
        self.omit_start = true;
        self
    }

    /// Quirk: these bytes are written (as one chunk) after `turn_stop`.
    pub fn junk_after_stop(mut self, bytes: impl AsRef<[u8]>) -> TurnReply {
        self.after_stop.extend_from_slice(bytes.as_ref());
        self
    }

    /// Quirk: a well-formed event after `turn_stop` (framed as chosen so far: call
    /// `name_in_data` first to have it framed that way).
    pub fn event_after_stop(self, name: &str, data: Value) -> TurnReply {
        let frame = frame(name, &data, self.name_in_data);
        self.junk_after_stop(frame)
    }

    /// Quirk: frames carry the name inside the data (`data: {"event":"text_delta",...}`) and no
    /// `event:` line (`aap.md` §3.2: tolerated by the TS client, not the specified format).
    pub fn name_in_data(mut self) -> TurnReply {
        self.name_in_data = true;
        self
    }

    /// Quirk: a pause before every event after `turn_start` (in `none` mode: the sum, before the
    /// answer).
    pub fn pause(mut self, pause: Duration) -> TurnReply {
        self.pause = pause;
        self
    }

    /// Answer in `mode` whatever the request asked (e.g. JSON to a streaming request).
    pub fn mode(mut self, mode: StreamMode) -> TurnReply {
        self.mode = Some(mode);
        self
    }

    /// The stop reason.
    pub fn stop_reason(&self) -> &str {
        &self.stop
    }

    /// How the stream ends.
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// True for a raw status reply.
    pub fn is_raw(&self) -> bool {
        self.raw.is_some()
    }

    /// The `(name, data)` events of the turn's content in `mode` (without `turn_start` /
    /// `turn_stop` and without pauses; `None` mode gives the message-mode events).
    pub fn content_events(&self, mode: StreamMode) -> Vec<(String, Value)> {
        self.items
            .iter()
            .flat_map(|item| item_events(item, mode))
            .collect()
    }

    /// The AAP messages this turn generates (`aap.md` §3.5), as the JSON answer lists them and
    /// as they are stored in the history.
    pub fn messages(&self) -> Vec<Value> {
        let mut events = self.content_events(StreamMode::Message);
        events.push(("turn_stop".to_owned(), json!({"stopReason": self.stop})));
        events_to_messages(&events).1
    }

    /// The HTTP answer to a request that asked for `requested`.
    pub(super) fn plan(&self, requested: StreamMode) -> Planned {
        if let Some(raw) = &self.raw {
            return Planned::fixed(raw.status, &raw.content_type, raw.body.clone());
        }
        let mode = self.mode.unwrap_or(requested);
        if mode == StreamMode::None {
            return self.plan_json();
        }
        let mut steps = Vec::new();
        if !self.omit_start {
            steps.push(Step::Bytes(frame(
                "turn_start",
                &json!({}),
                self.name_in_data,
            )));
        }
        for item in &self.items {
            if let Item::Pause(d) = item {
                steps.push(Step::Sleep(*d));
                continue;
            }
            for (name, data) in item_events(item, mode) {
                if !self.pause.is_zero() {
                    steps.push(Step::Sleep(self.pause));
                }
                steps.push(Step::Bytes(frame(&name, &data, self.name_in_data)));
            }
        }
        let end = match self.ending {
            Ending::Stop => {
                let stop = frame(
                    "turn_stop",
                    &json!({"stopReason": self.stop}),
                    self.name_in_data,
                );
                if !self.pause.is_zero() {
                    steps.push(Step::Sleep(self.pause));
                }
                steps.push(Step::Bytes(stop.clone()));
                if self.double_stop {
                    steps.push(Step::Bytes(stop));
                }
                if !self.after_stop.is_empty() {
                    steps.push(Step::Bytes(self.after_stop.clone()));
                }
                End::Clean
            }
            Ending::OmitStop => End::Clean,
            Ending::Cut => End::Cut,
            Ending::Stall => End::Stall,
        };
        Planned {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: Body::Chunked(steps, end),
            delay: Duration::ZERO,
        }
    }

    fn plan_json(&self) -> Planned {
        let waited: Duration = self
            .items
            .iter()
            .map(|item| match item {
                Item::Pause(d) => *d,
                _ => Duration::ZERO,
            })
            .sum::<Duration>()
            + self.pause * self.content_events(StreamMode::Message).len() as u32;
        let mut planned = match self.ending {
            Ending::Stop => {
                let body = json!({"stopReason": self.stop, "messages": self.messages()});
                Planned::fixed(200, "application/json", body.to_string().into_bytes())
            }
            Ending::OmitStop | Ending::Cut => Planned::fixed(
                500,
                "application/json",
                json!({"error": "Internal Server Error"})
                    .to_string()
                    .into_bytes(),
            ),
            Ending::Stall => Planned {
                status: 200,
                headers: Vec::new(),
                body: Body::NoResponse,
                delay: Duration::ZERO,
            },
        };
        planned.delay = waited;
        planned
    }
}

fn item_events(item: &Item, mode: StreamMode) -> Vec<(String, Value)> {
    let whole = |chunks: &[String], name: &str, key: &str| -> Vec<(String, Value)> {
        let text = chunks.concat();
        if text.is_empty() {
            return Vec::new();
        }
        vec![(name.to_owned(), json!({ key: text }))]
    };
    let deltas = |chunks: &[String], name: &str| -> Vec<(String, Value)> {
        chunks
            .iter()
            .filter(|c| !c.is_empty())
            .map(|c| (name.to_owned(), json!({"delta": c})))
            .collect()
    };
    match (item, mode) {
        (Item::Text(chunks), StreamMode::Delta) => deltas(chunks, "text_delta"),
        (Item::Thinking(chunks), StreamMode::Delta) => deltas(chunks, "thinking_delta"),
        (Item::Text(chunks), _) => whole(chunks, "text", "text"),
        (Item::Thinking(chunks), _) => whole(chunks, "thinking", "thinking"),
        (Item::Event(name, data), _) => vec![(name.clone(), data.clone())],
        (Item::Pause(_), _) => Vec::new(),
    }
}

/// One SSE frame: `event: NAME\ndata: {compact json}\n\n`, or with `name_in_data`
/// `data: {"event":NAME,...}\n\n`.
pub fn frame(name: &str, data: &Value, name_in_data: bool) -> Vec<u8> {
    if name_in_data {
        let mut object = Map::new();
        object.insert("event".into(), Value::String(name.to_owned()));
        if let Some(fields) = data.as_object() {
            object.extend(fields.clone());
        }
        format!("data: {}\n\n", Value::Object(object)).into_bytes()
    } else {
        format!("event: {name}\ndata: {data}\n\n").into_bytes()
    }
}

// === the planned HTTP answer ===

/// One timed action of a chunked body.
#[derive(Clone, Debug)]
pub(super) enum Step {
    /// One chunk, written and flushed.
    Bytes(Vec<u8>),
    Sleep(Duration),
}

/// How a chunked body ends after its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    Clean,
    Cut,
    Stall,
}

#[derive(Clone, Debug)]
pub(super) enum Body {
    /// A `content-length` body (empty for 204).
    Fixed(Vec<u8>),
    Chunked(Vec<Step>, End),
    /// Headers are never sent.
    NoResponse,
}

/// An HTTP answer, decided while the agent's state is locked and written afterwards.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Waited before the head is written.
    pub delay: Duration,
}

impl Planned {
    pub fn fixed(status: u16, content_type: &str, body: Vec<u8>) -> Planned {
        Planned {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Body::Fixed(body),
            delay: Duration::ZERO,
        }
    }

    pub fn json(status: u16, body: &Value) -> Planned {
        Planned::fixed(status, "application/json", body.to_string().into_bytes())
    }

    pub fn error(status: u16, text: &str) -> Planned {
        Planned::json(status, &json!({ "error": text }))
    }

    pub fn no_content() -> Planned {
        Planned {
            status: 204,
            headers: Vec::new(),
            body: Body::Fixed(Vec::new()),
            delay: Duration::ZERO,
        }
    }
}
