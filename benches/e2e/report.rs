//! The report: the machine, the commands, the CPU layout, the targets (met / missed, see
//! `targets.rs`), summary tables per scenario (throughput with its per-run ratios to nginx and
//! direct, latency added over direct and over nginx, syscalls per event), every figure as the
//! median over runs with min–max, the codec micro-benchmarks read from criterion's files, and
//! the raw per-run values; printed and written to `benches/RESULTS.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::figures::{median, Figure, Figures};
use crate::rig::Comparator;
use crate::targets;
use crate::{latency, sdk, soak, syscalls, throughput};

/// Where the generated report ends in `benches/RESULTS.md`: what follows it is kept.
pub const KEPT_MARKER: &str =
    "<!-- benches/run rewrites everything above this line and keeps everything below it -->";

/// Everything the report needs besides the figures.
pub struct Context<'a> {
    pub command: String,
    pub args: String,
    pub layout: String,
    pub nginx: Option<String>,
    pub notes: &'a [String],
    pub target_dir: &'a Path,
    pub runs: usize,
    pub quick: bool,
}

/// One codec benchmark: its rounds (criterion's baselines `round-N`, or its one `new` result
/// when it was run without rounds), each as events/s per sample.
pub struct Codec {
    pub shape: String,
    pub direction: String,
    pub rounds: Vec<Vec<f64>>,
    /// Input bytes per content event, for MB/s.
    pub bytes_per_event: f64,
}

impl Codec {
    /// Each round's median events/s, in round order.
    pub fn round_medians(&self) -> Vec<f64> {
        self.rounds.iter().map(|r| median(r)).collect()
    }

    /// The fastest round's median events/s: the figure the target judges. The work is
    /// deterministic, so a slower round measured the host's other load, not the code.
    pub fn best(&self) -> f64 {
        self.round_medians().into_iter().fold(0.0, f64::max)
    }
}

