//! The README's translation matrix is generated from the fixtures: each fixture directory's
//! `matrix.toml` names, per feature, how that direction carries it and the hand-written case
//! that proves it. This test checks every claim against its fixture and that the README shows
//! exactly the table the claims make. `DIALECT_PROXY_BLESS=1` rewrites the README's table
//! instead (the claims stay hand-written; only their rendering is generated).
//!
//! What a claim must show in its fixture:
//! - `native`: the direction does not change dialect (AG-UI → AG-UI, AAP → AAP, or a hop
//!   that comes back to AG-UI);
//! - `translated`: the case exists (its golden test compares it);
//! - `extension`: an expected stream of the case carries one of the documented extensions
//!   (`CUSTOM hai.*`/`agui.*`, the `agui` member, an AAP `agui.*` event);
//! - `lossy`: a `note` saying what is lost (shown under the table).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The rows, in order: the key a `matrix.toml` uses and the README's wording.
const FEATURES: &[(&str, &str)] = &[
    ("text", "text messages"),
    ("reasoning", "reasoning"),
    ("tool_calls", "tool calls"),
    ("tool_results", "tool results (with parts)"),
    ("client_tools", "client tools left pending"),
    (
        "human_in_the_loop",
        "interrupts, confirmations, permissions",
    ),
    ("outcomes", "run outcomes (cancelled, stop reasons)"),
    ("run_errors", "run errors (code, message)"),
    ("several_runs", "several runs per stream"),
    ("state", "state"),
    ("activity", "activity"),
    ("messages_snapshot", "messages snapshots"),
    ("steps", "steps"),
    ("subagents", "subagents"),
    ("metadata", "metadata"),
    ("custom", "custom and raw events"),
    ("truncation", "a cut upstream"),
];

const BEGIN: &str = "<!-- matrix:begin (generated from tests/fixtures/*/matrix.toml) -->";
const END: &str = "<!-- matrix:end -->";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// The column heading, `"AG-UI → HAI"`.
    direction: String,
    /// Where the column goes (ascending).
    order: u32,
    cells: BTreeMap<String, Cell>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cell {
    class: Class,
    fixture: String,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Debug)]
#[serde(rename_all = "lowercase")]
enum Class {
    Native,
    Translated,
    Extension,
    Lossy,
}

impl Class {
    fn label(self) -> &'static str {
        match self {
            Class::Native => "native",
            Class::Translated => "translated",
            Class::Extension => "via extension",
            Class::Lossy => "lossy",
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `(directory name, manifest)` of every fixture directory that has one, in column order.
fn manifests() -> Vec<(String, Manifest)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(root().join("tests/fixtures")).unwrap() {
        let dir = entry.unwrap().path();
        let file = dir.join("matrix.toml");
        if !file.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let manifest: Manifest =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        all.push((name, manifest));
    }
    all.sort_by_key(|(_, m)| m.order);
    all
}

/// Every file of a case: `NAME.in`, `NAME.out`, `NAME.*.out`, `NAME.hai`, `NAME.aap`, ….
fn case_files(dir: &str, case: &str) -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.strip_prefix(case)
                    .is_some_and(|rest| rest.starts_with('.'))
            })
        })
        .collect();
    files.sort();
    files
}

/// Whether `text` shows one of the documented extensions.
fn shows_extension(text: &str) -> bool {
    [
        "\"hai.",
        "\"agui.",
        "\"agui\":",
        "event: agui.",
        "event:agui.",
    ]
    .iter()
    .any(|marker| text.contains(marker))
}

