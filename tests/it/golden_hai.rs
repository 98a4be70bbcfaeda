//! HAI ⇄ AG-UI through the pipeline, offline:
//!
//! - golden fixtures `tests/fixtures/hai-agui/` (a HAI upstream, an AG-UI client) and
//!   `tests/fixtures/agui-hai/` (an AG-UI upstream, a HAI client), hand-written from the seed
//!   HAI specification and `specs/hai.md` / `translation.md` §3; each run whole and byte by byte;
//! - the §3.6 round trip: every HAI fixture input, and generated HAI streams of all three delta
//!   variants, come back equal in normal form, in-process (HAI → HAI) and through an AG-UI hop
//!   (HAI → AG-UI wire → HAI), the AG-UI leg passing the 1.0 sequence rules.
//!
//! Gateway clock: fixed at [`CLOCK`], which the fixtures use for stamped events.

use crate::support;

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use dialect_proxy::dialect::hai::{DeltaEncoding, HaiOptions, SnapshotName, ToolArgsEncoding};
use dialect_proxy::dialect::{read_request, CodecOptions, Dialect};
use dialect_proxy::event::Event;
use dialect_proxy::event::{Clock, RunIds};
use dialect_proxy::pipeline::translate_all;
use dialect_proxy::pipeline::verify::verify_run;
use dialect_proxy::pipeline::{Pipeline, PipelineSpec};
use serde_json::Value;
use support::hai::{normalise, random_stream, sse_events, Variant};
use support::random::Rng;

const CLOCK: i64 = 1_760_000_000_000;

fn cases(dir: &str) -> Vec<PathBuf> {
    support::fixture_inputs(dir)
}

/// `NAME.options.json` → the route's HAI options.
fn options(case: &Path) -> HaiOptions {
    let mut options = HaiOptions::default();
    let Ok(text) = std::fs::read_to_string(case.with_extension("options.json")) else {
        return options;
    };
    let v: Value = serde_json::from_str(&text).expect("options.json");
    let hai = &v["hai"];
    let w = &mut options.writer;
    if let Some(s) = hai["delta_encoding"].as_str() {
        w.delta_encoding = s.parse().expect("delta_encoding");
    }
    if let Some(s) = hai["tool_args"].as_str() {
        w.tool_args = s.parse().expect("tool_args");
    }
    if let Some(s) = hai["snapshot_name"].as_str() {
        w.snapshot_name = s.parse().expect("snapshot_name");
    }
    if let Some(b) = hai["run_ids"].as_bool() {
        w.run_ids = b;
    }
    if let Some(b) = hai["thinking_final_chunk"].as_bool() {
        w.thinking_final_chunk = b;
    }
    options
}

fn spec(case: &Path, upstream: Dialect, client: Dialect) -> PipelineSpec {
    let body = std::fs::read(case.with_extension("request.json")).expect("request.json");
    let hai = options(case);
    let mut no_ids = || panic!("fixture requests carry their ids");
    let codecs = CodecOptions {
        hai: hai.clone(),
        ..CodecOptions::default()
    };
    let input = read_request(client, &body, &codecs, &mut no_ids).expect("valid request");
    let mut spec = PipelineSpec::new(
        upstream,
        client,
        RunIds {
            thread_id: input.thread_id,
            run_id: input.run_id,
        },
    );
    spec.codecs.tools = input.tools.iter().map(|t| t.name.clone()).collect();
    spec.codecs.hai = hai;
    spec.options.clock = Clock::Fixed(CLOCK);
    spec
}

