//! The strict AG-UI writer (`agui.md` §1, §6.1, §9): what it emits passes `@ag-ui/client` 1.0.0
//! without a warning when it declares 1.0.
//!
//! The canonical types already rule out nulls, fractional timestamps and chunks; what is left
//! for the writer is the one thing a version forbids that the model keeps: fields it does not
//! know. They move under `metadata.upstream` (nothing a producer added is lost, and `metadata`
//! is the protocol's place for extension data) or are dropped, per [`UnknownFields`].
//!
//! It declares the version it emits on every `RUN_STARTED` ([`ProtocolVersion`], AG-UI 1.1
//! "Version negotiation": a translating proxy declares what it emits, not what its upstream
//! spoke). 1.1 only adds `encryptedValueType` beside every `encryptedValue`: declaring 1.1 it
//! stays in place; declaring 1.0 it is an unknown field like any other.

use bytes::BytesMut;
use serde_json::{Map, Value};

use crate::event::{DeltaKind, DeltaRef, Event, Message};
use crate::{json, sse};

/// What the writer does with fields outside the 1.0 shape of an event or message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownFields {
    /// Move them under `metadata.upstream`.
    #[default]
    Metadata,
    /// Drop them.
    Drop,
}

/// The AG-UI version a writer emits and declares (`[routes.agui] protocol_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProtocolVersion {
    /// What `@ag-ui/client` 1.0.0 accepts without a warning.
    #[default]
    V1_0,
    V1_1,
}

impl ProtocolVersion {
    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V1_0 => "1.0",
            ProtocolVersion::V1_1 => "1.1",
        }
    }
}

/// The one field 1.1 adds (beside every `encryptedValue`).
const ENCRYPTED_VALUE_TYPE: &str = "encryptedValueType";

/// See the module docs.
#[derive(Debug, Default)]
pub struct AguiWriter {
    unknown_fields: UnknownFields,
    version: ProtocolVersion,
}

impl AguiWriter {
    pub fn new(unknown_fields: UnknownFields) -> AguiWriter {
        AguiWriter {
            unknown_fields,
            version: ProtocolVersion::default(),
        }
    }

    /// Emits and declares `version`.
    pub fn with_version(mut self, version: ProtocolVersion) -> AguiWriter {
        self.version = version;
        self
    }

    /// Appends `data: <json>\n\n` for one canonical event.
    pub fn write(&mut self, event: Event, out: &mut BytesMut) {
        if !self.write_content(&event, out) && !self.write_bound(&event, out) {
            self.write_general(event, out);
        }
    }

    /// [`Self::write`] for any event: unknown fields folded, serialised by serde.
    fn write_general(&mut self, mut event: Event, out: &mut BytesMut) {
        let base = event.base_mut();
        if !base.extra.is_empty() {
            let mut extra = base.extra.take();
            let kept = self.keep_known(&mut extra);
            if self.unknown_fields == UnknownFields::Metadata && !extra.is_empty() {
                fold_into(extra, base.metadata.get_or_insert_with(Box::default));
            }
            if let Some(kept) = kept {
                base.extra.insert(ENCRYPTED_VALUE_TYPE.into(), kept);
            }
        }
        match &mut event {
            Event::MessagesSnapshot(snapshot) => {
                for message in &mut snapshot.messages {
                    self.fold_message(message);
                }
            }
            Event::RunStarted(started) => {
                started.protocol_version = Some(self.version.as_str().to_owned());
                if let Some(input) = started.input.as_mut() {
                    input.extra.clear();
                    for message in &mut input.messages {
                        self.fold_message(message);
                    }
                }
            }
            _ => {}
        }
        let encoded = sse::encode_json(out, None, &event);
        // Canonical types always serialise into memory (string keys only, and writing to a
        // buffer cannot fail): a failure here is a model bug, which tests would show.
        debug_assert!(encoded.is_ok(), "could not encode {event:?}");
    }

