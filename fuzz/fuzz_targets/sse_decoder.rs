//! The SSE decoder on any bytes: the items it decodes do not depend on how the bytes were split
//! into reads (all at once against reads of the sizes the input chooses), its size bound holds
//! (no event's data over the limit), and it never panics.
#![no_main]

use bytes::BytesMut;
use dialect_proxy::sse::{SseDecoder, SseError, SseItem};
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 512;

/// Every item until the end or the first error, feeding `input` in reads of the sizes `sizes`
/// gives (cycled); then the end of the stream.
fn decode(input: &[u8], sizes: &[u8]) -> (Vec<SseItem>, Option<SseError>) {
    let mut decoder = SseDecoder::new(LIMIT);
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    let mut rest = input;
    let mut i = 0;
    loop {
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(e) => return (items, Some(e)),
            }
        }
        if rest.is_empty() {
            break;
        }
        let size = sizes
            .get(i % sizes.len().max(1))
            .map_or(rest.len(), |&s| 1 + usize::from(s));
        let n = size.min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        i += 1;
    }
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return (items, None),
            Err(e) => return (items, Some(e)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % 16).min(rest.len());
    let (sizes, input) = rest.split_at(count);
    let whole = decode(input, &[]);
    let split = decode(input, sizes);
    assert_eq!(whole, split, "reads of sizes {sizes:?} decoded otherwise");
    for item in &whole.0 {
        if let SseItem::Event(event) = item {
            assert!(
                event.data.len() <= LIMIT,
                "{} bytes passed the bound",
                event.data.len()
            );
        }
    }
});
