//! Scenario g, soak: [`STREAMS`] streams open at once through the gateway for [`DURATION`]
//! (AG-UI → AG-UI and AG-UI → HAI), to show that nothing grows with time: every stream is a run
//! of [`EVENTS`] content events one second apart, and when one ends its client opens the next at
//! once, so the gateway keeps its count of streams while it serves about `STREAMS × DURATION /
//! EVENTS s` of them. Every stream is checked like any other of the benchmark (markers in
//! order, the terminal event); the gateway's RSS is sampled every second, and its slope over the
//! second half (least squares) is the figure: a leak of a few hundred bytes per stream shows as
//! a slope of KiB per second. The samples go to `soak-<direction>.csv` beside the gateway's
//! log (under the target directory).
//!
//! The clients speak HTTP/2 with prior knowledge (h2c), [`PER_CONNECTION`] streams per
//! connection: with one HTTP/1.1 connection per stream the gateway would need two descriptors
//! per stream, and 10,000 streams then pass the 20,000 descriptors a process may have on this
//! machine (a hard limit the benchmark cannot raise). Upstream, each stream still has its own
//! HTTP/1.1 connection to the mock. The gateway ends a connection after
//! `max_requests_per_connection` requests ([`MAX_REQUESTS`], the default) with GOAWAY; as any
//! HTTP/2 client does, the soak's then opens a new one ([`Connection`]), and sends a request
//! again there if the old connection refused it unanswered (a request after the GOAWAY). Those
//! second tries are counted and reported; a request that fails again counts as a failed stream.
//!
//! Clients in steady state hold connections of every age. The soak's would all be of one age,
//! opened together in the first seconds and carrying requests at the same rate, so all would be
//! replaced at once, every `MAX_REQUESTS × stream life / PER_CONNECTION` (305 s): a wave of new
//! connections while the old ones finish their streams, which steady traffic never makes. So
//! before the soak starts, connection *k* of *n* carries `k × MAX_REQUESTS / n` quick requests
//! (`GET /`, which the gateway refuses with 405): the connections are then replaced one at a
//! time, evenly over the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client;
use crate::figures::Figures;
use crate::mock::Script;
use crate::procs::{self, Proc};
use crate::rig::{self, Comparator, Ctx};

pub const SCENARIO: &str = "g. soak";
/// Streams open at once, and for how long (quick: a smoke check).
const STREAMS: usize = 10_000;
const DURATION: Duration = Duration::from_secs(600);
const QUICK_STREAMS: usize = 1_000;
const QUICK_DURATION: Duration = Duration::from_secs(60);
/// Content events per stream, [`PACE`] apart.
const EVENTS: u64 = 30;
const PACE: Duration = Duration::from_secs(1);
/// Streams per HTTP/2 connection (hyper's server allows 200 at once by default).
const PER_CONNECTION: usize = 100;
/// `max_requests_per_connection` for the soak: the gateway's default (quick: lower, so that the
/// minute-long soak goes through GOAWAY and reconnection too).
const MAX_REQUESTS: u64 = 1_000;
const QUICK_MAX_REQUESTS: u64 = 100;

/// The directions soaked.
pub const KINDS: [Comparator; 2] = [Comparator::Passthrough, Comparator::Hai];

/// Figure names.
pub const COMPLETED: &str = "streams completed";
pub const FAILED: &str = "streams failed";
pub const SLOPE: &str = "RSS slope, second half";
pub const RSS_HALF: &str = "RSS at half time";
pub const RSS_END: &str = "RSS at the end";
pub const OPEN: &str = "streams open";
pub const SECONDS: &str = "duration";
pub const RECONNECTS: &str = "connections opened again";
pub const RETRIED: &str = "requests sent again";

fn script() -> Script {
    Script::paced(0, EVENTS, PACE)
}

