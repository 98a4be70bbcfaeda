//! Who owns each id of a run, as `@ag-ui/client` 1.0 remembers it for its attribution checks
//! (`agui.md` §5.2): an id keeps its first opener's `subagentRunId` for the whole run (a
//! message snapshot re-declares it), in three namespaces. Bounded by
//! [`MAX_TRACKED_IDS`] per namespace; beyond, new ids are not
//! remembered and the checks that need them degrade, never fail.

use std::collections::HashMap;

use crate::event::Message;

pub const MAX_TRACKED_IDS: usize = 8192;

/// The client's id namespaces: text messages (with tool-result messages), reasoning (spans and
/// messages together), tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    Message,
    Reasoning,
    Tool,
}

/// What the client remembers of an id.
#[derive(Debug)]
pub(super) struct Owner {
    pub(super) lane: Option<String>,
    /// The id names an assistant text message (a valid `parentMessageId`).
    pub(super) assistant: bool,
    /// For tool calls: the tool's name (a reused id must keep it).
    pub(super) name: Option<String>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Owners {
    messages: HashMap<String, Owner>,
    reasoning: HashMap<String, Owner>,
    tools: HashMap<String, Owner>,
}

impl Owners {
    fn table(&self, space: Space) -> &HashMap<String, Owner> {
        match space {
            Space::Message => &self.messages,
            Space::Reasoning => &self.reasoning,
            Space::Tool => &self.tools,
        }
    }

    fn table_mut(&mut self, space: Space) -> &mut HashMap<String, Owner> {
        match space {
            Space::Message => &mut self.messages,
            Space::Reasoning => &mut self.reasoning,
            Space::Tool => &mut self.tools,
        }
    }

    pub(super) fn get(&self, space: Space, id: &str) -> Option<&Owner> {
        self.table(space).get(id)
    }

    /// Records the first owner of an id; later owners do not replace it.
    pub(super) fn remember(
        &mut self,
        space: Space,
        id: &str,
        lane: &Option<String>,
        assistant: bool,
        name: Option<&str>,
    ) {
        let table = self.table_mut(space);
        if table.len() < MAX_TRACKED_IDS && !table.contains_key(id) {
            table.insert(
                id.to_string(),
                Owner {
                    lane: lane.clone(),
                    assistant,
                    name: name.map(str::to_owned),
                },
            );
        }
    }

    /// The lane an id belongs to, when the run has seen it; `lane` otherwise.
    pub(super) fn lane_of(&self, space: Space, id: &str, lane: &Option<String>) -> Option<String> {
        match self.get(space, id) {
            Some(owner) => owner.lane.clone(),
            None => lane.clone(),
        }
    }

    /// Whether a tool call in `lane` may name `parent` as its `parentMessageId`: the client
    /// attaches it to the message with that id (reasoning messages included), which must be an
    /// assistant message of the same lane. Unknown ids are fine (the client creates one).
    pub(super) fn is_valid_parent(&self, parent: &str, lane: &Option<String>) -> bool {
        !self.reasoning.contains_key(parent)
            && self
                .messages
                .get(parent)
                .is_none_or(|owner| owner.assistant && owner.lane == *lane)
    }

    /// A tool call id seen before under another tool's name.
    pub(super) fn is_renamed_tool(&self, id: &str, name: &str) -> bool {
        self.tools
            .get(id)
            .and_then(|o| o.name.as_deref())
            .is_some_and(|known| known != name)
    }

    /// A message snapshot re-declares the owners of its messages and their tool calls.
    pub(super) fn declare_snapshot(&mut self, messages: &[Message]) {
        for message in messages {
            let (space, id, lane, assistant) = message_owner(message);
            let lane = lane.cloned();
            self.table_mut(space).remove(id);
            self.remember(space, id, &lane, assistant, None);
            if let Message::Assistant(m) = message {
                for call in m.tool_calls.iter().flatten() {
                    self.tools.remove(&call.id);
                    let name = Some(call.function.name.as_str());
                    self.remember(Space::Tool, &call.id, &lane, false, name);
                }
            }
        }
    }
}

/// The namespace, id, owner lane and assistant-ness of a snapshot message.
fn message_owner(message: &Message) -> (Space, &str, Option<&String>, bool) {
    match message {
        Message::Assistant(m) => (Space::Message, &m.id, m.subagent_run_id.as_ref(), true),
        Message::Developer(m) | Message::System(m) => {
            (Space::Message, &m.id, m.subagent_run_id.as_ref(), false)
        }
        Message::User(m) => (Space::Message, &m.id, m.subagent_run_id.as_ref(), false),
        Message::Tool(m) => (Space::Message, &m.id, m.subagent_run_id.as_ref(), false),
        Message::Activity(m) => (Space::Message, &m.id, m.subagent_run_id.as_ref(), false),
        Message::Reasoning(m) => (Space::Reasoning, &m.id, m.subagent_run_id.as_ref(), false),
    }
}
