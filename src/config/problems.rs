//! How problems are collected and reported: every problem is gathered before `load` fails, one
//! per line, `file:line:column: key: problem` when it has a place in the file (a TOML error also
//! shows the line it is on), `flags: --flag: problem` when a flag or the environment gave the
//! value ([`Given`] says which). Also the small readers every table shares, which report at the
//! value's place.

use std::ops::Range;

use toml::Spanned;

use super::part::PartError;

/// The problems of one origin: the config file (with its text, for positions) or the flags.
pub(super) struct Problems<'a> {
    origin: &'a str,
    /// The file's text; `None` for flags and the environment, whose values have no place.
    text: Option<&'a str>,
    /// Each problem with its offset in the file, when it has one.
    list: Vec<(Option<usize>, String)>,
}

impl<'a> Problems<'a> {
    pub fn file(origin: &'a str, text: &'a str) -> Problems<'a> {
        Problems {
            origin,
            text: Some(text),
            list: Vec::new(),
        }
    }

    pub fn flags() -> Problems<'static> {
        Problems {
            origin: "flags",
            text: None,
            list: Vec::new(),
        }
    }

    /// A problem with the value at `span` (ignored for flags).
    pub fn at(&mut self, span: Range<usize>, key: &str, problem: String) {
        match self.text {
            Some(text) => {
                let (line, column) = line_column(text, span.start);
                self.list.push((
                    Some(span.start),
                    format!("{}:{line}:{column}: {key}: {problem}", self.origin),
                ));
            }
            None => self.plain(key, problem),
        }
    }

    /// A problem without a place.
    pub fn plain(&mut self, key: &str, problem: String) {
        self.list
            .push((None, format!("{}: {key}: {problem}", self.origin)));
    }

    /// A part of the file that serde could not read (a wrong type, an unknown or missing key),
    /// with the line it is on; `part` is the part's own key.
    pub fn unreadable(&mut self, part: &str, e: &PartError) {
        let key = e.key(part);
        match (self.text, &e.span) {
            (Some(text), Some(span)) => {
                let (line, column) = line_column(text, span.start);
                self.list.push((
                    Some(span.start),
                    format!(
                        "{}:{line}:{column}: {key}: {}\n{}",
                        self.origin,
                        e.message,
                        excerpt(text, span)
                    ),
                ));
            }
            _ => self.plain(&key, e.message.clone()),
        }
    }

    /// Where `span` is, to point from one problem to another place (`file:3:8`).
    pub fn place(&self, span: &Range<usize>) -> String {
        match self.text {
            Some(text) => {
                let (line, column) = line_column(text, span.start);
                format!("{}:{line}:{column}", self.origin)
            }
            None => self.origin.to_owned(),
        }
    }

    /// How many problems were reported so far.
    pub fn count(&self) -> usize {
        self.list.len()
    }

    /// A problem found elsewhere (a mapping table), already saying where.
    pub fn other(&mut self, problem: String) {
        self.list.push((None, problem));
    }

    /// The problems, those with a place in file order first.
    pub fn into_lines(self) -> Vec<String> {
        let mut list = self.list;
        list.sort_by_key(|(at, _)| at.unwrap_or(usize::MAX));
        list.into_iter().map(|(_, line)| line).collect()
    }
}

/// A TOML syntax error, which ends the reading of the file: `file:line:column: problem`, then
/// the line.
pub(super) fn syntax(origin: &str, text: &str, e: &toml_edit::TomlError) -> String {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            format!(
                "{origin}:{line}:{column}: {message}\n{}",
                excerpt(text, &span)
            )
        }
        None => format!("{origin}: {message}"),
    }
}

