//! Nothing panics on any input, and every stream still ends well. Deterministic pseudo-random
//! mutations of the hand-written fixtures (bytes flipped, inserted, deleted, lines duplicated or
//! dropped) go through the real pipeline at random read boundaries; whatever comes out must be a
//! legal 1.0 run in canonical framing. The same holds for all nine client × upstream pairs, each
//! fed its upstream dialect's recorded streams: the client's dialect, well formed, closed by its
//! terminal once per run (`pipeline::output_check`); a sample of them goes through the real
//! binary too, with hostile streams of 32 MiB, under a check of the gateway's peak memory.
//! Request bodies get the same treatment and must either parse or be refused with
//! `INVALID_REQUEST`.

use crate::support;

use std::path::Path;
use std::sync::{atomic::AtomicUsize, Arc};

use bytes::BytesMut;
use dialect_proxy::dialect::aap::types::StreamMode;
use dialect_proxy::dialect::agui::read_request;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::error::ErrorCode;
use dialect_proxy::event::Event;
use dialect_proxy::event::RunIds;
use dialect_proxy::mapping::AguiAliases;
use dialect_proxy::pipeline::output_check::verify_output;
use dialect_proxy::pipeline::verify::verify_stream;
use dialect_proxy::pipeline::{Pipeline, PipelineSpec};
use support::random::{structured_stream, Rng};
use support::{pairs, pairs::Answer, ConfigFile, Gateway, Script, ScriptedUpstream};

const INTERESTING: &[&[u8]] = &[
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b":",
    b"{",
    b"}",
    b"\"",
    b"null",
    b"[DONE]",
    b"\xEF\xBB\xBF",
    b"\xFF",
    b"\xE4\xBD",
    b"RUN_FINISHED",
    b"RUN_ERROR",
    b"_CHUNK",
    b"THINKING_",
    b"\"type\":",
    b"\"delta\":{}",
    b"1e400",
    b"-0",
    b"\"messageId\":\"\"",
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                out.splice(at..at, piece.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + 1 + rng.below(40)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 => {
                // Duplicate a stretch (repeated events, repeated terminals).
                let end = (at + rng.below(200)).min(out.len());
                let copy = out[at..end].to_vec();
                out.splice(end..end, copy);
            }
            4 => out.truncate(at),
            _ => {}
        }
    }
    out
}

fn run(input: &[u8], rng: &mut Rng, max_event_bytes: usize) -> Vec<u8> {
    let (agui, none) = (Dialect::AgUi, StreamMode::None);
    run_pair(agui, agui, none, input, rng, max_event_bytes)
}

fn assert_ends_well(output: &[u8], context: &str) {
    let text =
        std::str::from_utf8(output).unwrap_or_else(|_| panic!("{context}: output is not UTF-8"));
    let events: Vec<Event> = text
        .split_terminator("\n\n")
        .map(|frame| {
            let json = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{context}: bad frame {frame:?}"));
            assert!(
                !json.contains('\n') && !json.contains('\r'),
                "{context}: multi-line frame"
            );
            serde_json::from_str(json).unwrap_or_else(|e| {
                panic!("{context}: the gateway wrote an event it cannot read back ({e}): {json}")
            })
        })
        .collect();
    if let Err(v) = verify_stream(&events) {
        let types: Vec<_> = events.iter().map(|e| e.event_type().as_str()).collect();
        panic!("{context}: {v}\n{types:?}");
    }
}

#[test]
fn mutated_vendor_streams_always_end_well() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agui-agui");
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "in"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10);
    let mut runs = 0;
    for (name, input) in &inputs {
        for round in 0..300u64 {
            let seed = 0x5EED ^ (round << 8) ^ name.len() as u64;
            let mut rng = Rng(seed | 1);
            let mutated = mutate(&mut rng, input);
            // Small limits now and then, so the size guard is exercised too.
            let limit = if round % 7 == 0 {
                64 + rng.below(256)
            } else {
                1 << 20
            };
            let output = run(&mutated, &mut rng, limit);
            assert_ends_well(&output, &format!("{name} seed {seed:#x}"));
            runs += 1;
        }
    }
    assert!(runs >= 3000);
}

