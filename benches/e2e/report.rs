//! The report: the machine, the commands, the CPU layout, the targets (met / missed), every
//! figure as the median over runs with min–max, the codec micro-benchmarks read from
//! criterion's files, and the raw per-run values; printed and written to `benches/RESULTS.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::figures::{median, Figure, Figures};
use crate::rig::Comparator;
use crate::{latency, memory, saturation, slow};

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

/// One codec benchmark: events/s and MB/s per sample.
struct Codec {
    shape: String,
    direction: String,
    events_per_s: Vec<f64>,
    mb_per_s: Vec<f64>,
}

/// Codec target, content events per second (text deltas, every direction).
const CODEC_TARGET: f64 = 3_000_000.0;

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
        let path = root
            .join(format!("codec_{shape}"))
            .join(direction)
            .join("new")
            .join("sample.json");
        let Ok(sample) = std::fs::read_to_string(&path) else {
            continue;
        };
        let sample: serde_json::Value = serde_json::from_str(&sample).unwrap_or_default();
        let events = input["events"].as_f64().unwrap_or(0.0);
        let bytes = input["input_bytes"].as_f64().unwrap_or(0.0);
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
        let mb = rates
            .iter()
            .map(|r| {
                if events > 0.0 {
                    r / events * bytes / 1e6
                } else {
                    0.0
                }
            })
            .collect();
        rows.push(Codec {
            shape: shape.to_string(),
            direction: direction.to_string(),
            events_per_s: rates,
            mb_per_s: mb,
        });
    }
    rows
}

fn spread(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(v), min, max)
}

