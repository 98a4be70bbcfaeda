//! Data-driven dialect variants (DESIGN.md principle 6): parses and validates `mappings/*.toml`
//! for the readers. The files in the repository are compiled in as defaults; `--mappings DIR`
//! replaces them at start-up (`config` reads the directory and hands over the texts), and
//! `check` validates them.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`). The
//! caller reads the files and hands the texts over.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::event::{EventType, TextRole};

/// The compiled-in AG-UI alias table.
pub const BUILTIN_AGUI_ALIASES: &str = include_str!("../mappings/agui-aliases.toml");
/// File name of the AG-UI alias table inside a mappings directory.
pub const AGUI_ALIASES_FILE: &str = "agui-aliases.toml";
/// The compiled-in HAI variant table.
pub const BUILTIN_HAI_TABLES: &str = include_str!("../mappings/hai.toml");
/// File name of the HAI variant table inside a mappings directory.
pub const HAI_TABLES_FILE: &str = "hai.toml";

/// The event types of the HAI catalogue (`hai.md` §2).
pub const HAI_EVENT_TYPES: &[&str] = &[
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "BUSINESS_DATA_START",
    "BUSINESS_DATA_CONTENT",
    "BUSINESS_DATA_END",
    "AGENT_COLLABORATIVE_MESSAGE_START",
    "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
    "AGENT_COLLABORATIVE_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGE_SNAPSHOT",
    "RAW",
    "CUSTOM",
];

