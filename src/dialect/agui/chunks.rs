//! `*_CHUNK` expansion (`agui.md` §4, `dialects.md` row 11), the way `@ag-ui/client` 1.0
//! expands them before verification, so the canonical stream never holds a chunk.
//!
//! Open chunk streams are tracked per lane (`subagentRunId`; absent is the parent lane), at most
//! one per lane. A chunk continues its lane's stream when its id is absent or equal; otherwise
//! the stream is closed (synthetic `*_END`) and a new one starts. Non-chunk events close streams
//! by the client's rules. Where the client would throw (a first chunk without an id) the gateway
//! is lenient: text and reasoning get a minted id; a tool chunk without a name is dropped.
//!
//! What AG-UI 1.1 makes fatal because no repair keeps the bytes with their owner ends the run
//! with `UPSTREAM_CONFLICT` ("Continuation chunks"): a continuation repeating its opener's
//! role, name, tool name or parent with another value (an absent role established
//! `assistant`), a chunk naming an open item of another subagent, and a continuation without
//! id or tag that several subagents' open streams could own.

use crate::error::{ErrorCode, Failure};
use crate::event::{
    Event, EventBase, ReasoningMessageContent, ReasoningMessageStart, TextMessageContent,
    TextMessageStart, TextRole, ToolCallArgs, ToolCallStart,
};
// Entities that open and must close, and the events that end them.
use crate::event::Entity as Kind;

use crate::event::{DropKind, IdMint, Note, Rule};

#[derive(Debug)]
struct Stream {
    lane: Option<String>,
    kind: Kind,
    id: String,
    /// What the opener established, which a continuation may repeat only unchanged.
    opener: Opener,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Opener {
    Text {
        role: Option<TextRole>,
        name: Option<String>,
    },
    Tool {
        name: String,
        parent: Option<String>,
    },
    Reasoning,
}

impl Opener {
    /// The field of `self` (the continuation's) that contradicts `opened`, if one does. An
    /// absent field repeats nothing; an absent role was `assistant`.
    fn conflict(&self, opened: &Opener) -> Option<&'static str> {
        let differs = |have: &Option<String>, had: &Option<String>| {
            have.is_some() && had.is_some() && have != had
        };
        match (self, opened) {
            (Opener::Text { role, name }, Opener::Text { role: r, name: n }) => {
                if role.is_some_and(|role| role != r.unwrap_or_default()) {
                    Some("role")
                } else {
                    differs(name, n).then_some("name")
                }
            }
            (Opener::Tool { name, parent }, Opener::Tool { name: m, parent: p }) => {
                if !name.is_empty() && name != m {
                    Some("toolCallName")
                } else {
                    differs(parent, p).then_some("parentMessageId")
                }
            }
            _ => None,
        }
    }
}

fn conflict(problem: String) -> Failure {
    Failure::new(ErrorCode::UpstreamConflict, problem)
}

/// Chunk streams open at once (one per lane).
const MAX_LANES: usize = 256;

/// See the module docs.
#[derive(Debug, Default)]
pub struct ChunkExpander {
    open: Vec<Stream>,
}

impl ChunkExpander {
    /// Whether [`Self::push`] would pass `event` on as it is, with nothing before it: it is no
    /// chunk, and no chunk stream is open for it to close.
    pub fn passes(&self, event: &Event) -> bool {
        self.is_idle()
            && !matches!(
                event,
                Event::TextMessageChunk(_)
                    | Event::ToolCallChunk(_)
                    | Event::ReasoningMessageChunk(_)
            )
    }