/// Comparable form of an expected or actual event: string deltas of HAI business, collaboration
/// and argument events compared as the JSON they hold; the message of a synthesised truncation
/// error is free text.
fn comparable(mut event: Value) -> Value {
    let ty = event["type"].as_str().unwrap_or_default().to_owned();
    if matches!(
        ty.as_str(),
        "BUSINESS_DATA_CONTENT" | "AGENT_COLLABORATIVE_MESSAGE_CONTENT" | "TOOL_CALL_ARGS"
    ) {
        if let Some(Value::String(text)) = event.get("delta") {
            if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                if parsed.is_object() {
                    event["delta"] = serde_json::json!({"json": parsed});
                }
            }
        }
    }
    if ty == "RUN_ERROR" && event["code"] == "UPSTREAM_TRUNCATED" {
        event.as_object_mut().map(|m| m.remove("message"));
    }
    event
}

fn run_golden(dir: &str, upstream: Dialect, client: Dialect) {
    let mut failures = Vec::new();
    for case in cases(dir) {
        let name = case.file_stem().unwrap().to_string_lossy().into_owned();
        let input = std::fs::read(&case).unwrap();
        let expected_bytes = std::fs::read(case.with_extension("out")).unwrap();
        let expected: Vec<Value> = sse_events(&expected_bytes)
            .into_iter()
            .map(comparable)
            .collect();
        let whole = translate_all(spec(&case, upstream, client), &input).unwrap();
        let text = std::str::from_utf8(&whole).expect("UTF-8 output");
        assert!(
            !text.contains('\r') && text.ends_with("\n\n"),
            "{name}: framing"
        );
        let actual: Vec<Value> = sse_events(&whole).into_iter().map(comparable).collect();
        if actual != expected {
            failures.push(format!(
                "== {dir}/{name}\n{}",
                support::diff_events(&expected, &actual)
            ));
            continue;
        }
        let mut pipeline = Pipeline::new(spec(&case, upstream, client)).unwrap();
        let mut out = BytesMut::new();
        for b in &input {
            pipeline.push(std::slice::from_ref(b), &mut out);
        }
        pipeline.end(&mut out);
        assert_eq!(
            out, whole,
            "{name}: byte-by-byte output differs from whole-input output"
        );
    }
    assert!(
        failures.is_empty(),
        "{} fixture(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn hai_upstream_fixtures_translate_to_their_agui_streams() {
    run_golden("hai-agui", Dialect::Hai, Dialect::AgUi);
}

#[test]
fn agui_upstream_fixtures_translate_to_their_hai_streams() {
    run_golden("agui-hai", Dialect::AgUi, Dialect::Hai);
}

/// The AG-UI output of HAI fixtures is a legal 1.0 run.
#[test]
fn hai_fixtures_give_legal_agui_runs() {
    for case in cases("hai-agui") {
        let out = translate_all(
            spec(&case, Dialect::Hai, Dialect::AgUi),
            &std::fs::read(&case).unwrap(),
        )
        .unwrap();
        let events: Vec<Event> = sse_events(&out)
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("canonical event"))
            .collect();
        if let Err(v) = verify_run(&events) {
            panic!("{}: {v:?}", case.display());
        }
    }
}

fn round_trip_spec(
    upstream: Dialect,
    client: Dialect,
    hai: &HaiOptions,
    tools: &[String],
) -> PipelineSpec {
    let mut spec = PipelineSpec::new(
        upstream,
        client,
        RunIds {
            thread_id: "t-rt".into(),
            run_id: "run-rt".into(),
        },
    );
    spec.codecs.hai = hai.clone();
    spec.codecs.tools = tools.to_vec();
    spec.options.clock = Clock::Fixed(CLOCK);
    spec
}

