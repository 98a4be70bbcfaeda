//! Generated AG-UI 1.1 runs for the hop property test: well-formed streams a conformant agent
//! could send (every event type, several runs per stream, content parts, interrupts, every
//! outcome, errors, state and activity patches that apply), each with the request that asks for
//! it. Deterministic from a seed, so a failing case reproduces from its number.
//!
//! Unlike `random.rs` (which feeds the repair paths with broken streams), nothing here needs
//! repairing: what the gateway gives back on the plain AG-UI route is the run itself, and a hop
//! must give back the same.

use serde_json::{json, Map, Value};

use super::random::Rng;

/// One generated case: the AG-UI request and the events the agent answers it with.
pub struct Case {
    pub request: Value,
    pub events: Vec<Value>,
}

/// The user message that names a case; the upstream finds the case by it, because the AAP face
/// calls the agent with its own thread id.
pub fn case_prompt(n: usize) -> String {
    format!("case {n}")
}

/// The case number a request asks for (from its last user message), if any.
pub fn case_of(request: &Value) -> Option<usize> {
    let messages = request["messages"].as_array()?;
    let text = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?
        .get("content")?;
    let text = match text {
        Value::String(s) => s.as_str(),
        Value::Array(parts) => parts.iter().find_map(|p| p["text"].as_str())?,
        _ => return None,
    };
    text.strip_prefix("case ")?.parse().ok()
}

const WORDS: &[&str] = &[
    "hello",
    " world",
    "{\"a\":1}",
    "}{",
    " ünïcode ✓",
    "line\nbreak",
    " \"quoted\"",
    "tab\there",
    " ",
    "42",
];

struct Gen<'a> {
    rng: &'a mut Rng,
    case: usize,
    next_id: usize,
    events: Vec<Value>,
    state: Map<String, Value>,
    state_known: bool,
    /// Messages the client holds so far (for snapshots): the prompt, then assistant text.
    messages: Vec<Value>,
    /// The last text message of the parent lane: a parent call may name it as its parent (a
    /// subagent's message may not be, nor may a message that only a snapshot holds).
    last_main_text: Option<String>,
    /// Calls of this run without a result (an interrupt may point at one).
    open_calls: Vec<String>,
    /// The event that closes what the last main-lane block left open by chunks (a text message
    /// or a tool call), until another main-lane event closes it.
    open_chunks: Option<Value>,
}

