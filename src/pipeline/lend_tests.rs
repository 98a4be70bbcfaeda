//! Lent deltas ([`Reader::read_delta`], [`Writer::write_delta`]) are an accelerator, never a
//! second behaviour: every stream translates to the same bytes, notes and counts with them as
//! with every event built and stepped. So is the live body's stop before the general path
//! ([`Pipeline::pause_after_output`]): with it, a push writes in at most two parts what it
//! writes whole without.

use std::path::Path;

use bytes::BytesMut;

use super::*;
use crate::dialect::aap::transcript::Transcript;
use crate::dialect::aap::types::StreamMode;
use crate::dialect::aap::{AapWriter, TurnOptions};
use crate::event::{DeltaRef, Event};
use crate::sse::{SseEvent, SseEventRef};

/// The reader it wraps, lending nothing: every event takes the general path.
struct Unlent(AnyReader);

impl Reader for Unlent {
    fn start(&mut self, out: &mut Vec<Event>) {
        self.0.start(out)
    }

    fn read(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Event>,
        notes: &mut Vec<Note>,
    ) -> Result<(), Failure> {
        self.0.read(event, out, notes)
    }

    fn read_delta<'a>(&'a mut self, _event: SseEventRef<'a>) -> Option<DeltaRef<'a>> {
        None
    }

    fn finish(&mut self, out: &mut Vec<Event>) {
        self.0.finish(out)
    }

    fn at_handover(&self) -> bool {
        self.0.at_handover()
    }

    fn next_response(&mut self, framing: Framing) {
        self.0.next_response(framing)
    }
}

/// What a pipeline made of a stream: its bytes, counts and notes.
type Made = (BytesMut, StreamStats, Vec<(Note, u64)>);

/// What a pipeline made of `input` (fed in `step`-byte pieces). With `pause`, fed as the live
/// body feeds it: it stops after output ([`Pipeline::pause_after_output`]) and the rest follows
/// ([`Pipeline::push_rest`]); the stops are counted in [`PAUSES`].
fn run<R: Reader, W: Writer>(
    pipeline: &mut Pipeline<R, W>,
    input: &[u8],
    step: usize,
    pause: bool,
) -> Made {
    pipeline.pause_after_output(pause);
    let mut out = BytesMut::new();
    pipeline.begin(&mut out);
    for piece in input.chunks(step) {
        let before = out.len();
        pipeline.push(piece, &mut out);
        if pipeline.paused() {
            assert!(pause, "stopped without being asked to");
            PAUSES.with(|p| p.set(p.get() + 1));
            assert!(out.len() > before, "stopped before anything was written");
            pipeline.push_rest(&mut out);
            assert!(!pipeline.paused(), "the rest stopped again");
        }
    }
    pipeline.end(&mut out);
    let notes = pipeline.note_counts().to_vec();
    (out, pipeline.stats(), notes)
}

fn spec(upstream: Dialect, client: Dialect, mode: StreamMode) -> PipelineSpec {
    let ids = RunIds {
        thread_id: "t".into(),
        run_id: "r".into(),
    };
    let mut spec = PipelineSpec::new(upstream, client, ids);
    spec.options.clock = Clock::Fixed(1_760_000_000_000);
    spec.codecs.aap.turn.mode = mode;
    spec
}

/// The writer it wraps, counting the deltas it wrote as lent.
struct Counted<W> {
    inner: W,
    lent: u64,
}

impl<W: Writer> Writer for Counted<W> {
    fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), Failure> {
        self.inner.write(event, out)
    }

    fn write_delta(
        &mut self,
        delta: &DeltaRef<'_>,
        out: &mut BytesMut,
    ) -> Option<Result<(), Failure>> {
        let written = self.inner.write_delta(delta, out);
        self.lent += u64::from(written.is_some());
        written
    }

    fn opening(&self) -> Option<&'static [u8]> {
        self.inner.opening()
    }

    fn is_stream(&self) -> bool {
        self.inner.is_stream()
    }

    fn wants_clock(&self) -> bool {
        self.inner.wants_clock()
    }

    fn set_now(&mut self, now_ms: i64) {
        self.inner.set_now(now_ms)
    }

    fn take_notes(&mut self, notes: &mut Vec<Note>) {
        self.inner.take_notes(notes)
    }

    fn runs(&self) -> crate::dialect::Runs {
        self.inner.runs()
    }
}