    /// Writes a text, reasoning or argument delta that carries nothing but its id, delta,
    /// timestamp and unknown fields — nearly every event of a stream — by hand: the bytes serde
    /// and [`Self::write`]'s folding of unknown fields write, without the tagged and flattened
    /// serialisers and the maps around them. False: not such an event; nothing written.
    fn write_content(&self, event: &Event, out: &mut BytesMut) -> bool {
        let (ty, id_key, id, delta, base) = match event {
            Event::TextMessageContent(e) => (
                "TEXT_MESSAGE_CONTENT",
                "messageId",
                &e.message_id,
                &e.delta,
                &e.base,
            ),
            Event::ReasoningMessageContent(e) => (
                "REASONING_MESSAGE_CONTENT",
                "messageId",
                &e.message_id,
                &e.delta,
                &e.base,
            ),
            Event::ToolCallArgs(e) => (
                "TOOL_CALL_ARGS",
                "toolCallId",
                &e.tool_call_id,
                &e.delta,
                &e.base,
            ),
            _ => return false,
        };
        if !is_bare(base) {
            return false;
        }
        let extra = base.extra.members();
        // 1.1 keeps its one field where it is: the general path knows where.
        if self.version == ProtocolVersion::V1_1 && extra.contains(ENCRYPTED_VALUE_TYPE) {
            return false;
        }
        // A whole object ends with its brace, the part before unknown fields never does: the
        // source must be the one the fields it has left call for.
        let source = base
            .source
            .json()
            .filter(|json| (json.last() == Some(&b'}')) == extra.is_empty());
        if let Some(json) = source {
            // Read as it is and unchanged since: what it came as is what this would write, up
            // to spelling (key order, spaces, escapes), which JSON leaves to the writer.
            let start = out.len();
            self.forward(json, extra, out);
            self.check_forwarded(&out[start..], || event.clone());
            return true;
        }
        self.encode_content((ty, id_key), id, delta, base.timestamp, extra, out);
        true
    }

    /// Writes the events that open and close a run and a text message, as nearly every run
    /// sends them — ids, a role and name, at most a timestamp, nothing for the writer to fold —
    /// by hand: the bytes serde would write, without the tagged and flattened serialisers. They
    /// come once per run or message, when that code is cold, and with the reader's hand-written
    /// decoding (`fast::lifecycle_event`) they were half of a one-event request's translation
    /// (`benches/request_instructions.sh`). False: not such an event; nothing written.
    fn write_bound(&self, event: &Event, out: &mut BytesMut) -> bool {
        let base = event.base();
        if !is_bare(base) || !base.extra.is_empty() {
            return false;
        }
        // Each event's members after its type, in serde's order; `None`: absent.
        let members: [(&str, Option<&str>); 3] = match event {
            Event::RunStarted(e) if e.parent_run_id.is_none() && e.input.is_none() => [
                ("threadId", Some(&e.thread_id)),
                ("runId", Some(&e.run_id)),
                // Declared by the writer, as `write_general` declares it.
                ("protocolVersion", Some(self.version.as_str())),
            ],
            Event::RunFinished(e)
                if e.result.is_none() && e.outcome.is_none() && e.usage.is_none() =>
            {
                [
                    ("threadId", Some(&e.thread_id)),
                    ("runId", Some(&e.run_id)),
                    ("", None),
                ]
            }
            Event::TextMessageStart(e) => [
                ("messageId", Some(&e.message_id)),
                ("role", Some(e.role.as_str())),
                ("name", e.name.as_deref()),
            ],
            Event::TextMessageEnd(e) => {
                [("messageId", Some(&e.message_id)), ("", None), ("", None)]
            }
            _ => return false,
        };
        let start = out.len();
        out.reserve(96);
        out.extend_from_slice(b"data: {\"type\":\"");
        out.extend_from_slice(event.event_type().as_str().as_bytes());
        out.extend_from_slice(b"\"");
        for (key, value) in members {
            if let Some(value) = value {
                member(out, key, value);
            }
        }
        if let Some(ts) = base.timestamp {
            out.extend_from_slice(b",\"timestamp\":");
            json::write_int(out, ts);
        }
        out.extend_from_slice(b"}\n\n");
        self.check_forwarded(&out[start..], || event.clone());
        true
    }

