//! Reading one part of the file (a top-level value, one route) with serde: a deserializer over
//! one [`Node`] of the spanned tree, whose errors carry the innermost place and the key path
//! below the part. Fields typed `toml::Spanned<T>` keep their spans through it.

use std::ops::Range;

use serde::de::value::{BorrowedStrDeserializer, StrDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{forward_to_deserialize_any, Deserializer};

use super::document::{is_spanned, Entry, Node, PartError, Segment, Value};

/// Reads `node` (found at `at`) as a `T`.
pub(super) fn read<T: DeserializeOwned>(node: &Node, at: Range<usize>) -> Result<T, PartError> {
    T::deserialize(NodeDe { node, at })
}

/// The items of an array, each with its place; else a type error.
pub(super) fn items<'a>(
    node: &'a Node,
    at: &Range<usize>,
) -> Result<Vec<(Range<usize>, &'a Node)>, PartError> {
    match &node.value {
        Value::Array(items) => Ok(items
            .iter()
            .map(|item| (item.span.clone().unwrap_or_else(|| at.clone()), item))
            .collect()),
        other => Err(de::Error::invalid_type(
            unexpected(other),
            &"an array of tables",
        )),
    }
    .map_err(|e: PartError| e.at(at.clone()))
}

fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value {
        Value::String(s) => de::Unexpected::Str(s),
        Value::Integer(i) => de::Unexpected::Signed(*i),
        Value::Float(f) => de::Unexpected::Float(*f),
        Value::Boolean(b) => de::Unexpected::Bool(*b),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Table(_) => de::Unexpected::Map,
    }
}

/// Deserializes one node; errors carry the innermost span and the key path below `node`.
struct NodeDe<'a> {
    node: &'a Node,
    at: Range<usize>,
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = PartError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PartError> {
        let at = self.at;
        match &self.node.value {
            Value::String(s) => visitor.visit_str(s),
            Value::Integer(i) => visitor.visit_i64(*i),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::Boolean(b) => visitor.visit_bool(*b),
            Value::Array(items) => visitor.visit_seq(ArrayAccess {
                items: items.iter().enumerate(),
                at: at.clone(),
            }),
            Value::Table(entries) => visitor.visit_map(TableAccess {
                entries: entries.iter(),
                current: None,
                at: at.clone(),
            }),
        }
        .map_err(|e| e.at(at))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PartError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, PartError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PartError> {
        if is_spanned(name, fields) {
            let span = self.at.clone();
            return visitor.visit_map(SpannedAccess {
                span,
                fields,
                step: 0,
                value: Some(self),
            });
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PartError> {
        match &self.node.value {
            Value::String(s) => {
                let unit: StrDeserializer<'_, PartError> = s.as_str().into_deserializer();
                visitor.visit_enum(unit).map_err(|e| e.at(self.at))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PartError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier
    }
}

/// A key handed to serde: its name, or its span and name for a `Spanned` key.
struct KeyDe<'a> {
    entry: &'a Entry,
    at: Range<usize>,
}

impl<'de> Deserializer<'de> for KeyDe<'_> {
    type Error = PartError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PartError> {
        visitor.visit_str(&self.entry.key)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PartError> {
        if is_spanned(name, fields) {
            let span = self.entry.key_span.clone().unwrap_or(self.at.clone());
            return visitor.visit_map(SpannedAccess {
                span,
                fields,
                step: 0,
                value: Some(self),
            });
        }
        self.deserialize_any(visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The start, end and value a `toml::Spanned` reads.
struct SpannedAccess<D> {
    span: Range<usize>,
    fields: &'static [&'static str],
    step: usize,
    value: Option<D>,
}

impl<'de, D: Deserializer<'de, Error = PartError>> MapAccess<'de> for SpannedAccess<D> {
    type Error = PartError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, PartError> {
        match self.fields.get(self.step) {
            Some(field) => seed
                .deserialize(BorrowedStrDeserializer::<PartError>::new(field))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, PartError> {
        self.step += 1;
        match self.step {
            1 => seed.deserialize(self.span.start.into_deserializer()),
            2 => seed.deserialize(self.span.end.into_deserializer()),
            _ => match self.value.take() {
                Some(value) => seed.deserialize(value),
                None => Err(de::Error::custom("a spanned value read twice")),
            },
        }
    }
}

struct TableAccess<'a> {
    entries: std::slice::Iter<'a, Entry>,
    current: Option<&'a Entry>,
    at: Range<usize>,
}

impl<'de> MapAccess<'de> for TableAccess<'_> {
    type Error = PartError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, PartError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.current = Some(entry);
        let at = entry
            .key_span
            .clone()
            .unwrap_or_else(|| entry.span(&self.at));
        seed.deserialize(KeyDe {
            entry,
            at: at.clone(),
        })
        .map(Some)
        .map_err(|e| e.at(at).under(Segment::Key(entry.key.clone())))
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, PartError> {
        let Some(entry) = self.current.take() else {
            return Err(de::Error::custom("a value read before its key"));
        };
        seed.deserialize(NodeDe {
            node: &entry.node,
            at: entry.span(&self.at),
        })
        .map_err(|e| e.under(Segment::Key(entry.key.clone())))
    }
}

struct ArrayAccess<'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Node>>,
    at: Range<usize>,
}

impl<'de> SeqAccess<'de> for ArrayAccess<'_> {
    type Error = PartError;

    fn next_element_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, PartError> {
        let Some((i, node)) = self.items.next() else {
            return Ok(None);
        };
        let at = node.span.clone().unwrap_or_else(|| self.at.clone());
        seed.deserialize(NodeDe { node, at })
            .map(Some)
            .map_err(|e| e.under(Segment::Index(i)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}
