//! An AAP agent upstream, offline: the golden fixtures of `tests/fixtures/aap-agui/` (an AG-UI
//! client) and `tests/fixtures/aap-hai/` (a HAI client), hand-written from `specs/aap.md` and
//! `translation.md` §4.4, §5, §6.2 A1–A2, §7. Each case is one AAP turn (SSE, or the `none`
//! JSON body), the client's request, and the expected client stream; every case runs whole and
//! byte by byte, and AG-UI output passes the 1.0 sequence rules.
//!
//! `"message": "*"` in an expected event stands for any message text (gateway errors word
//! their messages freely; the code is what clients act on).

use crate::support;

use std::path::Path;

use bytes::BytesMut;
use dialect_proxy::adapters::aap_client::planner::resolve_hitl;
use dialect_proxy::config::aap_client::HitlStyle;
use dialect_proxy::dialect::aap::read::ReadOptions;
use dialect_proxy::dialect::{read_request, CodecOptions, Dialect};
use dialect_proxy::event::Event;
use dialect_proxy::event::{Clock, RunIds};
use dialect_proxy::pipeline::verify::verify_run;
use dialect_proxy::pipeline::{Pipeline, PipelineSpec};
use dialect_proxy::sse::Framing;
use serde_json::Value;
use support::hai::sse_events;

const CLOCK: i64 = 1_760_000_000_000;

fn spec(case: &Path, client: Dialect) -> PipelineSpec {
    let body = std::fs::read(case.with_extension("request.json")).expect("request.json");
    let options: Value = std::fs::read_to_string(case.with_extension("options.json"))
        .map(|t| serde_json::from_str(&t).expect("options.json"))
        .unwrap_or(Value::Null);
    let mut no_ids = || panic!("fixture requests carry their ids");
    let codecs = CodecOptions::default();
    let input = read_request(client, &body, &codecs, &mut no_ids).expect("valid request");
    let confirm_tool = options["confirmTool"].as_str().unwrap_or("confirmAction");
    let style: HitlStyle = options["hitl"].as_str().unwrap_or("auto").parse().unwrap();
    let mut spec = PipelineSpec::new(
        Dialect::Aap,
        client,
        RunIds {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
        },
    );
    spec.codecs.tools = input.tools.iter().map(|t| t.name.clone()).collect();
    spec.options.clock = Clock::Fixed(CLOCK);
    if options["framing"] == "json" {
        spec.options.framing = Framing::Json;
    }
    spec.codecs.aap.read = ReadOptions {
        client_tools: input
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| n != confirm_tool)
            .collect(),
        hitl: resolve_hitl(style, confirm_tool, &input, client == Dialect::AgUi),
        limit_stops: options["limitStops"]
            .as_str()
            .map_or_else(Default::default, |s| s.parse().unwrap()),
    };
    spec
}

/// Runs the pipeline over `input` in chunks of `chunk` bytes.
fn translate(spec: PipelineSpec, input: &[u8], chunk: usize) -> Vec<u8> {
    let mut pipeline = Pipeline::new(spec).expect("supported");
    let mut out = BytesMut::new();
    pipeline.begin(&mut out);
    for piece in input.chunks(chunk) {
        pipeline.push(piece, &mut out);
    }
    pipeline.end(&mut out);
    out.to_vec()
}

/// `expected` with `"message": "*"` taking `actual`'s message.
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter().all(|(k, v)| {
                    a.get(k).is_some_and(|av| {
                        (k == "message" && v == "*" && av.is_string()) || matches(v, av)
                    })
                })
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| matches(e, a))
        }
        _ => expected == actual,
    }
}

fn check(dir: &str, client: Dialect) -> usize {
    let cases = support::fixture_inputs(dir);
    for case in &cases {
        let name = case.file_stem().unwrap().to_string_lossy();
        let input = std::fs::read(case).unwrap();
        let expected = sse_events(&std::fs::read(case.with_extension("out")).expect("out"));
        let whole = translate(spec(case, client), &input, usize::MAX);
        let actual = sse_events(&whole);
        let first_difference = expected
            .iter()
            .zip(&actual)
            .position(|(e, a)| !matches(e, a))
            .unwrap_or(expected.len().min(actual.len()));
        assert!(
            expected.len() == actual.len() && first_difference == expected.len(),
            "{dir}/{name}: event {first_difference} differs\nexpected: {}\nactual:   {}\nwhole output:\n{}",
            expected.get(first_difference).map_or("<none>".into(), Value::to_string),
            actual.get(first_difference).map_or("<none>".into(), Value::to_string),
            String::from_utf8_lossy(&whole)
        );
        let bytewise = translate(spec(case, client), &input, 1);
        assert_eq!(
            String::from_utf8_lossy(&bytewise),
            String::from_utf8_lossy(&whole),
            "{dir}/{name}: byte by byte differs from whole"
        );
        if client == Dialect::AgUi {
            let events: Vec<Event> = actual
                .iter()
                .map(|v| serde_json::from_value(v.clone()).unwrap())
                .collect();
            verify_run(&events).unwrap_or_else(|e| panic!("{dir}/{name}: {e:?}"));
        }
    }
    cases.len()
}

#[test]
fn aap_to_agui_golden_fixtures() {
    assert!(check("aap-agui", Dialect::AgUi) >= 20);
}

#[test]
fn aap_to_hai_golden_fixtures() {
    assert!(check("aap-hai", Dialect::Hai) >= 10);
}

#[test]
fn a_wrong_expectation_fails() {
    let case = support::fixture_inputs("aap-agui")
        .into_iter()
        .find(|c| c.ends_with("text-delta-multibyte.in"))
        .unwrap();
    let input = std::fs::read(&case).unwrap();
    let mut expected = sse_events(&std::fs::read(case.with_extension("out")).unwrap());
    let actual = sse_events(&translate(spec(&case, Dialect::AgUi), &input, usize::MAX));
    assert!(expected.iter().zip(&actual).all(|(e, a)| matches(e, a)));
    // One character of one delta changed: the comparison must notice.
    let content = expected
        .iter_mut()
        .find(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .unwrap();
    let delta = content["delta"].as_str().unwrap().to_owned() + "!";
    content["delta"] = Value::String(delta);
    assert!(!expected.iter().zip(&actual).all(|(e, a)| matches(e, a)));
}