    /// Writes a content delta of type and id key `wire`, its unknown fields (`extra`) folded
    /// as `write_general` folds them on an event without metadata.
    fn encode_content(
        &self,
        (ty, id_key): (&str, &str),
        id: &str,
        delta: &str,
        timestamp: Option<i64>,
        extra: &str,
        out: &mut BytesMut,
    ) {
        out.reserve(64 + id.len() + delta.len() + extra.len());
        out.extend_from_slice(b"data: {\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"");
        out.extend_from_slice(id_key.as_bytes());
        out.extend_from_slice(b"\":");
        json::write_str(out, id);
        member(out, "delta", delta);
        if let Some(ts) = timestamp {
            out.extend_from_slice(b",\"timestamp\":");
            json::write_int(out, ts);
        }
        if !extra.is_empty() && self.unknown_fields == UnknownFields::Metadata {
            // What `fold_into` makes of them on an event without metadata.
            out.extend_from_slice(b",\"metadata\":{\"upstream\":{");
            out.extend_from_slice(extra.as_bytes());
            out.extend_from_slice(b"}}");
        }
        out.extend_from_slice(b"}\n\n");
    }

    /// Writes an event as it came (`json`, its [`crate::event::Source`]), its unknown fields
    /// (`extra`) folded as `write_general` folds them, after what it came as up to them.
    fn forward(&self, json: &[u8], extra: &str, out: &mut BytesMut) {
        out.reserve(40 + json.len() + extra.len());
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(json);
        if !extra.is_empty() {
            if self.unknown_fields == UnknownFields::Metadata {
                out.extend_from_slice(b",\"metadata\":{\"upstream\":{");
                out.extend_from_slice(extra.as_bytes());
                out.extend_from_slice(b"}}");
            }
            out.extend_from_slice(b"}");
        }
        out.extend_from_slice(b"\n\n");
    }

    /// Debug builds: a forwarded or hand-encoded frame is the same JSON value as the general
    /// encoding.
    fn check_forwarded(&self, frame: &[u8], event: impl FnOnce() -> Event) {
        if cfg!(debug_assertions) {
            let mut encoded = BytesMut::new();
            AguiWriter { ..*self }.write_general(event(), &mut encoded);
            let value = |frame: &[u8]| {
                let json = frame.strip_prefix(b"data: ")?.strip_suffix(b"\n\n")?;
                serde_json::from_slice::<serde_json::Value>(json).ok()
            };
            assert_eq!(
                value(frame),
                value(&encoded),
                "a forwarded event differs from its encoding"
            );
        }
    }

    fn fold_message(&self, message: &mut Message) {
        if let (Message::Assistant(m), ProtocolVersion::V1_0) = (&mut *message, self.version) {
            for call in m.tool_calls.iter_mut().flatten() {
                if let Some(kind) = call.encrypted_value_type.take() {
                    if self.unknown_fields == UnknownFields::Metadata {
                        let mut extra = Map::new();
                        extra.insert(ENCRYPTED_VALUE_TYPE.into(), kind.into());
                        fold_into(extra, call.metadata.get_or_insert_with(Map::new));
                    }
                }
            }
        }
        let (extra, metadata) = message.extra_and_metadata();
        if !extra.is_empty() {
            let mut unknown = std::mem::take(extra);
            if let Some(kept) = self.keep_known(&mut unknown) {
                extra.insert(ENCRYPTED_VALUE_TYPE.into(), kept);
            }
            if self.unknown_fields == UnknownFields::Metadata && !unknown.is_empty() {
                fold_into(unknown, metadata.get_or_insert_with(Map::new));
            }
        }
    }

    /// Takes out of `extra` what the declared version describes (1.1: `encryptedValueType`),
    /// so it stays where the producer put it.
    fn keep_known(&self, extra: &mut Map<String, Value>) -> Option<Value> {
        match self.version {
            ProtocolVersion::V1_1 => extra.shift_remove(ENCRYPTED_VALUE_TYPE),
            ProtocolVersion::V1_0 => None,
        }
    }
}

/// Moves unknown fields under `metadata.upstream`.
fn fold_into(extra: Map<String, Value>, metadata: &mut Map<String, Value>) {
    match metadata.get_mut("upstream") {
        Some(Value::Object(upstream)) => upstream.extend(extra),
        _ => {
            metadata.insert("upstream".into(), Value::Object(extra));
        }
    }
}

impl crate::dialect::codec::Writer for AguiWriter {
    fn write(&mut self, event: Event, out: &mut BytesMut) -> Result<(), crate::error::Failure> {
        AguiWriter::write(self, event, out);
        Ok(())
    }

