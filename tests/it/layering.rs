//! The import rule of DESIGN.md: the model, the codec, the dialects, the mapping tables and the
//! converters never reach into the proxy, sessions, the AAP face or hyper, so they stay pure
//! and usable offline (`translate`, fuzzing, benchmarks).

use std::path::{Path, PathBuf};

const PURE: &[&str] = &[
    "src/event",
    "src/sse.rs",
    "src/dialect",
    "src/mapping.rs",
    "src/translate",
];
const FORBIDDEN: &[&str] = &[
    "crate::proxy",
    "crate::aap",
    "crate::session",
    "hyper",
    "tokio::",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            rust_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

#[test]
fn pure_modules_do_not_import_the_proxy_or_hyper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for p in PURE {
        rust_files(&root.join(p), &mut files);
    }
    assert!(
        files.len() >= 10,
        "expected the pure modules, found {files:?}"
    );
    let mut violations = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for word in FORBIDDEN {
                if code.contains(word) {
                    violations.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}
