use super::*;

/// Decodes `input` fed in pieces cut at `cuts`, then EOF; the same again taking every event
/// [`SseDecoder::peek`] offers where it lies, which must come to the same items.
fn decode_split(input: &[u8], cuts: &[usize], max: usize) -> Result<Vec<SseItem>, SseError> {
    let decoded = decode_split_with(input, cuts, max, false);
    let peeked = decode_split_with(input, cuts, max, true);
    assert_eq!(decoded, peeked, "peeking changed what was decoded");
    decoded
}

fn decode_split_with(
    input: &[u8],
    cuts: &[usize],
    max: usize,
    peeking: bool,
) -> Result<Vec<SseItem>, SseError> {
    let mut dec = SseDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        buf.extend_from_slice(&input[start..cut]);
        start = cut;
        loop {
            if let Some((event, peeked)) = dec.peek(&buf).filter(|_| peeking) {
                // Every other event taken, the others skipped: both as decoding does.
                let event = SseEvent {
                    name: event.name.map(Arc::from),
                    data: Bytes::copy_from_slice(event.data),
                };
                if items.len() % 2 == 0 {
                    dec.skip(&mut buf, peeked);
                    items.push(SseItem::Event(event));
                } else {
                    let taken = dec.take(&mut buf, peeked);
                    assert_eq!(taken, event, "taken differs from peeked");
                    items.push(SseItem::Event(taken));
                }
                continue;
            }
            match dec.decode(&mut buf)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
    }
    while let Some(item) = dec.decode_eof(&mut buf)? {
        items.push(item);
    }
    Ok(items)
}

fn decode_whole(input: &[u8]) -> Vec<SseItem> {
    decode_split(input, &[], DEFAULT_MAX_EVENT_BYTES).expect("decodes")
}

fn data(s: &str) -> SseItem {
    SseItem::Event(SseEvent {
        name: None,
        data: Bytes::copy_from_slice(s.as_bytes()),
    })
}

fn named(name: &str, s: &str) -> SseItem {
    SseItem::Event(SseEvent {
        name: Some(name.into()),
        data: Bytes::copy_from_slice(s.as_bytes()),
    })
}

/// Whole, line by line, byte by byte and every single split point give the same items.
fn assert_split_invariant(input: &[u8], expected: &[SseItem]) {
    assert_eq!(decode_whole(input), expected, "whole input");
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(
        decode_split(input, &bytewise, DEFAULT_MAX_EVENT_BYTES).unwrap(),
        expected,
        "byte by byte"
    );
    for cut in 1..input.len() {
        assert_eq!(
            decode_split(input, &[cut], DEFAULT_MAX_EVENT_BYTES).unwrap(),
            expected,
            "split at {cut}"
        );
    }
}

#[test]
fn lf_events() {
    assert_split_invariant(
        b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
        &[data("{\"a\":1}"), data("{\"b\":2}")],
    );
}

#[test]
fn crlf_line_ends() {
    assert_split_invariant(
        b"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n\r\n",
        &[data("{\"a\":1}"), data("{\"b\":2}")],
    );
}

#[test]
fn cr_line_ends() {
    assert_split_invariant(
        b"data: {\"a\":1}\r\rdata: {\"b\":2}\r\r",
        &[data("{\"a\":1}"), data("{\"b\":2}")],
    );
}

#[test]
fn cr_at_read_boundary_then_lf_is_one_line_end() {
    let items = decode_split(b"data: x\r\n\r\ndata: y\r\n\r\n", &[8, 10], 1024).unwrap();
    assert_eq!(items, vec![data("x"), data("y")]);
}

#[test]
fn mixed_line_ends() {
    assert_split_invariant(
        b"data: a\r\n\ndata: b\r\rdata: c\n\r\n",
        &[data("a"), data("b"), data("c")],
    );
}

#[test]
fn bom_is_stripped_at_stream_start_even_when_split() {
    assert_split_invariant(b"\xEF\xBB\xBFdata: {}\n\n", &[data("{}")]);
}

