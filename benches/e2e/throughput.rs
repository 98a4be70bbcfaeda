//! Scenario b, throughput: an unpaced mock read as fast as the client can. Single streams of
//! 100-byte events in four upstream shapes (one event per HTTP chunk; the same with a member
//! the gateway does not know; one event per chunk and per write; many events per chunk), the
//! comparators of a run taking turns ([`single_streams`]), then 100 streams in a closed loop.
//! Events/s counts only content events of streams that arrived whole and in order; each run
//! also records every proxy's rate over nginx's and over direct's of the same run. Direct is
//! the ceiling of the mock and client themselves.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{self, Target};
use crate::figures::Figures;
use crate::mock::{Chunking, Script};
use crate::procs;
use crate::procs::Layout;
use crate::rig::{self, Comparator, Ctx, Sut};

pub const SCENARIO: &str = "b. throughput";
/// Delta size that makes a content event's whole `data: ...\n\n` line 100 bytes.
pub const DELTA_BYTES: usize = 33;
/// Content events of the single stream. 200,000 deltas of 33 bytes are 6.6 MB of AAP session
/// history, under its 8 MiB default cap (`max_history_bytes`), so every direction runs the
/// same count.
const LONG_EVENTS: u64 = 200_000;
/// Concurrent streams of the closed loop.
const CONCURRENCY: usize = 100;
/// Content events of each closed-loop stream.
const LOOP_EVENTS: u64 = 2_000;

/// One upstream shape of the single-stream measurement.
#[derive(Clone, Copy)]
pub struct Shape {
    /// The figure's name: `<name> events/s`, `<name> gateway/nginx`...
    pub name: &'static str,
    pub chunking: Chunking,
    pub extra_field: bool,
}

/// The event-per-chunk shape, the way the AG-UI SDKs write.
pub const EVENT: Shape = Shape {
    name: "1 stream, event per chunk",
    chunking: Chunking::Event,
    extra_field: false,
};
/// The same with `"ts":<ns>` in every event.
pub const EVENT_FIELD: Shape = Shape {
    name: "1 stream, event per chunk + unknown field",
    chunking: Chunking::Event,
    extra_field: true,
};
/// One event per chunk and per write, as an SDK's server writes while its reader keeps up.
pub const WRITE: Shape = Shape {
    name: "1 stream, event per chunk and per write",
    chunking: Chunking::Write,
    extra_field: false,
};
/// Many events per 16 KiB chunk.
pub const BATCH: Shape = Shape {
    name: "1 stream, 16 KiB chunks",
    chunking: Chunking::Batch,
    extra_field: false,
};
pub const SHAPES: [Shape; 4] = [EVENT, EVENT_FIELD, WRITE, BATCH];

pub const MANY: &str = "100 streams, event per chunk";

/// The figure names of a throughput measurement called `name`.
pub fn rate(name: &str) -> String {
    format!("{name}: events/s")
}
pub fn over_nginx(name: &str) -> String {
    format!("{name}: ÷ nginx")
}
pub fn over_direct(name: &str) -> String {
    format!("{name}: ÷ direct")
}
/// The share of the stream's wall time the process in the middle ran on its CPU.
pub fn busy_middle(name: &str) -> String {
    format!("{name}: CPU busy, process in the middle")
}
/// The share of the stream's wall time CPU 0 (the upstream and the client) was busy.
pub fn busy_rig(name: &str) -> String {
    format!("{name}: CPU busy, CPU 0 (upstream and client)")
}

/// How busy the two sides of the rig were over one measurement: the process in the middle
/// (its threads' run time) and CPU 0, which the upstream and the client share. A proxy well
/// short of 100 % while CPU 0 is full did not set the pace.
pub struct Busy {
    started: Instant,
    middle: Option<u64>,
    rig: Option<(u64, u64)>,
}

impl Busy {
    pub fn start(sut: &Sut, layout: &Layout) -> Busy {
        Busy {
            started: Instant::now(),
            middle: sut.proc.as_ref().and_then(|p| p.cpu_ns().ok()),
            rig: layout.pinned.then(|| procs::cpu_jiffies(0).ok()).flatten(),
        }
    }

