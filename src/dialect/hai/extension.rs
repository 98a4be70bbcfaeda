//! The `agui` extension of the HAI wire: what lets an AG-UI run cross a HAI hop whole
//! (README "HAI extension").
//!
//! Two forms, both ignored by a plain HAI client:
//! - an AG-UI event HAI has no home for travels as HAI `CUSTOM` named `agui.<TYPE>` whose
//!   `value` is the AG-UI event without `type`;
//! - the AG-UI fields a mapped HAI event cannot hold travel in ONE member `agui` on that HAI
//!   event: an object of just those fields (`metadata`, `subagentRunId`, `outcome`,
//!   `content`, …), which the reader merges back. One reserved member, `synthetic: true`,
//!   marks a HAI event the writer made up for plain HAI clients (an interrupt's confirm call, the
//!   business message holding a lone reasoning message, the last thinking chunk): the reader
//!   drops it.
//!
//! The writer side builds these members, the reader side takes them apart; a malformed member
//! is dropped and noted, never fatal.

use serde_json::{Map, Value};

use super::METADATA_KEY;
use crate::event::{DropKind, Event, EventBase, EventType, Note};

/// The member on a mapped HAI event.
pub const MEMBER: &str = "agui";
/// Prefix of the `CUSTOM` names carrying whole AG-UI events.
pub const EVENT_PREFIX: &str = "agui.";
/// The reserved member marking an event the writer made up.
pub const SYNTHETIC: &str = "synthetic";

/// The base fields of `base` a HAI event cannot hold: `metadata` (without the `hai` key, which
/// is HAI's own material the writer already used) and `subagentRunId`.
pub(super) fn base_lost(base: &EventBase) -> Map<String, Value> {
    let mut lost = Map::new();
    if let Some(metadata) = &base.metadata {
        let own: Map<String, Value> = metadata
            .iter()
            .filter(|(k, _)| *k != METADATA_KEY)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !own.is_empty() {
            lost.insert("metadata".into(), Value::Object(own));
        }
    }
    if let Some(id) = &base.subagent_run_id {
        lost.insert("subagentRunId".into(), id.clone().into());
    }
    lost
}

/// `{"synthetic": true}`.
pub(super) fn synthetic() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(SYNTHETIC.into(), true.into());
    map
}

/// Puts `lost` on `fields` as the `agui` member unless it is empty.
pub(super) fn put(fields: &mut Map<String, Value>, lost: Map<String, Value>) {
    if !lost.is_empty() {
        fields.insert(MEMBER.into(), Value::Object(lost));
    }
}

/// The `CUSTOM agui.<TYPE>` name and value for a whole AG-UI event.
pub(super) fn custom_of(event: &Event) -> (String, Value) {
    let name = format!("{EVENT_PREFIX}{}", event.event_type().as_str());
    let mut value = serde_json::to_value(event).unwrap_or_default();
    if let Value::Object(map) = &mut value {
        map.shift_remove("type");
    }
    (name, value)
}

/// What a HAI event's `agui` member says.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) enum Ext {
    /// No member (or a malformed one, noted).
    #[default]
    None,
    /// The writer made the event up: drop it.
    Synthetic,
    /// The lost AG-UI fields.
    Lost(Map<String, Value>),
}

impl Ext {
    /// Takes the member out of `map`. Anything but an object is dropped and noted.
    pub(super) fn take(map: &mut Map<String, Value>, notes: &mut Vec<Note>) -> Ext {
        match map.shift_remove(MEMBER) {
            None => Ext::None,
            Some(Value::Object(lost)) => {
                if lost.get(SYNTHETIC) == Some(&Value::Bool(true)) {
                    Ext::Synthetic
                } else {
                    Ext::Lost(lost)
                }
            }
            Some(_) => {
                notes.push(Note::Dropped(DropKind::InvalidEvent));
                Ext::None
            }
        }
    }

    pub(super) fn is_some(&self) -> bool {
        !matches!(self, Ext::None)
    }

    /// The lost fields (empty unless [`Ext::Lost`]).
    pub(super) fn lost(&self) -> Option<&Map<String, Value>> {
        match self {
            Ext::Lost(lost) => Some(lost),
            _ => None,
        }
    }

    /// A string field of the lost fields.
    pub(super) fn str(&self, key: &str) -> Option<&str> {
        self.lost().and_then(|l| l.get(key)).and_then(Value::as_str)
    }