#[test]
fn bom_later_in_the_stream_is_data() {
    let items = decode_whole(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
    // Only the stream start may carry a BOM; later it makes an unknown field name.
    assert_eq!(items, vec![data("a")]);
}

#[test]
fn multi_line_data_is_joined_with_lf() {
    assert_split_invariant(b"data: {\"a\":\ndata: 1}\n\n", &[data("{\"a\":\n1}")]);
}

#[test]
fn comments_are_items_and_do_not_end_events() {
    assert_split_invariant(
        b": ping\n\ndata: a\n: keepalive\ndata: b\n\n",
        &[SseItem::Comment, SseItem::Comment, data("a\nb")],
    );
}

#[test]
fn event_id_retry_lines() {
    assert_split_invariant(
        b"event: text_delta\nid: 7\nretry: 1000\ndata: {}\n\ndata: {}\n\n",
        &[named("text_delta", "{}"), data("{}")],
    );
}

#[test]
fn a_repeated_event_name_is_shared_and_a_new_one_replaces_it() {
    let items = decode_whole(b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: b\ndata: 3\n\n");
    let names: Vec<_> = items
        .iter()
        .map(|item| match item {
            SseItem::Event(e) => e.name.clone().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(Arc::ptr_eq(&names[0], &names[1]));
    assert_eq!([&*names[0], &*names[2]], ["a", "b"]);
    assert_eq!(items[2], named("b", "3"));
}

#[test]
fn data_without_space_and_with_two_spaces() {
    assert_split_invariant(b"data:{}\n\ndata:  x\n\n", &[data("{}"), data(" x")]);
}

#[test]
fn done_marker_is_reported() {
    assert_split_invariant(
        b"data: {}\n\ndata: [DONE]\n\n",
        &[data("{}"), SseItem::Done],
    );
}

#[test]
fn missing_final_blank_line_is_flushed_at_eof() {
    assert_split_invariant(
        b"data: {}\n\ndata: {\"b\":1}",
        &[data("{}"), data("{\"b\":1}")],
    );
    assert_split_invariant(b"data: {\"b\":1}\n", &[data("{\"b\":1}")]);
    assert_split_invariant(b"data: {\"b\":1}\r", &[data("{\"b\":1}")]);
}

#[test]
fn empty_data_and_fieldless_blank_lines_dispatch_nothing() {
    assert_split_invariant(b"\n\n\ndata:\n\nevent: x\n\n", &[]);
}

#[test]
fn multibyte_characters_survive_every_split() {
    let input = "data: {\"delta\":\"你好, 世界 🌍\"}\n\ndata: {\"delta\":\"é\"}\n\n";
    assert_split_invariant(
        input.as_bytes(),
        &[
            data("{\"delta\":\"你好, 世界 🌍\"}"),
            data("{\"delta\":\"é\"}"),
        ],
    );
}

#[test]
fn oversized_event_is_an_error_not_growth() {
    let big = format!("data: {}\n\n", "x".repeat(100));
    assert_eq!(
        decode_split(big.as_bytes(), &[], 64),
        Err(SseError::EventTooLarge { limit: 64 })
    );
    // Also when the line never ends: the pending bytes alone trip the limit.
    let endless = "data: ".to_string() + &"y".repeat(200);
    let mut dec = SseDecoder::new(64);
    let mut buf = BytesMut::from(endless.as_bytes());
    assert_eq!(
        dec.decode(&mut buf),
        Err(SseError::EventTooLarge { limit: 64 })
    );
}

#[test]
fn oversized_multi_line_event_is_an_error() {
    let input = "data: aaaaaaaaaa\n".repeat(10) + "\n";
    assert_eq!(
        decode_split(input.as_bytes(), &[], 50),
        Err(SseError::EventTooLarge { limit: 50 })
    );
}

#[test]
fn event_at_exactly_the_limit_passes() {
    // The limit counts the raw bytes of the event in progress, `data: ` included.
    let payload = "z".repeat(58);
    let input = format!("data: {payload}\n\n");
    assert_eq!(
        decode_split(input.as_bytes(), &[], 64).unwrap(),
        vec![data(&payload)]
    );
    let input = format!("data: {payload}z\n\n");
    assert!(decode_split(input.as_bytes(), &[], 64).is_err());
}

#[test]
fn encoder_writes_lf_only_single_line() {
    let mut out = BytesMut::new();
    encode_json(
        &mut out,
        None,
        &serde_json::json!({"type":"X","delta":"a\nb"}),
    )
    .unwrap();
    assert_eq!(&out[..], b"data: {\"type\":\"X\",\"delta\":\"a\\nb\"}\n\n");
    out.clear();
    encode_json(
        &mut out,
        Some("turn_stop"),
        &serde_json::json!({"stopReason":"end_turn"}),
    )
    .unwrap();
    assert_eq!(
        &out[..],
        b"event: turn_stop\ndata: {\"stopReason\":\"end_turn\"}\n\n"
    );
}

#[test]
fn encoded_output_decodes_back() {
    let mut out = BytesMut::new();
    for i in 0..5 {
        encode_json(&mut out, None, &serde_json::json!({"i": i, "s": "ü\r\n"})).unwrap();
    }
    let items = decode_whole(&out);
    assert_eq!(items.len(), 5);
}

#[test]
fn ndjson_lines_are_events() {
    let input = b"{\"a\":1}\r\n\n  \n{\"b\":\"data: x\"}\n{\"c\":3}";
    let mut dec = SseDecoder::with_framing(Framing::Ndjson, 1024);
    let mut buf = BytesMut::from(&input[..]);
    let mut items = Vec::new();
    while let Some(item) = dec.decode_eof(&mut buf).unwrap() {
        items.push(item);
    }
    assert_eq!(
        items,
        vec![
            data("{\"a\":1}"),
            data("{\"b\":\"data: x\"}"),
            data("{\"c\":3}")
        ]
    );
    assert_eq!(
        Framing::from_content_type("application/x-ndjson; charset=utf-8"),
        Framing::Ndjson
    );
    assert_eq!(
        Framing::from_content_type("text/event-stream"),
        Framing::Sse
    );
    assert_eq!(Framing::from_content_type("application/json"), Framing::Sse);
}

#[test]
fn peek_offers_only_a_whole_single_line_event_and_what_it_takes_up() {
    let mut dec = SseDecoder::new(DEFAULT_MAX_EVENT_BYTES);
    let input = b"event: e\ndata: {}\n\ndata: x\n\n";
    // At the stream's start a BOM may still be arriving: the decoder reads the first event.
    assert!(dec.peek(input).is_none());
    let mut buf = BytesMut::from(&input[..]);
    assert_eq!(dec.decode(&mut buf), Ok(Some(named("e", "{}"))));
    let (event, peeked) = dec.peek(&buf).expect("a plain event");
    assert_eq!((event.name, event.data), (None, &b"x"[..]));
    dec.skip(&mut buf, peeked);
    assert!(buf.is_empty());
    // Not whole, more than one line, CRLF, the end marker, too large: not offered.
    for other in [
        &b"data: x\n"[..],
        b"data: a\ndata: b\n\n",
        b"data: x\r\n\r\n",
        b"data: [DONE]\n\n",
        b"event: \xff\ndata: x\n\n",
    ] {
        assert!(
            dec.peek(other).is_none(),
            "{:?}",
            String::from_utf8_lossy(other)
        );
    }
    let mut small = SseDecoder::new(8);
    assert_eq!(
        small.decode(&mut BytesMut::from(&b"data: a\n\n"[..])),
        Ok(Some(data("a")))
    );
    assert!(small.peek(b"data: 1\n\n").is_some());
    assert!(small.peek(b"data: 12345\n\n").is_none());
}
