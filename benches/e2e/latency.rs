//! Scenario a, latency: an open-loop schedule of paced streams (100 new streams per second,
//! 100 events each 10 ms apart, so about 100 streams open at once), per-event latency, TTFE
//! and TTFB percentiles per comparator, and what each proxy adds over direct and over nginx
//! in the same run. Every event is its own HTTP chunk. When profiling (`--perf-dir`),
//! `perf record -g` is attached to the process in the middle for the whole schedule.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{self, Target};
use crate::figures::{quantile, Figures};
use crate::mock::Script;
use crate::procs;
use crate::rig::{self, Comparator, Ctx};

pub const SCENARIO: &str = "a. latency";
/// CPU time of the process in the middle over the whole schedule, per content event passed.
pub const CPU_PER_EVENT: &str = "CPU per event, process in the middle";
/// The hop's share of the time to first event: from the request to the mock having it, plus
/// from the first content event's send to its receipt. The mock's own wait before that event
/// (25 ms, rounded up to its timer's next millisecond tick, so it depends on when the request
/// arrived) is left out: comparing whole TTFEs compares where each request fell between two
/// ticks of the mock's timer as much as the hops.
pub const TTFE_HOP: &str = "TTFE (hop)";
/// Figures of each stream's last content event alone.
pub const LAST_EVENT: &str = "last-event latency";
/// Per-event latency of the events that reached the process in the middle while no other
/// stream was opening (see [`Openings`]).
pub const OUTSIDE_OPENINGS: &str = "latency outside openings";
/// Share of the events sent while another stream was opening, of all and of those over p99.
pub const DURING_OPENINGS: &str = "events during openings";
pub const TAIL_DURING_OPENINGS: &str = "events over p99 during openings";
/// Streams started per second.
const RATE: u64 = 100;
/// Content events per stream.
pub const EVENTS: u64 = 100;
/// Pace of the mock.
pub const PACE: Duration = Duration::from_millis(10);
/// Streams started in the first second are not measured.
const WARMUP: Duration = Duration::from_secs(1);

pub fn script() -> Script {
    Script::paced(25, EVENTS, PACE)
}

/// The figures of one comparator in one run.
#[derive(Clone, Copy, Default)]
struct Run {
    lat: [f64; 3],
    /// The latency of each stream's last content event alone: what AAP message mode's one
    /// sample per stream is set against (its message is complete with that event).
    last: [f64; 3],
    ttfe: [f64; 3],
    /// The hop's share of TTFE (`client::Outcome::ttfe_hop_ns`).
    ttfe_hop: [f64; 3],
    ttfb: [f64; 2],
    /// p50 and p99 of the events sent while no stream was opening.
    outside: [f64; 2],
    /// Content events of every stream, warm-up included.
    all_events: u64,
}

/// The times (epoch ns) at which some stream was opening: from its first request's send (an
/// AAP session's, else the run's) to the upstream having the run. In that time the process in the middle reads, routes and forwards the
/// request, and on one CPU an event of another stream that arrives meanwhile waits for that
/// work; the events sent then are told apart from the rest, so that a proxy's tail latency can
/// be split into what its openings cost other streams and what its per-event path costs.
struct Openings(Vec<(u64, u64)>);

impl Openings {
    /// The union of `spans`, in order.
    fn new(mut spans: Vec<(u64, u64)>) -> Openings {
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        Openings(merged)
    }

    fn contain(&self, at: u64) -> bool {
        let after = self.0.partition_point(|&(start, _)| start <= at);
        after > 0 && at <= self.0[after - 1].1
    }
}

const PCT: [(&str, f64); 3] = [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)];

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let mock = procs::mock(&ctx.layout, &script()).await?;
    let measured = if ctx.quick {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(10)
    };
    for run in 0..ctx.runs {
        let mut results = HashMap::new();
        for comparator in ctx.order(run) {
            let sut = rig::start(ctx, comparator, mock.addr).await?;
            let perf = match (&ctx.perf_dir, &sut.proc) {
                (Some(dir), Some(p)) => Some(perf_record(dir, comparator, p.child.id()).await?),
                _ => None,
            };
            let started = std::time::Instant::now();
            let cpu_before = sut.proc.as_ref().and_then(|p| p.cpu_ns().ok());
            let r = one(sut.target, measured, comparator, figures).await;
            let secs = started.elapsed().as_secs_f64();
            let cpu_after = sut.proc.as_ref().and_then(|p| p.cpu_ns().ok());
            if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
                if r.all_events > 0 {
                    // Warm-up streams included: their events cost the same.
                    let per_event = after.saturating_sub(before) as f64 / 1e3 / r.all_events as f64;
                    figures.push(SCENARIO, comparator.label(), CPU_PER_EVENT, "µs", per_event);
                }
            }
            if let (Some((tracer, data)), Some(dir)) = (perf, &ctx.perf_dir) {
                tracer.finish(Duration::from_secs(60)).await?;
                let side = serde_json::json!({
                    "comparator": comparator.label(),
                    "data": data.file_name().map(|n| n.to_string_lossy().to_string()),
                    "events": r.all_events,
                    "seconds": secs,
                    "streams_per_second": RATE,
                    "events_per_stream": EVENTS,
                    "pace_ms": PACE.as_millis() as u64,
                });
                let path = data.with_extension("json");
                std::fs::write(&path, side.to_string())?;
                println!("  perf data: {} ({})", data.display(), dir.display());
            }
            sut.stop().await;
            println!(
                "  run {run} {:<28} p50 {:>7.0} µs  p99 {:>7.0} µs  TTFE p50 {:>7.0} µs",
                comparator.label(),
                r.lat[0],
                r.lat[1],
                r.ttfe[0]
            );
            results.insert(comparator, r);
        }
        added(&results, figures);
    }
    mock.stop().await;
    Ok(())
}