#[test]
fn arbitrary_bytes_end_well() {
    let mut rng = Rng(0xDEC0DE);
    for round in 0..2000 {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(3) == 0 {
                    INTERESTING[rng.below(INTERESTING.len())][0]
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        let output = run(&bytes, &mut rng, 1 << 20);
        assert_ends_well(&output, &format!("random round {round}"));
    }
}

#[test]
fn mutated_requests_parse_or_are_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agui-agui");
    let aliases = AguiAliases::builtin();
    let mut rng = Rng(0xBAD_BEEF);
    let mut refused = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if !path.to_string_lossy().ends_with(".request.json") {
            continue;
        }
        let body = std::fs::read(&path).unwrap();
        for _ in 0..200 {
            let mutated = mutate(&mut rng, &body);
            match read_request(&mutated, &aliases) {
                Ok(input) => assert!(!input.thread_id.is_empty() && !input.run_id.is_empty()),
                Err(failure) => {
                    assert_eq!(failure.code, ErrorCode::InvalidRequest);
                    assert!(!failure.message.is_empty());
                    refused += 1;
                }
            }
        }
    }
    assert!(
        refused > 100,
        "mutations should break many requests ({refused})"
    );
}

/// Structured random streams (see `support::random`): whatever comes out must satisfy the 1.0
/// client's rules. `tests/it/real_client.rs` feeds a sample of the same streams to the real client.
#[test]
fn random_structured_streams_satisfy_the_client_rules() {
    let mut rng = Rng(0xA6_01);
    for round in 0..4000 {
        let input = structured_stream(&mut rng);
        let output = run(input.as_bytes(), &mut rng, 1 << 20);
        assert_ends_well(&output, &format!("structured round {round}\n{input}"));
    }
}

/// The recorded upstream streams of `dialect` (`ag-ui`, `hai`, `aap`): the inputs of every
/// fixture directory whose upstream it is.
fn upstream_inputs(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut inputs = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap().flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&format!("{prefix}-")) {
            continue;
        }
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let path = file.path();
            if path.extension().is_some_and(|x| x == "in") {
                let label = format!("{name}/{}", path.file_name().unwrap().to_string_lossy());
                inputs.push((label, std::fs::read(&path).unwrap()));
            }
        }
    }
    inputs.sort();
    inputs
}

/// `input` through the pipeline `upstream` → `client` at random read boundaries, ended.
fn run_pair(
    upstream: Dialect,
    client: Dialect,
    mode: StreamMode,
    input: &[u8],
    rng: &mut Rng,
    max_event_bytes: usize,
) -> Vec<u8> {
    let ids = RunIds {
        thread_id: "thread".into(),
        run_id: "run".into(),
    };
    let mut spec = PipelineSpec::new(upstream, client, ids);
    spec.options.max_event_bytes = max_event_bytes;
    spec.codecs.aap.turn.mode = mode;
    let mut pipeline = Pipeline::new(spec).unwrap();
    let mut out = BytesMut::new();
    // What a stream's body writes before the upstream's first byte (`http::body`): the
    // run's own opening events, else the writer's opening frame (AAP's `turn_start`).
    pipeline.begin(&mut out);
    if out.is_empty() {
        out.extend_from_slice(pipeline.opening().unwrap_or_default());
    }
    let mut rest = input;
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(97));
        pipeline.push(&rest[..n], &mut out);
        rest = &rest[n..];
    }
    pipeline.end(&mut out);
    out.to_vec()
}

const DIALECTS: [(Dialect, &str); 3] = [
    (Dialect::AgUi, "agui"),
    (Dialect::Hai, "hai"),
    (Dialect::Aap, "aap"),
];