/// What one soak measured.
struct Soak {
    completed: u64,
    failed: u64,
    reconnects: u64,
    retried: u64,
    errors: Vec<String>,
    /// `(seconds since the start, RSS KiB)`, every second until the end of the duration.
    samples: Vec<(f64, f64)>,
}

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let (streams, duration) = if ctx.quick {
        (QUICK_STREAMS, QUICK_DURATION)
    } else {
        (STREAMS, DURATION)
    };
    let mock = procs::mock(&ctx.layout, &script()).await?;
    for kind in KINDS {
        if !ctx.comparators.contains(&kind) {
            continue;
        }
        // The default `max_streams` is 10,000: a stream's permit is given back a moment after
        // its client has seen the end, and the client's next request may come first.
        let max_requests = if ctx.quick {
            QUICK_MAX_REQUESTS
        } else {
            MAX_REQUESTS
        };
        let max_requests_flag = max_requests.to_string();
        let args = [
            "--max-streams",
            "12000",
            "--max-requests-per-connection",
            &max_requests_flag,
        ];
        let sut = rig::start_with(ctx, kind, mock.addr, &args).await?;
        let result = soak(
            sut.proc.as_ref(),
            sut.target,
            streams,
            duration,
            max_requests,
        )
        .await;
        sut.stop().await;
        let soak = match result {
            Ok(soak) => soak,
            Err(e) => {
                ctx.note(format!("soak {}: {e:#}", kind.label()));
                continue;
            }
        };
        let half = duration.as_secs_f64() / 2.0;
        let second_half: Vec<(f64, f64)> = soak
            .samples
            .iter()
            .copied()
            .filter(|(t, _)| *t >= half)
            .collect();
        let slope = slope(&second_half);
        let rss_at = |t: f64| {
            soak.samples
                .iter()
                .find(|(at, _)| *at >= t)
                .map_or(0.0, |(_, rss)| *rss)
        };
        let rss_end = soak.samples.last().map_or(0.0, |(_, rss)| *rss);
        let label = kind.label();
        println!(
            "  {label:<28} {streams} streams for {} s: {} completed, {} failed ({} connections \
             opened again, {} requests sent again); RSS {:.0} KiB at half time, {:.0} KiB at the \
             end, slope {slope:+.3} KiB/s",
            duration.as_secs(),
            soak.completed,
            soak.failed,
            soak.reconnects,
            soak.retried,
            rss_at(half),
            rss_end,
        );
        for error in &soak.errors {
            ctx.note(format!("soak {label}: a failed stream: {error}"));
        }
        // The whole series, for a look at what the slope summarises.
        let series = ctx.dir.join(format!("soak-{}.csv", procs::slug(label)));
        let csv: String = std::iter::once("seconds,rss_kib\n".to_string())
            .chain(
                soak.samples
                    .iter()
                    .map(|(t, rss)| format!("{t:.1},{rss:.0}\n")),
            )
            .collect();
        match std::fs::write(&series, csv) {
            Ok(()) => ctx.note(format!(
                "soak {label}: RSS every second in {}",
                series.display()
            )),
            Err(e) => ctx.note(format!(
                "soak {label}: could not write {}: {e}",
                series.display()
            )),
        }
        figures.push(SCENARIO, label, OPEN, "streams", streams as f64);
        figures.push(SCENARIO, label, SECONDS, "s", duration.as_secs_f64());
        figures.push(SCENARIO, label, COMPLETED, "streams", soak.completed as f64);
        figures.push(SCENARIO, label, FAILED, "streams", soak.failed as f64);
        figures.push(
            SCENARIO,
            label,
            RECONNECTS,
            "connections",
            soak.reconnects as f64,
        );
        figures.push(SCENARIO, label, RETRIED, "requests", soak.retried as f64);
        figures.push(SCENARIO, label, RSS_HALF, "KiB", rss_at(half));
        figures.push(SCENARIO, label, RSS_END, "KiB", rss_end);
        figures.push(SCENARIO, label, SLOPE, "KiB/s", slope);
    }
    mock.stop().await;
    Ok(())
}

/// One of the soak's HTTP/2 connections to the gateway, opened again once the gateway has ended
/// it (GOAWAY), as a client does. Shared by the streams that use it.
struct Connection {
    addr: std::net::SocketAddr,
    /// The current connection, and how many were opened before it.
    current: tokio::sync::Mutex<(u64, http2::SendRequest<Full<Bytes>>)>,
    /// Connections opened again, over all [`Connection`]s.
    reconnects: Arc<AtomicU64>,
}

impl Connection {
    async fn open(addr: std::net::SocketAddr, reconnects: Arc<AtomicU64>) -> anyhow::Result<Self> {
        Ok(Connection {
            addr,
            current: tokio::sync::Mutex::new((0, client::connect_h2(addr).await?)),
            reconnects,
        })
    }

