//! Scenario d, slow client: the gateway (passthrough) in front of a mock that floods ~50 MB as
//! fast as it is read, and one client on a raw socket with a small receive buffer that reads
//! 1 KiB per second. The gateway's RSS is sampled every second; the mock reports how much it
//! managed to produce, which backpressure must keep far below the flood.

use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::client;
use crate::figures::{slope, Figures};
use crate::mock::{Chunking, Mode, Script};
use crate::procs;
use crate::rig::{self, Comparator, Ctx};

pub const SCENARIO: &str = "d. slow client";
const FLOOD_BYTES: u64 = 50_000_000;

/// What one slow-client run saw.
pub struct Slow {
    /// Before the request.
    pub idle_rss: u64,
    /// (second, KiB) from the request on.
    pub rss: Vec<(f64, f64)>,
    pub produced: Vec<u64>,
    pub received: u64,
}

pub async fn scenario(ctx: &mut Ctx, figures: &mut Figures) -> anyhow::Result<()> {
    let script = Script {
        delay_ms: 0,
        events: 0,
        pace_us: 0,
        delta_bytes: crate::marker::DELTA_BYTES,
        mode: Mode::Flood,
        flood_bytes: FLOOD_BYTES,
        chunking: Chunking::Event,
        extra_field: false,
    };
    let secs = if ctx.quick { 10 } else { 30 };
    let mock = procs::mock(&ctx.layout, &script).await?;
    let sut = rig::start(ctx, Comparator::Passthrough, mock.addr).await?;
    let result = run(&sut, mock.addr, secs).await;
    sut.stop().await;
    mock.stop().await;
    let slow = result?;
    let label = Comparator::Passthrough.label();
    let kib: Vec<f64> = slow.rss.iter().map(|p| p.1).collect();
    let half = &slow.rss[slow.rss.len() / 2..];
    let max = kib.iter().copied().fold(0.0, f64::max);
    let start = kib.first().copied().unwrap_or(0.0);
    let end = kib.last().copied().unwrap_or(0.0);
    let produced_mid = slow
        .produced
        .get(slow.produced.len() / 2)
        .copied()
        .unwrap_or(0);
    let produced = slow.produced.last().copied().unwrap_or(0);
    figures.push(
        SCENARIO,
        label,
        "RSS before the stream",
        "KiB",
        slow.idle_rss as f64,
    );
    figures.push(SCENARIO, label, "RSS start", "KiB", start);
    figures.push(SCENARIO, label, "RSS max", "KiB", max);
    figures.push(SCENARIO, label, "RSS end", "KiB", end);
    figures.push(
        SCENARIO,
        label,
        "RSS slope, whole run",
        "KiB/s",
        slope(&slow.rss),
    );
    figures.push(
        SCENARIO,
        label,
        "RSS slope, second half",
        "KiB/s",
        slope(half),
    );
    figures.push(
        SCENARIO,
        label,
        "mock produced at half time",
        "KiB",
        produced_mid as f64 / 1024.0,
    );
    figures.push(
        SCENARIO,
        label,
        "mock produced at end",
        "KiB",
        produced as f64 / 1024.0,
    );
    figures.push(
        SCENARIO,
        label,
        "client received",
        "KiB",
        slow.received as f64 / 1024.0,
    );
    println!(
        "  slow client: RSS {start:.0} → max {max:.0} → {end:.0} KiB; mock produced {} KiB of {} KiB",
        produced / 1024,
        FLOOD_BYTES / 1024
    );
    Ok(())
}

async fn run(sut: &rig::Sut, mock: std::net::SocketAddr, secs: u64) -> anyhow::Result<Slow> {
    let gateway = sut.proc.as_ref().context("no gateway")?;
    // Read before the request: the flood fills every buffer within milliseconds of it.
    let before = produced(mock).await?;
    let idle_rss = gateway.rss_kib()?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    // Small receive buffer so that the client's socket cannot hide the backlog (the kernel
    // may round it up).
    let _ = socket.set_recv_buffer_size(4096);
    let mut tcp = socket.connect(sut.target.addr).await.context("connect")?;
    let body = r#"{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}"#;
    let request = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        sut.target.addr,
        body.len()
    );
    tcp.write_all(request.as_bytes()).await?;
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let mut slow = Slow {
        idle_rss,
        rss: Vec::new(),
        produced: Vec::new(),
        received: 0,
    };
    for second in 0..=secs {
        tokio::time::sleep_until(started + Duration::from_secs(second)).await;
        if second > 0 {
            let n = tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf))
                .await
                .unwrap_or(Ok(0))?;
            slow.received += n as u64;
        }
        slow.rss.push((second as f64, gateway.rss_kib()? as f64));
        slow.produced
            .push(produced(mock).await.unwrap_or(0).saturating_sub(before));
    }
    Ok(slow)
}

/// Bytes the mock has produced since it started.
async fn produced(mock: std::net::SocketAddr) -> anyhow::Result<u64> {
    let stats = client::get_json(mock, "/stats").await?;
    stats["bytes"].as_u64().context("no bytes in /stats")
}
