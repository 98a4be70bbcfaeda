//! The Node tools of `tests/node/` (the `@ag-ui/client` validators, the HAI consumer check) and
//! their `node_modules`, installed with `npm ci` on first use when missing. A failed install
//! fails the tests; they are never skipped.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use serde_json::Value;

use super::process::{succeed, INSTALL_PATIENCE};

/// `tests/node/`.
pub fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// `node tests/node/<script>`, run in that directory (so its `node_modules` resolve).
pub fn node_script(script: &str) -> Command {
    let mut command = Command::new("node");
    command.arg(node_dir().join(script)).current_dir(node_dir());
    command
}

/// Runs `npm ci` in `tests/node/` unless every dependency its `package.json` declares is
/// installed. A no-op when `.ci/run` has installed them already. Once per test process: every
/// caller shares the first outcome, so two tests never run `npm ci` at the same time.
pub fn provision_node() -> Result<(), String> {
    static PROVISIONED: OnceLock<Result<(), String>> = OnceLock::new();
    PROVISIONED.get_or_init(install_node).clone()
}

/// The work of [`provision_node`].
fn install_node() -> Result<(), String> {
    let modules = node_dir().join("node_modules");
    let installed = declared_dependencies()?
        .iter()
        .all(|package| modules.join(package).join("package.json").is_file());
    if installed {
        return Ok(());
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund"])
        .current_dir(node_dir());
    succeed(&mut npm, INSTALL_PATIENCE)
}

/// [`provision_node`]; panics with the installer's output when it failed.
pub fn ensure_node() {
    if let Err(problem) = provision_node() {
        panic!(
            "the Node tools in {} are not installed and installing them failed:\n{problem}",
            node_dir().display()
        );
    }
}

/// The package names under `dependencies` in `tests/node/package.json`.
fn declared_dependencies() -> Result<Vec<String>, String> {
    let path = node_dir().join("package.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let dependencies = json["dependencies"]
        .as_object()
        .ok_or_else(|| format!("{} has no \"dependencies\" object", path.display()))?;
    Ok(dependencies.keys().cloned().collect())
}
