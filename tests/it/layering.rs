//! The import rules of the crate, checked on its source (DESIGN.md, "Rule of the house"):
//!
//! - **Data flows one way.** Top-level modules are ranked in the order data flows through
//!   them ([`LAYERS`], the order `lib.rs` lists them in); a module imports only modules ranked
//!   below it. So there is no cycle between top-level modules.
//! - **No cycle between the files of one folder** (`super::x`, `crate::folder::x`).
//! - **The pure core stays pure.** [`PURE`] modules import no I/O: no `std::fs`, `std::net`,
//!   `SystemTime`, `Instant`, tokio, hyper or tracing, and none of the I/O-side modules. Time
//!   comes in as an argument, diagnostics go out as notes, mappings arrive loaded.
//!
//! Imports are read as text, grouped ones included (`use crate::{a, b::{c, d}}`,
//! `use std::{fs, time::Instant}`); comments and `#[cfg(test)]` tails are skipped, and test
//! files (`tests.rs`, `*_tests.rs`) may reach upward. The checker itself is tested on
//! deliberately bad sources, so a rule that stopped matching would fail here too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules in the order data flows through them: each may import only those
/// before it.
const LAYERS: &[&str] = &[
    "error",
    "sse",
    "json",
    "event",
    "mapping",
    "dialect",
    "pipeline",
    "session",
    "telemetry",
    "tls",
    "config",
    "auth",
    "demo",
    "http",
    "adapters",
    "server",
    "cli",
];

/// The pure modules: no I/O, no clock, no logging.
const PURE: &[&str] = &[
    "error", "event", "sse", "json", "mapping", "dialect", "pipeline",
];

