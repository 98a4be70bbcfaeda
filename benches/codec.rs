//! Codec micro-benchmarks: one core, the whole translation path of the gateway (SSE decoding,
//! the lenient reader, the run lifecycle guard, the strict writer) for every direction the
//! build supports, on three shapes of traffic: 60-byte text deltas, the same deltas carrying
//! one field the reader does not know (a `ts` timestamp in nanoseconds, as some agents add), and
//! 64 KiB state snapshots.
//!
//! Each benchmark translates one recorded run (opening events, N content events, closing
//! events) with a fresh pipeline; throughput is counted in content events. The byte size of
//! each input is written next to criterion's results (`target/criterion/codec-inputs.json`)
//! so the report (`benches/run`) can give MB/s as well. Events allocate with the gateway
//! binary's allocator (jemalloc, `src/main.rs`), so a figure is what an event costs there.
//!
//! Every benchmark is measured in [`ROUNDS`] rounds, each over all of them in turn and saved
//! as criterion's baseline `round-N`, so that one benchmark's windows lie minutes apart (the
//! snapshots, which no target judges, in the first round only). The work is deterministic, yet
//! on a shared virtual machine the rate of one window follows the host: the same binary
//! measured 2.6 and then 3.6 M events/s for one direction in two consecutive runs on an
//! otherwise idle machine with no steal time accounted. The report takes the fastest round as
//! what one core does and shows every round's.

use std::hint::black_box;
use std::time::Duration;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, Throughput};
use dialect_proxy::dialect::aap::types::StreamMode;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::event::{Clock, RunIds};
use dialect_proxy::pipeline::{Pipeline, PipelineSpec};

/// The gateway binary's allocator (the default `jemalloc` feature).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Content events per text-delta run; large enough that a run's opening and closing events
/// and the pipeline's construction are noise.
const TEXT_EVENTS: usize = 10_000;
/// Snapshots per snapshot run.
const SNAPSHOT_EVENTS: usize = 64;
/// The size of one state snapshot's JSON.
const SNAPSHOT_BYTES: usize = 64 * 1024;
/// The size of one text delta.
const DELTA_BYTES: usize = 60;
/// The value of the unknown `ts` field of the first event of `text-60B+field` (nanoseconds).
const TS_NANOS: u64 = 1_732_460_000_000_000_000;
/// Rounds over every benchmark (`CODEC_ROUNDS`, 3).
const ROUNDS: usize = 3;

#[derive(Clone, Copy)]
enum Shape {
    Text,
    /// Text deltas with one unknown field.
    TextField,
    Snapshot,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Text => "text-60B",
            Shape::TextField => "text-60B+field",
            Shape::Snapshot => "snapshot-64KiB",
        }
    }

    fn events(self) -> usize {
        match self {
            Shape::Text | Shape::TextField => TEXT_EVENTS,
            Shape::Snapshot => SNAPSHOT_EVENTS,
        }
    }

    fn is_text(self) -> bool {
        matches!(self, Shape::Text | Shape::TextField)
    }

    /// The unknown field of content event `i`, if the shape has one.
    fn field(self, i: usize) -> Option<(&'static str, serde_json::Value)> {
        match self {
            Shape::TextField => Some(("ts", (TS_NANOS + i as u64).into())),
            Shape::Text | Shape::Snapshot => None,
        }
    }

    const ALL: [Shape; 3] = [Shape::Text, Shape::TextField, Shape::Snapshot];
}

/// Adds the shape's unknown field to a content event's JSON object.
fn with_field(shape: Shape, i: usize, mut event: serde_json::Value) -> serde_json::Value {
    if let (Some((key, value)), Some(object)) = (shape.field(i), event.as_object_mut()) {
        object.insert(key.into(), value);
    }
    event
}

/// Every client × upstream pair the gateway translates.
const DIRECTIONS: [(Dialect, Dialect); 8] = [
    (Dialect::AgUi, Dialect::AgUi),
    (Dialect::AgUi, Dialect::Hai),
    (Dialect::AgUi, Dialect::Aap),
    (Dialect::Hai, Dialect::AgUi),
    (Dialect::Hai, Dialect::Aap),
    (Dialect::Aap, Dialect::AgUi),
    (Dialect::Aap, Dialect::Hai),
    (Dialect::Aap, Dialect::Aap),
];

/// A 60-byte delta, different per event like real traffic.
fn delta(i: usize) -> String {
    let mut text = format!(
        "t={:019};s={i:06};",
        1_700_000_000_000_000_000u64 + i as u64
    );
    while text.len() < DELTA_BYTES {
        text.push_str(" lorem");
    }
    text.truncate(DELTA_BYTES);
    text
}

