//! Scenario b, saturation: an unpaced mock, read as fast as the client can; one long stream,
//! then 100 streams in a closed loop. Events/s counts only content events of streams that
//! arrived whole and in order. Direct is the ceiling of the mock and client themselves.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{self, Target};
use crate::figures::Figures;
use crate::mock::{Chunking, Script};
use crate::procs;
use crate::rig::{self, Comparator, Ctx};

pub const SCENARIO: &str = "b. saturation";
/// Concurrent streams of the closed loop.
const CONCURRENCY: usize = 100;
/// Content events of the single long stream: as many as an AAP session's history holds
/// (`max_history_bytes`, 8 MiB by default, about 139,800 60-byte deltas); past it the gateway
/// rightly ends the turn with `HISTORY_LIMIT_EXCEEDED`, so the same count for every comparator.
const LONG_EVENTS: u64 = 120_000;
/// Content events of each closed-loop stream.
const LOOP_EVENTS: u64 = 2_000;

fn script(events: u64) -> Script {
    Script::unpaced(events, crate::marker::DELTA_BYTES, Chunking::Batch)
}

pub const ONE: &str = "1 stream events/s";
pub const MANY: &str = "100 streams events/s";

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let long = if ctx.quick { 50_000 } else { LONG_EVENTS };
    let loop_for = if ctx.quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(3)
    };
    let single = procs::mock(&ctx.layout, &script(long)).await?;
    let multi = procs::mock(&ctx.layout, &script(LOOP_EVENTS)).await?;
    for run in 0..ctx.runs {
        let mut one_rates = HashMap::new();
        let mut many_rates = HashMap::new();
        for comparator in ctx.order(run) {
            let label = comparator.label();
            let sut = rig::start(ctx, comparator, single.addr).await?;
            // Warm-up: the same stream once, not measured.
            one_stream(sut.target, long).await;
            let (rate, errors) = one_stream(sut.target, long).await;
            sut.stop().await;
            figures.push(SCENARIO, label, ONE, "events/s", rate);
            figures.push(SCENARIO, label, "1 stream failed", "streams", errors as f64);
            one_rates.insert(comparator, rate);

            let sut = rig::start(ctx, comparator, multi.addr).await?;
            closed_loop(sut.target, CONCURRENCY, Duration::from_millis(300)).await;
            let (rate, errors) = closed_loop(sut.target, CONCURRENCY, loop_for).await;
            sut.stop().await;
            figures.push(SCENARIO, label, MANY, "events/s", rate);
            figures.push(
                SCENARIO,
                label,
                "100 streams failed",
                "streams",
                errors as f64,
            );
            many_rates.insert(comparator, rate);
            println!(
                "  run {run} {label:<28} 1 stream {rate1:>10.0} ev/s  100 streams {rate:>10.0} ev/s",
                rate1 = one_rates[&comparator]
            );
        }
        for (rates, name) in [(&one_rates, ONE), (&many_rates, MANY)] {
            let Some(&direct) = rates.get(&Comparator::Direct) else {
                continue;
            };
            for c in Comparator::ALL {
                if let (Some(r), true) = (rates.get(&c), c != Comparator::Direct) {
                    let share = if direct > 0.0 {
                        r / direct * 100.0
                    } else {
                        f64::NAN
                    };
                    figures.push(
                        SCENARIO,
                        c.label(),
                        &format!("{name} % of direct"),
                        "%",
                        share,
                    );
                }
            }
        }
    }
    single.stop().await;
    multi.stop().await;
    Ok(())
}

/// One stream of `events`; (events/s, failed streams).
async fn one_stream(target: Target, events: u64) -> (f64, u64) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(120),
        client::stream(target, events, None),
    )
    .await;
    let secs = started.elapsed().as_secs_f64();
    match outcome {
        Ok(o) if o.ok() => (o.markers as f64 / secs, 0),
        Ok(o) => {
            println!("  one stream failed: {}", o.error.unwrap_or_default());
            (0.0, 1)
        }
        Err(_) => {
            println!("  one stream timed out");
            (0.0, 1)
        }
    }
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
