//! What a writer produced for one stream, checked in the client's own dialect: every frame well
//! formed (comment frames skipped, as SSE clients skip them), and the stream closed by its
//! dialect's terminal — once per run, last. The property tests and the fuzz targets hold every
//! pipeline's output to it, whatever the upstream sent, and so does the sample the property
//! test sends through the real binary.
//!
//! - AG-UI: `data: <event>` frames that read back as events, then [`verify_stream`] (several
//!   runs allowed, each legal and ended).
//! - HAI: `data: <object with a string type>` frames; one run per stream, so exactly one
//!   `RUN_FINISHED`/`RUN_ERROR`, last.
//! - AAP, streamed (`delta`, `message`): `event: <name>` + `data: <object>` frames, `turn_start`
//!   first, exactly one `turn_stop`, last, with a string `stopReason`. AAP `none`: one JSON object
//!   with a string `stopReason` and an array of `messages`.

use serde_json::Value;

use super::verify::{verify_stream, Violation};
use crate::dialect::aap::types::StreamMode;
use crate::dialect::Dialect;
use crate::event::Event;

/// Checks `output`, all a writer of `client` wrote for one stream (`aap_mode`: the AAP writer's
/// mode, ignored for the others).
pub fn verify_output(
    client: Dialect,
    aap_mode: StreamMode,
    output: &[u8],
) -> Result<(), Violation> {
    let text = std::str::from_utf8(output).map_err(|e| at(0, format!("not UTF-8: {e}")))?;
    match client {
        Dialect::AgUi => {
            let events = frames(text)?
                .iter()
                .enumerate()
                .map(|(i, frame)| {
                    let data = data_only(i, frame)?;
                    serde_json::from_str::<Event>(data)
                        .map_err(|e| at(i, format!("not an event ({e}): {data}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            verify_stream(&events)
        }
        Dialect::Hai => {
            let types = frames(text)?
                .iter()
                .enumerate()
                .map(|(i, frame)| {
                    let object = object(i, data_only(i, frame)?)?;
                    match object.get("type") {
                        Some(Value::String(t)) => Ok(t.clone()),
                        _ => Err(at(i, "an event without a string type".into())),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            once_last(&types, |t| t == "RUN_FINISHED" || t == "RUN_ERROR")
        }
        Dialect::Aap if aap_mode == StreamMode::None => {
            let answer = object(0, text)?;
            if !answer.get("stopReason").is_some_and(Value::is_string) {
                return Err(at(0, "no string stopReason".into()));
            }
            if !answer.get("messages").is_some_and(Value::is_array) {
                return Err(at(0, "no messages array".into()));
            }
            Ok(())
        }
        Dialect::Aap => {
            let frames = frames(text)?;
            let mut names = Vec::with_capacity(frames.len());
            for (i, frame) in frames.iter().enumerate() {
                let (name, data) = frame
                    .strip_prefix("event: ")
                    .and_then(|rest| rest.split_once("\ndata: "))
                    .ok_or_else(|| at(i, format!("not an `event:` + `data:` frame: {frame:?}")))?;
                let data = object(i, data)?;
                if name == "turn_stop" && !data.get("stopReason").is_some_and(Value::is_string) {
                    return Err(at(i, "turn_stop without a string stopReason".into()));
                }
                names.push(name.to_owned());
            }
            if names.first().map(String::as_str) != Some("turn_start") {
                return Err(at(0, "the stream must open with turn_start".into()));
            }
            once_last(&names, |n| n == "turn_stop")
        }
    }
}

fn at(index: usize, problem: String) -> Violation {
    Violation { index, problem }
}

/// The frames of an SSE text, each without its blank line; an unfinished last frame is a
/// violation.
fn frames(text: &str) -> Result<Vec<&str>, Violation> {
    let mut frames: Vec<&str> = text.split("\n\n").collect();
    // After the last frame's blank line the split leaves an empty piece.
    if frames.pop() != Some("") {
        return Err(at(
            frames.len(),
            "the output does not end with a blank line".into(),
        ));
    }
    // Comment frames (the gateway's opening `: ok`, heartbeats) carry nothing; SSE clients skip
    // them, and so does the check.
    frames.retain(|frame| !frame.split('\n').all(|line| line.starts_with(':')));
    Ok(frames)
}

/// The payload of a frame that is one `data:` line.
fn data_only(i: usize, frame: &str) -> Result<&str, Violation> {
    frame
        .strip_prefix("data: ")
        .filter(|data| !data.contains(['\n', '\r']))
        .ok_or_else(|| at(i, format!("not a single `data:` line: {frame:?}")))
}

fn object(i: usize, json: &str) -> Result<serde_json::Map<String, Value>, Violation> {
    match serde_json::from_str(json) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(at(i, format!("not a JSON object: {json}"))),
    }
}

/// Exactly one item is `terminal`, and it is the last.
fn once_last(items: &[String], terminal: impl Fn(&str) -> bool) -> Result<(), Violation> {
    let ends: Vec<usize> = (0..items.len()).filter(|&i| terminal(&items[i])).collect();
    match ends.as_slice() {
        [] => Err(at(items.len(), "no terminal event".into())),
        [end] if *end + 1 == items.len() => Ok(()),
        [end] => Err(at(*end + 1, "an event after the terminal".into())),
        [first, second, ..] => Err(at(*second, format!("a second terminal after {first}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(client: Dialect, mode: StreamMode, text: &str) -> Result<(), Violation> {
        verify_output(client, mode, text.as_bytes())
    }

    #[test]
    fn each_dialects_terminal_is_required_once_and_last() {
        let started = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
        let finished = "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
        let none = StreamMode::None;
        assert!(check(Dialect::AgUi, none, &format!("{started}{finished}")).is_ok());
        assert!(check(Dialect::AgUi, none, started).is_err());
        assert!(check(Dialect::AgUi, none, &format!("{started}{finished}x")).is_err());
        assert!(check(Dialect::Hai, none, &format!("{started}{finished}")).is_ok());
        assert!(check(
            Dialect::Hai,
            none,
            &format!("{started}{finished}{finished}")
        )
        .is_err());
        assert!(check(Dialect::Hai, none, &format!("{finished}{started}")).is_err());
        assert!(check(Dialect::Hai, none, "data: {\"type\":1}\n\n").is_err());

        let delta = StreamMode::Delta;
        let start = "event: turn_start\ndata: {}\n\n";
        let text = "event: text_delta\ndata: {\"delta\":\"hi\"}\n\n";
        let stop = "event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n";
        assert!(check(Dialect::Aap, delta, &format!("{start}{text}{stop}")).is_ok());
        assert!(check(Dialect::Aap, delta, &format!("{start}{text}")).is_err());
        assert!(check(Dialect::Aap, delta, &format!("{text}{stop}")).is_err());
        assert!(check(Dialect::Aap, delta, &format!("{start}{stop}{stop}")).is_err());
        assert!(check(
            Dialect::Aap,
            delta,
            &format!("{start}event: turn_stop\ndata: {{}}\n\n")
        )
        .is_err());
        assert!(check(
            Dialect::Aap,
            none,
            "{\"stopReason\":\"error\",\"messages\":[]}"
        )
        .is_ok());
        assert!(check(Dialect::Aap, none, "{\"stopReason\":\"error\"}").is_err());
        assert!(check(Dialect::Aap, none, "{\"messages\":[]}").is_err());
    }
}
