//! The timing markers that ride inside text deltas: `t=<19-digit ns since the epoch>;s=<6-digit
//! sequence>;`, written by the mock and found again by the client in whatever dialect the
//! gateway translated the event into (digits, letters, `=` and `;` are never escaped). A run's
//! first content event may also carry `q=<19-digit ns>;` right after its marker: when the mock
//! had the whole request, so the client can tell the hop's share of the time to first event
//! from the mock's own wait.

use std::time::{SystemTime, UNIX_EPOCH};

/// Size of a text delta, markers and padding included.
pub const DELTA_BYTES: usize = 60;
/// Length of one marker.
const MARKER_LEN: usize = 31;
/// Length of the request stamp that may follow a marker.
const REQUEST_LEN: usize = 22;
/// Padding: letters and spaces only, so it never looks like a marker.
const PADDING: &[u8] = b" lorem ipsum dolor sit amet consectetur adipiscing elit sed do";

/// Nanoseconds since the epoch on the host clock (shared by every process of the rig).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A delta of exactly `size` bytes (at least the marker's length) carrying one marker, and the
/// request stamp `request_ns` when given and there is room for it.
pub fn delta(ns: u64, seq: u64, size: usize, request_ns: Option<u64>) -> String {
    let mut text = format!("t={ns:019};s={:06};", seq % 1_000_000);
    if let Some(q) = request_ns.filter(|_| size >= MARKER_LEN + REQUEST_LEN) {
        text.push_str(&format!("q={q:019};"));
    }
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
    /// When the mock had the whole request (a run's first content event only).
    pub request_ns: Option<u64>,
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
    let stamp = &b[MARKER_LEN..];
    let request_ns =
        (stamp.len() >= REQUEST_LEN && stamp.starts_with(b"q=") && stamp[REQUEST_LEN - 1] == b';')
            .then(|| digits(&stamp[2..REQUEST_LEN - 1]))
            .flatten();
    Some(Marker {
        sent_ns: digits(&b[2..21])?,
        seq: digits(&b[24..30])?,
        request_ns,
    })
}

fn digits(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0u64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
    })
}