    /// No chunk stream is open: every event but a chunk passes as it is.
    pub fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    /// Passes one event through, expanding chunks and closing chunk streams as the client does.
    /// `Err`: the chunk contradicts what its item's opener said (see the module docs).
    pub fn push(
        &mut self,
        event: Event,
        mint: &mut IdMint,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        match event {
            Event::TextMessageChunk(c) => {
                notes.push(Note::Fixup(Rule::ChunkExpansion));
                let said = Opener::Text {
                    role: c.role,
                    name: c.name.clone(),
                };
                let started =
                    self.stream_for(Kind::Text, c.message_id, &c.base, said, out, |id, base| {
                        let id = id.unwrap_or_else(|| mint.next('m'));
                        let start = TextMessageStart {
                            message_id: id.clone(),
                            role: c.role.unwrap_or_default(),
                            name: c.name,
                            base,
                        };
                        Some((id, start.into()))
                    })?;
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
                let said = Opener::Tool {
                    name: c.tool_call_name.clone().unwrap_or_default(),
                    parent: c.parent_message_id.clone(),
                };
                let (name, parent) = (c.tool_call_name, c.parent_message_id);
                let started = self.stream_for(
                    Kind::Tool,
                    c.tool_call_id,
                    &c.base,
                    said,
                    out,
                    |id, base| {
                        // A call cannot start without both an id and a name; nothing to synthesise.
                        let (id, name) = (id?, name?);
                        let start = ToolCallStart {
                            tool_call_id: id.clone(),
                            tool_call_name: name,
                            parent_message_id: parent,
                            base,
                        };
                        Some((id, start.into()))
                    },
                )?;
                let Some(id) = started else {
                    notes.push(Note::Dropped(DropKind::Orphan));
                    return Ok(());
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
                let started = self.stream_for(
                    Kind::ReasoningMessage,
                    c.message_id,
                    &c.base,
                    Opener::Reasoning,
                    out,
                    |id, base| {
                        let id = id.unwrap_or_else(|| mint.next('r'));
                        let start = ReasoningMessageStart {
                            message_id: id.clone(),
                            role: Default::default(),
                            base,
                        };
                        Some((id, start.into()))
                    },
                )?;
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
        Ok(())
    }

    /// The id of the stream a chunk continues (after checking that it repeats its opener's
    /// fields unchanged); otherwise closes its lane's stream and starts a new one with
    /// `start(chunk id, lane base)`, which returns the new id and its START event (`None`:
    /// nothing can be started, and the chunk is dropped).
    fn stream_for(
        &mut self,
        kind: Kind,
        id: Option<String>,
        base: &EventBase,
        said: Opener,
        out: &mut Vec<Event>,
        start: impl FnOnce(Option<String>, EventBase) -> Option<(String, Event)>,
    ) -> Result<Option<String>, Failure> {
        let lane = self.lane(kind, id.as_deref(), &base.subagent_run_id)?;
        if let Some(open) = self.continuing(&lane, kind, id.as_deref()) {
            if let Some(field) = said.conflict(&open.opener) {
                return Err(conflict(format!(
                    "a chunk continuing {:?} repeats its `{field}` with another value",
                    open.id
                )));
            }
            return Ok(Some(open.id.clone()));
        }
        self.close_lane(&lane, out);
        if self.open.len() >= MAX_LANES {
            // Lanes are subagent ids the upstream chooses: keep their number bounded by
            // closing the oldest open stream.
            let oldest = self.open.remove(0);
            out.push(end_event(oldest));
        }
        let Some((id, event)) = start(id, EventBase::in_lane(lane.clone())) else {
            return Ok(None);
        };
        out.push(event);
        self.open.push(Stream {
            lane,
            kind,
            id: id.clone(),
            opener: said,
        });
        Ok(Some(id))
    }

    /// Which lane a chunk belongs to: the lane whose open stream of that kind has its id (a tag
    /// naming another lane is a conflict), else its own tag; a chunk without either continues
    /// the parent's open stream of its kind, else the only one open (several: ambiguous).
    fn lane(
        &self,
        kind: Kind,
        id: Option<&str>,
        tag: &Option<String>,
    ) -> Result<Option<String>, Failure> {
        if let Some(id) = id {
            if let Some(s) = self.open.iter().find(|s| s.kind == kind && s.id == id) {
                if tag.is_some() && *tag != s.lane {
                    return Err(conflict(format!(
                        "a chunk continuing {id:?} names subagent {:?}, but {:?} opened it",
                        tag.as_deref().unwrap_or_default(),
                        s.lane.as_deref().unwrap_or("the parent agent")
                    )));
                }
                return Ok(s.lane.clone());
            }
        }
        if tag.is_some() {
            return Ok(tag.clone());
        }
        if self.open.iter().any(|s| s.kind == kind && s.lane.is_none()) {
            return Ok(None);
        }
        let mut same_kind = self.open.iter().filter(|s| s.kind == kind);
        match (same_kind.next(), same_kind.next()) {
            (Some(only), None) => Ok(only.lane.clone()),
            (Some(_), Some(_)) if id.is_none() => Err(conflict(
                "a chunk without id or subagentRunId continues one of several subagents' open streams; parallel subagents must attribute their chunks".into(),
            )),
            _ => Ok(None),
        }
    }

    /// The lane's open stream when this chunk continues it.
    fn continuing(&self, lane: &Option<String>, kind: Kind, id: Option<&str>) -> Option<&Stream> {
        let s = self.open.iter().find(|s| &s.lane == lane)?;
        (s.kind == kind && id.is_none_or(|id| id == s.id)).then_some(s)
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

fn end_event(s: Stream) -> Event {
    s.kind.end_event(s.id, s.lane)
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
            )
            .unwrap();
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

    /// The failure a sequence of chunks ends in, after the events before it.
    fn refused(events: Vec<serde_json::Value>) -> (Vec<serde_json::Value>, Failure) {
        let mut x = ChunkExpander::default();
        let mut mint = IdMint::new("run");
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        for v in events {
            if let Err(f) = x.push(
                serde_json::from_value(v).unwrap(),
                &mut mint,
                &mut out,
                &mut notes,
            ) {
                let out = out
                    .iter()
                    .map(|e| serde_json::to_value(e).unwrap())
                    .collect();
                return (out, f);
            }
        }
        panic!("accepted: {out:?}");
    }

    #[test]
    fn a_continuation_repeating_a_field_with_another_value_is_a_conflict() {
        let cases = [
            // A user message continued as assistant text would land in the user's message.
            vec![
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"user","delta":"hi"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","role":"assistant","delta":"there"}),
            ],
            // An absent role on the opener established `assistant`.
            vec![
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"user","delta":"b"}),
            ],
            vec![
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","name":"ann","delta":"a"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","name":"bob","delta":"b"}),
            ],
            // Renaming a call in flight would deliver its arguments under the first name.
            vec![
                json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"search","delta":"{"}),
                json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"delete","delta":"}"}),
            ],
            vec![
                json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1"}),
                json!({"type":"TOOL_CALL_CHUNK","parentMessageId":"m2","delta":"{}"}),
            ],
            // A chunk of an item another subagent opened.
            vec![
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"s1","subagentRunId":"a","delta":"x"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"s1","subagentRunId":"b","delta":"y"}),
            ],
            // Neither id nor tag, and two subagents' streams open: no unique owner.
            vec![
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"s1","subagentRunId":"a","delta":"x"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"s2","subagentRunId":"b","delta":"y"}),
                json!({"type":"TEXT_MESSAGE_CHUNK","delta":"z"}),
            ],
        ];
        for events in cases {
            let n = events.len();
            let (out, failure) = refused(events.clone());
            assert_eq!(failure.code, ErrorCode::UpstreamConflict, "{events:?}");
            // Nothing of the refused chunk came out.
            let contents = out
                .iter()
                .filter(|e| {
                    e["type"].as_str().unwrap().ends_with("_CONTENT")
                        || e["type"] == "TOOL_CALL_ARGS"
                })
                .count();
            assert!(contents < n, "{out:?}");
        }
    }

    #[test]
    fn a_continuation_repeating_its_opener_unchanged_or_omitting_fields_continues_it() {
        let out = expand(vec![
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"user","name":"ann","delta":"a"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"user","name":"ann","delta":"c"}),
            json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","delta":"{"}),
            json!({"type":"TOOL_CALL_CHUNK","toolCallName":"f","delta":"}"}),
        ]);
        let deltas: Vec<_> = out.iter().filter_map(|e| e["delta"].as_str()).collect();
        assert_eq!(deltas, ["a", "b", "c", "{", "}"]);
        assert_eq!(out[3]["messageId"], "m1");
    }
}