    /// Records both shares, in %, under `name` for `label`.
    pub fn finish(
        self,
        sut: &Sut,
        figures: &mut Figures,
        scenario: &'static str,
        label: &str,
        name: &str,
    ) {
        let wall = self.started.elapsed().as_nanos() as f64;
        let middle = sut.proc.as_ref().and_then(|p| p.cpu_ns().ok());
        if let (Some(before), Some(after)) = (self.middle, middle) {
            let share = 100.0 * after.saturating_sub(before) as f64 / wall;
            figures.push(scenario, label, &busy_middle(name), "%", share);
        }
        if let (Some((busy0, total0)), Ok((busy1, total1))) = (self.rig, procs::cpu_jiffies(0)) {
            if total1 > total0 {
                let share = 100.0 * busy1.saturating_sub(busy0) as f64 / (total1 - total0) as f64;
                figures.push(scenario, label, &busy_rig(name), "%", share);
            }
        }
    }
}

fn script(events: u64, shape: Shape) -> Script {
    Script {
        extra_field: shape.extra_field,
        ..Script::unpaced(events, DELTA_BYTES, shape.chunking)
    }
}

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let long = if ctx.quick { 50_000 } else { LONG_EVENTS };
    let loop_for = if ctx.quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(3)
    };
    let mut mocks = Vec::new();
    for shape in SHAPES {
        mocks.push((shape, procs::mock(&ctx.layout, &script(long, shape)).await?));
    }
    let multi = procs::mock(&ctx.layout, &script(LOOP_EVENTS, EVENT)).await?;
    for run in 0..ctx.runs {
        for (shape, mock) in &mocks {
            let rates =
                single_streams(ctx, figures, SCENARIO, shape.name, mock.addr, long, run).await?;
            ratios(&rates, shape.name, figures, SCENARIO);
        }
        let mut rates = HashMap::new();
        for comparator in ctx.order(run) {
            let sut = rig::start(ctx, comparator, multi.addr).await?;
            closed_loop(sut.target, CONCURRENCY, Duration::from_millis(300)).await;
            let (rate, errors) = closed_loop(sut.target, CONCURRENCY, loop_for).await;
            sut.stop().await;
            record(figures, SCENARIO, MANY, comparator, run, rate, errors);
            rates.insert(comparator, rate);
        }
        ratios(&rates, MANY, figures, SCENARIO);
    }
    for (_, mock) in mocks {
        mock.stop().await;
    }
    multi.stop().await;
    Ok(())
}

/// Records one comparator's rate and failed streams of run `run` under `name`, and prints
/// the rate.
fn record(
    figures: &mut Figures,
    scenario: &'static str,
    name: &str,
    comparator: Comparator,
    run: usize,
    rate: f64,
    failed: u64,
) {
    let label = comparator.label();
    figures.push(scenario, label, &self::rate(name), "events/s", rate);
    figures.push(
        scenario,
        label,
        &format!("{name}: failed"),
        "streams",
        failed as f64,
    );
    println!("  run {run} {name:<42} {label:<28} {rate:>10.0} ev/s");
}

/// Every proxy's rate over nginx's and over direct's of the same run.
pub fn ratios(
    rates: &HashMap<Comparator, f64>,
    name: &str,
    figures: &mut Figures,
    scenario: &'static str,
) {
    for c in Comparator::ALL {
        let Some(&r) = rates.get(&c) else {
            continue;
        };
        for (base, figure) in [
            (Comparator::Nginx, over_nginx(name)),
            (Comparator::Direct, over_direct(name)),
        ] {
            if c == base || c == Comparator::Direct {
                continue;
            }
            if let Some(&b) = rates.get(&base).filter(|b| **b > 0.0) {
                figures.push(scenario, c.label(), &figure, "×", r / b);
            }
        }
    }
}

/// Rounds of single streams per comparator and run.
pub const ROUNDS: usize = 3;

