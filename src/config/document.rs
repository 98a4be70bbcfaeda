//! The config file as a tree of TOML values that remember where they are written.
//!
//! Deserializing the whole file in one go stops at the first type error. Parsing it into this
//! tree first (a syntax error is the only failure) lets each top-level table and each route be
//! deserialized from its own node ([`super::part`]), so every bad part is reported, each with
//! its position and key path.

use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{forward_to_deserialize_any, Deserialize, Deserializer};

/// One value of the file. `span` is `None` where the TOML parser gives none (a table created
/// implicitly by a dotted key or header); it is then taken from the key or the enclosing value.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub span: Option<Range<usize>>,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub(super) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Array(Vec<Node>),
    /// A table, in the file's order. A date or time is a table of one private key, as `toml`
    /// hands it over; no setting takes one.
    Table(Vec<Entry>),
}

/// One `key = value` of a table.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub key: String,
    pub key_span: Option<Range<usize>>,
    pub node: Node,
}

impl Entry {
    /// Where the value is, else where its key is.
    pub fn span(&self, enclosing: &Range<usize>) -> Range<usize> {
        self.node
            .span
            .clone()
            .or_else(|| self.key_span.clone())
            .unwrap_or_else(|| enclosing.clone())
    }
}

/// The top-level entries of `text`; the error is TOML's own (a syntax error, a duplicate key).
pub(super) fn parse(text: &str) -> Result<Vec<Entry>, toml::de::Error> {
    struct Root(Vec<Entry>);
    impl<'de> Deserialize<'de> for Root {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Root, D::Error> {
            match d.deserialize_map(TreeVisitor)?.value {
                Value::Table(entries) => Ok(Root(entries)),
                _ => Err(de::Error::custom("the file is not a table")),
            }
        }
    }
    toml::from_str::<Root>(text).map(|root| root.0)
}

/// The struct name and fields `toml::Spanned` asks a deserializer for: learnt once, by asking
/// it, rather than copied from `toml`'s private constants.
pub(super) fn spanned_shape() -> (&'static str, &'static [&'static str]) {
    static SHAPE: OnceLock<(&'static str, &'static [&'static str])> = OnceLock::new();
    *SHAPE.get_or_init(|| {
        let mut shape = ("", &[][..]);
        let _ = toml::Spanned::<()>::deserialize(Probe(&mut shape));
        shape
    })
}

struct Probe<'s>(&'s mut (&'static str, &'static [&'static str]));

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = PartError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, PartError> {
        Err(de::Error::custom("a probe"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, PartError> {
        *self.0 = (name, fields);
        Err(de::Error::custom("a probe"))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

pub(super) fn is_spanned(name: &str, fields: &[&str]) -> bool {
    let (n, f) = spanned_shape();
    !n.is_empty() && name == n && fields == f
}

/// A key, with its span when the parser gives one.
struct Key {
    name: String,
    span: Option<Range<usize>>,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(Key {
                    name: name.to_owned(),
                    span: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Key, A::Error> {
                let (span, name) = spanned::<A, String>(map)?;
                Ok(Key { name, span })
            }
        }
        let (name, fields) = spanned_shape();
        d.deserialize_struct(name, fields, KeyVisitor)
    }
}

/// Reads the start, end and value of a spanned value.
fn spanned<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    mut map: A,
) -> Result<(Option<Range<usize>>, T), A::Error> {
    let (_, fields) = spanned_shape();
    let (mut start, mut end, mut value) = (None, None, None);
    while let Some(key) = map.next_key::<String>()? {
        match fields.iter().position(|f| *f == key) {
            Some(0) => start = Some(map.next_value::<usize>()?),
            Some(1) => end = Some(map.next_value::<usize>()?),
            Some(_) => value = Some(map.next_value::<T>()?),
            None => return Err(de::Error::unknown_field(&key, fields)),
        }
    }
    let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
    Ok((start.zip(end).map(|(s, e)| s..e), value))
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        let (name, fields) = spanned_shape();
        d.deserialize_struct(name, fields, TreeVisitor)
    }
}

/// A value without its span, inside a spanned one.
struct Bare(Node);

impl<'de> Deserialize<'de> for Bare {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bare, D::Error> {
        d.deserialize_any(TreeVisitor).map(Bare)
    }
}

/// Builds a [`Node`] from what `toml` hands over: a plain value, a table, or a spanned value (a
/// map of the spanned shape's fields, whose keys have no span of their own).
struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(bare(Value::Boolean(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Node, E> {
        Ok(bare(Value::Integer(i)))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Node, E> {
        i64::try_from(u)
            .map(|i| bare(Value::Integer(i)))
            .map_err(|_| de::Error::custom("integer out of range"))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Node, E> {
        Ok(bare(Value::Float(f)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(bare(Value::String(s.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(bare(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let (_, fields) = spanned_shape();
        let (mut start, mut end, mut inner) = (None, None, None);
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Key>()? {
            let field = match key.span {
                None => fields.iter().position(|f| *f == key.name),
                Some(_) => None,
            };
            match field {
                Some(0) => start = Some(map.next_value::<usize>()?),
                Some(1) => end = Some(map.next_value::<usize>()?),
                Some(_) => inner = Some(map.next_value::<Bare>()?.0),
                None => entries.push(Entry {
                    node: map.next_value::<Node>()?,
                    key: key.name,
                    key_span: key.span,
                }),
            }
        }
        Ok(match inner {
            Some(node) => Node {
                span: start.zip(end).map(|(s, e)| s..e),
                value: node.value,
            },
            None => bare(Value::Table(entries)),
        })
    }
}

fn bare(value: Value) -> Node {
    Node { span: None, value }
}

/// Why a part of the file could not be read: serde's message, where, and the key path below
/// the part.
#[derive(Debug)]
pub(super) struct PartError {
    pub message: String,
    pub span: Option<Range<usize>>,
    /// Innermost first.
    path: Vec<Segment>,
}

#[derive(Debug)]
pub(super) enum Segment {
    Key(String),
    Index(usize),
}

impl PartError {
    /// Places the error at `span` unless an inner value already placed it.
    pub fn at(mut self, span: Range<usize>) -> PartError {
        self.span.get_or_insert(span);
        self
    }

    pub(super) fn under(mut self, segment: Segment) -> PartError {
        self.path.push(segment);
        self
    }

    /// An unknown key of a table whose keys are `expected`.
    pub fn unknown_key(entry: &Entry, expected: &'static [&'static str]) -> PartError {
        let e: PartError = de::Error::unknown_field(&entry.key, expected);
        let span = entry.key_span.clone().or_else(|| entry.node.span.clone());
        PartError { span, ..e }.under(Segment::Key(entry.key.clone()))
    }

    /// The failing key as the file spells it, below the part's own key `part`
    /// (`routes[1]` + `.limits.idle_timeout`).
    pub fn key(&self, part: &str) -> String {
        let mut key = part.to_owned();
        for segment in self.path.iter().rev() {
            match segment {
                Segment::Key(k) if key.is_empty() => key.push_str(k),
                Segment::Key(k) => {
                    key.push('.');
                    key.push_str(k);
                }
                Segment::Index(i) => key.push_str(&format!("[{i}]")),
            }
        }
        key
    }
}

impl de::Error for PartError {
    fn custom<T: fmt::Display>(msg: T) -> PartError {
        PartError {
            message: msg.to_string(),
            span: None,
            path: Vec::new(),
        }
    }
}

impl fmt::Display for PartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PartError {}