fn shell(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn machine(ctx: &Context) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let logical = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let smt = std::fs::read_to_string("/sys/devices/system/cpu/smt/active")
        .map(|v| if v.trim() == "1" { "on" } else { "off" }.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let manifest = env!("CARGO_MANIFEST_DIR");
    let commit = shell("git", &["-C", manifest, "rev-parse", "HEAD"]);
    let dirty = shell(
        "git",
        &[
            "-C",
            manifest,
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    );
    let dirty = if dirty.is_empty() || dirty == "unknown" {
        ""
    } else {
        " (with uncommitted changes)"
    };
    format!(
        "- CPU: {} — {logical} logical CPUs visible, {} cores / {} siblings per package \
         (/proc/cpuinfo), SMT {smt}\n- kernel: {}\n- rustc: {}\n- nginx: {}\n\
         - git commit: {commit}{dirty}\n- date: {}\n",
        field("model name"),
        field("cpu cores"),
        field("siblings"),
        shell("uname", &["-r"]),
        shell("rustc", &["--version"]),
        ctx.nginx.as_deref().unwrap_or("absent"),
        shell("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]),
    )
}

fn codec(target_dir: &Path) -> Vec<Codec> {
    let root = target_dir.join("criterion");
    let Ok(text) = std::fs::read_to_string(root.join("codec-inputs.json")) else {
        return Vec::new();
    };
    let inputs: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let mut rows = Vec::new();
    for (key, input) in inputs.as_object().into_iter().flatten() {
        let Some((shape, direction)) = key.split_once('/') else {
            continue;
        };
        let dir = root.join(format!("codec_{shape}")).join(direction);
        let events = input["events"].as_f64().unwrap_or(0.0);
        let bytes = input["input_bytes"].as_f64().unwrap_or(0.0);
        let mut rounds: Vec<Vec<f64>> = (1..)
            .map(|n| dir.join(format!("round-{n}")))
            .take_while(|d| d.is_dir())
            .filter_map(|d| sample_rates(&d, events))
            .collect();
        if rounds.is_empty() {
            rounds.extend(sample_rates(&dir.join("new"), events));
        }
        if rounds.is_empty() {
            continue;
        }
        rows.push(Codec {
            shape: shape.to_string(),
            direction: direction.to_string(),
            rounds,
            bytes_per_event: if events > 0.0 { bytes / events } else { 0.0 },
        });
    }
    rows
}

/// Events/s of each sample in one criterion result directory (`sample.json`).
fn sample_rates(dir: &Path, events: f64) -> Option<Vec<f64>> {
    let sample = std::fs::read_to_string(dir.join("sample.json")).ok()?;
    let sample: serde_json::Value = serde_json::from_str(&sample).ok()?;
    let floats = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default()
    };
    let (iters, times) = (floats(&sample["iters"]), floats(&sample["times"]));
    let rates: Vec<f64> = iters
        .iter()
        .zip(&times)
        .filter(|(_, t)| **t > 0.0)
        .map(|(i, t)| events * i / t * 1e9)
        .collect();
    (!rates.is_empty()).then_some(rates)
}

/// `num` with an explicit sign: `+12.5`, `-3.0`.
pub fn signed(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v < 0.0 {
        format!("-{}", num(-v))
    } else {
        format!("+{}", num(v))
    }
}

pub fn num(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() >= 100.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else {
        format!("{v:.1}")
    }
}

/// Throughput of every shape: events/s (median, min–max) and the medians of the per-run
/// ratios to nginx and to direct; the rows a comparator within 10 % of direct's ceiling is
/// flagged in, where the rig rather than the comparator sets the pace.
fn throughput_table(figures: &Figures) -> String {
    let mut shapes: Vec<(&str, &str)> = throughput::SHAPES
        .iter()
        .map(|s| (throughput::SCENARIO, s.name))
        .collect();
    shapes.push((throughput::SCENARIO, throughput::MANY));
    shapes.push((sdk::SCENARIO, sdk::NAME));
    let mut out = String::from(
        "| upstream shape | comparator | events/s median | min–max | ÷ nginx | ÷ direct |\n\
         | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    let mut flags = String::new();
    for (scenario, shape) in shapes {
        for c in Comparator::ALL {
            let Some(f) = figures.get(scenario, c.label(), &throughput::rate(shape)) else {
                continue;
            };
            let ratio = |name: String| {
                figures
                    .get(scenario, c.label(), &name)
                    .map(|f| format!("{:.2}", f.median()))
                    .unwrap_or_else(|| "–".into())
            };
            let direct = figures
                .get(scenario, c.label(), &throughput::over_direct(shape))
                .map(Figure::median);
            if direct.is_some_and(|d| d >= 0.9) {
                let _ = writeln!(
                    flags,
                    "- **flag**: {} reaches {:.0} % of direct ({shape}): the upstream and client on \
                     CPU 0 may set the pace, not it",
                    c.label(),
                    direct.unwrap_or(0.0) * 100.0
                );
            }
            let _ = writeln!(
                out,
                "| {shape} | {} | {} | {} – {} | {} | {} |",
                c.label(),
                num(f.median()),
                num(f.min()),
                num(f.max()),
                ratio(throughput::over_nginx(shape)),
                ratio(throughput::over_direct(shape)),
            );
        }
    }
    out.push('\n');
    out.push_str(&flags);
    out
}

/// Scenario a in one table: each proxy's added latency and TTFE over direct, and the
/// gateway's over nginx (medians of the per-run differences).
fn latency_table(figures: &Figures) -> String {
    let a = latency::SCENARIO;
    let mut out = String::from(
        "| comparator | added p50 | added p99 | added TTFE p50 | added TTFE (hop) p50 | \
         − nginx p50 | − nginx p99 | − nginx TTFE p50 | − nginx TTFE (hop) p50 |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for c in Comparator::ALL
        .into_iter()
        .filter(|c| *c != Comparator::Direct)
    {
        let get = |name: &str| {
            figures
                .get(a, c.label(), name)
                .map(|f| format!("{} µs", num(f.median())))
                .unwrap_or_else(|| "–".into())
        };
        if figures
            .get(a, c.label(), "added vs direct: latency p50")
            .is_none()
        {
            continue;
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.label(),
            get("added vs direct: latency p50"),
            get("added vs direct: latency p99"),
            get("added vs direct: TTFE p50"),
            get("added vs direct: TTFE (hop) p50"),
            get("added vs nginx: latency p50"),
            get("added vs nginx: latency p99"),
            get("added vs nginx: TTFE p50"),
            get("added vs nginx: TTFE (hop) p50"),
        );
    }
    out.push_str(&openings_table(figures));
    out
}

/// The per-event latency split by whether another stream was opening when the event was sent
/// (`latency::Openings`): a proxy on one CPU makes the events that arrive during an opening
/// wait for it.
fn openings_table(figures: &Figures) -> String {
    let a = latency::SCENARIO;
    let mut out = format!(
        "\nEvents sent while another stream was opening (its first request sent → the upstream \
         had the run), and the latency of the others:\n\n\
         | comparator | share of all events | share of events over p99 | {o} p50 | {o} p99 | \
         − nginx, {o} p50 | − nginx, {o} p99 |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        o = latency::OUTSIDE_OPENINGS
    );
    let mut any = false;
    for c in Comparator::ALL {
        let get = |name: &str, unit: &str| {
            figures
                .get(a, c.label(), name)
                .map(|f| format!("{}{unit}", num(f.median())))
                .unwrap_or_else(|| "–".into())
        };
        if figures
            .get(a, c.label(), latency::DURING_OPENINGS)
            .is_none()
        {
            continue;
        }
        any = true;
        let outside = |p: &str| format!("{} {p}", latency::OUTSIDE_OPENINGS);
        let over = |p: &str| format!("added vs nginx: {} {p}", latency::OUTSIDE_OPENINGS);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.label(),
            get(latency::DURING_OPENINGS, " %"),
            get(latency::TAIL_DURING_OPENINGS, " %"),
            get(&outside("p50"), " µs"),
            get(&outside("p99"), " µs"),
            get(&over("p50"), " µs"),
            get(&over("p99"), " µs"),
        );
    }
    if any {
        out
    } else {
        String::new()
    }
}

/// Scenario f in one table.
fn soak_table(figures: &Figures) -> String {
    let g = soak::SCENARIO;
    let mut out = String::from(
        "| direction | streams open | seconds | streams completed | failed | connections opened \
         again | requests sent again | RSS at half time | RSS at the end | RSS slope, second half \
         |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut any = false;
    for kind in soak::KINDS {
        let label = kind.label();
        let value = |name| figures.get(g, label, name).map(|f| f.median());
        let Some(slope) = value(soak::SLOPE) else {
            continue;
        };
        any = true;
        let n = |name| value(name).map(num).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} | {} KiB | {} KiB | {slope:+.3} KiB/s |",
            n(soak::OPEN),
            n(soak::SECONDS),
            n(soak::COMPLETED),
            n(soak::FAILED),
            n(soak::RECONNECTS),
            n(soak::RETRIED),
            n(soak::RSS_HALF),
            n(soak::RSS_END),
        );
    }
    if any {
        out
    } else {
        "Not measured in this run (scenario g).\n".into()
    }
}

fn syscalls_table(figures: &Figures) -> String {
    let f = syscalls::SCENARIO;
    let mut out = String::from(
        "| process | writes per event | reads per event | epoll_wait per event | all syscalls \
         per event |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    let mut any = false;
    let labels = [syscalls::UPSTREAM]
        .into_iter()
        .chain(Comparator::ALL.iter().map(|c| c.label()));
    for label in labels {
        let get = |name| {
            figures
                .get(f, label, name)
                .map(|f| format!("{:.3}", f.median()))
        };
        let Some(writes) = get(syscalls::WRITES_PER_EVENT) else {
            continue;
        };
        any = true;
        let dash = || "–".to_string();
        let _ = writeln!(
            out,
            "| {label} | {writes} | {} | {} | {} |",
            get(syscalls::READS_PER_EVENT).unwrap_or_else(dash),
            get(syscalls::WAITS_PER_EVENT).unwrap_or_else(dash),
            get(syscalls::ALL_PER_EVENT).unwrap_or_else(dash),
        );
    }
    if any {
        out
    } else {
        "Not measured in this run (scenario f).\n".into()
    }
}

/// The figures table: median and min–max over runs.
pub fn table(figures: &Figures) -> String {
    let mut out = String::from("| scenario | comparator | figure | median | min–max | runs |\n");
    out.push_str("| --- | --- | --- | ---: | ---: | ---: |\n");
    for f in &figures.list {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} – {} | {} |",
            f.scenario,
            f.comparator,
            f.name,
            f.unit,
            num(f.median()),
            num(f.min()),
            num(f.max()),
            f.runs.len()
        );
    }
    out
}

fn codec_table(rows: &[Codec]) -> String {
    let mut out = String::from(
        "| shape | direction | events/s, fastest round | each round's median | MB/s (input), fastest round |\n\
         | --- | --- | ---: | ---: | ---: |\n",
    );
    for c in rows {
        let best = c.best();
        let rounds: Vec<String> = c.round_medians().into_iter().map(num).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            c.shape,
            c.direction,
            num(best),
            rounds.join(", "),
            num(best * c.bytes_per_event / 1e6)
        );
    }
    out
}

