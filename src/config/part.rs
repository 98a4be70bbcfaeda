//! Reading one part of the file (a top-level value, one route) with serde, so that a part serde
//! cannot read does not hide the others.
//!
//! `toml_edit` parses the file once ([`ImDocument`], which keeps the byte range of every key and
//! value) and deserializes each part from its own item; its errors carry the innermost range
//! (`toml_edit::de::Error::span`), and fields typed `toml::Spanned<T>` get their ranges from it.
//! `serde_path_to_error` gives the key path below the part.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::OnceLock;

use serde::de::{self, DeserializeOwned, IntoDeserializer};
use serde_path_to_error::Segment;
use toml::Spanned;
use toml_edit::{DocumentMut, ImDocument, Item, Key, Table, Value};

/// Reads a top-level `key = item` as a `T`.
///
/// The entry is deserialized from a document of its own that holds only it, whatever kind of
/// item it is (a value, a table, an array of tables): an error `toml_edit` cannot place more
/// precisely is placed at the item, else at its key, as for any entry of a table.
pub(super) fn entry<T: DeserializeOwned>(key: &Key, item: &Item) -> Result<T, PartError> {
    let mut root = Table::new();
    root.insert_formatted(key, item.clone());
    let fallback = item.span().or_else(|| key.span());
    let one: BTreeMap<String, T> =
        track(toml_edit::de::Deserializer::from(DocumentMut::from(root)))
            .map_err(|e| e.below_entry().at(fallback.clone()))?;
    one.into_values()
        .next()
        .ok_or_else(|| PartError::new("the value is missing".into(), fallback))
}

/// The elements of an array of tables (`[[routes]]`) or of an array (`routes = [{ … }]`): each
/// a table or a value. Anything else is a type error.
pub(super) fn elements(key: &Key, item: &Item) -> Result<Vec<Item>, PartError> {
    match item {
        Item::ArrayOfTables(tables) => Ok(tables.iter().cloned().map(Item::Table).collect()),
        Item::Value(Value::Array(values)) => Ok(values.iter().cloned().map(Item::Value).collect()),
        other => {
            let e: de::value::Error =
                de::Error::invalid_type(unexpected(other), &"an array of tables");
            Err(PartError::new(
                e.to_string(),
                other.span().or_else(|| key.span()),
            ))
        }
    }
}

/// Reads one element of [`elements`] as a `T`.
pub(super) fn element<T: DeserializeOwned>(item: Item) -> Result<T, PartError> {
    let span = item.span();
    match item {
        // A table is deserialized as the root of a document of its own; its range is kept.
        Item::Table(table) => track(toml_edit::de::Deserializer::from(DocumentMut::from(table))),
        other => match other.into_value() {
            Ok(value) => track(value.into_deserializer()),
            Err(_) => Err(PartError::new("the value is missing".into(), None)),
        },
    }
    .map_err(|e| e.at(span))
}

/// What serde is told a value is, in a type error: a date or time is a map, as `toml_edit`
/// hands it over.
fn unexpected(item: &Item) -> de::Unexpected<'_> {
    match item {
        Item::Value(Value::String(s)) => de::Unexpected::Str(s.value()),
        Item::Value(Value::Integer(i)) => de::Unexpected::Signed(*i.value()),
        Item::Value(Value::Float(f)) => de::Unexpected::Float(*f.value()),
        Item::Value(Value::Boolean(b)) => de::Unexpected::Bool(*b.value()),
        Item::Value(Value::Array(_)) | Item::ArrayOfTables(_) => de::Unexpected::Seq,
        Item::Value(Value::Datetime(_) | Value::InlineTable(_)) | Item::Table(_) => {
            de::Unexpected::Map
        }
        Item::None => de::Unexpected::Unit,
    }
}

/// Deserializes a `T` from `toml_edit`, keeping the key path of an error.
fn track<'de, D, T>(deserializer: D) -> Result<T, PartError>
where
    D: serde::Deserializer<'de, Error = toml_edit::de::Error>,
    T: serde::Deserialize<'de>,
{
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|segment| match segment {
                Segment::Seq { index } => Some(Step::Index(*index)),
                Segment::Map { key } if key == spanned_value_key() => None,
                Segment::Map { key } | Segment::Enum { variant: key } => {
                    Some(Step::Key(key.clone()))
                }
                Segment::Unknown => None,
            })
            .collect();
        let inner = e.into_inner();
        PartError {
            message: inner.message().to_owned(),
            span: inner.span(),
            path,
        }
    })
}

/// The key `serde_path_to_error` records for the value inside a `toml::Spanned` (a private name
/// of `serde_spanned`), which is no key of the file: learnt once, by reading a spanned value
/// that fails, rather than copied.
fn spanned_value_key() -> &'static str {
    static KEY: OnceLock<Option<String>> = OnceLock::new();
    KEY.get_or_init(|| {
        let doc = ImDocument::parse("v = 0").ok()?;
        let value = doc.get("v")?.as_value()?.clone();
        let e = serde_path_to_error::deserialize::<_, Spanned<bool>>(value.into_deserializer())
            .err()?;
        match e.path().iter().next_back()? {
            Segment::Map { key } => Some(key.clone()),
            _ => None,
        }
    })
    .as_deref()
    .unwrap_or("")
}

/// Why a part of the file could not be read: serde's message, where, and the key path below
/// the part.
#[derive(Debug)]
pub(super) struct PartError {
    pub message: String,
    pub span: Option<Range<usize>>,
    /// Outermost first.
    path: Vec<Step>,
}

#[derive(Debug)]
enum Step {
    Key(String),
    Index(usize),
}

impl PartError {
    fn new(message: String, span: Option<Range<usize>>) -> PartError {
        PartError {
            message,
            span,
            path: Vec::new(),
        }
    }

    /// Places the error at `span` unless `toml_edit` already placed it.
    fn at(mut self, span: Option<Range<usize>>) -> PartError {
        if self.span.is_none() {
            self.span = span;
        }
        self
    }

    /// Drops the entry's own key, which the caller names as the part.
    fn below_entry(mut self) -> PartError {
        if matches!(self.path.first(), Some(Step::Key(_))) {
            self.path.remove(0);
        }
        self
    }

    /// An unknown top-level key, whose siblings may be `expected`.
    pub fn unknown_key(key: &Key, expected: &'static [&'static str]) -> PartError {
        let e: de::value::Error = de::Error::unknown_field(key.get(), expected);
        PartError {
            path: vec![Step::Key(key.get().to_owned())],
            ..PartError::new(e.to_string(), key.span())
        }
    }

    /// The failing key as the file spells it, below the part's own key `part`
    /// (`routes[1]` + `.limits.idle_timeout`).
    pub fn key(&self, part: &str) -> String {
        let mut key = part.to_owned();
        for step in &self.path {
            match step {
                Step::Key(k) if key.is_empty() => key.push_str(k),
                Step::Key(k) => {
                    key.push('.');
                    key.push_str(k);
                }
                Step::Index(i) => key.push_str(&format!("[{i}]")),
            }
        }
        key
    }
}
