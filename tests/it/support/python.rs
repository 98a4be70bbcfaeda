//! The official AG-UI Python SDK for the validators of `tests/python/` (`validate_events.py`,
//! `validate_input.py`): a venv at `target/pyenv` with `tests/python/requirements.txt`, created
//! and installed on first use when missing. A failed install fails the tests; they are never
//! skipped.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};

use super::process::{run_command, succeed, INSTALL_PATIENCE};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's interpreter, `target/pyenv/bin/python`.
pub fn python() -> PathBuf {
    root().join("target/pyenv/bin/python")
}

/// `tests/python/<script>`.
pub fn python_script(script: &str) -> PathBuf {
    root().join("tests/python").join(script)
}

/// Creates the venv and installs `tests/python/requirements.txt` unless `ag_ui.core` and
/// `pydantic` import already. A no-op when `.ci/run` has installed them. Once per test process:
/// every caller shares the first outcome, so two tests never build the venv at the same time.
pub fn provision_python() -> Result<(), String> {
    static PROVISIONED: OnceLock<Result<(), String>> = OnceLock::new();
    PROVISIONED.get_or_init(install_python).clone()
}

/// The work of [`provision_python`].
fn install_python() -> Result<(), String> {
    let importable = || {
        let mut check = Command::new(python());
        check.args(["-c", "import ag_ui.core, pydantic"]);
        run_command(&mut check, Duration::from_secs(60)).is_ok_and(|ran| ran.success)
    };
    if python().is_file() && importable() {
        return Ok(());
    }
    if !python().is_file() {
        let mut venv = Command::new("python3");
        venv.args(["-m", "venv", "--clear"])
            .arg(root().join("target/pyenv"))
            .current_dir(root());
        succeed(&mut venv, INSTALL_PATIENCE)?;
    }
    let mut pip = Command::new(python());
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-r",
    ])
    .arg(root().join("tests/python/requirements.txt"))
    .current_dir(root());
    succeed(&mut pip, INSTALL_PATIENCE)?;
    if importable() {
        Ok(())
    } else {
        Err(format!(
            "{} still cannot `import ag_ui.core` after pip install",
            python().display()
        ))
    }
}

/// [`provision_python`]; panics with the installer's output when it failed.
pub fn ensure_python() {
    if let Err(problem) = provision_python() {
        panic!(
            "the Python SDK venv {} is not installed and installing it failed:\n{problem}",
            root().join("target/pyenv").display()
        );
    }
}