fn num(v: f64) -> String {
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

/// One target row: what, the figure, the bound, met or not.
struct Target {
    what: String,
    value: String,
    bound: String,
    met: bool,
}

fn targets(figures: &Figures, codec: &[Codec]) -> Vec<Target> {
    let mut rows = Vec::new();
    for c in codec.iter().filter(|c| c.shape.starts_with("text")) {
        let (m, _, _) = spread(&c.events_per_s);
        rows.push(Target {
            what: format!("codec {} {}", c.shape, c.direction),
            value: format!("{} events/s", num(m)),
            bound: "≥ 3,000,000 events/s".into(),
            met: m >= CODEC_TARGET,
        });
    }
    let a = latency::SCENARIO;
    let nginx_p99 = figures
        .get(a, Comparator::Nginx.label(), "added vs direct: latency p99")
        .map(Figure::median);
    for c in Comparator::ALL.into_iter().filter(|c| c.is_gateway()) {
        let label = c.label();
        if let Some(f) = figures.get(a, label, "added vs direct: latency p99") {
            let m = f.median();
            let bound = match nginx_p99 {
                Some(n) => format!("≤ 100 µs and < nginx's {} µs", num(n)),
                None => "≤ 100 µs (nginx absent)".into(),
            };
            rows.push(Target {
                what: format!("{label}: added per-event latency p99"),
                value: format!("{} µs", num(m)),
                bound,
                met: m <= 100.0 && nginx_p99.is_none_or(|n| m < n),
            });
        }
        // AAP message mode sends the text whole at its end: its TTFE is the run's length.
        for p in ["p50", "p99"]
            .into_iter()
            .filter(|_| c != Comparator::AapMessage)
        {
            if let Some(f) = figures.get(a, label, &format!("added vs direct: TTFE {p}")) {
                rows.push(Target {
                    what: format!("{label}: added TTFE {p}"),
                    value: format!("{} µs", num(f.median())),
                    bound: "≤ 300 µs".into(),
                    met: f.median() <= 300.0,
                });
            }
        }
    }
    for f in figures
        .list
        .iter()
        .filter(|f| f.scenario == memory::SCENARIO)
    {
        let bound = if f.name.starts_with("idle KiB/stream") {
            32.0
        } else if f.name.starts_with("active KiB/stream") {
            64.0
        } else {
            continue;
        };
        rows.push(Target {
            what: format!("{}: {}", f.comparator, f.name),
            value: format!("{} KiB", num(f.median())),
            bound: format!("≤ {bound} KiB"),
            met: f.median() <= bound,
        });
    }
    let label = Comparator::Passthrough.label();
    let get = |name| figures.get(slow::SCENARIO, label, name).map(Figure::median);
    if let (Some(start), Some(max), Some(slope), Some(produced)) = (
        get("RSS start"),
        get("RSS max"),
        get("RSS slope, second half"),
        get("mock produced at end"),
    ) {
        rows.push(Target {
            what: "slow client: gateway RSS flat, mock held back".into(),
            value: format!(
                "max − start {} KiB, 2nd-half slope {} KiB/s, mock produced {} KiB",
                num(max - start),
                num(slope),
                num(produced)
            ),
            bound: "max − start ≤ 4 MiB, slope within ±4 KiB/s, produced ≤ 16 MiB".into(),
            met: max - start <= 4096.0 && slope.abs() <= 4.0 && produced <= 16.0 * 1024.0,
        });
    }
    rows
}

/// The mock's ceiling (direct) in scenario b, and every result within 10 % of it.
fn ceiling(figures: &Figures) -> String {
    let mut out = String::new();
    let b = saturation::SCENARIO;
    for name in [saturation::ONE, saturation::MANY] {
        if let Some(f) = figures.get(b, Comparator::Direct.label(), name) {
            let _ = writeln!(
                out,
                "- mock's own ceiling ({name}, direct, mock and client sharing CPU 0): {} \
                 (min–max {} – {})",
                num(f.median()),
                num(f.min()),
                num(f.max())
            );
        }
        for f in figures.list.iter().filter(|f| {
            f.scenario == b && f.name == format!("{name} % of direct") && f.median() >= 90.0
        }) {
            let _ = writeln!(
                out,
                "- **flag**: {} reaches {:.0} % of the ceiling ({name}): limited by the rig",
                f.comparator,
                f.median()
            );
        }
    }
    out
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

fn targets_table(rows: &[Target]) -> String {
    let mut out =
        String::from("| target | measured (median) | bound | |\n| --- | --- | --- | --- |\n");
    for t in rows {
        let verdict = if t.met { "met" } else { "**missed**" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {verdict} |",
            t.what, t.value, t.bound
        );
    }
    out
}

fn codec_table(rows: &[Codec]) -> String {
    let mut out = String::from(
        "| shape | direction | events/s median | min–max | MB/s (input) median | min–max |\n\
         | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    for c in rows {
        let (e, emin, emax) = spread(&c.events_per_s);
        let (m, mmin, mmax) = spread(&c.mb_per_s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} – {} | {} | {} – {} |",
            c.shape,
            c.direction,
            num(e),
            num(emin),
            num(emax),
            num(m),
            num(mmin),
            num(mmax)
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

const METHOD: &str = "\
- Processes: the load generator (this bench, its own tokio runtime, one HTTP/1.1 connection per \
stream), the mock upstream (the same executable re-run as `mock`, one process per scenario \
shape) and the system under test (the gateway, nginx, or nothing for direct) are separate \
processes.
- The mock speaks AG-UI, so the **direct baseline speaks AG-UI** (the upstream's protocol) for \
every comparator, translating ones included; nginx is a plain AG-UI proxy.
- Each 60-byte text delta carries `t=<send ns>;s=<seq>;`, stamped by the mock when it produces \
the frame; the client takes the receive time (same host clock) when a body frame arrives. One \
latency sample per received event with markers: receive − send of the event's last marker. In \
AAP **message** mode the whole text arrives in one `text` event, so there is one sample per \
stream (the last marker's) and its TTFE is the time to the complete message.
- A stream counts as failed unless every sequence number arrives once and in order and the \
terminal event (`RUN_FINISHED`, AAP `turn_stop` `end_turn`) arrives.
- Qualification before timing (one stream per comparator against the paced mock): status 200, \
translation proven by the body (`BUSINESS_DATA_CONTENT`, `event: text_delta`, `event: text`), \
first content event well before the mock's last one was sent (AAP message: first event), terminal \
event present.
- a. latency: open loop, a new stream every 10 ms whatever the completions (each start shifted \
by a fixed 0–10 ms offset so the ~100 open streams do not all tick on the same millisecond); \
each stream 100 events 10 ms apart after 25 ms; streams of the first second are warm-up and not measured. TTFE is from the \
request to the first event with a marker (AAP: from the turn POST; session creation is not \
included; no TTFE target for AAP message mode, whose first content event is the whole message \
at the end of the run). *added* = comparator − direct, and gateway − nginx, of the same run per percentile; \
the median of those per-run differences is shown.
- b. saturation: unpaced mock (many events per 16 KiB frame); one stream of 120,000 events (not \
200,000: an AAP session's history is capped at 8 MiB by default, about 139,800 such deltas, and \
past it the gateway ends the turn with `HISTORY_LIMIT_EXCEEDED`), then 100 streams of 2,000 \
events in a closed loop; events/s = content events of correct streams / wall time. Direct is the ceiling \
of the mock and client sharing CPU 0; a comparator within 10 % of it is limited by the rig, not \
by itself.
- c. memory: fresh gateway per value; RSS (VmRSS) at rest after 0.5 s, then with K streams: idle \
= after every stream got a heartbeat (1 s interval), active = mock sends one event per 500 ms \
per stream (at 100 ms, 9,900 streams = 99,000 events/s saturate CPU 0, shared by mock and client, \
and the gateway's RSS then holds the client's backlog), sampled while all flow (median of three samples 0.4 s apart). Measured once per \
benchmark (not per run).
- d. slow client: measured once per benchmark; a raw socket with a 4 KiB receive buffer reads \
1 KiB per second; RSS is sampled before the request, then every second from the request on \
(start = right after the request); the mock's production is counted from before the request.
- Runs: comparators are rotated by one position per run (counterbalanced order); a fresh \
gateway / nginx process per comparator and run.";

/// The whole report as Markdown.
pub fn render(ctx: &Context, figures: &Figures) -> String {
    let codec = codec(ctx.target_dir);
    let targets = targets(figures, &codec);
    let mut out = String::from("# Benchmark results\n\n");
    if ctx.quick {
        out.push_str("**Quick smoke run** (`--quick`): short phases, not for publication.\n\n");
    }
    let _ = write!(
        out,
        "## Machine\n\n{}\n## Commands\n\n```sh\n{}\n```\n\nwhich runs `cargo bench --bench codec` \
         and `cargo bench --bench e2e -- {}`. Runs per scenario a/b: {}.\n\n## CPU layout\n\n{}\n\n\
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
        "## Targets\n\n{}\n{}\n## Figures (median over runs, min–max)\n\n{}\n## Codec \
         micro-benchmarks\n\nFrom criterion's `sample.json` (per-sample rates); events are content \
         events, MB/s counts input bytes.\n\n{}\n## Raw per-run figures\n\n{}",
        targets_table(&targets),
        ceiling(figures),
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

/// The short stdout form: targets and figures.
pub fn summary(ctx: &Context, figures: &Figures) -> String {
    let codec = codec(ctx.target_dir);
    format!(
        "{}\n{}\n{}\n{}",
        targets_table(&targets(figures, &codec)),
        ceiling(figures),
        table(figures),
        codec_table(&codec)
    )
}