/// The problems with the claims, one line each.
fn check(manifests: &[(String, Manifest)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (dir, manifest) in manifests {
        for (feature, cell) in &manifest.cells {
            let at = format!("{dir}/matrix.toml {feature}");
            if !FEATURES.iter().any(|(key, _)| key == feature) {
                problems.push(format!("{at}: unknown feature"));
                continue;
            }
            let files = case_files(dir, &cell.fixture);
            let input = root()
                .join("tests/fixtures")
                .join(dir)
                .join(format!("{}.in", cell.fixture));
            if !input.is_file() {
                problems.push(format!(
                    "{at}: no case `{}` ({} missing)",
                    cell.fixture,
                    input.display()
                ));
                continue;
            }
            match cell.class {
                Class::Native => {
                    let (from, to) = dir.split_once('-').unwrap_or((dir, dir));
                    let to = to.rsplit('-').next().unwrap_or(to);
                    if from != to {
                        problems.push(format!("{at}: `native` claimed across dialects"));
                    }
                }
                Class::Extension => {
                    let outputs = files.iter().filter(|p| {
                        !p.to_string_lossy().ends_with(".in")
                            && !p.to_string_lossy().ends_with(".request.json")
                    });
                    let shown = outputs
                        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
                        .any(|text| shows_extension(&text));
                    if !shown {
                        problems.push(format!(
                            "{at}: `extension` claimed, but no expected stream of `{}` carries one",
                            cell.fixture
                        ));
                    }
                }
                Class::Lossy if cell.note.is_none() => {
                    problems.push(format!("{at}: `lossy` needs a note saying what is lost"));
                }
                Class::Lossy | Class::Translated => {}
            }
        }
    }
    problems
}

/// The README section between the markers.
fn render(manifests: &[(String, Manifest)]) -> String {
    let mut out = String::new();
    out.push_str("| feature |");
    for (_, m) in manifests {
        out.push_str(&format!(" {} |", m.direction));
    }
    out.push_str("\n| --- |");
    for _ in manifests {
        out.push_str(" --- |");
    }
    out.push('\n');
    let mut notes = Vec::new();
    for (key, label) in FEATURES {
        out.push_str(&format!("| {label} |"));
        for (dir, m) in manifests {
            match m.cells.get(*key) {
                Some(cell) => {
                    let mut text = format!(
                        " {} [`{}`](tests/fixtures/{dir}/{}.in)",
                        cell.class.label(),
                        cell.fixture,
                        cell.fixture
                    );
                    if let Some(note) = &cell.note {
                        notes.push(format!(
                            "{}. {} ({label}): {note}",
                            notes.len() + 1,
                            m.direction
                        ));
                        text.push_str(&format!(" ({})", notes.len()));
                    }
                    out.push_str(&text);
                    out.push_str(" |");
                }
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            out.push_str(&note);
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_readme_matrix_is_the_fixtures_matrix() {
    let manifests = manifests();
    assert!(
        manifests.len() >= 7,
        "fixture directories with a matrix.toml: {}",
        manifests.len()
    );
    let problems = check(&manifests);
    assert!(
        problems.is_empty(),
        "claims the fixtures do not back:\n{}",
        problems.join("\n")
    );

    let table = render(&manifests);
    let readme_path = root().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md has no `{BEGIN}` … `{END}` section");
    };
    let current = &readme[start + BEGIN.len()..end];
    let wanted = format!("\n{table}");
    if current != wanted {
        if std::env::var_os("DIALECT_PROXY_BLESS").is_some() {
            let updated = format!("{}{BEGIN}{wanted}{}", &readme[..start], &readme[end..]);
            std::fs::write(&readme_path, updated).unwrap();
        } else {
            panic!(
                "README.md's matrix is not the fixtures' (rerun with DIALECT_PROXY_BLESS=1 to \
                 rewrite it):\n--- README\n{current}\n--- fixtures\n{wanted}"
            );
        }
    }
}

#[test]
fn a_claim_without_its_evidence_is_refused() {
    // The checker itself: an extension claim on a case whose streams carry none, a lossy claim
    // without a note, native across dialects, and a missing case are each reported.
    let manifest = |cells: &str| -> Manifest {
        toml::from_str(&format!("direction = \"x\"\norder = 1\n[cells]\n{cells}")).unwrap()
    };
    let cases = [
        (
            "agui-agui",
            "text = { class = \"extension\", fixture = \"truncated\" }",
        ),
        (
            "agui-agui",
            "text = { class = \"lossy\", fixture = \"truncated\" }",
        ),
        (
            "agui-hai",
            "text = { class = \"native\", fixture = \"truncated\" }",
        ),
        (
            "agui-hai",
            "text = { class = \"translated\", fixture = \"no-such-case\" }",
        ),
        (
            "agui-hai",
            "colour = { class = \"translated\", fixture = \"truncated\" }",
        ),
    ];
    for (dir, cells) in cases {
        let problems = check(&[(dir.to_owned(), manifest(cells))]);
        assert_eq!(problems.len(), 1, "{dir} {cells}: {problems:?}");
    }
    let fine = check(&[(
        "agui-hai".to_owned(),
        manifest("activity = { class = \"extension\", fixture = \"activity\" }"),
    )]);
    assert!(fine.is_empty(), "{fine:?}");
}
