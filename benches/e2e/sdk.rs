//! Scenario e, a real SDK upstream: the agent is `benches/sdk_agent.py`, written with the
//! official `ag-ui-protocol` Python package (its event types and `EventEncoder`) and served by
//! FastAPI and uvicorn, one event per HTTP chunk. Streams of N 100-byte events through every
//! comparator, taking turns as scenario b's single streams do
//! ([`throughput::single_streams`]), reported like them: events/s, and per run the rate over
//! nginx's and over direct's.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::figures::Figures;
use crate::procs;
use crate::rig::Ctx;
use crate::throughput;

pub const SCENARIO: &str = "e. Python SDK upstream";
/// The figure's name.
pub const NAME: &str = "1 stream, ag-ui-protocol + FastAPI/uvicorn upstream";
/// Content events of the stream: the Python agent makes a few tens of thousands per second.
const EVENTS: u64 = 50_000;

/// The Python that has the SDK, FastAPI and uvicorn: `BENCH_PYTHON`, else the venv
/// `benches/run` and `.ci/run` create (`target/pyenv`).
pub fn python() -> PathBuf {
    std::env::var_os("BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/python")
        })
}

/// Whether `python` imports everything the agent needs; why not otherwise.
fn check(python: &PathBuf) -> anyhow::Result<()> {
    let out = std::process::Command::new(python)
        .args(["-c", "import ag_ui.core, ag_ui.encoder, fastapi, uvicorn"])
        .output()
        .with_context(|| format!("run {}", python.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} cannot import the SDK, FastAPI and uvicorn: {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let python = python();
    if let Err(e) = check(&python) {
        ctx.note(format!(
            "{SCENARIO} skipped: {e:#} (benches/run installs them into target/pyenv)"
        ));
        return Ok(());
    }
    let events = if ctx.quick { 10_000 } else { EVENTS };
    let agent = procs::sdk_agent(&ctx.layout, &python, events, throughput::DELTA_BYTES).await?;
    for run in 0..ctx.runs {
        let rates =
            throughput::single_streams(ctx, figures, SCENARIO, NAME, agent.addr, events, run)
                .await?;
        throughput::ratios(&rates, NAME, figures, SCENARIO);
    }
    agent.stop().await;
    Ok(())
}
