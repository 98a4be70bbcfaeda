//! `*_CHUNK` expansion (`agui.md` §4, `dialects.md` row 11), the way `@ag-ui/client` 1.0
//! expands them before verification, so the canonical stream never holds a chunk.
//!
//! Open chunk streams are tracked per lane (`subagentRunId`; absent is the parent lane), at most
//! one per lane. A chunk continues its lane's stream when its id is absent or equal; otherwise
//! the stream is closed (synthetic `*_END`) and a new one starts. Non-chunk events close streams
//! by the client's rules. Where the client would throw (a first chunk without an id) the gateway
//! is lenient: text and reasoning get a minted id; a tool chunk without a name is dropped.

use crate::event::{
    Event, EventBase, ReasoningMessageContent, ReasoningMessageEnd, ReasoningMessageStart,
    TextMessageContent, TextMessageEnd, TextMessageStart, ToolCallArgs, ToolCallEnd, ToolCallStart,
};

use crate::event::{DropKind, IdMint, Note, Rule};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Reasoning,
}

#[derive(Debug)]
struct Stream {
    lane: Option<String>,
    kind: Kind,
    id: String,
}

/// Chunk streams open at once (one per lane).
const MAX_LANES: usize = 256;

/// See the module docs.
#[derive(Debug, Default)]
pub struct ChunkExpander {
    open: Vec<Stream>,
}

impl ChunkExpander {
    /// Passes one event through, expanding chunks and closing chunk streams as the client does.
    pub fn push(
        &mut self,
        event: Event,
        mint: &mut IdMint,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) {
        match event {
            Event::TextMessageChunk(c) => {
                notes.push(Note::Fixup(Rule::ChunkExpansion));
                let (role, name) = (c.role, c.name);
                let started =
                    self.stream_for(Kind::Text, c.message_id, &c.base, out, |id, base| {
                        let id = id.unwrap_or_else(|| mint.next('m'));
                        let start = TextMessageStart {
                            message_id: id.clone(),
                            role: role.unwrap_or_default(),
                            name,
                            base,
                        };
                        Some((id, start.into()))
                    });
                if let (Some(id), Some(base)) = (started, content_base(c.delta.is_some(), c.base)) {
                    out.push(Event::TextMessageContent(TextMessageContent {
                        message_id: id,
                        delta: c.delta.unwrap_or_default(),
                        base,
                    }));
                }
            }
            Event::ToolCallChunk(c) => {
                notes.push(Note::Fixup(Rule::ChunkExpansion));
                let (name, parent) = (c.tool_call_name, c.parent_message_id);
                let started =
                    self.stream_for(Kind::Tool, c.tool_call_id, &c.base, out, |id, base| {
                        // A call cannot start without both an id and a name; nothing to synthesise.
                        let (id, name) = (id?, name?);
                        let start = ToolCallStart {
                            tool_call_id: id.clone(),
                            tool_call_name: name,
                            parent_message_id: parent,
                            base,
                        };
                        Some((id, start.into()))
                    });
                let Some(id) = started else {
                    notes.push(Note::Dropped(DropKind::Orphan));
                    return;
                };
                if let Some(base) = content_base(c.delta.is_some(), c.base) {
                    out.push(Event::ToolCallArgs(ToolCallArgs {
                        tool_call_id: id,
                        delta: c.delta.unwrap_or_default(),
                        base,
                    }));
                }
            }
            Event::ReasoningMessageChunk(c) => {
                notes.push(Note::Fixup(Rule::ChunkExpansion));
                let started =
                    self.stream_for(Kind::Reasoning, c.message_id, &c.base, out, |id, base| {
                        let id = id.unwrap_or_else(|| mint.next('r'));
                        let start = ReasoningMessageStart {
                            message_id: id.clone(),
                            role: Default::default(),
                            base,
                        };
                        Some((id, start.into()))
                    });
                if let (Some(id), Some(base)) = (started, content_base(c.delta.is_some(), c.base)) {
                    out.push(Event::ReasoningMessageContent(ReasoningMessageContent {
                        message_id: id,
                        delta: c.delta.unwrap_or_default(),
                        base,
                    }));
                }
            }
            other => {
                if !self.open.is_empty() {
                    self.close_for(&other, out);
                }
                out.push(other);
            }
        }
    }

    /// The id of the stream a chunk continues; otherwise closes its lane's stream and starts a
    /// new one with `start(chunk id, lane base)`, which returns the new id and its START event
    /// (`None`: nothing can be started, and the chunk is dropped).
    fn stream_for(
        &mut self,
        kind: Kind,
        id: Option<String>,
        base: &EventBase,
        out: &mut Vec<Event>,
        start: impl FnOnce(Option<String>, EventBase) -> Option<(String, Event)>,
    ) -> Option<String> {
        let lane = self.lane(kind, id.as_deref(), &base.subagent_run_id);
        if let Some(id) = self.continuing(&lane, kind, id.as_deref()) {
            return Some(id);
        }
        self.close_lane(&lane, out);
        if self.open.len() >= MAX_LANES {
            // Lanes are subagent ids the upstream chooses: keep their number bounded by
            // closing the oldest open stream.
            let oldest = self.open.remove(0);
            out.push(end_event(oldest));
        }
        let (id, event) = start(id, lane_base(&lane))?;
        out.push(event);
        self.open.push(Stream {
            lane,
            kind,
            id: id.clone(),
        });
        Some(id)
    }