    /// The connection to send on, and its generation. It is replaced first when it is closed,
    /// or when it is generation `refused` (a request on it went unanswered) and no other stream
    /// has replaced it yet.
    async fn sender(
        &self,
        refused: Option<u64>,
    ) -> anyhow::Result<(u64, http2::SendRequest<Full<Bytes>>)> {
        let mut current = self.current.lock().await;
        if current.1.is_closed() || refused == Some(current.0) {
            *current = (current.0 + 1, client::connect_h2(self.addr).await?);
            self.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        Ok((current.0, current.1.clone()))
    }

    /// Sends `requests` requests the gateway answers at once (`GET /`, refused with 405), one
    /// after another: the connection is then that many requests old.
    async fn age(&self, requests: u64) -> anyhow::Result<()> {
        let mut sender = self.current.lock().await.1.clone();
        for _ in 0..requests {
            let request = hyper::Request::get(format!("http://{}/", self.addr))
                .body(Full::new(Bytes::new()))?;
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            response.into_body().collect().await?;
            anyhow::ensure!(status == 405, "GET / answered {status}, not 405");
        }
        Ok(())
    }
}

/// One stream on `connection`: sent once more on a new connection when the first went
/// unanswered (no status: the gateway's GOAWAY refused it). Counts that in `retried`.
async fn stream(
    connection: &Connection,
    target: client::Target,
    retried: &AtomicU64,
) -> client::Outcome {
    let failed = |error: anyhow::Error| client::Outcome {
        error: Some(format!("{error:#}")),
        ..client::Outcome::default()
    };
    let (generation, sender) = match connection.sender(None).await {
        Ok(current) => current,
        Err(error) => return failed(error),
    };
    let outcome = client::stream_h2(sender, target, EVENTS).await;
    if outcome.error.is_none() || outcome.status != 0 {
        return outcome;
    }
    retried.fetch_add(1, Ordering::Relaxed);
    match connection.sender(Some(generation)).await {
        Ok((_, sender)) => client::stream_h2(sender, target, EVENTS).await,
        Err(error) => failed(error),
    }
}

/// Keeps `streams` streams open through `gateway` for `duration`.
async fn soak(
    gateway: Option<&Proc>,
    target: client::Target,
    streams: usize,
    duration: Duration,
    max_requests: u64,
) -> anyhow::Result<Soak> {
    let gateway = gateway.context("no gateway")?;
    let reconnects = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let count = streams.div_ceil(PER_CONNECTION);
    let mut connections = Vec::new();
    for k in 0..count {
        let connection = Connection::open(target.addr, reconnects.clone()).await?;
        // Ages spread evenly below `max_requests` (see the module docs).
        let age = k as u64 * max_requests / count as u64;
        connection
            .age(age)
            .await
            .with_context(|| format!("ageing a connection by {age} requests"))?;
        connections.push(Arc::new(connection));
    }
    let completed = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let end = start + duration;
    let mut set = JoinSet::new();
    let mut samples = Vec::new();
    let mut next_sample = start;
    // The first streams start evenly over one stream's life, each at its time on one schedule:
    // the streams' ends then come as evenly, cycle after cycle. A sleep per stream (2 ms, as
    // here before) drifted: 10,000 of them took a little longer than a stream's life, so the
    // last to start did so together with the first ones' second streams, and every 30 s about
    // 540 streams ended and began in one second instead of 330 — a peak of streams at once,
    // and of the memory they hold, that steady traffic does not make.
    let life = PACE * EVENTS as u32;
    for i in 0..streams {
        let connection = connections[i % connections.len()].clone();
        let (completed, failed, errors) = (completed.clone(), failed.clone(), errors.clone());
        let retried = retried.clone();
        set.spawn(async move {
            while Instant::now() < end {
                let outcome = stream(&connection, target, &retried).await;
                match outcome.error {
                    None => completed.fetch_add(1, Ordering::Relaxed),
                    Some(error) => {
                        let mut kept = errors.lock().unwrap_or_else(|e| e.into_inner());
                        if kept.len() < 5 {
                            kept.push(error);
                        }
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        });
        tokio::time::sleep_until(start + life * (i as u32 + 1) / streams as u32).await;
        if Instant::now() >= next_sample {
            samples.push((start.elapsed().as_secs_f64(), gateway.rss_kib()? as f64));
            next_sample += Duration::from_secs(1);
        }
    }
    while Instant::now() < end {
        tokio::time::sleep_until(next_sample.min(end)).await;
        samples.push((start.elapsed().as_secs_f64(), gateway.rss_kib()? as f64));
        next_sample += Duration::from_secs(1);
    }
    // The streams open at the end run to their own end (at most one stream's life).
    let patience = PACE * (EVENTS as u32 + 30);
    tokio::time::timeout(patience, async { while set.join_next().await.is_some() {} })
        .await
        .context("streams still open long after the soak's end")?;
    let errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Soak {
        completed: completed.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        reconnects: reconnects.load(Ordering::Relaxed),
        retried: retried.load(Ordering::Relaxed),
        errors,
        samples,
    })
}

/// The least-squares slope of `y` over `x` (0 for fewer than two points).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(num, den), (x, y)| {
        (num + (x - mx) * (y - my), den + (x - mx) * (x - mx))
    });
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}
