//! End-to-end benchmark of the gateway (`cargo bench --bench e2e`, normally through
//! `benches/run`): starts a mock AG-UI upstream (or the Python SDK agent), the gateway in each
//! direction and nginx as separate processes, drives them from this process, and writes
//! `benches/RESULTS.md`. With `--perf-dir`, `perf record` is attached to every process in the
//! middle during scenario a (`benches/profile.sh`).
//!
//! This file owns the command line and the order of the phases; each scenario lives in its own
//! module.

mod client;
mod figures;
mod latency;
mod machine;
mod marker;
mod memory;
mod mock;
mod pacer;
mod procs;
mod report;
mod rig;
mod sdk;
mod slow;
mod soak;
mod syscalls;
mod targets;
mod throughput;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use figures::Figures;
use rig::{Comparator, Ctx};

#[derive(Parser)]
#[command(about = "End-to-end benchmark of dialect-proxy")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Fewer runs and shorter phases: a smoke check of everything.
    #[arg(long)]
    quick: bool,
    /// Runs of scenarios a, b and e [default: 3, quick: 1].
    #[arg(long)]
    runs: Option<usize>,
    /// Scenarios to run, among a (latency), b (throughput), c (memory), d (slow client),
    /// e (Python SDK upstream), f (syscalls per event), g (soak: 10,000 streams for 10
    /// minutes in two directions).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e,f,g")]
    scenarios: Vec<String>,
    /// Comparators to run, among direct, nginx, ag-ui, hai, aap-delta, aap-message [default:
    /// all]; direct is always run.
    #[arg(long, value_delimiter = ',')]
    comparators: Option<Vec<String>>,
    /// Attach `perf record -g` to every process in the middle during scenario a and write its
    /// data (and the events it passed) into this directory.
    #[arg(long)]
    perf_dir: Option<PathBuf>,
    /// Where to write the report [default: benches/RESULTS.md].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The command that started the benchmark, for the report.
    #[arg(long, env = "BENCH_COMMAND", default_value = "cargo bench --bench e2e")]
    command_line: String,
    /// Set by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve as the mock upstream (started by the benchmark itself).
    Mock(mock::Script),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Cmd::Mock(script)) = cli.command {
        return mock::main(script);
    }
    let layout = procs::Layout::detect();
    layout.pin_self()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("runtime")?;
    // On Ctrl-C or SIGTERM the benchmark future is dropped, which kills every child process.
    runtime.block_on(async {
        tokio::select! {
            result = bench(cli, layout) => result,
            signal = interrupted() => {
                signal?;
                anyhow::bail!("interrupted: child processes stopped")
            }
        }
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn interrupted() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("SIGINT handler")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// The directory Cargo builds into (criterion's results, our logs).
fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(PathBuf::from).unwrap_or(tmp)
}

async fn bench(cli: Cli, layout: procs::Layout) -> anyhow::Result<()> {
    let target = target_dir();
    let dir = target.join("e2e");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let _ = std::fs::remove_file(dir.join("gateway.log"));
    let nginx = procs::nginx_version();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut ctx = Ctx {
        layout: layout.clone(),
        dir,
        quick: cli.quick,
        runs: cli.runs.unwrap_or(if cli.quick { 1 } else { 3 }).max(1),
        comparators: Vec::new(),
        notes: Vec::new(),
        gateway_starts: 0,
        perf_dir: cli.perf_dir.clone(),
    };
    let only = match &cli.comparators {
        Some(keys) => Some(
            keys.iter()
                .map(|k| Comparator::from_key(k))
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
        None => None,
    };
    println!("e2e: {}", layout.describe());
    if let Ok(secs) = std::env::var("BENCH_CODEC_SECONDS") {
        ctx.notes
            .push(format!("phase codec (criterion) took {secs} s"));
    }
    ctx.notes
        .push(format!("load average at start: {}", loadavg()));
    lost_time(&mut ctx, "at start");
    let mut phases = Vec::new();
    let clock = Instant::now();
    qualify(&mut ctx, nginx.is_some(), only.as_deref()).await?;
    phases.push(("qualification", clock.elapsed()));
    let mut figures = Figures::default();
    let wanted = |s: &str| cli.scenarios.iter().any(|x| x == s);
    for (key, name) in [
        ("a", latency::SCENARIO),
        ("b", throughput::SCENARIO),
        ("e", sdk::SCENARIO),
        ("f", syscalls::SCENARIO),
        ("c", memory::SCENARIO),
        ("d", slow::SCENARIO),
        ("g", soak::SCENARIO),
    ] {
        if !wanted(key) {
            continue;
        }
        println!("{name}");
        let clock = Instant::now();
        let result = match key {
            "a" => latency::scenario(&mut ctx, &mut figures).await,
            "b" => throughput::scenario(&mut ctx, &mut figures).await,
            "c" => memory::scenario(&mut ctx, &mut figures).await,
            "e" => sdk::scenario(&mut ctx, &mut figures).await,
            "f" => syscalls::scenario(&mut ctx, &mut figures).await,
            "g" => soak::scenario(&mut ctx, &mut figures).await,
            _ => slow::scenario(&mut ctx, &mut figures).await,
        };
        if let Err(e) = result {
            ctx.note(format!("{name} did not complete: {e:#}"));
        }
        phases.push((name, clock.elapsed()));
    }
    ctx.notes.push(format!(
        "load average at end: {} (the machine is shared: other work on the CPUs inflates tails)",
        loadavg()
    ));
    lost_time(&mut ctx, "at end");
    for (name, took) in &phases {
        ctx.notes
            .push(format!("phase {name} took {:.0} s", took.as_secs_f64()));
    }
    let report_ctx = report::Context {
        command: cli.command_line.clone(),
        args: args.join(" "),
        layout: layout.describe(),
        nginx,
        notes: &ctx.notes,
        target_dir: &target,
        runs: ctx.runs,
        quick: ctx.quick,
    };
    println!("\n{}", report::summary(&report_ctx, &figures));
    let out = cli
        .out
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/RESULTS.md"));
    let mut text = report::render(&report_ctx, &figures);
    // Sections measured by their own scripts (floods, shutdown, paired before/after runs)
    // follow the marker; a new report keeps them.
    if let Some(kept) = std::fs::read_to_string(&out)
        .ok()
        .and_then(|old| old.find(report::KEPT_MARKER).map(|at| old[at..].to_owned()))
    {
        text.push('\n');
        text.push_str(&kept);
    } else {
        text.push_str(&format!("\n{}\n", report::KEPT_MARKER));
    }
    std::fs::write(&out, text).with_context(|| format!("write {}", out.display()))?;
    println!("report written to {}", out.display());
    let failed = ctx.notes.iter().any(|n| n.contains("QUALIFICATION FAILED"));
    anyhow::ensure!(
        !failed,
        "some comparators failed qualification (see the report)"
    );
    Ok(())
}

/// What each CPU lost to other work over one second (`machine`), as notes.
fn lost_time(ctx: &mut Ctx, when: &str) {
    // SAFETY: sysconf only reads a system setting.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    for cpu in 0..cpus {
        if let Some(lost) = machine::probe(cpu, Duration::from_secs(1)) {
            ctx.notes.push(format!("machine {when}: {lost}"));
        }
    }
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Qualifies every comparator (of `only`, if given) against the paced mock of scenario a;
/// keeps those that pass.
async fn qualify(ctx: &mut Ctx, nginx: bool, only: Option<&[Comparator]>) -> anyhow::Result<()> {
    let mock = procs::mock(&ctx.layout, &latency::script()).await?;
    for comparator in Comparator::ALL {
        if comparator != Comparator::Direct && only.is_some_and(|o| !o.contains(&comparator)) {
            continue;
        }
        if matches!(comparator, Comparator::Nginx | Comparator::NginxAgain) && !nginx {
            if comparator == Comparator::Nginx {
                ctx.note("nginx is not installed: the nginx comparators are skipped".into());
            }
            continue;
        }
        match rig::qualify(ctx, comparator, mock.addr, latency::EVENTS, latency::PACE).await {
            Ok(()) => {
                println!("qualified: {}", comparator.label());
                ctx.comparators.push(comparator);
            }
            Err(e) => ctx.note(format!(
                "QUALIFICATION FAILED for {}: {e:#}; it is left out",
                comparator.label()
            )),
        }
    }
    mock.stop().await;
    anyhow::ensure!(
        ctx.comparators.contains(&Comparator::Direct),
        "the direct baseline failed qualification: the rig itself is broken"
    );
    Ok(())
}
