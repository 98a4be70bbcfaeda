//! The comparators (direct, nginx, a second nginx, the gateway in each direction), how each is
//! started in front of a mock, the shared settings of a benchmark, and qualification: one
//! stream per comparator that must prove status, translation, incremental delivery and a
//! terminal event.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::client::{self, Face, Target};
use crate::procs::{self, Layout, Proc};

/// One way of reaching the mock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparator {
    Direct,
    Nginx,
    /// A second nginx, configured as the first and measured like every other comparator: the
    /// A/A control. What it and nginx differ by in the same run is the rig's resolution, the
    /// smallest gap between two proxies this machine can show (`targets`).
    NginxAgain,
    Passthrough,
    Hai,
    AapDelta,
    AapMessage,
}

impl Comparator {
    pub const ALL: [Comparator; 7] = [
        Comparator::Direct,
        Comparator::Nginx,
        Comparator::NginxAgain,
        Comparator::Passthrough,
        Comparator::Hai,
        Comparator::AapDelta,
        Comparator::AapMessage,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Comparator::Direct => "direct (AG-UI)",
            Comparator::Nginx => "nginx (AG-UI)",
            Comparator::NginxAgain => "nginx again (AG-UI)",
            Comparator::Passthrough => "gateway ag-ui→ag-ui",
            Comparator::Hai => "gateway ag-ui→hai",
            Comparator::AapDelta => "gateway ag-ui→aap delta",
            Comparator::AapMessage => "gateway ag-ui→aap message",
        }
    }

    /// The comparator a `--comparators` key names.
    pub fn from_key(key: &str) -> anyhow::Result<Comparator> {
        Ok(match key {
            "direct" => Comparator::Direct,
            "nginx" => Comparator::Nginx,
            "nginx-again" => Comparator::NginxAgain,
            "ag-ui" => Comparator::Passthrough,
            "hai" => Comparator::Hai,
            "aap-delta" => Comparator::AapDelta,
            "aap-message" => Comparator::AapMessage,
            _ => bail!(
                "unknown comparator {key:?} (direct, nginx, nginx-again, ag-ui, hai, aap-delta, \
                 aap-message)"
            ),
        })
    }

    pub fn face(self) -> Face {
        match self {
            Comparator::Direct
            | Comparator::Nginx
            | Comparator::NginxAgain
            | Comparator::Passthrough => Face::AgUi,
            Comparator::Hai => Face::Hai,
            Comparator::AapDelta => Face::AapDelta,
            Comparator::AapMessage => Face::AapMessage,
        }
    }

    pub fn is_gateway(self) -> bool {
        !matches!(
            self,
            Comparator::Direct | Comparator::Nginx | Comparator::NginxAgain
        )
    }

    /// Whether this comparator's figures are also set against nginx's of the same run: the
    /// gateway's, and the second nginx's (the A/A control).
    pub fn against_nginx(self) -> bool {
        self.is_gateway() || self == Comparator::NginxAgain
    }

    /// The body text proving the stream was translated into this face.
    fn translated_mark(self) -> Option<&'static str> {
        match self {
            Comparator::Hai => Some("BUSINESS_DATA_CONTENT"),
            Comparator::AapDelta => Some("event: text_delta"),
            Comparator::AapMessage => Some("event: text\n"),
            _ => None,
        }
    }
}

/// Settings shared by every scenario.
pub struct Ctx {
    pub layout: Layout,
    /// Where logs and nginx's prefix go (under the target directory).
    pub dir: PathBuf,
    pub quick: bool,
    pub runs: usize,
    /// The comparators that qualified, in their base order.
    pub comparators: Vec<Comparator>,
    /// Loud notes for the report (failed qualifications, skipped parts).
    pub notes: Vec<String>,
    pub gateway_starts: usize,
    /// Where scenario a's `perf record` data go, when profiling.
    pub perf_dir: Option<PathBuf>,
}

impl Ctx {
    /// The comparators of run `run`, rotated by one per run (counterbalanced order).
    pub fn order(&self, run: usize) -> Vec<Comparator> {
        let mut order = self.comparators.clone();
        if !order.is_empty() {
            let len = order.len();
            order.rotate_left(run % len);
        }
        order
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("gateway.log")
    }

    pub fn note(&mut self, note: String) {
        println!("NOTE: {note}");
        self.notes.push(note);
    }
}

/// A running comparator: the address the client uses, and the process in the middle if any.
pub struct Sut {
    pub target: Target,
    pub proc: Option<Proc>,
}

impl Sut {
    pub async fn stop(self) {
        if let Some(p) = self.proc {
            p.stop().await;
        }
    }
}

/// Starts `comparator` in front of the mock at `mock`.
pub async fn start(ctx: &mut Ctx, comparator: Comparator, mock: SocketAddr) -> anyhow::Result<Sut> {
    start_with(ctx, comparator, mock, &[]).await
}

/// Like [`start`], with `extra` flags for a gateway.
pub async fn start_with(
    ctx: &mut Ctx,
    comparator: Comparator,
    mock: SocketAddr,
    extra: &[&str],
) -> anyhow::Result<Sut> {
    let face = comparator.face();
    let proc = match comparator {
        Comparator::Direct => None,
        Comparator::Nginx => Some(procs::nginx(&ctx.layout, mock, &ctx.dir).await?),
        // A prefix of its own: both may run at once (scenario b's turns).
        Comparator::NginxAgain => {
            Some(procs::nginx(&ctx.layout, mock, &ctx.dir.join("again")).await?)
        }
        _ => {
            ctx.gateway_starts += 1;
            Some(procs::gateway(&ctx.layout, face, mock, &ctx.log_path(), extra).await?)
        }
    };
    let addr = proc.as_ref().map(|p| p.addr).unwrap_or(mock);
    Ok(Sut {
        target: Target { addr, face },
        proc,
    })
}

/// Qualifies one comparator against a paced mock of `events` events `pace` apart.
pub async fn qualify(
    ctx: &mut Ctx,
    comparator: Comparator,
    mock: SocketAddr,
    events: u64,
    pace: Duration,
) -> anyhow::Result<()> {
    let sut = start(ctx, comparator, mock).await?;
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        client::stream(sut.target, events, None),
    )
    .await
    .context("qualification stream timed out");
    sut.stop().await;
    let outcome = outcome?;
    let head = String::from_utf8_lossy(&outcome.head).to_string();
    if outcome.status != 200 {
        bail!("status {} (body: {head:.300})", outcome.status);
    }
    if let Some(e) = &outcome.error {
        bail!("{e} (body: {head:.300})");
    }
    if let Some(mark) = comparator.translated_mark() {
        if !head.contains(mark) {
            bail!("not translated: no {mark:?} in {head:.300}");
        }
    }
    // Incremental: the first event (for AAP message mode, where the text comes whole at the
    // end, any event; else the first content event) arrives well before the mock stamped its
    // last content event.
    let first = if comparator == Comparator::AapMessage {
        outcome.first_event_at
    } else {
        outcome.first_marker_at
    };
    let half = pace.as_nanos() as u64 * events / 2;
    match first {
        Some(at) if at + half <= outcome.last_sent => Ok(()),
        Some(at) => bail!(
            "not incremental: first event {} µs before the last was sent",
            (outcome.last_sent as i64 - at as i64) / 1000
        ),
        None => bail!("no event"),
    }
}
