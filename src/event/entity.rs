//! The entities a run opens and must close (messages, calls, reasoning, steps, subagents), the
//! event that ends each, and the base of an event attributed to a subagent lane. Every part
//! of the gateway that closes what an upstream left open (the run guard, chunk expansion, the
//! AAP reader) writes the same `*_END` events through here.

use super::{
    Event, EventBase, ReasoningEnd, ReasoningMessageEnd, StepFinished, SubagentFinished,
    TextMessageEnd, ToolCallEnd,
};

/// What an open entity is, as far as the event that ends it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Text,
    Tool,
    ReasoningMessage,
    ReasoningSpan,
    Step,
    Subagent,
}

impl Entity {
    /// The event that closes entity `id` (a step's name, a subagent's run id), attributed to
    /// `lane`, its opener's subagent.
    pub fn end_event(self, id: String, lane: Option<String>) -> Event {
        let base = EventBase::in_lane(lane);
        match self {
            Entity::Text => Event::TextMessageEnd(TextMessageEnd {
                message_id: id,
                base,
            }),
            Entity::Tool => Event::ToolCallEnd(ToolCallEnd {
                tool_call_id: id,
                base,
            }),
            Entity::ReasoningMessage => Event::ReasoningMessageEnd(ReasoningMessageEnd {
                message_id: id,
                base,
            }),
            Entity::ReasoningSpan => Event::ReasoningEnd(ReasoningEnd {
                message_id: id,
                base,
            }),
            Entity::Step => Event::StepFinished(StepFinished {
                step_name: id,
                base,
            }),
            // A subagent's own id is its own field; its lane tag stays empty.
            Entity::Subagent => Event::SubagentFinished(SubagentFinished {
                subagent_run_id: id,
                result: None,
                outcome: None,
                base: EventBase::default(),
            }),
        }
    }
}

impl EventBase {
    /// The base of an event attributed to subagent `lane` (the parent run's when `None`).
    pub fn in_lane(lane: Option<String>) -> EventBase {
        EventBase {
            subagent_run_id: lane,
            ..EventBase::default()
        }
    }
}