/// Why a mapping file was refused.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("{origin}: {source}")]
    Parse {
        origin: String,
        source: Box<toml::de::Error>,
    },
    #[error("{origin}: {key}: {problem}")]
    Invalid {
        origin: String,
        key: String,
        problem: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAliases {
    #[serde(default)]
    keys: HashMap<String, String>,
    #[serde(default)]
    events: HashMap<String, String>,
    #[serde(default)]
    fields: HashMap<String, HashMap<String, String>>,
    #[serde(default)]
    roles: HashMap<String, String>,
    #[serde(default)]
    defaults: RawDefaults,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    unknown_role: Option<String>,
}

/// The AG-UI reader's alias and rename tables, validated.
#[derive(Debug, Clone)]
pub struct AguiAliases {
    /// snake_case → camelCase key renames.
    pub keys: Vec<(String, String)>,
    /// Upstream type name → 1.0 type.
    pub events: HashMap<String, EventType>,
    /// Type name (as spelled upstream, or canonical) → (alias, canonical key).
    pub fields: HashMap<String, Vec<(String, String)>>,
    /// Lower-cased role → 1.0 text role.
    pub roles: HashMap<String, TextRole>,
    pub unknown_role: TextRole,
    /// The aliases of [`DELTA_TYPES`]' own fields (from `fields`, in that order), for the
    /// reader's fast path: found once per table, not by hashing type names for every stream.
    delta_aliases: Arc<[Vec<String>; 3]>,
}

/// The content deltas whose fields' aliases the AG-UI reader's fast path checks for on every
/// event ([`AguiAliases::delta_aliases`]).
pub const DELTA_TYPES: [EventType; 3] = [
    EventType::TextMessageContent,
    EventType::ReasoningMessageContent,
    EventType::ToolCallArgs,
];

impl AguiAliases {
    /// The compiled-in table.
    pub fn builtin() -> AguiAliases {
        // The embedded file is tested (`builtin_tables_parse`); failing here is a build defect.
        AguiAliases::parse(BUILTIN_AGUI_ALIASES, "builtin agui-aliases.toml")
            .expect("the compiled-in agui-aliases.toml is valid")
    }

    /// Parses and validates a table; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<AguiAliases, MappingError> {
        let raw: RawAliases = toml::from_str(text).map_err(|e| MappingError::Parse {
            origin: origin.to_string(),
            source: Box::new(e),
        })?;
        let invalid = |key: String, problem: String| MappingError::Invalid {
            origin: origin.to_string(),
            key,
            problem,
        };
        let mut events = HashMap::new();
        for (from, to) in raw.events {
            let ty = EventType::from_wire(&to).ok_or_else(|| {
                invalid(
                    format!("events.{from}"),
                    format!("unknown AG-UI 1.0 event type {to:?}"),
                )
            })?;
            events.insert(from, ty);
        }
        let mut roles = HashMap::new();
        for (from, to) in raw.roles {
            let role = TextRole::from_wire(&to).ok_or_else(|| {
                invalid(
                    format!("roles.{from}"),
                    format!("unknown role {to:?} (expected developer, system, assistant or user)"),
                )
            })?;
            roles.insert(from.to_lowercase(), role);
        }
        let unknown_role = match raw.defaults.unknown_role {
            None => TextRole::Assistant,
            Some(r) => TextRole::from_wire(&r).ok_or_else(|| {
                invalid(
                    "defaults.unknown_role".into(),
                    format!("unknown role {r:?}"),
                )
            })?,
        };
        for (to, from) in raw.keys.iter().map(|(f, t)| (t, f)) {
            if to.is_empty() || from == to {
                return Err(invalid(
                    format!("keys.{from}"),
                    "must rename to a different, non-empty key".into(),
                ));
            }
        }
        let mut keys: Vec<_> = raw.keys.into_iter().collect();
        keys.sort();
        let fields = raw
            .fields
            .into_iter()
            .map(|(ty, map)| {
                let mut pairs: Vec<_> = map.into_iter().collect();
                pairs.sort();
                (ty, pairs)
            })
            .collect::<HashMap<String, Vec<(String, String)>>>();
        let delta_aliases = Arc::new(DELTA_TYPES.map(|ty| {
            fields.get(ty.as_str()).map_or_else(Vec::new, |pairs| {
                pairs.iter().map(|(alias, _)| alias.clone()).collect()
            })
        }));
        Ok(AguiAliases {
            keys,
            events,
            fields,
            roles,
            unknown_role,
            delta_aliases,
        })
    }

    /// The aliases of the fields of each of [`DELTA_TYPES`], in that order.
    pub fn delta_aliases(&self) -> &Arc<[Vec<String>; 3]> {
        &self.delta_aliases
    }

    /// Maps any role string onto a 1.0 text role.
    pub fn role(&self, role: &str) -> TextRole {
        let lower = role.to_lowercase();
        TextRole::from_wire(&lower)
            .or_else(|| self.roles.get(&lower).copied())
            .unwrap_or(self.unknown_role)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHaiTables {
    #[serde(default)]
    events: HashMap<String, String>,
    #[serde(default)]
    outputs: HashMap<String, String>,
    #[serde(default)]
    defaults: RawHaiDefaults,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHaiDefaults {
    error_message: Option<String>,
}

/// The HAI reader's variant tables, validated.
#[derive(Debug, Clone)]
pub struct HaiTables {
    /// Producer spelling → HAI catalogue type.
    pub events: HashMap<String, &'static str>,
    /// Producer output type → canonical output type (`think` → `thinking`).
    pub outputs: HashMap<String, String>,
    /// Message of a `RUN_ERROR` that carries none.
    pub error_message: String,
}

impl HaiTables {
    /// The compiled-in table.
    pub fn builtin() -> HaiTables {
        // The embedded file is tested (`builtin_tables_parse`); failing here is a build defect.
        HaiTables::parse(BUILTIN_HAI_TABLES, "builtin hai.toml")
            .expect("the compiled-in hai.toml is valid")
    }

    /// Parses and validates a table; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<HaiTables, MappingError> {
        let raw: RawHaiTables = toml::from_str(text).map_err(|e| MappingError::Parse {
            origin: origin.to_string(),
            source: Box::new(e),
        })?;
        let mut events = HashMap::new();
        for (from, to) in raw.events {
            let Some(known) = HAI_EVENT_TYPES.iter().find(|t| **t == to) else {
                return Err(MappingError::Invalid {
                    origin: origin.to_string(),
                    key: format!("events.{from}"),
                    problem: format!("unknown HAI event type {to:?}"),
                });
            };
            events.insert(from, *known);
        }
        for (from, to) in &raw.outputs {
            if to.is_empty() || from == to {
                return Err(MappingError::Invalid {
                    origin: origin.to_string(),
                    key: format!("outputs.{from}"),
                    problem: "must rename to a different, non-empty output type".into(),
                });
            }
        }
        Ok(HaiTables {
            events,
            outputs: raw.outputs,
            error_message: raw
                .defaults
                .error_message
                .unwrap_or_else(|| "upstream error".into()),
        })
    }

    /// The catalogue type of a producer's spelling, if it is one.
    pub fn event_type(&self, spelled: &str) -> Option<&'static str> {
        HAI_EVENT_TYPES
            .iter()
            .find(|t| **t == spelled)
            .copied()
            .or_else(|| self.events.get(spelled).copied())
    }

    /// The canonical spelling of an output type.
    pub fn output_type<'a>(&'a self, spelled: &'a str) -> &'a str {
        self.outputs.get(spelled).map_or(spelled, String::as_str)
    }
}

/// Every table the readers use.
#[derive(Debug, Clone)]
pub struct Mappings {
    pub agui: Arc<AguiAliases>,
    pub hai: Arc<HaiTables>,
}

impl Default for Mappings {
    fn default() -> Mappings {
        Mappings::builtin()
    }
}

impl Mappings {
    /// The compiled-in defaults.
    pub fn builtin() -> Mappings {
        Mappings {
            agui: Arc::new(AguiAliases::builtin()),
            hai: Arc::new(HaiTables::builtin()),
        }
    }

    /// The tables of the texts given, each `(text, origin)` with `origin` naming it in errors;
    /// a table not given keeps the compiled-in default.
    pub fn from_texts(
        agui: Option<(&str, &str)>,
        hai: Option<(&str, &str)>,
    ) -> Result<Mappings, MappingError> {
        let agui = match agui {
            Some((text, origin)) => AguiAliases::parse(text, origin)?,
            None => AguiAliases::builtin(),
        };
        let hai = match hai {
            Some((text, origin)) => HaiTables::parse(text, origin)?,
            None => HaiTables::builtin(),
        };
        Ok(Mappings {
            agui: Arc::new(agui),
            hai: Arc::new(hai),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tables_parse() {
        let a = AguiAliases::parse(BUILTIN_AGUI_ALIASES, "builtin").unwrap();
        assert!(a
            .keys
            .iter()
            .any(|(s, c)| s == "thread_id" && c == "threadId"));
        assert_eq!(a.events["MESSAGE_SNAPSHOT"], EventType::MessagesSnapshot);
        assert_eq!(a.role("助手"), TextRole::Assistant);
        assert_eq!(a.role("AI"), TextRole::Assistant);
        assert_eq!(a.role("Human"), TextRole::User);
        assert_eq!(a.role("wizard"), TextRole::Assistant);
        assert_eq!(a.role("system"), TextRole::System);
        let h = HaiTables::parse(BUILTIN_HAI_TABLES, "builtin").unwrap();
        assert_eq!(h.event_type("MESSAGES_SNAPSHOT"), Some("MESSAGE_SNAPSHOT"));
        assert_eq!(h.event_type("BUSINESS_DATA_END"), Some("BUSINESS_DATA_END"));
        assert_eq!(h.event_type("TEXT_MESSAGE_START"), None);
        assert_eq!(h.output_type("think"), "thinking");
        assert_eq!(h.output_type("fold"), "fold");
        assert_eq!(h.error_message, "upstream error");
    }

    #[test]
    fn the_content_deltas_field_aliases_are_listed_once_per_table_in_delta_order() {
        let builtin = AguiAliases::parse(BUILTIN_AGUI_ALIASES, "builtin").unwrap();
        let expected: [Vec<String>; 3] = [vec!["content".into()], vec![], vec!["args".into()]];
        assert_eq!(**builtin.delta_aliases(), expected);
        let own = AguiAliases::parse(
            "[fields.REASONING_MESSAGE_CONTENT]\nthought = \"delta\"\ntext = \"delta\"\n\
             [fields.TOOL_CALL_START]\nname = \"toolCallName\"\n",
            "own.toml",
        )
        .unwrap();
        let expected: [Vec<String>; 3] = [vec![], vec!["text".into(), "thought".into()], vec![]];
        assert_eq!(**own.delta_aliases(), expected);
    }

    #[test]
    fn invalid_hai_tables_name_the_key() {
        let err = HaiTables::parse("[events]\nFOO = \"BAR\"\n", "h.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "h.toml: events.FOO: unknown HAI event type \"BAR\""
        );
        let err = HaiTables::parse("[outputs]\nx = \"x\"\n", "h.toml").unwrap_err();
        assert!(err.to_string().contains("outputs.x"), "{err}");
    }

    #[test]
    fn invalid_tables_name_the_key() {
        let err = AguiAliases::parse("[events]\nFOO = \"BAR\"\n", "x.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.toml: events.FOO: unknown AG-UI 1.0 event type \"BAR\""
        );
        let err = AguiAliases::parse("[roles]\nbot = \"robot\"\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("roles.bot"), "{err}");
        let err = AguiAliases::parse("[nope]\n", "x.toml").unwrap_err();
        assert!(err.to_string().starts_with("x.toml: "), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn given_texts_replace_the_builtin_tables() {
        let m = Mappings::from_texts(Some(("[roles]\nrobot = \"assistant\"\n", "a.toml")), None)
            .unwrap();
        assert!(m.agui.keys.is_empty());
        assert!(m.agui.roles.contains_key("robot"));
        assert_eq!(m.hai.error_message, "upstream error");
        let err =
            Mappings::from_texts(None, Some(("[events]\nFOO = \"BAR\"\n", "h.toml"))).unwrap_err();
        assert!(err.to_string().starts_with("h.toml: events.FOO"), "{err}");
    }
}
