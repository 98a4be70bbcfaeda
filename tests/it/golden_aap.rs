//! Canonical runs → AAP turns through the pipeline, offline, each in the three stream modes of
//! a turn, plus the wire framing of every AAP event written: the golden fixtures of
//! `tests/fixtures/agui-aap/` (an AG-UI agent's run) and `tests/fixtures/aap-aap/` (an AAP
//! agent's turn, read as the AAP face reads it), hand-written from `specs/aap.md` and
//! `translation.md` §4.2, §4.4, §5, §6.2, §7.

use crate::support;

use std::path::Path;

use dialect_proxy::dialect::aap::read::{LimitStops, ReadOptions};
use dialect_proxy::dialect::aap::types::StreamMode;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::event::RunIds;
use dialect_proxy::pipeline::translate_all;
use dialect_proxy::pipeline::PipelineSpec;
use dialect_proxy::sse::Framing;
use serde_json::Value;

/// The fixture directories, by the upstream dialect they hold.
const DIRS: [(&str, Dialect); 2] = [("agui-aap", Dialect::AgUi), ("aap-aap", Dialect::Aap)];

/// `event: NAME\ndata: JSON\n\n` frames → (name, data); panics on anything else, so the framing
/// itself is checked: one `event:` and one `data:` line per event, the name not repeated inside.
fn aap_events(wire: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for frame in wire.split_terminator("\n\n") {
        let lines: Vec<&str> = frame.split('\n').collect();
        assert_eq!(lines.len(), 2, "an AAP event is two lines: {frame:?}");
        let name = lines[0]
            .strip_prefix("event: ")
            .unwrap_or_else(|| panic!("no event line: {frame:?}"));
        let data = lines[1]
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("no data line: {frame:?}"));
        let value: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{data}: {e}"));
        assert!(value.get("event").is_none(), "the name is repeated: {data}");
        events.push((name.to_owned(), value));
    }
    assert!(
        wire.ends_with("\n\n") || wire.is_empty(),
        "unterminated: {wire:?}"
    );
    events
}

fn translate(upstream: Dialect, case: &Path, mode: StreamMode) -> String {
    let input = std::fs::read(case).unwrap();
    let ids = RunIds {
        thread_id: "sess_1".into(),
        run_id: "run-1".into(),
    };
    let mut spec = PipelineSpec::new(upstream, Dialect::Aap, ids);
    spec.codecs.aap.turn.mode = mode;
    let options: Value = std::fs::read_to_string(case.with_extension("options.json"))
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap_or(Value::Null);
    if let Some(tools) = options["clientTools"].as_array() {
        spec.codecs.aap.turn.client_tools = tools
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
    }
    if let Some(name) = options["confirmTool"].as_str() {
        spec.codecs.aap.turn.confirm_tool = name.into();
    }
    if upstream == Dialect::Aap {
        // As the AAP face runs an AAP agent's turn.
        spec.codecs.aap.read = ReadOptions::for_aap_client(
            spec.codecs.aap.turn.client_tools.clone(),
            LimitStops::default(),
        );
        if options["framing"] == "json" {
            spec.options.framing = Framing::Json;
        }
    }
    let out = translate_all(spec, &input).unwrap();
    String::from_utf8(out.to_vec()).unwrap()
}

fn expected(case: &Path, ext: &str) -> String {
    std::fs::read_to_string(case.with_extension(ext))
        .unwrap_or_else(|e| panic!("{}: {e}", case.with_extension(ext).display()))
}

#[test]
fn every_fixture_in_every_mode() {
    let mut failures = Vec::new();
    for (dir, upstream) in DIRS {
        let cases = support::fixture_inputs(dir);
        for case in &cases {
            let name = format!("{dir}/{}", case.file_stem().unwrap().to_string_lossy());
            for (mode, ext) in [
                (StreamMode::Delta, "delta.out"),
                (StreamMode::Message, "message.out"),
            ] {
                let want = aap_events(&expected(case, ext));
                let got = aap_events(&translate(upstream, case, mode));
                if want != got {
                    failures.push(format!(
                        "{name} ({}):\n  expected {want:?}\n  got      {got:?}",
                        mode.as_str()
                    ));
                }
                let stops = got.iter().filter(|(n, _)| n == "turn_stop").count();
                assert_eq!(
                    got.first().map(|e| e.0.as_str()),
                    Some("turn_start"),
                    "{name}"
                );
                assert_eq!(
                    got.last().map(|e| e.0.as_str()),
                    Some("turn_stop"),
                    "{name}"
                );
                assert_eq!(stops, 1, "{name}");
            }
            let want: Value = serde_json::from_str(&expected(case, "none.json")).unwrap();
            let got: Value = serde_json::from_str(&translate(upstream, case, StreamMode::None))
                .unwrap_or_else(|e| panic!("{name} (none): {e}"));
            if want != got {
                failures.push(format!(
                    "{name} (none):\n  expected {want}\n  got      {got}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_three_modes_tell_the_same_story() {
    // Rebuilt the way the reference SDK does (aap.md §3.3), delta and message streams yield the
    // text the JSON body holds.
    for (dir, upstream) in DIRS {
        for case in support::fixture_inputs(dir) {
            let json: Value =
                serde_json::from_str(&translate(upstream, &case, StreamMode::None)).unwrap();
            let body_text: String = json["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .flat_map(|m| m["content"].as_array().unwrap().clone())
                .filter_map(|b| b["text"].as_str().map(str::to_owned))
                .collect();
            for mode in [StreamMode::Delta, StreamMode::Message] {
                let text: String = aap_events(&translate(upstream, &case, mode))
                    .iter()
                    .filter_map(|(n, d)| match n.as_str() {
                        "text_delta" => d["delta"].as_str().map(str::to_owned),
                        "text" => d["text"].as_str().map(str::to_owned),
                        _ => None,
                    })
                    .collect();
                assert_eq!(text, body_text, "{} ({})", case.display(), mode.as_str());
            }
        }
    }
}

#[test]
fn an_aap_agents_permission_is_shown_as_its_own_call() {
    // The one thing the pair adds to its halves: no confirm call, no synthetic call.
    let case = support::fixture_inputs("aap-aap")
        .into_iter()
        .find(|c| c.ends_with("permission.in"))
        .unwrap();
    let events = aap_events(&translate(Dialect::Aap, &case, StreamMode::Delta));
    let calls: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "tool_call")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["toolCallId"], "call_9");
    assert_eq!(calls[0]["name"], "web_fetch");
    assert_eq!(events.last().unwrap().1["stopReason"], "tool_use");
}