/// Checks S ≡ S' in normal form, in-process and through an AG-UI hop; returns a problem.
fn round_trip(source: &[u8], hai: &HaiOptions, tools: &[String]) -> Result<(), String> {
    let want = normalise(&sse_events(source), "run-rt");
    let direct = translate_all(
        round_trip_spec(Dialect::Hai, Dialect::Hai, hai, tools),
        source,
    )
    .unwrap();
    let got = normalise(&sse_events(&direct), "run-rt");
    if got != want {
        return Err(format!(
            "in-process:\n{}",
            support::diff_events(&want, &got)
        ));
    }
    let wire = translate_all(
        round_trip_spec(Dialect::Hai, Dialect::AgUi, hai, tools),
        source,
    )
    .unwrap();
    let canonical: Vec<Event> = sse_events(&wire)
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("canonical event"))
        .collect();
    verify_run(&canonical).map_err(|v| format!("AG-UI leg: {v:?}"))?;
    let back = translate_all(
        round_trip_spec(Dialect::AgUi, Dialect::Hai, hai, tools),
        &wire,
    )
    .unwrap();
    let got = normalise(&sse_events(&back), "run-rt");
    if got != want {
        return Err(format!(
            "through AG-UI:\n{}",
            support::diff_events(&want, &got)
        ));
    }
    Ok(())
}

fn profile(delta_encoding: DeltaEncoding, tool_args: ToolArgsEncoding) -> HaiOptions {
    let mut hai = HaiOptions::default();
    hai.writer.delta_encoding = delta_encoding;
    hai.writer.tool_args = tool_args;
    hai
}

#[test]
fn every_hai_fixture_round_trips() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases("hai-agui") {
        let source = std::fs::read(&case).unwrap();
        // Streams the gateway has to repair (cut short, ended by an error, missing ids or
        // starts, unclosed) come back repaired: the identity is promised for well-formed ones.
        if !well_formed(&sse_events(&source)) {
            continue;
        }
        checked += 1;
        let mut hai = profile(DeltaEncoding::JsonString, ToolArgsEncoding::Stream);
        hai.writer.snapshot_name = SnapshotName::Singular;
        if let Err(problem) = round_trip(&source, &hai, &[]) {
            failures.push(format!("== {}\n{problem}", case.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 8, "only {checked} well-formed HAI fixtures");
}

/// A HAI run the gateway passes without repairs: RUN_STARTED first, RUN_FINISHED last and
/// nothing else terminal, business messages and steps opened before use (with ids) and closed.
fn well_formed(events: &[Value]) -> bool {
    let ty = |e: &Value| e["type"].as_str().unwrap_or_default().to_owned();
    if events.first().map(ty).as_deref() != Some("RUN_STARTED")
        || events.last().map(ty).as_deref() != Some("RUN_FINISHED")
        || events.iter().filter(|e| ty(e).starts_with("RUN_")).count() != 2
    {
        return false;
    }
    let mut open: Vec<String> = Vec::new();
    for e in events {
        let id = e["messageId"].as_str().unwrap_or_default().to_owned();
        let step = format!("step:{}", e["stepName"].as_str().unwrap_or_default());
        match ty(e).as_str() {
            "BUSINESS_DATA_START" if !id.is_empty() => open.push(id),
            "BUSINESS_DATA_CONTENT" if open.contains(&id) => {}
            "BUSINESS_DATA_END" if open.contains(&id) => open.retain(|o| *o != id),
            "STEP_STARTED" => open.push(step),
            "STEP_FINISHED" if open.contains(&step) => open.retain(|o| *o != step),
            t if t.starts_with("BUSINESS_DATA") || t == "STEP_FINISHED" => return false,
            _ => {}
        }
    }
    open.is_empty()
}

#[test]
fn generated_hai_streams_round_trip_in_every_variant() {
    let mut checked = 0;
    for seed in 1..=150_u64 {
        for (variant, hai) in [
            (
                Variant::JsonString,
                profile(DeltaEncoding::JsonString, ToolArgsEncoding::WholeJsonString),
            ),
            (
                Variant::Object,
                profile(DeltaEncoding::Object, ToolArgsEncoding::Object),
            ),
            (
                Variant::Plain,
                profile(DeltaEncoding::JsonString, ToolArgsEncoding::Stream),
            ),
        ] {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let stream = random_stream(&mut rng, variant);
            if let Err(problem) = round_trip(stream.as_bytes(), &hai, &["openToolSidePage".into()])
            {
                panic!("seed {seed}, {variant:?}: {problem}\nstream:\n{stream}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 450);
}