/// Attaches `perf record -g` to `pid`; the tracer and the file it writes.
async fn perf_record(
    dir: &std::path::Path,
    c: Comparator,
    pid: u32,
) -> anyhow::Result<(crate::procs::Tracer, std::path::PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let data = dir.join(format!("{}.data", crate::procs::slug(c.label())));
    let args: Vec<String> = ["record", "-g", "-q", "-o"]
        .into_iter()
        .map(String::from)
        .chain([data.display().to_string(), "-p".into(), pid.to_string()])
        .collect();
    let tracer = crate::procs::Tracer::attach("perf", &args, Duration::from_millis(500)).await?;
    Ok((tracer, data))
}

/// One timed schedule against one comparator; records its own figures and returns them.
async fn one(target: Target, measured: Duration, c: Comparator, figures: &mut Figures) -> Run {
    let interval = Duration::from_nanos(1_000_000_000 / RATE);
    let warm = (WARMUP.as_nanos() / interval.as_nanos()) as usize;
    let total = warm + (measured.as_nanos() / interval.as_nanos()) as usize;
    let t0 = Instant::now() + Duration::from_millis(20);
    let mut set = JoinSet::new();
    for i in 0..total {
        // A fixed schedule, one start per interval, each start shifted within the 10 ms pace
        // so that the open streams do not all tick on the same millisecond.
        let shift = Duration::from_micros((i as u64 * 7_919) % PACE.as_micros() as u64);
        let at = t0 + interval * i as u32 + shift;
        set.spawn(async move {
            tokio::time::sleep_until(at).await;
            let outcome = tokio::time::timeout(
                Duration::from_secs(60),
                client::stream(target, EVENTS, None),
            )
            .await
            .unwrap_or_else(|_| client::Outcome {
                error: Some("timed out".into()),
                ..Default::default()
            });
            (i, outcome)
        });
    }
    let (mut last, mut ttfe, mut ttfe_hop, mut ttfb) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Every stream's opening, warm-up included; the measured events as (sent, latency).
    let (mut spans, mut sent) = (Vec::new(), Vec::new());
    let (mut events, mut errors, mut all_events) = (0u64, 0u64, 0u64);
    let mut first_error = None;
    while let Some(joined) = set.join_next().await {
        let Ok((i, outcome)) = joined else {
            errors += 1;
            continue;
        };
        if let Some(e) = &outcome.error {
            errors += 1;
            first_error.get_or_insert_with(|| e.clone());
            continue;
        }
        all_events += outcome.markers;
        spans.extend(outcome.opening);
        if i < warm {
            continue;
        }
        let pairs = outcome.sent_at_ns.iter().zip(&outcome.latencies_ns);
        sent.extend(pairs.map(|(&at, &ns)| (at, ns)));
        events += outcome.markers;
        last.extend(outcome.latencies_ns.last());
        ttfe.extend(outcome.ttfe_ns);
        ttfe_hop.extend(outcome.ttfe_hop_ns);
        ttfb.push(outcome.ttfb_ns);
    }
    if let Some(e) = first_error {
        println!("  {}: {errors} failed streams, first: {e}", c.label());
    }
    // Every measured event's latency, from the (sent, latency) pairs.
    let mut lat: Vec<u64> = sent.iter().map(|&(_, ns)| ns).collect();
    for v in [&mut lat, &mut last, &mut ttfe, &mut ttfe_hop, &mut ttfb] {
        v.sort_unstable();
    }
    let us = |sorted: &[u64], q| quantile(sorted, q) / 1000.0;
    let mut r = Run {
        all_events,
        ..Run::default()
    };
    for (k, (_, q)) in PCT.iter().enumerate() {
        r.lat[k] = us(&lat, *q);
        r.last[k] = us(&last, *q);
        r.ttfe[k] = us(&ttfe, *q);
        r.ttfe_hop[k] = us(&ttfe_hop, *q);
    }
    r.ttfb = [us(&ttfb, 0.5), us(&ttfb, 0.99)];
    let openings = Openings::new(spans);
    let tail_from = quantile(&lat, 0.99);
    let (mut outside, mut during, mut tail, mut tail_during) = (Vec::new(), 0u64, 0u64, 0u64);
    for &(at, ns) in &sent {
        let opening = openings.contain(at);
        if opening {
            during += 1;
        } else {
            outside.push(ns);
        }
        if ns as f64 >= tail_from {
            tail += 1;
            tail_during += u64::from(opening);
        }
    }
    outside.sort_unstable();
    r.outside = [us(&outside, 0.5), us(&outside, 0.99)];
    let share = |part: u64, whole: u64| 100.0 * part as f64 / whole.max(1) as f64;
    let label = c.label();
    if !sent.is_empty() {
        let during = share(during, sent.len() as u64);
        figures.push(SCENARIO, label, DURING_OPENINGS, "%", during);
        let tail_during = share(tail_during, tail);
        figures.push(SCENARIO, label, TAIL_DURING_OPENINGS, "%", tail_during);
        for (k, p) in ["p50", "p99"].into_iter().enumerate() {
            let name = format!("{OUTSIDE_OPENINGS} {p}");
            figures.push(SCENARIO, label, &name, "µs", r.outside[k]);
        }
    }
    figures.push(
        SCENARIO,
        label,
        "achieved events/s",
        "events/s",
        events as f64 / measured.as_secs_f64(),
    );
    figures.push(SCENARIO, label, "failed streams", "streams", errors as f64);
    for (k, (p, _)) in PCT.iter().enumerate() {
        figures.push(SCENARIO, label, &format!("latency {p}"), "µs", r.lat[k]);
    }
    for (k, (p, _)) in PCT.iter().enumerate() {
        figures.push(
            SCENARIO,
            label,
            &format!("{LAST_EVENT} {p}"),
            "µs",
            r.last[k],
        );
    }
    for (k, (p, _)) in PCT.iter().enumerate() {
        figures.push(SCENARIO, label, &format!("TTFE {p}"), "µs", r.ttfe[k]);
    }
    for (k, (p, _)) in PCT.iter().enumerate() {
        figures.push(
            SCENARIO,
            label,
            &format!("{TTFE_HOP} {p}"),
            "µs",
            r.ttfe_hop[k],
        );
    }
    figures.push(SCENARIO, label, "TTFB p50", "µs", r.ttfb[0]);
    figures.push(SCENARIO, label, "TTFB p99", "µs", r.ttfb[1]);
    r
}