/// One run of single streams named `name` from the upstream at `upstream`: every comparator of
/// the run is started at once and they take turns, one stream each per round for [`ROUNDS`]
/// rounds, in the run's order. The rig's CPU 0 (upstream and client) sets the pace of these
/// streams, and how fast it goes drifts by up to 1.6 × over seconds on this shared machine
/// (`benches/RESULTS.md`, the full run at `eca260d`); streams a few hundred milliseconds apart
/// meet the same drift, so each comparator's rate is over its streams of every round: content
/// events of correct streams over their wall time. Records the rates, failed streams and CPU
/// shares, and returns each comparator's rate.
pub async fn single_streams(
    ctx: &mut Ctx,
    figures: &mut Figures,
    scenario: &'static str,
    name: &str,
    upstream: SocketAddr,
    events: u64,
    run: usize,
) -> anyhow::Result<HashMap<Comparator, f64>> {
    let mut suts = Vec::new();
    for comparator in ctx.order(run) {
        suts.push((comparator, rig::start(ctx, comparator, upstream).await?));
    }
    // Per comparator: content events of correct streams, seconds, failed streams.
    let mut totals: HashMap<Comparator, (u64, f64, u64)> = HashMap::new();
    for _ in 0..ROUNDS {
        for (comparator, sut) in &suts {
            // No warm-up stream: one stream lasts a quarter of a second at least, the first
            // connection's setup well under a millisecond.
            let busy = Busy::start(sut, &ctx.layout);
            let timed = timed_stream(sut.target, events).await;
            busy.finish(sut, figures, scenario, comparator.label(), name);
            let total = totals.entry(*comparator).or_default();
            total.0 += timed.events;
            total.1 += timed.secs;
            total.2 += u64::from(timed.failed);
        }
    }
    for (_, sut) in suts {
        sut.stop().await;
    }
    let mut rates = HashMap::new();
    for comparator in ctx.order(run) {
        let Some(&(events, secs, failed)) = totals.get(&comparator) else {
            continue;
        };
        let rate = if secs > 0.0 {
            events as f64 / secs
        } else {
            0.0
        };
        record(figures, scenario, name, comparator, run, rate, failed);
        rates.insert(comparator, rate);
    }
    Ok(rates)
}

/// One timed stream: the content events it brought if it arrived whole (else 0) and the
/// seconds it took.
pub struct Timed {
    pub events: u64,
    pub secs: f64,
    pub failed: bool,
}

/// One stream of `events`, timed.
pub async fn timed_stream(target: Target, events: u64) -> Timed {
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        client::stream(target, events, None),
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    let failed = |why: String| {
        println!("  one stream failed: {why}");
        Timed {
            events: 0,
            secs,
            failed: true,
        }
    };
    match outcome {
        Ok(o) if o.ok() => Timed {
            events: o.markers,
            secs,
            failed: false,
        },
        Ok(o) => failed(o.error.unwrap_or_default()),
        Err(_) => failed("timed out".into()),
    }
}

/// One stream of `events`; (events/s, failed streams).
pub async fn one_stream(target: Target, events: u64) -> (f64, u64) {
    let timed = timed_stream(target, events).await;
    if timed.failed || timed.secs <= 0.0 {
        return (0.0, u64::from(timed.failed));
    }
    (timed.events as f64 / timed.secs, 0)
}

/// `workers` streams at once, each followed by the next, until `duration` has passed; the
/// streams under way then finish. (events/s over the whole wall time, failed streams).
async fn closed_loop(target: Target, workers: usize, duration: Duration) -> (f64, u64) {
    let started = Instant::now();
    let deadline = started + duration;
    let mut set = JoinSet::new();
    for _ in 0..workers {
        set.spawn(async move {
            let (mut events, mut errors, mut first_error) = (0u64, 0u64, None);
            while Instant::now() < deadline {
                let o = tokio::time::timeout(
                    Duration::from_secs(60),
                    client::stream(target, LOOP_EVENTS, None),
                )
                .await
                .unwrap_or_else(|_| client::Outcome {
                    error: Some("timed out".into()),
                    ..Default::default()
                });
                match o.error {
                    None => events += o.markers,
                    Some(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (events, errors, first_error)
        });
    }
    let (mut events, mut errors) = (0, 0);
    let mut first = None;
    while let Some(Ok((e, x, f))) = set.join_next().await {
        events += e;
        errors += x;
        if first.is_none() {
            first = f;
        }
    }
    if let Some(e) = first {
        println!("  closed loop: {errors} failed streams, first: {e}");
    }
    (events as f64 / started.elapsed().as_secs_f64(), errors)
}
