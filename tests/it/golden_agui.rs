//! Golden fixtures AG-UI → AG-UI (`tests/fixtures/agui-agui/`), hand-written from the seed
//! documents and `specs/dialects.md`. Each case is run whole and fed one byte at a time; both
//! must equal the expected stream event for event (JSON values) with canonical framing.

use crate::support;

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use dialect_proxy::dialect::agui::read_request;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::event::RunIds;
use dialect_proxy::mapping::AguiAliases;
use dialect_proxy::pipeline::translate_all;
use dialect_proxy::pipeline::{Pipeline, PipelineSpec};
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    support::fixture_inputs("agui-agui")
}

fn spec(case: &Path) -> PipelineSpec {
    let request = std::fs::read(case.with_extension("request.json")).expect("request.json");
    let input = read_request(&request, &AguiAliases::builtin()).expect("valid request");
    PipelineSpec::new(
        Dialect::AgUi,
        Dialect::AgUi,
        RunIds {
            thread_id: input.thread_id,
            run_id: input.run_id,
        },
    )
}

/// Splits canonical output into event payloads, checking the framing byte for byte.
fn events(bytes: &[u8], what: &str) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).expect("UTF-8 output");
    assert!(!text.contains('\r'), "{what}: CR in output");
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "{what}: output must end with a blank line"
    );
    text.split_terminator("\n\n")
        .map(|frame| {
            let json = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{what}: frame is not `data: `: {frame:?}"));
            assert!(!json.contains('\n'), "{what}: multi-line frame {frame:?}");
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{what}: bad JSON {json}: {e}"))
        })
        .collect()
}

#[test]
fn every_fixture_normalises_to_its_expected_stream() {
    let mut failures = Vec::new();
    for case in fixtures() {
        let name = case.file_stem().unwrap().to_string_lossy().into_owned();
        let input = std::fs::read(&case).unwrap();
        let expected = events(&std::fs::read(case.with_extension("out")).unwrap(), &name);
        let whole = translate_all(spec(&case), &input).unwrap();
        let actual = events(&whole, &name);
        if actual != expected {
            failures.push(format!(
                "== {name}\n{}",
                support::diff_events(&expected, &actual)
            ));
            continue;
        }
        // Byte by byte: the same bytes, whatever the read boundaries.
        let mut pipeline = Pipeline::new(spec(&case)).unwrap();
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
