//! Scenario c, memory per stream: the RSS of the process in the middle (the gateway in three
//! directions, and nginx, whose single process is its worker: `master_process off`) at rest,
//! then with K streams held open, idle (the mock holds the stream after its opening events;
//! only the gateway's 1 s heartbeats flow) or active (the mock sends one event per 500 ms per
//! stream). A fresh process for every measurement; KiB per stream = (RSS with K − RSS at
//! rest) / K. "At rest" is after one stream has been served and closed: what a process sets
//! up once, on its first request (thread-local buffers, allocator caches, connection pools,
//! metric series), is not a stream's, and a fresh process has not paid it yet.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{self, Progress};
use crate::figures::{median, Figures};
use crate::mock::{Chunking, Mode, Script};
use crate::procs::{self, Proc};
use crate::rig::{self, Comparator, Ctx};

pub const SCENARIO: &str = "c. memory";
/// File descriptors the process in the middle keeps for itself (listener, epoll, log, the
/// runtime's own) under the per-process limit.
const SPARE_FDS: u64 = 100;
/// Streams being opened at once.
const OPENING: usize = 200;

/// Pace of each active stream. At 100 ms, 9,900 streams make 99,000 events/s, more than the
/// mock and the client sharing CPU 0 can write and read: the gateway then holds the backlog
/// and its RSS measures the rig, not a stream.
const ACTIVE_PACE_US: u64 = 500_000;

/// The kinds measured.
pub const KINDS: [Comparator; 4] = [
    Comparator::Nginx,
    Comparator::Passthrough,
    Comparator::Hai,
    Comparator::AapDelta,
];

fn script(active: bool) -> Script {
    Script {
        delay_ms: 0,
        events: 100_000,
        pace_us: ACTIVE_PACE_US,
        delta_bytes: crate::marker::DELTA_BYTES,
        mode: if active { Mode::Normal } else { Mode::Hold },
        flood_bytes: 0,
        chunking: Chunking::Event,
        extra_field: false,
    }
}

/// The open-file limit of this process (the gateway's is the same).
pub fn fd_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(1024)
}

/// The K values: 1000 and 10000, capped at (limit − spare) / 2 (two sockets per stream in the
/// process in the middle; the limit is the hard one, which `benches/run` takes as its soft
/// one, and raising the hard one needs a privilege the bench may not have).
pub fn stream_counts(quick: bool) -> (Vec<usize>, u64) {
    let limit = fd_limit();
    let cap = (limit.saturating_sub(SPARE_FDS) / 2) as usize;
    let wanted: &[usize] = if quick { &[200, 1000] } else { &[1000, 10_000] };
    (wanted.iter().map(|&k| k.min(cap)).collect(), limit)
}

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let (counts, limit) = stream_counts(ctx.quick);
    ctx.note(format!(
        "memory: open-file limit {limit} per process and 2 sockets per stream in the gateway or \
         nginx: K capped at ({limit} − {SPARE_FDS}) / 2; K measured: {counts:?}"
    ));
    for active in [false, true] {
        let mock = procs::mock(&ctx.layout, &script(active)).await?;
        let state = if active { "active" } else { "idle" };
        for kind in KINDS {
            if !ctx.comparators.contains(&kind) {
                continue;
            }
            for &k in &counts {
                let sut = rig::start(ctx, kind, mock.addr).await?;
                // nginx sends no heartbeat: an idle stream is ready once its first event came.
                let heartbeats = kind.is_gateway();
                let result = measure(sut.proc.as_ref(), sut.target, k, active, heartbeats).await;
                sut.stop().await;
                let (rest, loaded, failed) = match result {
                    Ok(r) => r,
                    Err(e) => {
                        ctx.note(format!("memory {} {state} K={k}: {e:#}", kind.label()));
                        continue;
                    }
                };
                // Failed streams hold nothing: the RSS is shared among those that opened.
                let per = (loaded as f64 - rest as f64) / k.saturating_sub(failed).max(1) as f64;
                println!(
                    "  {:<28} {state:<6} K={k:<5} rest {rest} KiB, loaded {loaded} KiB, \
                     {per:.1} KiB/stream, {failed} failed",
                    kind.label()
                );
                let label = kind.label();
                figures.push(SCENARIO, label, "RSS at rest", "KiB", rest as f64);
                figures.push(
                    SCENARIO,
                    label,
                    &format!("RSS {state} K={k}"),
                    "KiB",
                    loaded as f64,
                );
                figures.push(
                    SCENARIO,
                    label,
                    &format!("{state} KiB/stream K={k}"),
                    "KiB",
                    per,
                );
                figures.push(
                    SCENARIO,
                    label,
                    &format!("{state} failed K={k}"),
                    "streams",
                    failed as f64,
                );
            }
        }
        mock.stop().await;
    }
    Ok(())
}

/// One stream, opened until its first event and then closed, and a pause for the process to
/// settle (the allocator returns freed pages within a second).
async fn warm_up(target: client::Target) -> anyhow::Result<()> {
    let progress = Arc::new(Progress::default());
    let warming = {
        let progress = progress.clone();
        tokio::spawn(async move { client::stream(target, u64::MAX, Some(&progress)).await })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while progress.opened.load(Ordering::Relaxed) + progress.failed.load(Ordering::Relaxed) == 0 {
        anyhow::ensure!(Instant::now() < deadline, "the warm-up stream did not open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    warming.abort();
    let _ = warming.await;
    anyhow::ensure!(
        progress.failed.load(Ordering::Relaxed) == 0,
        "the warm-up stream failed"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(())
}

/// (RSS at rest, RSS with `k` streams, failed streams).
async fn measure(
    gateway: Option<&Proc>,
    target: client::Target,
    k: usize,
    active: bool,
    heartbeats: bool,
) -> anyhow::Result<(u64, u64, usize)> {
    let gateway = gateway.context("no process in the middle")?;
    warm_up(target).await?;
    let rest = gateway.rss_kib()?;
    let progress = Arc::new(Progress::default());
    let mut set = JoinSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in 0..k {
        // At most OPENING streams between "started" and "first event".
        while i > progress.opened.load(Ordering::Relaxed)
            + progress.failed.load(Ordering::Relaxed)
            + OPENING
        {
            anyhow::ensure!(Instant::now() < deadline, "streams stopped opening at {i}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let progress = progress.clone();
        set.spawn(async move { client::stream(target, u64::MAX, Some(&progress)).await });
    }
    let ready = |p: &Progress| {
        if active {
            p.flowing.load(Ordering::Relaxed)
        } else if heartbeats {
            p.heartbeat.load(Ordering::Relaxed)
        } else {
            p.opened.load(Ordering::Relaxed)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready(&progress) + progress.failed.load(Ordering::Relaxed) < k {
        if Instant::now() > deadline {
            anyhow::bail!(
                "only {} of {k} streams ready ({} failed)",
                ready(&progress),
                progress.failed.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every stream has had its heartbeat (or content, or for nginx its first event): sample
    // three times.
    let mut samples = Vec::new();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        samples.push(gateway.rss_kib()? as f64);
    }
    let failed = progress.failed.load(Ordering::Relaxed);
    set.abort_all();
    while set.join_next().await.is_some() {}
    Ok((rest, median(&samples) as u64, failed))
}