/// What a pure module must not name: the I/O side of the crate, and I/O, time and logging.
const FORBIDDEN_MODULES: &[&str] = &[
    "session",
    "telemetry",
    "tls",
    "config",
    "auth",
    "demo",
    "http",
    "adapters",
    "server",
    "cli",
];
const FORBIDDEN_PATHS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::time::SystemTime",
    "std::time::Instant",
    "SystemTime",
    "Instant",
    "tokio",
    "hyper",
    "tracing",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The code of a file: comments removed, and everything from the first `#[cfg(test)]` on.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].split_once("*/").map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out.lines()
        .map(|line| match line.find("//") {
            // `//` inside a string literal (a URL) is rare in imports; good enough for paths.
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a piece of code names under `root::` (`crate`, `std`, `super`), grouped imports
/// expanded: `crate::{a, b::{c, d}}` gives `a`, `b::c`, `b::d`.
fn paths_under(code: &str, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let needle = format!("{root}::");
    let mut at = 0;
    while let Some(i) = code[at..].find(&needle) {
        let start = at + i;
        at = start + needle.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        expand(&code[at..], String::new(), &mut found);
    }
    found
}

/// Expands the path that starts `text` (after a `::`) into full paths, prefixed by `prefix`.
fn expand(text: &str, prefix: String, found: &mut Vec<String>) {
    let text = text.trim_start();
    if let Some(inner) = text.strip_prefix('{') {
        let mut depth = 0usize;
        let mut item = String::new();
        for c in inner.chars() {
            match c {
                '{' => {
                    depth += 1;
                    item.push(c);
                }
                '}' if depth == 0 => {
                    push_item(&item, &prefix, found);
                    return;
                }
                '}' => {
                    depth -= 1;
                    item.push(c);
                }
                ',' if depth == 0 => {
                    push_item(&item, &prefix, found);
                    item.clear();
                }
                _ => item.push(c),
            }
        }
        return;
    }
    let path: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let path = path.trim_end_matches(':');
    let rest = &text[path.len()..];
    if path.ends_with("::") || rest.starts_with("::{") {
        let head = path.trim_end_matches(':');
        let joined = join(&prefix, head);
        expand(&rest[2..], joined, found);
    } else if !path.is_empty() {
        found.push(join(&prefix, path));
    }
}

fn push_item(item: &str, prefix: &str, found: &mut Vec<String>) {
    let item = item.trim();
    if item.is_empty() || item == "self" {
        if item == "self" && !prefix.is_empty() {
            found.push(prefix.to_owned());
        }
        return;
    }
    expand(item, prefix.to_owned(), found);
}

fn join(prefix: &str, path: &str) -> String {
    if prefix.is_empty() {
        path.to_owned()
    } else {
        format!("{prefix}::{path}")
    }
}

/// The top-level module a file of `src/` belongs to.
fn top_module(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap_or(path);
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

/// Problems with the imports of one file of top-level module `module`, whose code is `code`.
fn check_file(module: &str, code: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let own = rank(module);
    for path in paths_under(code, "crate") {
        let target = path.split("::").next().unwrap_or("");
        if target == module {
            continue;
        }
        match (own, rank(target)) {
            (Some(a), Some(b)) if b > a => problems.push(format!(
                "imports crate::{path}, but {target} comes after {module} in the data flow"
            )),
            (_, None) => problems.push(format!("imports crate::{path}, not a known layer")),
            _ => {}
        }
        if PURE.contains(&module) && FORBIDDEN_MODULES.contains(&target) {
            problems.push(format!("is pure but imports crate::{path}"));
        }
    }
    if PURE.contains(&module) {
        let mut named = paths_under(code, "std")
            .into_iter()
            .map(|p| format!("std::{p}"))
            .collect::<Vec<_>>();
        for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            named.push(word.to_owned());
        }
        for path in named {
            for forbidden in FORBIDDEN_PATHS {
                let hit = path == *forbidden
                    || path.starts_with(&format!("{forbidden}::"))
                    || path
                        .rsplit("::")
                        .next()
                        .is_some_and(|last| last == *forbidden && forbidden.len() > 6);
                if hit {
                    problems.push(format!("is pure but names {path}"));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// Cycles in a directed graph, as sorted lists of nodes (strongly connected components of two
/// or more).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph
        .keys()
        .chain(graph.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let reaches = |from: &String, to: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for next in graph.get(n).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next) {
                    stack.push(next);
                }
            }
        }
        false
    };
    let mut found: Vec<Vec<String>> = Vec::new();
    for a in &nodes {
        let component: Vec<String> = nodes
            .iter()
            .filter(|b| *a == **b || (reaches(a, b) && reaches(b, a)))
            .map(|b| (*b).clone())
            .collect();
        if component.len() > 1 && !found.contains(&component) {
            found.push(component);
        }
    }
    found
}

/// The sibling files a file of a folder imports (`super::x`, `crate::<folder>::x`).
fn sibling_imports(code: &str, folder_path: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut names: Vec<String> = paths_under(code, "super");
    if !folder_path.is_empty() {
        for path in paths_under(code, "crate") {
            if let Some(rest) = path.strip_prefix(&format!("{folder_path}::")) {
                names.push(rest.to_owned());
            }
        }
    }
    names
        .into_iter()
        .filter_map(|p| p.split("::").next().map(str::to_owned))
        .filter(|n| siblings.contains(n))
        .collect()
}

#[test]
fn data_flows_one_way_and_the_pure_core_stays_pure() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(
        files.len() > 40,
        "expected the crate's files, found {}",
        files.len()
    );
    let mut problems = Vec::new();
    let mut modules = BTreeSet::new();
    for file in files.iter().filter(|f| !is_test_file(f)) {
        let module = top_module(file);
        if module == "lib" || module == "main" {
            continue;
        }
        modules.insert(module.clone());
        let text = std::fs::read_to_string(file).unwrap();
        for problem in check_file(&module, &code(&text)) {
            problems.push(format!("{}: {problem}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
    let listed: BTreeSet<String> = LAYERS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        modules, listed,
        "every top-level module has a place in LAYERS"
    );
    for pure in PURE {
        assert!(modules.contains(*pure), "pure module {pure} exists");
    }
}

#[test]
fn lib_lists_the_modules_in_data_flow_order() {
    let text = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert_eq!(declared, LAYERS);
}

#[test]
fn no_cycle_between_files_of_one_folder() {
    let mut dirs = vec![src()];
    let mut problems = Vec::new();
    while let Some(dir) = dirs.pop() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !is_test_file(&path) {
                files.push(path);
            }
        }
        let stem = |p: &PathBuf| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let siblings: BTreeSet<String> = files
            .iter()
            .map(stem)
            .filter(|s| s != "mod" && s != "lib" && s != "main")
            .collect();
        let folder_path = dir
            .strip_prefix(src())
            .unwrap_or(&dir)
            .to_string_lossy()
            .replace(std::path::MAIN_SEPARATOR, "::");
        let mut graph = BTreeMap::new();
        for file in &files {
            let me = stem(file);
            if !siblings.contains(&me) {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            let targets = sibling_imports(&code(&text), &folder_path, &siblings);
            graph.insert(
                me.clone(),
                targets.into_iter().filter(|t| *t != me).collect(),
            );
        }
        for cycle in cycles(&graph) {
            problems.push(format!("{}: {}", dir.display(), cycle.join(" <-> ")));
        }
    }
    assert!(problems.is_empty(), "file cycles:\n{}", problems.join("\n"));
}

/// The checker catches what it is for: each of these would be a violation in `dialect`.
#[test]
fn the_checker_finds_deliberately_bad_imports() {
    let bad = [
        "use crate::server::Server;",
        "use crate::{event::Event, http::relay::Relay};",
        "use crate::{event::{Event, Note}, session::Store};",
        "use std::fs;",
        "use std::{collections::HashMap, fs::read};",
        "use std::{time::{Duration, Instant}};",
        "let now = std::time::SystemTime::now();",
        "use tokio::sync::oneshot;",
        "tracing::debug!(\"x\");",
        "use hyper::body::Incoming;",
        "let body = crate::adapters::aap_client::run();",
    ];
    for source in bad {
        assert!(
            !check_file("dialect", source).is_empty(),
            "not caught in a pure module: {source}"
        );
    }
    let fine = [
        "use crate::{event::{Event, Note}, sse::SseEvent};",
        "use crate::mapping::Mappings;",
        "use std::{collections::HashMap, time::Duration};",
        "// use crate::server::Server;",
    ];
    for source in fine {
        assert_eq!(
            check_file("dialect", &code(source)),
            Vec::<String>::new(),
            "{source}"
        );
    }
    // Upward imports are caught for I/O-side modules too.
    assert!(!check_file("http", "use crate::server::Server;").is_empty());
    assert!(check_file("server", "use crate::http::relay::Relay;").is_empty());
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
    let siblings = BTreeSet::from(["read".to_owned(), "fast".to_owned()]);
    assert_eq!(
        sibling_imports("use super::{fast, options::X};", "dialect::agui", &siblings),
        BTreeSet::from(["fast".to_owned()])
    );
}