fn raw(figures: &Figures) -> String {
    let mut out =
        String::from("| scenario | comparator | figure | per run |\n| --- | --- | --- | --- |\n");
    for f in &figures.list {
        let runs: Vec<String> = f.runs.iter().map(|v| format!("{v:.1}")).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} |",
            f.scenario,
            f.comparator,
            f.name,
            f.unit,
            runs.join(", ")
        );
    }
    out
}

// The method below says how many rounds scenarios b and e take.
const _: () = assert!(crate::throughput::ROUNDS == 3);

const METHOD: &str = "\
- Processes: the load generator (this bench, its own tokio runtime, one HTTP/1.1 connection per \
stream), the upstream (the mock: the same executable re-run as `mock`, one process per scenario \
shape; or the Python SDK agent, `benches/sdk_agent.py`) and the system under test (the gateway, \
nginx, or nothing for direct) are separate processes.
- The gateway is the binary `BENCH_GATEWAY` names: with `benches/run`, the `cargo build --release` \
build, as shipped. (The binary `cargo bench` builds also has what the dev-dependencies turn on \
in crates they share with it: tokio's `test-util`, whose clock checks for a paused time at each \
reading.)
- The upstreams speak AG-UI, so the **direct baseline speaks AG-UI** (the upstream's protocol) \
for every comparator, translating ones included; nginx is a plain AG-UI proxy \
(`proxy_buffering off`, one process: `master_process off`).
- Both write a line per request, as they do by default: nginx its access log (the `combined` \
format, to a file), the gateway its closing line at `info` (to a file: its stderr). Each \
request's line is part of what it costs.
- Upstream shapes. **Event per chunk** (the default everywhere): every SSE event is its own \
HTTP/1.1 chunk, the way the Python and TypeScript AG-UI SDKs frame them; the mock's HTTP server \
(hyper) still gathers the chunks that are ready together into one vectored write (scenario f \
shows how many per write). **Event per chunk and per write**: each chunk is also handed to the \
socket on its own while the reader keeps up (the mock gives way after each event and hyper \
flushes it; behind a full socket chunks queue and leave together), as an SDK's server does; here \
the mock's own writes bound the rate. **16 KiB chunks**: as many events as fit in one chunk. \
**Unknown field**: every event also carries `\"ts\":<unix ns>`, a member the gateway does not \
know (125-byte content events instead of 100). **Python SDK**: `benches/sdk_agent.py`, the \
official `ag-ui-protocol` event types and `EventEncoder`, FastAPI (`RunAgentInput` validation, \
`StreamingResponse`) on uvicorn (h11, asyncio), one event per chunk, each chunk its own send.
- Each text delta carries `t=<send ns>;s=<seq>;`, stamped by the upstream when it produces the \
event; the client takes the receive time (same host clock) when a body frame arrives. One \
latency sample per received event with markers: receive − send of the event's last marker. In \
AAP **message** mode the whole text arrives in one `text` event, so there is one sample per \
stream (the last marker's) and its TTFE is the time to the complete message. *Last-event \
latency* takes only each stream's last content event (the mock writes it with the run's end: \
`TEXT_MESSAGE_END`, `RUN_FINISHED` and the body's end go in the same write); AAP message \
mode's samples, complete with that event, are set against it through direct and nginx.
- A stream counts as failed unless every sequence number arrives once and in order and the \
terminal event (`RUN_FINISHED`, AAP `turn_stop` `end_turn`) arrives.
- Qualification before timing (one stream per comparator against the paced mock): status 200, \
translation proven by the body (`BUSINESS_DATA_CONTENT`, `event: text_delta`, `event: text`), \
first content event well before the mock's last one was sent (AAP message: first event), terminal \
event present.
- a. latency: open loop, a new stream every 10 ms whatever the completions (each start shifted \
by a fixed 0–10 ms offset); each stream 100 events (60-byte deltas) about 10 ms apart after \
25 ms, one event per chunk: the k-th at start + k × 10 ms + a jitter drawn per event from \
[0, 2 ms), on a `timerfd` (microsecond precision) rather than tokio's timer, which rounds every \
deadline up to its next millisecond and so sent the open streams' events in bursts of about ten \
at once, one burst per millisecond (`benches/e2e/pacer.rs`); streams of \
the first second are warm-up and not measured. TTFE is from the request to the first event with a \
marker (AAP: from the turn POST; session creation is not included; no TTFE target for AAP \
message mode, whose first content event is the whole message at the end of the run). *TTFE \
(hop)* leaves the mock's own wait out: the mock stamps the first content event with the time it \
had the whole request (`q=<ns>;` after the marker), and the hop's share is request sent → \
request in at the mock, plus that event's send → receive. The mock's 25 ms wait ends on its \
timer's next millisecond tick, so a whole TTFE also measures where each request fell between \
two ticks (a hop that delays requests by d shortens the mock's wait by d, up to a tick); the \
TTFE target is judged on the hop's share. *added* = \
comparator − direct, and gateway − nginx, of the same run per percentile; the median of those \
per-run differences is shown. *CPU per event*: the run time of the process in the middle's \
threads (`/proc/PID/task/*/schedstat`) over the whole schedule ÷ the content events it passed. \
*Openings*: a stream opens from its first request's send (an AAP session's, else the run's) to \
the upstream having the run (the `q=` stamp); the events sent while any other stream was opening \
are counted apart (their share of all events and of the events over the run's p99), and the \
latency of the rest is given on its own, so that what a proxy's openings cost the open streams \
(on one CPU an event waits for the work under way) is told apart from its per-event path.
- b. throughput: unpaced mock, 100-byte content events (33-byte deltas); single streams of \
200,000 events per comparator and shape (every direction the same count: 200,000 × 33 bytes is \
6.6 MB of AAP session history, under its 8 MiB default cap), no warm-up stream: per run and \
shape every comparator is started and they take turns, one stream each per round in the run's \
order, for 3 rounds (streams a few hundred milliseconds apart share the drift of CPU 0's speed, \
which moves by up to 1.6 × over seconds here), and a comparator's rate in the run is over its 3 \
streams; then 100 streams of 2,000 events in a closed loop (one event per chunk). events/s = \
content events of correct streams / wall time. Per run, each proxy's rate ÷ nginx's and ÷ \
direct's of the same run; the median of those per-run ratios is shown. Direct is the ceiling of \
the upstream and client sharing CPU 0; a comparator within 10 % of it is limited by the rig, \
not by itself (nginx, which gathers many chunks into each of its writes, can pass direct: the \
client then reads fewer, larger frames). *CPU busy* over each single stream (median over \
streams): the share of its wall time the process in the middle ran (its threads' run time) and \
the share CPU 0 was busy (`/proc/stat`, all but idle and I/O wait); when CPU 0 is full and the \
proxy is not, the upstream and client set the pace and the proxies' ratio is a tie within the \
rig's noise.
- e. Python SDK upstream: streams of 50,000 100-byte content events from the SDK agent, the \
comparators taking turns for 3 rounds as in b, reported like b.
- f. syscalls per event: `strace -f -c -p <pid>` attached to the process in the middle (and to \
the mock during the direct stream) for one unpaced stream of 20,000 100-byte events, one per \
chunk; writes = write + writev + sendto + sendmsg, reads = read + readv + recvfrom + recvmsg, per \
content event. Measured once. strace stops the traced process at every syscall: it then finds \
more events waiting at each read than untraced, so the counts lean towards batching, for every \
process alike.
- c. memory: fresh gateway or nginx per value; RSS (VmRSS; nginx runs as one process, so this is \
its worker) at rest (after one warm-up stream, served and closed, and 1.5 s), then with K streams: idle = after every stream got a heartbeat \
(1 s interval; nginx sends none: after its first event), active = mock sends one event per \
500 ms per stream (at 100 ms, 9,900 streams = 99,000 events/s saturate CPU 0, shared by mock \
and client, and the gateway's RSS then holds the client's backlog), sampled while all flow \
(median of three samples 0.4 s apart). K = 1,000 and 10,000, capped by the open-file limit \
(two sockets per stream in the process in the middle; see the notes for the K measured). \
Measured once per benchmark (not per run).
- d. slow client: measured once per benchmark; a raw socket with a 4 KiB receive buffer reads \
1 KiB per second; RSS is sampled before the request, then every second from the request on \
(start = right after the request); the mock's production is counted from before the request.
- Runs: comparators are rotated by one position per run (counterbalanced order); a fresh \
gateway / nginx process per comparator and run.
- The rig's resolution (A/A control): in scenarios a, b and e a second nginx (*nginx again*), \
configured as the first, is measured as one more comparator, and set against nginx as the \
gateway is (nginx again − nginx per percentile, nginx again ÷ nginx per rate). Two identical \
proxies differ only by what the machine does to them, so those per-run figures are the smallest \
gap between two proxies this machine shows. A missed target whose gap lies within them (a \
latency gap no wider than the widest |nginx again − nginx| of the runs; a rate ratio no further \
below 1 than the two nginx came out apart, either way round, in some run) is marked *within the \
rig's resolution*, and the A/A figures are quoted beside it: the machine cannot tell the two \
proxies apart there, whichever way the median fell.
- g. soak: 10,000 streams open at once for 10 minutes through the gateway, AG-UI → AG-UI and AG-UI → HAI (quick: 1,000 for 1 minute). Each stream is a run of 30 content events 1 s apart; the first streams start evenly over one stream's life, and when one ends its client opens the next at once (about 200,000 streams per direction). The clients speak HTTP/2 with prior knowledge (h2c), 100 streams per connection (one HTTP/1.1 connection per stream would need 20,000 descriptors in the gateway, the hard limit of a process here); upstream, every stream has its own HTTP/1.1 connection. The gateway runs with `--max-streams 12000` (the default is 10,000, and a stream's permit is given back a moment after its client saw the end) and `--max-requests-per-connection 1000` (the default; quick: 100): after a connection's last request the gateway sends GOAWAY, and the client opens a new connection and sends a request the old one refused once more (both counted). Before the soak starts, connection k of n carries k × 1000 / n quick requests (`GET /`, 405), so that connections are replaced one at a time over the run, as in steady traffic, not all at once. Every stream is checked as in the other scenarios. The gateway's RSS is sampled every second; the figure is its least-squares slope over the second half.
- Codec: `cargo bench --bench codec` (criterion, one core, no network) measures every \
direction and shape in three rounds, each round over all of them in turn (20 samples in 2 s per \
benchmark), so one benchmark's windows lie minutes apart. The translation is deterministic \
work, yet on this shared virtual machine one window's rate follows the host: the same binary \
gave 2.6 and then 3.6 M events/s for one direction in two consecutive runs, the machine \
otherwise idle and no steal time accounted. A target is judged on the fastest round's median \
(a slower round measured load from outside the process); every round's median is shown.
- Profile: `benches/profile.sh` runs scenario a with `perf record -g` attached to nginx and the \
gateway (ag-ui→ag-ui, ag-ui→hai) and writes [PROFILE.md](PROFILE.md): self time by symbol, \
kernel and user, and the share of time in syscalls.";