    fn write_delta(
        &mut self,
        delta: &DeltaRef<'_>,
        out: &mut BytesMut,
    ) -> Option<Result<(), crate::error::Failure>> {
        // What `write_content` writes: the bytes it came in when it came in AG-UI, else
        // encoded from its parts.
        if self.version == ProtocolVersion::V1_1 && delta.extra.contains(ENCRYPTED_VALUE_TYPE) {
            return None;
        }
        let start = out.len();
        match delta.source {
            Some(source) => self.forward(source.json(), delta.extra, out),
            None => {
                let wire = match delta.kind {
                    DeltaKind::Text => ("TEXT_MESSAGE_CONTENT", "messageId"),
                    DeltaKind::Reasoning => ("REASONING_MESSAGE_CONTENT", "messageId"),
                    DeltaKind::ToolArgs => ("TOOL_CALL_ARGS", "toolCallId"),
                };
                let text = delta.delta.decode();
                self.encode_content(wire, delta.id, &text, delta.timestamp, delta.extra, out);
            }
        }
        self.check_forwarded(&out[start..], || delta.into_event());
        Some(Ok(()))
    }
}

/// Whether an event carries none of the base fields a hand-written frame leaves out: a raw
/// event, metadata, a subagent lane.
fn is_bare(base: &crate::event::EventBase) -> bool {
    base.raw_event.is_none() && base.metadata.is_none() && base.subagent_run_id.is_none()
}

/// Appends `,"key":"value"` (the key needs no escaping).
fn member(out: &mut BytesMut, key: &str, value: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    json::write_str(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Source;
    use serde_json::json;

    fn write(policy: UnknownFields, v: Value) -> String {
        let mut out = BytesMut::new();
        AguiWriter::new(policy).write(serde_json::from_value(v).unwrap(), &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn payload(line: &str) -> Value {
        let json = line
            .strip_prefix("data: ")
            .and_then(|l| l.strip_suffix("\n\n"))
            .unwrap();
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn frames_are_one_data_line_with_lf_only() {
        let text = write(
            UnknownFields::Metadata,
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\r\nb"}),
        );
        assert!(text.starts_with("data: {") && text.ends_with("}\n\n"));
        assert_eq!(text.matches('\n').count(), 2);
        assert!(!text.contains('\r'));
    }

    #[test]
    fn content_events_are_written_as_serde_writes_them() {
        for v in [
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"héllo \"q\"\n\u{1}"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m\\","delta":"","timestamp":1_700_000_000_000_i64}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"why"}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\":1}","timestamp":-5}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x","subagentRunId":"s"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","metadata":{"k":1}}),
        ] {
            let event: Event = serde_json::from_value(v.clone()).unwrap();
            let mut general = BytesMut::new();
            sse::encode_json(&mut general, None, &event).unwrap();
            assert_eq!(write(UnknownFields::Metadata, v).as_bytes(), &general[..]);
        }
    }

    #[test]
    fn content_events_with_unknown_fields_are_written_as_the_general_path_writes_them() {
        for policy in [UnknownFields::Metadata, UnknownFields::Drop] {
            for version in [ProtocolVersion::V1_0, ProtocolVersion::V1_1] {
                for v in [
                    json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","ts":1_732_460_000_000_000_000_u64}),
                    json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","timestamp":5,"model":"g\"pt","n":[1,{"a":null}]}),
                    json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"","encryptedValueType":"x","k":1}),
                ] {
                    let event: Event = serde_json::from_value(v.clone()).unwrap();
                    let mut writer = AguiWriter::new(policy).with_version(version);
                    let mut general = BytesMut::new();
                    writer.write_general(event.clone(), &mut general);
                    let mut out = BytesMut::new();
                    writer.write(event, &mut out);
                    assert_eq!(
                        String::from_utf8_lossy(&out),
                        String::from_utf8_lossy(&general),
                        "{policy:?} {version:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unknown_fields_move_under_metadata_upstream() {
        let v = payload(&write(
            UnknownFields::Metadata,
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","model":"gpt",
                   "metadata":{"k":1,"upstream":{"stage":"a"}}}),
        ));
        assert_eq!(
            v,
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x",
                   "metadata":{"k":1,"upstream":{"stage":"a","model":"gpt"}}})
        );
        let v = payload(&write(
            UnknownFields::Drop,
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","model":"gpt"}),
        ));
        assert_eq!(
            v,
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"})
        );
    }

    #[test]
    fn snapshot_messages_are_folded_too() {
        let v = payload(&write(
            UnknownFields::Metadata,
            json!({"type":"MESSAGES_SNAPSHOT","messages":[{"id":"1","role":"user","content":"x","mood":"ok"}]}),
        ));
        assert_eq!(
            v["messages"][0],
            json!({"id":"1","role":"user","content":"x","metadata":{"upstream":{"mood":"ok"}}})
        );
    }

    #[test]
    fn an_event_still_as_read_is_forwarded_as_it_came() {
        let json = r#"{ "delta":"h\u00e9", "type":"TEXT_MESSAGE_CONTENT","messageId":"m" }"#;
        let event = || {
            let mut event: Event = serde_json::from_str(json).unwrap();
            event.base_mut().source = Source::new(bytes::Bytes::from_static(json.as_bytes()));
            event
        };
        let mut out = BytesMut::new();
        AguiWriter::default().write(event(), &mut out);
        assert_eq!(out, format!("data: {json}\n\n").as_bytes());
        // Changed since it was read: encoded again.
        let mut moved = event();
        moved.base_mut().subagent_run_id = Some("s".into());
        let mut out = BytesMut::new();
        AguiWriter::default().write(moved, &mut out);
        assert_eq!(
            payload(std::str::from_utf8(&out).unwrap()),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hé","subagentRunId":"s"})
        );
        // A copy has no source.
        let mut out = BytesMut::new();
        AguiWriter::default().write(event().clone(), &mut out);
        assert_eq!(
            out,
            &b"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"h\xc3\xa9\"}\n\n"[..]
        );
    }

    #[test]
    fn unknown_fields_fold_after_what_an_event_came_as_up_to_them() {
        let open = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x\u0079""#;
        let event = |source: &'static str| {
            let mut event: Event = serde_json::from_value(
                json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"xy","ts":5,"k":"v"}),
            )
            .unwrap();
            event.base_mut().source = Source::new(bytes::Bytes::from_static(source.as_bytes()));
            event
        };
        let written = |policy, event| {
            let mut out = BytesMut::new();
            AguiWriter::new(policy).write(event, &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        assert_eq!(
            written(UnknownFields::Metadata, event(open)),
            format!("data: {open},\"metadata\":{{\"upstream\":{{\"ts\":5,\"k\":\"v\"}}}}}}\n\n")
        );
        assert_eq!(
            written(UnknownFields::Drop, event(open)),
            format!("data: {open}}}\n\n")
        );
        // A whole object cannot take the fields: encoded again.
        let whole = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"xy"}"#;
        assert_eq!(
            written(UnknownFields::Drop, event(whole)),
            format!("data: {whole}\n\n")
        );
        assert!(written(UnknownFields::Metadata, event(whole)).contains(r#""upstream":{"ts":5"#));
    }

    #[test]
    fn run_and_message_bounds_are_written_in_their_plain_shape() {
        let text = |version, v| {
            let mut out = BytesMut::new();
            AguiWriter::default()
                .with_version(version)
                .write(serde_json::from_value(v).unwrap(), &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        // `agui.md` §2.1 and §3.1: the members these events carry, the version the writer
        // declares on `RUN_STARTED`, the role always present.
        assert_eq!(
            text(
                ProtocolVersion::V1_0,
                json!({"type":"RUN_STARTED","threadId":"t1","runId":"r1","timestamp":1700000000000_i64})
            ),
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r1\",\"protocolVersion\":\"1.0\",\"timestamp\":1700000000000}\n\n"
        );
        assert_eq!(
            text(
                ProtocolVersion::V1_1,
                json!({"type":"RUN_STARTED","threadId":"t1","runId":"r1","protocolVersion":"0.9"})
            ),
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"r1\",\"protocolVersion\":\"1.1\"}\n\n"
        );
        assert_eq!(
            text(
                ProtocolVersion::V1_0,
                json!({"type":"TEXT_MESSAGE_START","messageId":"m\"1\n","name":"Zoë"})
            ),
            "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\\\"1\\n\",\"role\":\"assistant\",\"name\":\"Zoë\"}\n\n"
        );
        assert_eq!(
            text(
                ProtocolVersion::V1_0,
                json!({"type":"TEXT_MESSAGE_END","messageId":"m1","timestamp":-5})
            ),
            "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\",\"timestamp\":-5}\n\n"
        );
        assert_eq!(
            text(
                ProtocolVersion::V1_0,
                json!({"type":"RUN_FINISHED","threadId":"t1","runId":"r1"})
            ),
            "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n"
        );
        // More than that: the general encoding, which keeps what the plain shape has no
        // place for.
        let v = payload(&text(
            ProtocolVersion::V1_0,
            json!({"type":"RUN_FINISHED","threadId":"t1","runId":"r1","result":{"ok":true},"ts":3}),
        ));
        assert_eq!(
            v,
            json!({"type":"RUN_FINISHED","threadId":"t1","runId":"r1","result":{"ok":true},"metadata":{"upstream":{"ts":3}}})
        );
        let v = payload(&text(
            ProtocolVersion::V1_0,
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1","subagentRunId":"s1"}),
        ));
        assert_eq!(
            v,
            json!({"type":"TEXT_MESSAGE_END","messageId":"m1","subagentRunId":"s1"})
        );
    }

    #[test]
    fn timestamps_are_integers_and_nothing_is_null() {
        let text = write(
            UnknownFields::Metadata,
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","timestamp":1700000000000_i64,"result":null}),
        );
        assert!(
            text.contains("\"timestamp\":1700000000000,")
                || text.contains("\"timestamp\":1700000000000}")
        );
        assert!(!text.contains("null"));
    }
}
