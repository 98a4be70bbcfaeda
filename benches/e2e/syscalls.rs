//! Scenario f, syscalls per event: `strace -f -c` attached to the process in the middle
//! (the gateway ag-ui→ag-ui and ag-ui→hai, nginx) while one unpaced stream of 100-byte events,
//! one event per HTTP chunk, passes through it; and to the mock while a direct stream runs, to
//! show the upstream's own shape. Writes (write, writev, sendto, sendmsg) and reads (read,
//! readv, recvfrom, recvmsg) per content event. Measured once per benchmark.
//!
//! strace stops the traced process at every syscall, which slows it: it then finds more
//! events waiting at each read than it would untraced, so the counts lean towards batching
//! for every process alike.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::figures::Figures;
use crate::mock::{Chunking, Script};
use crate::procs::{self, Tracer};
use crate::rig::{self, Comparator, Ctx};
use crate::throughput;

pub const SCENARIO: &str = "f. syscalls per event";
/// Content events of the traced stream.
const EVENTS: u64 = 20_000;
/// Syscalls that hand bytes to a socket.
pub const WRITES: [&str; 4] = ["write", "writev", "sendto", "sendmsg"];
/// Syscalls that take bytes from a socket.
pub const READS: [&str; 4] = ["read", "readv", "recvfrom", "recvmsg"];
/// The figure names.
pub const WRITES_PER_EVENT: &str = "writes per event";
pub const READS_PER_EVENT: &str = "reads per event";
pub const WAITS_PER_EVENT: &str = "epoll_wait per event";
pub const ALL_PER_EVENT: &str = "all syscalls per event";
/// The label of the mock's own row.
pub const UPSTREAM: &str = "mock upstream (during the direct stream)";

/// Who is traced: the process in the middle, or the mock for direct.
const TRACED: [Comparator; 4] = [
    Comparator::Direct,
    Comparator::Nginx,
    Comparator::Passthrough,
    Comparator::Hai,
];

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_err()
    {
        ctx.note(format!(
            "{SCENARIO} skipped: strace is not installed (benches/run installs it when root)"
        ));
        return Ok(());
    }
    let script = Script::unpaced(EVENTS, throughput::DELTA_BYTES, Chunking::Event);
    let mock = procs::mock(&ctx.layout, &script).await?;
    for comparator in TRACED {
        if !ctx.comparators.contains(&comparator) {
            continue;
        }
        let sut = rig::start(ctx, comparator, mock.addr).await?;
        let (pid, label) = match &sut.proc {
            Some(p) => (p.child.id(), comparator.label()),
            None => (mock.child.id(), UPSTREAM),
        };
        let out = ctx.dir.join(format!("strace-{}.txt", procs::slug(label)));
        let result = traced(pid, &out, sut.target).await;
        sut.stop().await;
        let (counts, secs) = match result {
            Ok(r) => r,
            Err(e) => {
                ctx.note(format!("{SCENARIO}, {label}: {e:#}"));
                continue;
            }
        };
        let per = |names: &[&str]| {
            names
                .iter()
                .map(|n| counts.get(*n).copied().unwrap_or(0))
                .sum::<u64>() as f64
                / EVENTS as f64
        };
        let all = counts.values().sum::<u64>() as f64 / EVENTS as f64;
        let (writes, reads, waits) = (per(&WRITES), per(&READS), per(&["epoll_wait"]));
        println!(
            "  {label:<42} writes/event {writes:.3}  reads/event {reads:.3}  epoll_wait/event \
             {waits:.3}  all/event {all:.3}  ({:.0} events/s traced)",
            EVENTS as f64 / secs
        );
        figures.push(SCENARIO, label, WRITES_PER_EVENT, "syscalls", writes);
        figures.push(SCENARIO, label, READS_PER_EVENT, "syscalls", reads);
        figures.push(SCENARIO, label, WAITS_PER_EVENT, "syscalls", waits);
        figures.push(SCENARIO, label, ALL_PER_EVENT, "syscalls", all);
        let mut busiest: Vec<_> = counts.iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = busiest
            .iter()
            .take(6)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        ctx.notes.push(format!(
            "{SCENARIO}, {label}: {EVENTS} events, most frequent syscalls: {} (strace -c output: {})",
            top.join(", "),
            out.display()
        ));
    }
    mock.stop().await;
    Ok(())
}

/// One stream through `target` with strace attached to `pid`; (calls per syscall, seconds).
async fn traced(
    pid: u32,
    out: &Path,
    target: crate::client::Target,
) -> anyhow::Result<(HashMap<String, u64>, f64)> {
    let _ = std::fs::remove_file(out);
    let args: Vec<String> = ["-f", "-c", "-q", "-o"]
        .into_iter()
        .map(String::from)
        .chain([out.display().to_string(), "-p".into(), pid.to_string()])
        .collect();
    let tracer = Tracer::attach("strace", &args, Duration::from_millis(500)).await?;
    let started = Instant::now();
    let (rate, errors) = throughput::one_stream(target, EVENTS).await;
    let secs = started.elapsed().as_secs_f64();
    // The gateway's last writes and the connection's end happen just after the client saw
    // the terminal event.
    tokio::time::sleep(Duration::from_millis(200)).await;
    tracer.finish(Duration::from_secs(20)).await?;
    anyhow::ensure!(errors == 0 && rate > 0.0, "the traced stream failed");
    let text = std::fs::read_to_string(out).with_context(|| format!("read {}", out.display()))?;
    let counts = parse(&text);
    anyhow::ensure!(!counts.is_empty(), "no syscalls in {}", out.display());
    Ok((counts, secs))
}

/// The calls per syscall of a `strace -c` table.
pub fn parse(text: &str) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `% time  seconds  usecs/call  calls  [errors]  syscall`
        if words.len() < 5 || words[0].parse::<f64>().is_err() {
            continue;
        }
        let (Some(name), Ok(calls)) = (words.last(), words[3].parse::<u64>()) else {
            continue;
        };
        if *name != "total" {
            *counts.entry(name.to_string()).or_insert(0) += calls;
        }
    }
    counts
}