/// A state snapshot of about [`SNAPSHOT_BYTES`] bytes: a list of small records, as agents keep
/// (a plan, a document outline, search results).
fn snapshot(version: usize) -> serde_json::Value {
    let mut items = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < SNAPSHOT_BYTES - 128 {
        let item = serde_json::json!({
            "id": format!("item-{i}"),
            "title": format!("Step {i} of the plan, revision {version}"),
            "done": i % 3 == 0,
            "score": i * 7 % 101,
        });
        size += item.to_string().len() + 1;
        items.push(item);
        i += 1;
    }
    serde_json::json!({"version": version, "items": items})
}

fn agui(events: &mut String, value: serde_json::Value) {
    events.push_str("data: ");
    events.push_str(&value.to_string());
    events.push_str("\n\n");
}

/// One recorded upstream run in `dialect`.
fn input(dialect: Dialect, shape: Shape) -> Vec<u8> {
    use serde_json::json;
    let mut s = String::new();
    match dialect {
        Dialect::AgUi => {
            agui(
                &mut s,
                json!({"type":"RUN_STARTED","threadId":"t1","runId":"r1"}),
            );
            if shape.is_text() {
                agui(
                    &mut s,
                    json!({"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}),
                );
            }
            for i in 0..shape.events() {
                match shape {
                    Shape::Text | Shape::TextField => agui(
                        &mut s,
                        with_field(
                            shape,
                            i,
                            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":delta(i)}),
                        ),
                    ),
                    Shape::Snapshot => agui(
                        &mut s,
                        json!({"type":"STATE_SNAPSHOT","snapshot":snapshot(i)}),
                    ),
                }
            }
            if shape.is_text() {
                agui(&mut s, json!({"type":"TEXT_MESSAGE_END","messageId":"m1"}));
            }
            agui(
                &mut s,
                json!({"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}),
            );
        }
        Dialect::Hai => {
            let base = |t: &str| json!({"type": t, "messageId": "m1", "role": "assistant", "timestamp": 1_760_000_000_000_i64});
            agui(&mut s, base("RUN_STARTED"));
            if shape.is_text() {
                agui(&mut s, base("BUSINESS_DATA_START"));
            }
            for i in 0..shape.events() {
                let mut event = match shape {
                    Shape::Text | Shape::TextField => {
                        let mut e = base("BUSINESS_DATA_CONTENT");
                        // As HAI agents send them: the role is on the start only.
                        e.as_object_mut().map(|e| e.remove("role"));
                        let output = json!({"output":{"type":"text","content":delta(i)}});
                        e["delta"] = output.to_string().into();
                        e
                    }
                    Shape::Snapshot => {
                        let mut e = base("STATE_SNAPSHOT");
                        e["snapshot"] = snapshot(i);
                        e
                    }
                };
                event["timestamp"] = (1_760_000_000_000_i64 + i as i64).into();
                agui(&mut s, with_field(shape, i, event));
            }
            if shape.is_text() {
                agui(&mut s, base("BUSINESS_DATA_END"));
            }
            agui(&mut s, base("RUN_FINISHED"));
        }
        Dialect::Aap => {
            s.push_str("event: turn_start\ndata: {}\n\n");
            for i in 0..shape.events() {
                let data = with_field(shape, i, json!({"delta": delta(i)}));
                s.push_str(&format!("event: text_delta\ndata: {data}\n\n"));
            }
            s.push_str("event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n");
        }
    }
    s.into_bytes()
}

fn spec(upstream: Dialect, client: Dialect) -> PipelineSpec {
    let ids = RunIds {
        thread_id: "t1".into(),
        run_id: "r1".into(),
    };
    let mut spec = PipelineSpec::new(upstream, client, ids);
    spec.options.clock = Clock::Fixed(1_760_000_000_000);
    spec.codecs.aap.turn.mode = StreamMode::Delta;
    spec.options.max_event_bytes = 1 << 20;
    spec
}

/// Translates `input` whole, as the gateway would one upstream read at a time.
fn translate(spec: PipelineSpec, input: &[u8], out: &mut BytesMut) -> usize {
    let Ok(mut pipeline) = Pipeline::new(spec) else {
        return 0;
    };
    out.clear();
    pipeline.begin(out);
    // Reads of 16 KiB, the size hyper hands a body frame on loopback.
    for chunk in input.chunks(16 * 1024) {
        pipeline.push(chunk, out);
    }
    pipeline.end(out);
    out.len()
}

/// One round over the benchmarks; the snapshots (no target judges them, and each of their
/// samples takes about a second) only in the first.
fn codec(c: &mut Criterion, first_round: bool) {
    let mut sizes = serde_json::Map::new();
    for shape in Shape::ALL {
        if matches!(shape, Shape::Snapshot) && !first_round {
            continue;
        }
        let mut group = c.benchmark_group(format!("codec/{}", shape.name()));
        group.throughput(Throughput::Elements(shape.events() as u64));
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        for (upstream, client) in DIRECTIONS {
            // AAP has no shared state: no snapshot to read from an AAP upstream.
            if matches!((upstream, shape), (Dialect::Aap, Shape::Snapshot)) {
                continue;
            }
            let input = input(upstream, shape);
            let id = format!("{upstream}-to-{client}");
            let mut out = BytesMut::with_capacity(input.len() * 2);
            // Qualify before timing: the run is translated whole and ends well.
            let written = translate(spec(upstream, client), &input, &mut out);
            assert!(written > 0, "{id}: nothing written");
            let text = String::from_utf8_lossy(&out);
            assert!(
                !text.contains("RUN_ERROR") && !text.contains("\"error\""),
                "{id}: the run failed: {}",
                &text[text.len().saturating_sub(400)..]
            );
            sizes.insert(
                format!("{}/{id}", shape.name()),
                serde_json::json!({"input_bytes": input.len(), "output_bytes": written, "events": shape.events()}),
            );
            let base = spec(upstream, client);
            group.bench_function(&id, |b| {
                b.iter_batched(
                    || base.clone(),
                    |spec| black_box(translate(spec, black_box(&input), &mut out)),
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
    if first_round {
        let path = criterion_dir().join("codec-inputs.json");
        let _ = std::fs::create_dir_all(criterion_dir());
        let _ = std::fs::write(&path, serde_json::Value::Object(sizes).to_string());
    }
}

/// Where criterion writes its results: `target/criterion`.
fn criterion_dir() -> std::path::PathBuf {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("criterion")
}

/// Removes the `round-N` results of an earlier run, which the report would otherwise read as
/// rounds of this one.
fn forget_rounds() {
    let named = |prefix: &'static str| {
        move |entry: &std::fs::DirEntry| entry.file_name().to_string_lossy().starts_with(prefix)
    };
    let rounds = entries(&criterion_dir())
        .filter(named("codec_"))
        .flat_map(|group| entries(&group.path()))
        .flat_map(|bench| entries(&bench.path()))
        .filter(named("round-"));
    for round in rounds {
        let _ = std::fs::remove_dir_all(round.path());
    }
}

/// The entries of `dir` that can be read; none when it cannot be.
fn entries(dir: &std::path::Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir).into_iter().flatten().flatten()
}

/// Every benchmark once per round, each round kept as criterion's baseline `round-N` (the
/// report reads them all).
fn benches() {
    let rounds = std::env::var("CODEC_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(ROUNDS);
    forget_rounds();
    for round in 1..=rounds {
        let mut c = Criterion::default()
            .configure_from_args()
            .save_baseline(format!("round-{round}"));
        codec(&mut c, round == 1);
        if round == rounds {
            c.final_summary();
        }
    }
}

/// `CODEC_PROFILE=text-60B/ag-ui-to-hai cargo bench --bench codec` translates that one input
/// 200 times and exits, without criterion: a steady loop to put under `perf` or callgrind.
fn main() {
    let Ok(target) = std::env::var("CODEC_PROFILE") else {
        benches();
        return;
    };
    for shape in Shape::ALL {
        for (upstream, client) in DIRECTIONS {
            if target != format!("{}/{upstream}-to-{client}", shape.name()) {
                continue;
            }
            let input = input(upstream, shape);
            let mut out = BytesMut::new();
            let mut written = 0;
            for _ in 0..iterations() {
                written += translate(spec(upstream, client), black_box(&input), &mut out);
            }
            println!("{target}: {written} bytes written");
            return;
        }
    }
    eprintln!("CODEC_PROFILE={target}: no such benchmark (e.g. text-60B/ag-ui-to-hai)");
    std::process::exit(2);
}

/// How many times `CODEC_PROFILE` translates its input (`CODEC_PROFILE_ITERATIONS`, 200).
fn iterations() -> usize {
    std::env::var("CODEC_PROFILE_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}