const AAP_MODES: [StreamMode; 3] = [StreamMode::Delta, StreamMode::Message, StreamMode::None];

/// Every client × upstream pair: the upstream dialect's recorded streams, mutated, and (for an
/// AG-UI upstream) generated streams, at random read boundaries and now and then under a small
/// event limit. Whatever comes out is well formed in the client's dialect and ends with its
/// terminal exactly once per run (`pipeline::output_check`); nothing panics.
#[test]
fn mutated_and_generated_streams_end_well_through_all_nine_pairs() {
    let mut checked = 0;
    for (upstream, prefix) in DIALECTS {
        let inputs = upstream_inputs(prefix);
        assert!(inputs.len() >= 5, "{prefix}: {} inputs", inputs.len());
        for (client, _) in DIALECTS {
            let mut rng = Rng(0x9A1E ^ (checked as u64 + 1) << 4);
            for (name, input) in &inputs {
                for round in 0..24 {
                    let mode = AAP_MODES[round % AAP_MODES.len()];
                    let mutated = if round == 0 {
                        input.clone()
                    } else {
                        mutate(&mut rng, input)
                    };
                    let limit = if round % 5 == 4 {
                        64 + rng.below(512)
                    } else {
                        1 << 20
                    };
                    let output = run_pair(upstream, client, mode, &mutated, &mut rng, limit);
                    if let Err(violation) = verify_output(client, mode, &output) {
                        panic!(
                            "{upstream:?} → {client:?} ({mode:?}), {name} round {round}: \
                             {violation}\n--- input\n{}\n--- output\n{}",
                            String::from_utf8_lossy(&mutated),
                            String::from_utf8_lossy(&output)
                        );
                    }
                    checked += 1;
                }
            }
            if upstream == Dialect::AgUi {
                for round in 0..300 {
                    let mode = AAP_MODES[round % AAP_MODES.len()];
                    let input = structured_stream(&mut rng);
                    let output =
                        run_pair(upstream, client, mode, input.as_bytes(), &mut rng, 1 << 20);
                    if let Err(violation) = verify_output(client, mode, &output) {
                        panic!(
                            "{upstream:?} → {client:?} ({mode:?}), generated round {round}: \
                             {violation}\n--- input\n{input}\n--- output\n{}",
                            String::from_utf8_lossy(&output)
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 5000, "{checked} streams checked");
}

/// Peak resident memory of process `pid` (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

/// The upstream's stream for a sample: `SSE headers`, then `bytes` in chunks of random sizes
/// (seeded by `seed`, so the run can be repeated), then the clean end of the body.
fn sample_script(bytes: &[u8], seed: u64) -> Script {
    let mut rng = Rng(seed);
    let mut script = Script::sse_headers();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + rng.below(4096)).min(rest.len());
        script = script.bytes(&rest[..n]);
        rest = &rest[n..];
    }
    script
}

/// The bytes of a hostile sample for `upstream`'s dialect: one event of 32 MiB that never ends
/// (no line end), or 32 MiB of 1 KiB comments. A gateway that held either would grow by as much.
fn hostile(upstream: Dialect, endless_line: bool) -> Vec<u8> {
    let mut bytes = match upstream {
        Dialect::Aap => b"event: turn_start\ndata: {}\n\n".to_vec(),
        _ => Vec::new(),
    };
    if endless_line {
        bytes.extend_from_slice(b"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"delta\":\"");
        bytes.resize(bytes.len() + (32 << 20), b'x');
    } else {
        let comment = format!(": {}\n\n", "k".repeat(1020));
        for _ in 0..32 * 1024 {
            bytes.extend_from_slice(comment.as_bytes());
        }
    }
    bytes
}

/// A sample of the same mutated streams through the real binary, for each of the nine pairs
/// (the AAP client in its three modes in turn), plus two hostile streams of 32 MiB per pair:
/// every answer is well formed in the client's dialect and ended by its terminal once
/// (`pipeline::output_check`; an AAP turn that failed before its first event may be a JSON
/// error instead), the gateway does not panic, and its peak memory stays within
/// `max_event_bytes` (64 KiB) of what it needed before: nothing held the 32 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_through_the_real_binary_ends_well_in_all_nine_pairs_within_memory_bounds() {
    const MUTATED: usize = 9;
    for (upstream, prefix) in DIALECTS {
        let inputs = upstream_inputs(prefix);
        let mut rng = Rng(0x5A4D_17E5 ^ prefix.len() as u64);
        let mut samples: Vec<Vec<u8>> = (0..MUTATED)
            .map(|i| {
                let (_, input) = &inputs[rng.below(inputs.len())];
                if i == 0 {
                    input.clone()
                } else {
                    mutate(&mut rng, input)
                }
            })
            .collect();
        samples.push(hostile(upstream, true));
        samples.push(hostile(upstream, false));
        let samples = Arc::new(samples);
        let served = samples.clone();
        let sessions = AtomicUsize::new(0);
        let agent = ScriptedUpstream::start(move |request| {
            if upstream == Dialect::Aap {
                if let Some(answer) = pairs::aap_agent_besides_turns(request, &sessions) {
                    return answer;
                }
            }
            // The sample the user's message names; a turn without one (the agent's own
            // follow-up of a tool round) ends at once.
            let body = String::from_utf8_lossy(&request.body);
            let named = (0..served.len()).find(|i| body.contains(&format!("sample:{i};")));
            match (named, upstream) {
                (Some(i), _) => sample_script(&served[i], i as u64),
                (None, Dialect::Aap) => Script::sse_headers()
                    .bytes("event: turn_start\ndata: {}\n\n")
                    .bytes("event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n"),
                (None, _) => Script::status_body(400, "application/json", "{}"),
            }
        })
        .await;
        let url = agent.url(pairs::upstream_path(upstream));
        for (client, _) in DIALECTS {
            let route = pairs::route(client, upstream, "/run", &url, "max_event_bytes = 65536");
            let file = ConfigFile::new("sample", &route);
            let mut gateway = Gateway::spawn(&["--config", file.arg()]);
            let mut baseline = None;
            for i in 0..samples.len() {
                let mode = AAP_MODES[i % AAP_MODES.len()];
                let mode_name = match mode {
                    StreamMode::Delta => "delta",
                    StreamMode::Message => "message",
                    StreamMode::None => "none",
                };
                let at = format!("{upstream:?} → {client:?} ({mode_name}), sample {i}");
                let marker = format!("sample:{i};");
                let request =
                    pairs::run_request(client, &gateway, "/run", &marker, mode_name).await;
                let answer = Answer::of(&gateway, &request).await;
                let refused_turn = client == Dialect::Aap
                    && mode == StreamMode::None
                    && answer.status == 502
                    && answer.error_code().is_some();
                if !refused_turn {
                    assert_eq!(answer.status, 200, "{at}: {}", answer.text());
                    if let Err(violation) = verify_output(client, mode, &answer.body) {
                        panic!("{at}: {violation}\n--- output\n{}", answer.text());
                    }
                }
                // What the gateway needed for an ordinary stream of this pair.
                baseline.get_or_insert_with(|| peak_rss_kib(gateway.pid()));
            }
            let (before, peak) = (baseline.unwrap_or_default(), peak_rss_kib(gateway.pid()));
            assert!(
                peak < before + 16 * 1024,
                "{upstream:?} → {client:?}: peak RSS {peak} KiB, {before} KiB after the first \
                 stream: the 32 MiB streams were held"
            );
            assert!(gateway.is_running(), "{upstream:?} → {client:?}");
            assert!(
                !gateway.stderr().contains("panicked"),
                "{}",
                gateway.stderr()
            );
        }
    }
}
