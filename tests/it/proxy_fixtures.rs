//! Every hand-written fixture through the real gateway over TCP: the upstream sends the vendor
//! stream cut at arbitrary byte boundaries (inside multi-byte characters too), and the client
//! must receive `: ok` followed by exactly the bytes the offline pipeline produces — which
//! `golden_agui.rs` proves equal to the hand-written expected stream.

use crate::support;

use std::path::{Path, PathBuf};

use dialect_proxy::dialect::agui::read_request;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::event::RunIds;
use dialect_proxy::mapping::AguiAliases;
use dialect_proxy::pipeline::translate_all;
use dialect_proxy::pipeline::PipelineSpec;
use support::{send, Gateway, Request, Script, ScriptedUpstream};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agui-agui");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "in"))
        .collect();
    cases.sort();
    cases
}

/// The upstream script: the input in pieces of 1–13 bytes.
fn chunked(input: &[u8], seed: usize) -> Script {
    let mut script = Script::sse_headers();
    let mut at = 0;
    let mut n = seed;
    while at < input.len() {
        n = (n * 7 + 3) % 13;
        let end = (at + 1 + n).min(input.len());
        script = script.bytes(&input[at..end]);
        at = end;
    }
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_arrives_byte_exact_through_the_gateway() {
    let cases = cases();
    assert!(cases.len() >= 10);
    let inputs: Vec<(String, Vec<u8>)> = cases
        .iter()
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read(p).unwrap(),
            )
        })
        .collect();
    let served = inputs.clone();
    let upstream = ScriptedUpstream::start(move |req| {
        let name = req.path.trim_start_matches('/');
        match served.iter().enumerate().find(|(_, (n, _))| n == name) {
            Some((i, (_, input))) => chunked(input, i),
            None => Script::status_body(404, "text/plain", "no such case"),
        }
    })
    .await;
    let mut failures = Vec::new();
    for (case, (name, input)) in cases.iter().zip(&inputs) {
        let request = std::fs::read(case.with_extension("request.json")).unwrap();
        let parsed = read_request(&request, &AguiAliases::builtin()).unwrap();
        let ids = RunIds {
            thread_id: parsed.thread_id.clone(),
            run_id: parsed.run_id.clone(),
        };
        let expected =
            translate_all(PipelineSpec::new(Dialect::AgUi, Dialect::AgUi, ids), input).unwrap();

        let gateway = Gateway::agui(&upstream.url(&format!("/{name}")), &[]);
        let mut response = send(gateway.addr, &Request::post_json("/", request.clone())).await;
        assert_eq!(response.status, 200, "{name}");
        let body = response.read_to_end().await.to_vec();
        let Some(events) = body.strip_prefix(b": ok\n\n") else {
            failures.push(format!("{name}: the body does not open with `: ok`"));
            continue;
        };
        if events != &expected[..] {
            failures.push(format!(
                "{name}: bytes differ\n--- gateway\n{}\n--- pipeline\n{}",
                String::from_utf8_lossy(events),
                String::from_utf8_lossy(&expected)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