/// Comparator − direct, and gateway − nginx (and the second nginx − nginx, the A/A control), of
/// the same run.
fn added(results: &HashMap<Comparator, Run>, figures: &mut Figures) {
    let base = [
        (Comparator::Direct, "added vs direct"),
        (Comparator::Nginx, "added vs nginx"),
    ];
    for c in &Comparator::ALL {
        let Some(r) = results.get(c) else {
            continue;
        };
        for (b, what) in base {
            if *c == b || (b == Comparator::Nginx && !c.against_nginx()) {
                continue;
            }
            let Some(base) = results.get(&b) else {
                continue;
            };
            // AAP message mode's one event per stream is complete with the upstream's last
            // content event: it is set against the latency of that same event through the base.
            let base_lat = if *c == Comparator::AapMessage {
                &base.last
            } else {
                &base.lat
            };
            for (k, (p, _)) in PCT.iter().enumerate() {
                let name = format!("{what}: latency {p}");
                figures.push(SCENARIO, c.label(), &name, "µs", r.lat[k] - base_lat[k]);
                let name = format!("{what}: {LAST_EVENT} {p}");
                figures.push(SCENARIO, c.label(), &name, "µs", r.last[k] - base.last[k]);
            }
            for (k, (p, _)) in PCT.iter().enumerate() {
                let name = format!("{what}: TTFE {p}");
                figures.push(SCENARIO, c.label(), &name, "µs", r.ttfe[k] - base.ttfe[k]);
                let name = format!("{what}: {TTFE_HOP} {p}");
                let added = r.ttfe_hop[k] - base.ttfe_hop[k];
                figures.push(SCENARIO, c.label(), &name, "µs", added);
            }
            if *c != Comparator::AapMessage {
                for (k, p) in ["p50", "p99"].into_iter().enumerate() {
                    let name = format!("{what}: {OUTSIDE_OPENINGS} {p}");
                    figures.push(
                        SCENARIO,
                        c.label(),
                        &name,
                        "µs",
                        r.outside[k] - base.outside[k],
                    );
                }
            }
            let name = format!("{what}: TTFB p50");
            figures.push(SCENARIO, c.label(), &name, "µs", r.ttfb[0] - base.ttfb[0]);
        }
    }
}
