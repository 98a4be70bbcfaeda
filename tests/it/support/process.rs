//! Child processes of the tests that drive external tools (the Node validators, installers): run
//! to completion with piped output, killed after a patience limit.

use std::{
    io::Read,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// Limit for an installer step (`npm ci`, `python -m venv`, `pip install`).
pub const INSTALL_PATIENCE: Duration = Duration::from_secs(900);

/// How a command ended, with everything it printed.
pub struct Ran {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to completion with piped output; kills it after `patience`.
pub fn run_command(command: &mut Command, patience: Duration) -> Result<Ran, String> {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + patience;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {patience:?}; killed"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {what}: {e}")),
        }
    };
    Ok(Ran {
        success: status.success(),
        code: status.code(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Runs an installer step; `Err` with its whole output unless it exits 0.
pub fn succeed(command: &mut Command, patience: Duration) -> Result<(), String> {
    let what = format!("{command:?}");
    let ran = run_command(command, patience)?;
    if ran.success {
        Ok(())
    } else {
        Err(format!(
            "{what} exited with {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            ran.code, ran.stdout, ran.stderr
        ))
    }
}
