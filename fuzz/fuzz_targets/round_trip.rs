//! Reader → writer → reader, per dialect: what the gateway writes in a dialect, read again as
//! that dialect's upstream and written once more, is well formed and comes out the same (frame
//! by frame: the same event names, the same JSON; the order of an event's keys may differ). The
//! gateway's output is a fixed point of its own translation: it writes nothing its reader would
//! repair or read otherwise.
//!
//! AG-UI is held to this from its first pass. HAI and AAP (AAP in `delta` mode, the mode its
//! reader takes) from their second: a first pass may settle what their wire leaves open, and
//! once settled it stays.
//! - HAI: thinking flags the writer had to make up (the upstream sent none) read back as the
//!   upstream's own, so the made-up last chunk `{thinking:false}` (marked synthetic, dropped
//!   by the reader) is not made again (`translation.md`: only for synthesised flags).
//! - AAP: a call the agent left without a result when it ended its turn is shown as the
//!   client's (`tool_use`); read back at a `tool_use` stop, a call that is not a client tool
//!   is a permission, and confirmed.
#![no_main]

use dialect_proxy::dialect::aap::types::StreamMode;
use dialect_proxy::dialect::Dialect;
use dialect_proxy::pipeline::output_check::verify_output;
use dialect_proxy_fuzz::{run, Drive};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Each frame's `event:` name and `data:` JSON (checked well formed before this is asked).
fn frames(output: &[u8]) -> Vec<(Option<String>, Value)> {
    String::from_utf8_lossy(output)
        .split_terminator("\n\n")
        .map(|frame| {
            let (name, data) = match frame.strip_prefix("event: ") {
                Some(rest) => rest.split_once("\ndata: ").unwrap_or((rest, "")),
                None => ("", frame.strip_prefix("data: ").unwrap_or(frame)),
            };
            let name = (!name.is_empty()).then(|| name.to_owned());
            (name, serde_json::from_str(data).unwrap_or(Value::Null))
        })
        .collect()
}

const DIALECTS: [Dialect; 3] = [Dialect::AgUi, Dialect::Hai, Dialect::Aap];

fuzz_target!(|data: &[u8]| {
    let [select, read_seed, input @ ..] = data else {
        return;
    };
    let dialect = DIALECTS[usize::from(select % 3)];
    let drive = Drive {
        client: dialect,
        mode: StreamMode::Delta,
        max_event_bytes: 1 << 20,
        read_seed: *read_seed,
    };
    let mut before = run(dialect, drive, input);
    if dialect != Dialect::AgUi {
        before = run(dialect, drive, &before);
    }
    let after = run(dialect, drive, &before);
    for output in [&before, &after] {
        if let Err(violation) = verify_output(dialect, drive.mode, output) {
            panic!(
                "{dialect:?}: {violation}\n{}",
                String::from_utf8_lossy(output)
            );
        }
    }
    if frames(&before) != frames(&after) {
        panic!(
            "{dialect:?} is not a fixed point\n--- before\n{}\n--- after\n{}",
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        );
    }
});