/// Translates `input` with lent deltas and without, and with lent deltas and the live body's
/// stops, and compares; returns how many deltas the writer wrote as lent.
fn same_both_ways<W: Writer>(
    upstream: Dialect,
    writer: impl Fn() -> W,
    spec: &PipelineSpec,
    input: &[u8],
    what: &str,
) -> u64 {
    let mut lent_count = 0;
    for step in [input.len().max(1), 7] {
        let options = spec.options.clone();
        let reader = upstream.reader(&options.ids, options.framing, &spec.codecs);
        let writer_lent = Counted {
            inner: writer(),
            lent: 0,
        };
        let mut lent = Pipeline::from_parts(reader, writer_lent, options.clone());
        let lent_out = run(&mut lent, input, step, false);
        lent_count += lent.writer().lent;
        let reader = upstream.reader(&options.ids, options.framing, &spec.codecs);
        let mut built = Pipeline::from_parts(Unlent(reader), writer(), options.clone());
        let built_out = run(&mut built, input, step, false);
        let reader = upstream.reader(&options.ids, options.framing, &spec.codecs);
        let mut paused = Pipeline::from_parts(reader, writer(), options);
        let paused_out = run(&mut paused, input, step, true);
        for (other, how) in [(&built_out, "built"), (&paused_out, "stopping")] {
            assert_eq!(
                String::from_utf8_lossy(&lent_out.0),
                String::from_utf8_lossy(&other.0),
                "{what}, pieces of {step} bytes, {how}"
            );
            assert_eq!(lent_out.1, other.1, "{what}: counts, {how}");
            assert_eq!(lent_out.2, other.2, "{what}: notes, {how}");
        }
    }
    lent_count
}

thread_local! {
    /// How often a push stopped in [`run`] on this test's thread.
    static PAUSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// [`same_both_ways`] for every client dialect (AAP in each stream mode).
fn same_to_every_client(upstream: Dialect, input: &[u8], name: &str) -> u64 {
    let clients = [
        (Dialect::AgUi, StreamMode::Delta),
        (Dialect::Hai, StreamMode::Delta),
        (Dialect::Aap, StreamMode::Delta),
        (Dialect::Aap, StreamMode::Message),
        (Dialect::Aap, StreamMode::None),
    ];
    let mut lent = 0;
    for (client, mode) in clients {
        if check_pair(upstream, client).is_err() {
            continue;
        }
        let spec = spec(upstream, client, mode);
        let what = format!("{name}: {upstream} → {client} ({mode:?})");
        lent += same_both_ways(
            upstream,
            || client.writer(&spec.codecs),
            &spec,
            input,
            &what,
        );
    }
    lent
}

fn frames(events: &[&str]) -> String {
    events
        .iter()
        .map(|data| format!("data: {data}\n\n"))
        .collect()
}

/// Deltas of every kind and shape next to the events around them: escaped text and ids,
/// unknown fields, timestamps before and after, a delta of a message that is not open, of a
/// lane, two messages open at once (AAP streams one live), empty deltas, chunks.
#[test]
fn hand_made_streams_translate_the_same_with_lent_deltas() {
    let stream = frames(&[
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"plain"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"esc\"aped\n\u00e9 {braces}"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","timestamp":1760000000123,"messageId":"m","delta":"py"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ts","timestamp":1760000000124}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"f","ts":17,"model":"x"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"nobody","delta":"stray"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"second, waiting"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"first, live"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"now live"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m2"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"s1","subagentRunId":"sub"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"s1","delta":"in a lane"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"s1"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m\u0033","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m\u0033","delta":"escaped id"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m3"}"#,
        r#"{"type":"REASONING_START","messageId":"rs"}"#,
        r#"{"type":"REASONING_MESSAGE_START","messageId":"rm","role":"reasoning"}"#,
        r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"rm","delta":"thinking"}"#,
        r#"{"type":"REASONING_MESSAGE_END","messageId":"rm"}"#,
        r#"{"type":"REASONING_END","messageId":"rs"}"#,
        r#"{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"q\":"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"\"rust\"}"}"#,
        r#"{"type":"TOOL_CALL_END","toolCallId":"c"}"#,
        r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"k","role":"assistant","delta":"chunk"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"k","delta":"after a chunk"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"k"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"after the end"}"#,
    ]);
    let lent = same_to_every_client(Dialect::AgUi, stream.as_bytes(), "hand-made");
    // Each of the five clients, in both feeds, writes some of the deltas as lent.
    assert!(lent >= 5 * 2 * 3, "only {lent} deltas lent");
    // Read whole, the stream stops once for every client that writes as it goes (all but AAP
    // without streaming, which writes its turn at the end), before the first message's end.
    let pauses = PAUSES.with(std::cell::Cell::get);
    assert!(pauses >= 4, "a push stopped only {pauses} times");
}