/// The whole report as Markdown.
pub fn render(ctx: &Context, figures: &Figures) -> String {
    let codec = codec(ctx.target_dir);
    let targets = targets::targets(figures, &codec);
    let mut out = String::from("# Benchmark results\n\n");
    if ctx.quick {
        out.push_str("**Quick smoke run** (`--quick`): short phases, not for publication.\n\n");
    }
    let _ = write!(
        out,
        "## Machine\n\n{}\n## Commands\n\n```sh\n{}\n```\n\nwhich runs `cargo bench --bench codec` \
         and `cargo bench --bench e2e -- {}`. Runs per scenario a/b/e: {}.\n\n## CPU layout\n\n{}\n\n\
         ## Method\n\n{METHOD}\n\n",
        machine(ctx),
        ctx.command,
        ctx.args,
        ctx.runs,
        ctx.layout
    );
    if !ctx.notes.is_empty() {
        out.push_str("## Notes from this run\n\n");
        for n in ctx.notes {
            let _ = writeln!(out, "- {n}");
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "## Targets\n\n{}\n## Throughput (scenarios b and e)\n\n{}\n## Latency added (scenario a)\
         \n\n{}\n## Syscalls per event (scenario f)\n\n{}\n## Soak (scenario g)\n\n{}\n\
         ## Figures (median over runs, min–max)\
         \n\n{}\n## Codec micro-benchmarks\n\nFrom criterion's `sample.json`: each round's median of \
         its per-sample rates, and the fastest round's, which the targets judge (see Method); \
         events are content events, MB/s counts input bytes.\n\n{}\n## Raw per-run figures\n\n{}",
        targets::table(&targets),
        throughput_table(figures),
        latency_table(figures),
        syscalls_table(figures),
        soak_table(figures),
        table(figures),
        if codec.is_empty() {
            "No criterion results found (run `cargo bench --bench codec` first).\n".to_string()
        } else {
            codec_table(&codec)
        },
        raw(figures)
    );
    out
}

/// The short stdout form: targets and the summary tables.
pub fn summary(ctx: &Context, figures: &Figures) -> String {
    let codec = codec(ctx.target_dir);
    format!(
        "{}\n{}\n{}\n{}\n{}",
        targets::table(&targets::targets(figures, &codec)),
        throughput_table(figures),
        latency_table(figures),
        syscalls_table(figures),
        codec_table(&codec)
    )
}