    /// Merges the lost fields into the JSON of an AG-UI event: `metadata` key by key, every
    /// other field replacing what the HAI event held.
    pub(super) fn merge_into(self, map: &mut Map<String, Value>) {
        let Ext::Lost(lost) = self else {
            return;
        };
        for (key, value) in lost {
            match (key.as_str(), value) {
                ("metadata", Value::Object(extra)) => {
                    let metadata = map
                        .entry("metadata")
                        .or_insert_with(|| Value::Object(Map::new()));
                    match metadata {
                        Value::Object(metadata) => metadata.extend(extra),
                        other => *other = Value::Object(extra),
                    }
                }
                (_, value) => {
                    map.insert(key, value);
                }
            }
        }
    }

    /// Applies the base fields (`metadata`, `subagentRunId`) to an event the reader built;
    /// a field of the wrong type is noted and left out.
    pub(super) fn apply_base(&self, base: &mut EventBase, notes: &mut Vec<Note>) {
        let Some(lost) = self.lost() else {
            return;
        };
        match lost.get("metadata") {
            None => {}
            Some(Value::Object(extra)) => {
                let metadata = base.metadata.get_or_insert_with(Box::default);
                metadata.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            Some(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
        }
        match lost.get("subagentRunId") {
            None => {}
            Some(Value::String(id)) => base.subagent_run_id = Some(id.clone()),
            Some(_) => notes.push(Note::Dropped(DropKind::InvalidEvent)),
        }
    }
}

/// The AG-UI event a HAI `CUSTOM agui.<TYPE>` carries, as JSON for the AG-UI reader; `None`
/// when the name is not of that form, names no AG-UI type, or the value is not an object.
pub(super) fn event_of_custom(name: &str, value: &Value) -> Option<Value> {
    let ty = EventType::from_wire(name.strip_prefix(EVENT_PREFIX)?)?;
    let Value::Object(fields) = value else {
        return None;
    };
    let mut map = Map::with_capacity(fields.len() + 1);
    map.insert("type".into(), ty.as_str().into());
    map.extend(
        fields
            .iter()
            .filter(|(k, _)| *k != "type")
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    Some(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn members_are_read_only_when_well_formed() {
        let mut notes = Vec::new();
        let mut map = obj(json!({"agui": 5, "x": 1}));
        assert_eq!(Ext::take(&mut map, &mut notes), Ext::None);
        assert_eq!(notes, [Note::Dropped(DropKind::InvalidEvent)]);
        assert!(!map.contains_key("agui"));
        let mut map = obj(json!({"agui": {"synthetic": true}}));
        assert_eq!(Ext::take(&mut map, &mut notes), Ext::Synthetic);
        let mut map = obj(json!({"agui": {"synthetic": "yes", "metadata": 3}}));
        let ext = Ext::take(&mut map, &mut notes);
        assert!(matches!(ext, Ext::Lost(_)));
        let mut base = EventBase::default();
        notes.clear();
        ext.apply_base(&mut base, &mut notes);
        assert_eq!(base, EventBase::default());
        assert_eq!(notes, [Note::Dropped(DropKind::InvalidEvent)]);
    }

    #[test]
    fn lost_fields_merge_back() {
        let mut event = obj(json!({"type":"RUN_FINISHED","metadata":{"hai":{"x":1}}}));
        Ext::Lost(obj(
            json!({"metadata":{"k":"v"},"outcome":{"type":"cancelled"}}),
        ))
        .merge_into(&mut event);
        assert_eq!(
            Value::Object(event),
            json!({"type":"RUN_FINISHED","metadata":{"hai":{"x":1},"k":"v"},"outcome":{"type":"cancelled"}})
        );
        let base = EventBase {
            metadata: Some(Box::new(obj(json!({"hai":{"a":1},"k":2})))),
            subagent_run_id: Some("s".into()),
            ..EventBase::default()
        };
        assert_eq!(
            Value::Object(base_lost(&base)),
            json!({"metadata":{"k":2},"subagentRunId":"s"})
        );
    }

    #[test]
    fn custom_events_name_a_known_type_and_hold_an_object() {
        assert_eq!(
            event_of_custom("agui.ACTIVITY_DELTA", &json!({"messageId":"a"})),
            Some(json!({"type":"ACTIVITY_DELTA","messageId":"a"}))
        );
        assert_eq!(event_of_custom("agui.NOPE", &json!({})), None);
        assert_eq!(event_of_custom("agui.RAW", &json!("x")), None);
        assert_eq!(event_of_custom("other", &json!({})), None);
    }
}