/// HAI text deltas in the layout HAI agents write, and around it: escaped text, braces, a
/// timestamp before and after, unknown fields, a message that is not open, thinking.
#[test]
fn hai_streams_translate_the_same_with_lent_deltas() {
    let text = |id: &str, content: &str| {
        let delta = serde_json::json!({"output": {"type": "text", "content": content}});
        serde_json::json!({"type": "BUSINESS_DATA_CONTENT", "messageId": id, "delta": delta.to_string()})
            .to_string()
    };
    let events = [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#.to_owned(),
        r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}"#.to_owned(),
        text("m", "plain"),
        text("m", "with \"quotes\"\nand a line"),
        text("m", "{braces}"),
        text("m", ""),
        text("nobody", "stray"),
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","timestamp":1760000000001,"delta":"{\"output\":{\"type\":\"text\",\"content\":\"ts first\"}}"}"#.to_owned(),
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"{\"output\":{\"type\":\"text\",\"content\":\"ts last\"}}","timestamp":1760000000002}"#.to_owned(),
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"{\"output\":{\"type\":\"text\",\"content\":\"extra\"}}","vendor":"x"}"#.to_owned(),
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"{\"output\":{\"type\":\"thinking\",\"content\":\"hmm\"}}"}"#.to_owned(),
        text("m", "after thinking"),
        r#"{"type":"BUSINESS_DATA_END","messageId":"m"}"#.to_owned(),
        text("m", "after the end"),
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#.to_owned(),
    ];
    let stream = frames(&events.iter().map(String::as_str).collect::<Vec<_>>());
    let lent = same_to_every_client(Dialect::Hai, stream.as_bytes(), "hai");
    assert!(lent >= 5 * 2 * 3, "only {lent} deltas lent");
}

/// AAP deltas as AAP agents write them, and around them: escaped text, an empty delta, an
/// unknown field, reasoning between text, a call, deltas after the stop.
#[test]
fn aap_streams_translate_the_same_with_lent_deltas() {
    let stream = [
        ("turn_start", "{}"),
        ("text_delta", r#"{"delta":"plain"}"#),
        ("text_delta", r#"{"delta":"esc\"aped\n\u00e9"}"#),
        ("text_delta", r#"{"delta":""}"#),
        ("text_delta", r#"{"delta":"extra","vendor":1}"#),
        ("text_delta", r#"{"vendor":1,"delta":"other order"}"#),
        ("thinking_delta", r#"{"delta":"hmm"}"#),
        ("thinking_delta", r#"{"delta":"more"}"#),
        ("text_delta", r#"{"delta":"back to text"}"#),
        ("text_delta", r#"{"delta":"again"}"#),
        (
            "tool_call",
            r#"{"toolCallId":"c","name":"search","input":{"q":"x"}}"#,
        ),
        ("text_delta", r#"{"delta":"after a call"}"#),
        ("turn_stop", r#"{"stopReason":"end_turn"}"#),
        ("text_delta", r#"{"delta":"after the stop"}"#),
    ]
    .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
    .concat();
    let lent = same_to_every_client(Dialect::Aap, stream.as_bytes(), "aap");
    assert!(lent >= 5 * 2 * 3, "only {lent} deltas lent");
}

/// A delta over the AAP writer's history budget ends the turn the same way lent as built.
#[test]
fn a_lent_delta_over_the_history_budget_ends_the_run_as_a_built_one_does() {
    let big = "x".repeat(4096);
    let delta = format!(r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"{big}"}}"#);
    let mut events = vec![
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#.to_owned(),
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#.to_owned(),
    ];
    events.extend(std::iter::repeat_n(delta, 8));
    let stream = frames(&events.iter().map(String::as_str).collect::<Vec<_>>());
    for mode in [StreamMode::Delta, StreamMode::Message] {
        let spec = spec(Dialect::AgUi, Dialect::Aap, mode);
        let writer = || {
            AapWriter::new(
                TurnOptions {
                    mode,
                    ..TurnOptions::default()
                },
                Transcript::new(Vec::new(), None, 10_000),
            )
        };
        let input = stream.as_bytes();
        let lent = same_both_ways(Dialect::AgUi, writer, &spec, input, "budget");
        assert!(lent > 0);
        let mut pipeline = Pipeline::from_parts(
            Dialect::AgUi.reader(&spec.options.ids, spec.options.framing, &spec.codecs),
            writer(),
            spec.options.clone(),
        );
        let (out, ..) = run(&mut pipeline, input, 1 << 20, false);
        let out = String::from_utf8_lossy(&out);
        let tail = &out[out.len().saturating_sub(200)..];
        assert!(tail.contains(r#"{"stopReason":"error"}"#), "{tail}");
        // Two deltas fit in 10,000 bytes; the third ends the turn.
        let streamed = if mode == StreamMode::Delta { 2 } else { 0 };
        assert_eq!(
            out.matches("event: text_delta").count(),
            streamed,
            "{mode:?}"
        );
    }
}

/// Every recorded stream of the golden fixtures, from every upstream dialect to every client.
#[test]
fn every_fixture_translates_the_same_with_lent_deltas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (mut seen, mut lent) = (0, 0);
    for dir in std::fs::read_dir(&root).unwrap().flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        let upstream = match name.split('-').next() {
            Some("agui") => Dialect::AgUi,
            Some("hai") => Dialect::Hai,
            Some("aap") => Dialect::Aap,
            _ => continue,
        };
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "in") {
                let input = std::fs::read(&path).unwrap();
                lent += same_to_every_client(upstream, &input, &path.display().to_string());
                seen += 1;
            }
        }
    }
    assert!(seen > 100, "only {seen} fixtures found");
    assert!(lent > 100, "only {lent} deltas lent");
    let pauses = PAUSES.with(std::cell::Cell::get);
    assert!(pauses > 100, "a push stopped only {pauses} times");
}