    /// Which lane a chunk belongs to: the lane whose open stream of that kind has its id, else
    /// its own tag, else the only lane with a stream of that kind open.
    fn lane(&self, kind: Kind, id: Option<&str>, tag: &Option<String>) -> Option<String> {
        if let Some(id) = id {
            if let Some(s) = self.open.iter().find(|s| s.kind == kind && s.id == id) {
                return s.lane.clone();
            }
        }
        if tag.is_some() {
            return tag.clone();
        }
        let mut same_kind = self.open.iter().filter(|s| s.kind == kind);
        match (same_kind.next(), same_kind.next()) {
            (Some(only), None) => only.lane.clone(),
            _ => None,
        }
    }

    /// The id of the lane's open stream when this chunk continues it.
    fn continuing(&self, lane: &Option<String>, kind: Kind, id: Option<&str>) -> Option<String> {
        let s = self.open.iter().find(|s| &s.lane == lane)?;
        (s.kind == kind && id.is_none_or(|id| id == s.id)).then(|| s.id.clone())
    }

    fn close_lane(&mut self, lane: &Option<String>, out: &mut Vec<Event>) {
        if let Some(pos) = self.open.iter().position(|s| &s.lane == lane) {
            let s = self.open.remove(pos);
            out.push(end_event(s));
        }
    }

    fn close_all(&mut self, out: &mut Vec<Event>) {
        for s in self.open.drain(..) {
            out.push(end_event(s));
        }
    }

    /// Closes chunk streams that a non-chunk event ends (`agui.md` §4).
    fn close_for(&mut self, event: &Event, out: &mut Vec<Event>) {
        let lane = event.base().subagent_run_id.clone();
        match event {
            Event::TextMessageStart(_)
            | Event::TextMessageContent(_)
            | Event::TextMessageEnd(_)
            | Event::ToolCallStart(_)
            | Event::ToolCallArgs(_)
            | Event::ToolCallEnd(_)
            | Event::ToolCallResult(_)
            | Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::Custom(_)
            | Event::StepStarted(_)
            | Event::StepFinished(_)
            | Event::ReasoningStart(_)
            | Event::ReasoningMessageStart(_)
            | Event::ReasoningMessageContent(_)
            | Event::ReasoningMessageEnd(_)
            | Event::ReasoningEnd(_) => self.close_lane(&lane, out),
            Event::RunStarted(_)
            | Event::RunFinished(_)
            | Event::RunError(_)
            | Event::MessagesSnapshot(_) => self.close_all(out),
            Event::SubagentFinished(e) => self.close_lane(&Some(e.subagent_run_id.clone()), out),
            Event::SubagentError(e) => self.close_lane(&Some(e.subagent_run_id.clone()), out),
            Event::Raw(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::ReasoningEncryptedValue(_)
            | Event::SubagentStarted(_)
            | Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_) => {}
        }
    }
}

/// The base of the content event a chunk yields, if it yields one: it does when it carries a
/// delta, or metadata or a raw event without one.
fn content_base(has_delta: bool, base: EventBase) -> Option<EventBase> {
    (has_delta || base.metadata.is_some() || base.raw_event.is_some()).then_some(base)
}

fn lane_base(lane: &Option<String>) -> EventBase {
    EventBase {
        subagent_run_id: lane.clone(),
        ..EventBase::default()
    }
}

fn end_event(s: Stream) -> Event {
    let base = lane_base(&s.lane);
    match s.kind {
        Kind::Text => Event::TextMessageEnd(TextMessageEnd {
            message_id: s.id,
            base,
        }),
        Kind::Tool => Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: s.id,
            base,
        }),
        Kind::Reasoning => Event::ReasoningMessageEnd(ReasoningMessageEnd {
            message_id: s.id,
            base,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expand(events: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
        let mut x = ChunkExpander::default();
        let mut mint = IdMint::new("run");
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        for v in events {
            x.push(
                serde_json::from_value(v).unwrap(),
                &mut mint,
                &mut out,
                &mut notes,
            );
        }
        out.iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }

    #[test]
    fn text_chunks_without_end_expand_and_close_at_run_finished() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"x"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","delta":"y"}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        ]);
        assert_eq!(
            out,
            vec![
                json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x"}),
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"y"}),
                json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}),
                json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
            ]
        );
    }

    #[test]
    fn a_new_id_closes_the_previous_stream_of_the_lane() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a"}),
            json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1","delta":"{\"a\""}),
            json!({"type":"TOOL_CALL_CHUNK","delta":":1}"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","role":"assistant","delta":"b"}),
            json!({"type":"CUSTOM","name":"n","value":1}),
        ]);
        let types: Vec<_> = out.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "CUSTOM"
            ]
        );
        assert_eq!(out[3]["parentMessageId"], "m1");
    }

    #[test]
    fn a_start_only_chunk_yields_no_content() {
        let out = expand(vec![
            json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r1"}),
        ]);
        assert_eq!(
            out,
            vec![json!({"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"})]
        );
    }

    #[test]
    fn raw_and_activity_close_nothing() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a"}),
            json!({"type":"RAW","event":{}}),
            json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b"}),
        ]);
        assert_eq!(out.len(), 4);
        assert_eq!(out[3]["messageId"], "m1");
    }

    #[test]
    fn lanes_are_separate() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"s1","delta":"b","subagentRunId":"sub"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"c"}),
            json!({"type":"SUBAGENT_FINISHED","subagentRunId":"sub"}),
        ]);
        let types: Vec<_> = out.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "SUBAGENT_FINISHED"
            ]
        );
        assert_eq!(out[5]["messageId"], "s1");
    }

    #[test]
    fn first_chunk_without_id_gets_a_minted_one_and_nameless_tool_chunks_drop() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","delta":"a"}),
            json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c","delta":"{}"}),
        ]);
        assert_eq!(out[0]["messageId"], "run.m0");
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[2]["type"], "TEXT_MESSAGE_END");
    }
}