/// 1-based line and column (in bytes) of `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The line `span` starts on, marked under the span:
///
/// ```text
///   line 2 | listen_port = 3
///          | ^^^^^^^^^^^
/// ```
fn excerpt(text: &str, span: &Range<usize>) -> String {
    let start = span.start.min(text.len());
    let line_start = text
        .get(..start)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line_end = text
        .get(start..)
        .and_then(|t| t.find('\n'))
        .map_or(text.len(), |i| start + i);
    let line = text.get(line_start..line_end).unwrap_or("").trim_end();
    let (number, _) = line_column(text, start);
    let indent = text.get(line_start..start).map_or(0, |t| t.chars().count());
    let width = text
        .get(start..span.end.clamp(start, line_end))
        .map_or(1, |t| t.chars().count().max(1));
    let gutter = format!("  line {number} ");
    format!(
        "{gutter}| {line}\n{:w$}| {:indent$}{}",
        "",
        "",
        "^".repeat(width),
        w = gutter.len()
    )
}

/// Where a setting's text came from.
pub(super) enum Given<'a> {
    Flag(&'a str),
    File(&'a Spanned<String>),
}

impl<'a> Given<'a> {
    pub fn pick(flag: &'a Option<String>, file: &'a Option<Spanned<String>>) -> Option<Given<'a>> {
        match (flag, file) {
            (Some(text), _) => Some(Given::Flag(text)),
            (None, Some(v)) => Some(Given::File(v)),
            (None, None) => None,
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Given::Flag(text) => text,
            Given::File(v) => v.get_ref(),
        }
    }

    /// Reports at the file's value, or under the flag's name.
    pub fn report(&self, file: &mut Problems, flags: &mut Problems, key: &str, problem: String) {
        match self {
            Given::Flag(_) => flags.plain(&Keys::flags().key(key), problem),
            Given::File(v) => file.at(v.span(), key, problem),
        }
    }
}

/// How keys are spelled where a value came from: `routes[0].limits.idle_timeout` in the file,
/// `--idle-timeout` for a flag.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
    flags: bool,
}

impl Keys {
    /// Keys of the file below `prefix` (`"routes[0]."`, `"limits."`, or `""` at the top).
    pub fn file(prefix: impl Into<String>) -> Keys {
        Keys {
            prefix: prefix.into(),
            flags: false,
        }
    }

    /// Flags, named after the setting they give.
    pub fn flags() -> Keys {
        Keys {
            prefix: String::new(),
            flags: true,
        }
    }

    /// The key of one setting.
    pub fn key(&self, name: &str) -> String {
        let path = format!("{}{name}", self.prefix);
        if !self.flags {
            return path;
        }
        match path.as_str() {
            "aap.name" | "aap_upstream.agent" => "--agent-name".into(),
            _ => format!(
                "--{}",
                path.rsplit('.').next().unwrap_or(&path).replace('_', "-")
            ),
        }
    }

    /// The keys of a table below this one (`[routes.limits]`).
    pub fn table(&self, name: &str) -> Keys {
        Keys {
            prefix: format!("{}{name}.", self.prefix),
            flags: self.flags,
        }
    }

    /// The key of the whole table: `routes[0]`, or `route` for the flags' single route.
    pub fn whole(&self) -> String {
        if self.flags {
            return "route".into();
        }
        self.prefix.trim_end_matches('.').to_owned()
    }
}

/// Parses one choice with its type's `FromStr`, reporting at the value's place.
pub(super) fn parsed<T: std::str::FromStr + Default>(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
) -> T
where
    T::Err: std::fmt::Display,
{
    match value {
        None => T::default(),
        Some(v) => v.get_ref().parse().unwrap_or_else(|e: T::Err| {
            p.at(v.span(), key, e.to_string());
            T::default()
        }),
    }
}

/// A name that must not be blank, when one is given.
pub(super) fn non_empty(
    p: &mut Problems,
    key: &str,
    value: &Option<Spanned<String>>,
) -> Option<String> {
    let value = value.as_ref()?;
    if value.get_ref().trim().is_empty() {
        p.at(value.span(), key, "must not be empty".into());
        return None;
    }
    Some(value.get_ref().clone())
}
