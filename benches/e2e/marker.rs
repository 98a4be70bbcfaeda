//! The timing markers that ride inside text deltas: `t=<19-digit ns since the epoch>;s=<6-digit
//! sequence>;`, written by the mock and found again by the client in whatever dialect the
//! gateway translated the event into (digits, letters, `=` and `;` are never escaped).

use std::time::{SystemTime, UNIX_EPOCH};

/// Size of a text delta, markers and padding included.
pub const DELTA_BYTES: usize = 60;
/// Length of one marker.
const MARKER_LEN: usize = 31;
/// Padding: letters and spaces only, so it never looks like a marker.
const PADDING: &[u8] = b" lorem ipsum dolor sit amet consectetur adipiscing elit sed do";

/// Nanoseconds since the epoch on the host clock (shared by every process of the rig).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A delta of exactly `size` bytes (at least the marker's length) carrying one marker.
pub fn delta(ns: u64, seq: u64, size: usize) -> String {
    let mut text = format!("t={ns:019};s={:06};", seq % 1_000_000);
    let mut i = 0;
    while text.len() < size {
        text.push(PADDING[i % PADDING.len()] as char);
        i += 1;
    }
    text
}

/// One marker found in received bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub sent_ns: u64,
    pub seq: u64,
}

/// Every marker in `bytes`, in order.
pub fn scan(bytes: &[u8], mut found: impl FnMut(Marker)) {
    for at in memchr::memmem::find_iter(bytes, b"t=") {
        if let Some(marker) = parse(&bytes[at..]) {
            found(marker);
        }
    }
}

fn parse(b: &[u8]) -> Option<Marker> {
    if b.len() < MARKER_LEN || &b[21..24] != b";s=" || b[30] != b';' {
        return None;
    }
    Some(Marker {
        sent_ns: digits(&b[2..21])?,
        seq: digits(&b[24..30])?,
    })
}

fn digits(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0u64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
    })
}
