//! What the fuzz targets share: a pipeline run the way a stream's body drives one (opening,
//! reads at the boundaries the input chooses, end), and the choice of client dialect an input's
//! first byte makes.

use std::sync::LazyLock;

use bytes::BytesMut;
use dialect_proxy::dialect::aap::types::StreamMode;
use dialect_proxy::dialect::confirm::DEFAULT_TOOL;
use dialect_proxy::dialect::{CodecOptions, Dialect};
use dialect_proxy::event::RunIds;
use dialect_proxy::mapping::Mappings;
use dialect_proxy::pipeline::output_check::verify_output;
use dialect_proxy::pipeline::{Pipeline, PipelineOptions, PipelineSpec};

/// The client sides a target can pick: each dialect, AAP in each of its modes.
pub const CLIENTS: [(Dialect, StreamMode); 5] = [
    (Dialect::AgUi, StreamMode::None),
    (Dialect::Hai, StreamMode::None),
    (Dialect::Aap, StreamMode::Delta),
    (Dialect::Aap, StreamMode::Message),
    (Dialect::Aap, StreamMode::None),
];

/// The compiled-in tables, parsed once (parsing them per input would be most of the work).
pub static MAPPINGS: LazyLock<Mappings> = LazyLock::new(Mappings::builtin);

/// The codecs' options: the defaults, with the confirm tool among the client's own tools (a
/// client that is shown the gateway's confirmations runs them: reading them back, the gateway
/// must not confirm its own confirmation).
static CODECS: LazyLock<CodecOptions> = LazyLock::new(|| {
    let mut codecs = CodecOptions {
        mappings: MAPPINGS.clone(),
        tools: vec![DEFAULT_TOOL.to_owned()],
        ..CodecOptions::default()
    };
    codecs.aap.read.client_tools = vec![DEFAULT_TOOL.to_owned()];
    codecs.aap.turn.client_tools = vec![DEFAULT_TOOL.to_owned()];
    codecs
});

/// How a target's input drives a pipeline: from its first two bytes, the client side, the
/// event size limit (small now and then, so the bound is reached) and the read sizes; the rest
/// is the upstream's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Drive {
    pub client: Dialect,
    pub mode: StreamMode,
    pub max_event_bytes: usize,
    /// Reads are 1 + (seed-derived) bytes long, from 1 to 256.
    pub read_seed: u8,
}

impl Drive {
    /// Splits `data` into the drive and the upstream bytes; `None` when it is too short.
    pub fn from(data: &[u8]) -> Option<(Drive, &[u8])> {
        let [select, read_seed, rest @ ..] = data else {
            return None;
        };
        let (client, mode) = CLIENTS[usize::from(select % 5)];
        let max_event_bytes = if select & 0x80 != 0 { 256 } else { 1 << 20 };
        let drive = Drive {
            client,
            mode,
            max_event_bytes,
            read_seed: *read_seed,
        };
        Some((drive, rest))
    }
}

/// `input`, sent by an upstream speaking `upstream`, through the pipeline to `drive`'s client:
/// everything the client would receive.
pub fn run(upstream: Dialect, drive: Drive, input: &[u8]) -> Vec<u8> {
    let ids = RunIds {
        thread_id: "thread".into(),
        run_id: "run".into(),
    };
    // Built field by field: `PipelineSpec::new` would parse the tables again.
    let mut spec = PipelineSpec {
        upstream,
        client: drive.client,
        codecs: CODECS.clone(),
        options: PipelineOptions::new(ids),
    };
    spec.options.max_event_bytes = drive.max_event_bytes;
    spec.codecs.aap.turn.mode = drive.mode;
    let Ok(mut pipeline) = Pipeline::new(spec) else {
        return Vec::new();
    };
    let mut out = BytesMut::new();
    pipeline.begin(&mut out);
    if out.is_empty() {
        out.extend_from_slice(pipeline.opening().unwrap_or_default());
    }
    // A small xorshift over the seed: reads of varied sizes, the same for the same input.
    let mut state = u32::from(drive.read_seed) | 0x100;
    let mut rest = input;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (1 + (state % 256) as usize).min(rest.len());
        pipeline.push(&rest[..n], &mut out);
        rest = &rest[n..];
    }
    pipeline.end(&mut out);
    out.to_vec()
}

/// Runs `input` from an upstream speaking `upstream` and panics unless what the client gets is
/// well formed in its dialect and closed by its terminal once per run.
pub fn check_reader(upstream: Dialect, data: &[u8]) {
    let Some((drive, input)) = Drive::from(data) else {
        return;
    };
    let output = run(upstream, drive, input);
    if let Err(violation) = verify_output(drive.client, drive.mode, &output) {
        panic!(
            "{upstream:?} → {:?} ({:?}): {violation}\n--- output\n{}",
            drive.client,
            drive.mode,
            String::from_utf8_lossy(&output)
        );
    }
}