impl Gen<'_> {
    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}-{}", self.case, self.next_id)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn text(&mut self) -> String {
        let n = 1 + self.rng.below(3);
        (0..n).map(|_| WORDS[self.rng.below(WORDS.len())]).collect()
    }

    fn metadata(&mut self) -> Option<Value> {
        self.chance(25)
            .then(|| json!({"source": "gen", "rank": self.rng.below(9)}))
    }

    fn push(&mut self, mut event: Value, lane: Option<&str>) {
        if let Some(lane) = lane {
            event["subagentRunId"] = lane.into();
        }
        self.events.push(event);
    }

    fn text_message(&mut self, lane: Option<&str>) {
        let id = self.id("m");
        let mut full = String::new();
        let parts = 1 + self.rng.below(4);
        if self.chance(20) {
            // The chunk form: the first chunk names the message; the run's next event closes it.
            for i in 0..parts {
                let delta = self.text();
                full.push_str(&delta);
                let mut chunk =
                    json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": id, "delta": delta});
                if i == 0 {
                    chunk["role"] = "assistant".into();
                }
                self.push(chunk, lane);
            }
            if lane.is_none() {
                self.open_chunks = Some(json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
            }
        } else {
            let mut start =
                json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"});
            if let Some(metadata) = self.metadata() {
                start["metadata"] = metadata;
            }
            self.push(start, lane);
            for _ in 0..parts {
                let delta = self.text();
                full.push_str(&delta);
                self.push(
                    json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta}),
                    lane,
                );
            }
            self.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id}), lane);
        }
        if lane.is_none() {
            self.last_main_text = Some(id.clone());
        }
        self.messages
            .push(json!({"id": id, "role": "assistant", "content": full}));
    }

    fn reasoning(&mut self, lane: Option<&str>) {
        let phase = self.id("p");
        let id = self.id("r");
        self.push(json!({"type": "REASONING_START", "messageId": phase}), lane);
        let mut start =
            json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"});
        if let Some(metadata) = self.metadata() {
            start["metadata"] = metadata;
        }
        if self.chance(20) {
            // The chunk form: the first chunk opens the message, `REASONING_END` closes it.
            for _ in 0..1 + self.rng.below(3) {
                let delta = self.text();
                self.push(
                    json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": id, "delta": delta}),
                    lane,
                );
            }
        } else {
            self.push(start, lane);
            for _ in 0..1 + self.rng.below(3) {
                let delta = self.text();
                self.push(
                    json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": id, "delta": delta}),
                    lane,
                );
            }
            self.push(
                json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
                lane,
            );
        }
        if self.chance(30) {
            let value = format!("enc-{}", self.rng.below(1000));
            self.push(
                json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": id,
                       "encryptedValue": value}),
                lane,
            );
        }
        self.push(json!({"type": "REASONING_END", "messageId": phase}), lane);
    }

    fn tool_call(&mut self, lane: Option<&str>, parent: Option<String>) {
        let id = self.id("c");
        let name = ["get_weather", "search", "confirm_plan"][self.rng.below(3)];
        let mut start = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name});
        if let Some(parent) = parent {
            start["parentMessageId"] = parent.into();
        }
        if let Some(metadata) = self.metadata() {
            start["metadata"] = metadata;
        }
        let args = json!({"city": self.text(), "days": self.rng.below(7)}).to_string();
        let cut = args.len() / 2;
        let cut = (cut..args.len())
            .find(|&i| args.is_char_boundary(i))
            .unwrap_or(args.len());
        let chunked = self.chance(20);
        if chunked {
            // The chunk form: the first chunk names the call; the lane's next event ends it.
            // Metadata stays on the start: a chunk's would land on its argument fragment too,
            // and arguments cross a hop whole (README, Lossless hops).
            let mut first = start;
            if let Some(map) = first.as_object_mut() {
                map.remove("metadata");
            }
            first["type"] = "TOOL_CALL_CHUNK".into();
            first["delta"] = args[..cut].into();
            self.push(first, lane);
            if cut < args.len() {
                self.push(
                    json!({"type": "TOOL_CALL_CHUNK", "toolCallId": id, "delta": &args[cut..]}),
                    lane,
                );
            }
        } else {
            self.push(start, lane);
            for piece in [&args[..cut], &args[cut..]] {
                if !piece.is_empty() {
                    self.push(
                        json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": piece}),
                        lane,
                    );
                }
            }
            self.push(json!({"type": "TOOL_CALL_END", "toolCallId": id}), lane);
        }
        if self.chance(60) {
            let message_id = self.id("t");
            let content = if self.chance(40) {
                json!([{"type": "text", "text": self.text()},
                       {"type": "text", "text": "second part"}])
            } else {
                json!(self.text())
            };
            self.push(
                json!({"type": "TOOL_CALL_RESULT", "messageId": message_id, "toolCallId": id,
                       "content": content, "role": "tool"}),
                lane,
            );
        } else {
            if chunked && lane.is_none() {
                self.open_chunks = Some(json!({"type": "TOOL_CALL_END", "toolCallId": id}));
            }
            self.open_calls.push(id);
        }
    }

    fn state(&mut self) {
        if !self.state_known || self.chance(25) {
            let mut snapshot = Map::new();
            for k in 0..self.rng.below(3) {
                snapshot.insert(format!("k{k}"), json!(self.text()));
            }
            self.state = snapshot.clone();
            self.state_known = true;
            self.events
                .push(json!({"type": "STATE_SNAPSHOT", "snapshot": snapshot}));
            return;
        }
        let mut ops = Vec::new();
        for _ in 0..1 + self.rng.below(3) {
            let existing: Vec<String> = self.state.keys().cloned().collect();
            match (self.rng.below(3), existing.is_empty()) {
                (0, false) => {
                    let key = existing[self.rng.below(existing.len())].clone();
                    let value = json!({"n": self.rng.below(100)});
                    self.state.insert(key.clone(), value.clone());
                    ops.push(json!({"op": "replace", "path": format!("/{key}"), "value": value}));
                }
                (1, false) => {
                    let key = existing[self.rng.below(existing.len())].clone();
                    self.state.remove(&key);
                    ops.push(json!({"op": "remove", "path": format!("/{key}")}));
                }
                _ => {
                    let key = format!("k{}", self.rng.below(6));
                    let value = json!([self.rng.below(10), self.text()]);
                    self.state.insert(key.clone(), value.clone());
                    ops.push(json!({"op": "add", "path": format!("/{key}"), "value": value}));
                }
            }
        }
        self.events
            .push(json!({"type": "STATE_DELTA", "delta": ops}));
    }

    fn activity(&mut self) {
        let id = self.id("a");
        let kind = ["PLAN", "SEARCH"][self.rng.below(2)];
        let (step, replace) = (self.text(), self.chance(50));
        self.events.push(json!({
            "type": "ACTIVITY_SNAPSHOT", "messageId": id, "activityType": kind,
            "content": {"steps": [step], "done": false}, "replace": replace
        }));
        if self.chance(70) {
            let step = self.text();
            self.events.push(json!({
                "type": "ACTIVITY_DELTA", "messageId": id, "activityType": kind,
                "patch": [{"op": "add", "path": "/steps/-", "value": step},
                          {"op": "replace", "path": "/done", "value": true}]
            }));
        }
    }

    fn messages_snapshot(&mut self) {
        // A correction: the last assistant message (or a new one) gets other text.
        let fixed = format!("corrected {}", self.rng.below(100));
        match self
            .messages
            .iter_mut()
            .rev()
            .find(|m| m["role"] == "assistant")
        {
            Some(last) => last["content"] = fixed.into(),
            None => {
                let id = self.id("m");
                self.messages
                    .push(json!({"id": id, "role": "assistant", "content": fixed}));
            }
        }
        self.events
            .push(json!({"type": "MESSAGES_SNAPSHOT", "messages": self.messages}));
    }

    fn subagent(&mut self, open_chunks: Option<Value>) {
        // A main-lane message left open by chunks would stay open beside the subagent's
        // messages; AAP carries one message of a kind at a time, so such a pair comes back one
        // after the other (README, Lossless hops). Streams here close it first.
        if let Some(end) = open_chunks {
            self.push(end, None);
        }
        let lane = self.id("s");
        self.events.push(json!({
            "type": "SUBAGENT_STARTED", "subagentRunId": lane, "name": "researcher",
            "description": "looks things up"
        }));
        for _ in 0..1 + self.rng.below(2) {
            match self.rng.below(3) {
                0 => self.reasoning(Some(&lane)),
                1 => self.tool_call(Some(&lane), None),
                _ => self.text_message(Some(&lane)),
            }
        }
        // A subagent's calls are its own; an interrupt of the run never points at them.
        self.open_calls.clear();
        if self.chance(25) {
            self.events.push(json!({
                "type": "SUBAGENT_ERROR", "subagentRunId": lane, "message": "lookup failed",
                "code": "LOOKUP_FAILED"
            }));
        } else {
            self.events.push(json!({
                "type": "SUBAGENT_FINISHED", "subagentRunId": lane,
                "result": {"found": self.rng.below(5)}, "outcome": {"type": "success"}
            }));
        }
    }

    fn block(&mut self) {
        // A main-lane event closes what the last block left open by chunks, except activity
        // and RAW (as `@ag-ui/client` expands chunks), and a subagent's events, which are
        // another lane's.
        let mut open_chunks = self.open_chunks.take();
        // A call left open by chunks is ended explicitly here: activity and RAW would not end
        // it, and AAP carries a call whole, so an event inside it would come back before its
        // start and move the message the call opens in the client's list.
        if open_chunks
            .as_ref()
            .is_some_and(|e| e["type"] == "TOOL_CALL_END")
        {
            let end = open_chunks.take();
            self.events.extend(end);
        }
        match self.rng.below(12) {
            0..=2 => self.text_message(None),
            3 => self.reasoning(None),
            4 | 5 => {
                let attach = self.chance(50);
                let parent = self.last_main_text.clone().filter(|_| attach);
                self.tool_call(None, parent)
            }
            6 => self.state(),
            7 => {
                self.activity();
                self.open_chunks = open_chunks;
            }
            8 => self.messages_snapshot(),
            9 => self.subagent(open_chunks),
            10 => {
                let name = self.id("step");
                self.events
                    .push(json!({"type": "STEP_STARTED", "stepName": name}));
                self.text_message(None);
                self.events
                    .push(json!({"type": "STEP_FINISHED", "stepName": name}));
            }
            _ => {
                if self.chance(50) {
                    self.events.push(json!({
                        "type": "CUSTOM", "name": "gen.note", "value": {"n": self.rng.below(9)}
                    }));
                } else {
                    self.events.push(json!({
                        "type": "RAW", "event": {"vendor": "gen", "n": self.rng.below(9)},
                        "source": "gen"
                    }));
                    self.open_chunks = open_chunks;
                }
            }
        }
    }

    fn terminal(&mut self, thread: &str, run: &str, last: bool) {
        let mut finished = json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run});
        match self.rng.below(if last { 6 } else { 5 }) {
            0 => {
                finished["result"] = json!({"answer": self.text()});
                finished["outcome"] = json!({"type": "success"});
            }
            1 => {
                let id = self.id("i");
                let mut interrupt = json!({"id": id, "reason": "tool_approval",
                                           "message": "May I?"});
                if let Some(call) = self.open_calls.pop() {
                    interrupt["toolCallId"] = call.into();
                }
                if self.chance(50) {
                    interrupt["responseSchema"] = json!({"type": "object"});
                    interrupt["metadata"] = json!({"risk": "low"});
                }
                finished["outcome"] = json!({"type": "interrupt", "interrupts": [interrupt]});
            }
            2 => finished["outcome"] = json!({"type": "cancelled"}),
            3 => {}
            _ => {
                let code = ["RATE_LIMITED", "MODEL_ERROR"][self.rng.below(2)];
                let message = format!("failed: {}", self.text());
                self.events
                    .push(json!({"type": "RUN_ERROR", "message": message, "code": code}));
                return;
            }
        }
        self.events.push(finished);
    }
}

/// Case `n` of the stream family seeded by `seed`.
pub fn case(seed: u64, n: usize) -> Case {
    let mut rng = Rng(seed ^ (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let thread = format!("thread-{n}");
    let prompt = json!({"id": format!("u{n}"), "role": "user", "content": case_prompt(n)});
    let request = json!({
        "threadId": thread, "runId": format!("run-{n}"), "messages": [prompt],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let mut g = Gen {
        rng: &mut rng,
        case: n,
        next_id: 0,
        events: Vec::new(),
        state: Map::new(),
        state_known: false,
        messages: vec![prompt],
        open_calls: Vec::new(),
        open_chunks: None,
        last_main_text: None,
    };
    let runs = 1 + g.rng.below(3);
    for r in 0..runs {
        let run = if r == 0 {
            format!("run-{n}")
        } else {
            format!("run-{n}.{r}")
        };
        g.open_calls.clear();
        g.events
            .push(json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}));
        for _ in 0..g.rng.below(6) {
            g.block();
        }
        g.terminal(&thread, &run, r + 1 == runs);
    }
    Case {
        request,
        events: g.events,
    }
}
