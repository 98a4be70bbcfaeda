//! The decoder is driven through [`Wire`] over a scripted transport: every read returns
//! exactly the next piece of the script, which a socket cannot promise, and where a read ends
//! is what these tests are about. The real-socket exchanges are in `link.rs`.

use std::collections::VecDeque;
use std::future::poll_fn;

use super::*;
use crate::http::h1::framing::{MAX_SIZE_LINE, MAX_TRAILERS, SCRATCH};

/// A transport whose reads return the scripted pieces in order, then the end of stream
/// (or, with `open`, nothing more ever: `Pending`).
struct Script {
    reads: VecDeque<Vec<u8>>,
    open: bool,
    written: Vec<u8>,
}

impl Script {
    fn new(pieces: &[&[u8]]) -> Script {
        Script {
            reads: pieces.iter().map(|piece| piece.to_vec()).collect(),
            open: false,
            written: Vec::new(),
        }
    }
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.reads.pop_front() {
            Some(piece) => {
                assert!(piece.len() <= buf.remaining(), "a piece larger than a read");
                buf.put_slice(&piece);
                Poll::Ready(Ok(()))
            }
            None if self.open => Poll::Pending,
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for Script {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn post() -> Request<Bytes> {
    let mut request = Request::post("/run")
        .body(Bytes::from_static(b"{}"))
        .unwrap();
    request
        .headers_mut()
        .insert(HOST, HeaderValue::from_static("up:8080"));
    request
}

/// The body read to its end: its frames, and then the error that ended it, if any.
async fn body(wire: &mut Wire<Script>) -> (Vec<Bytes>, Option<WireError>) {
    let mut frames = Vec::new();
    loop {
        match poll_fn(|cx| wire.poll_data(cx)).await {
            Some(Ok(frame)) => frames.push(frame),
            Some(Err(error)) => return (frames, Some(error)),
            None => return (frames, None),
        }
    }
}

fn joined(frames: &[Bytes]) -> Vec<u8> {
    frames.concat()
}

/// One exchange over `pieces`: the response, the body frames, how it ended, and the wire.
async fn exchange(
    pieces: &[&[u8]],
) -> Result<(Response<()>, Vec<Bytes>, Option<WireError>, Wire<Script>), WireError> {
    let mut wire = Wire::new(Script::new(pieces));
    let response = wire.exchange(&post()).await.map_err(Sent::into_error)?;
    let (frames, error) = body(&mut wire).await;
    Ok((response, frames, error, wire))
}

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
    transfer-encoding: chunked\r\n\r\n\
    7\r\ndata: 1\r\n\
    a;ext=\"x\"\r\n\n\ndata: 22\r\n\
    2 \r\n\n\n\r\n\
    0\r\ntrailer: yes\r\n\r\n";

#[tokio::test]
async fn the_request_goes_out_in_origin_form_with_host_first_and_its_own_length() {
    let mut request = post();
    request
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from_static("999"));
    request
        .headers_mut()
        .insert("accept", HeaderValue::from_static("text/event-stream"));
    let mut wire = Wire::new(Script::new(&[b"HTTP/1.1 204 No Content\r\n\r\n"]));
    let response = wire.exchange(&request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        String::from_utf8(wire.io.written.clone()).unwrap(),
        "POST /run HTTP/1.1\r\nhost: up:8080\r\naccept: text/event-stream\r\n\
         content-length: 2\r\n\r\n{}"
    );
    assert!(wire.is_reusable());
}

#[tokio::test]
async fn a_chunked_body_gives_every_chunks_data_however_the_reads_cut_it() {
    let expected = b"data: 1\n\ndata: 22\n\n".to_vec();
    let (_, frames, error, wire) = exchange(&[CHUNKED]).await.unwrap();
    assert!(error.is_none(), "{error:?}");
    assert_eq!(joined(&frames), expected);
    assert_eq!(frames.len(), 1, "one read, one frame");
    assert!(wire.is_reusable());
    // Every place one read can end and the next begin, head included.
    for cut in 1..CHUNKED.len() {
        let (_, frames, error, wire) = exchange(&[&CHUNKED[..cut], &CHUNKED[cut..]]).await.unwrap();
        assert!(error.is_none(), "cut at {cut}: {error:?}");
        assert_eq!(joined(&frames), expected, "cut at {cut}");
        assert!(frames.iter().all(|frame| !frame.is_empty()), "cut at {cut}");
        assert!(wire.is_reusable(), "cut at {cut}");
    }
    // One byte per read.
    let bytes: Vec<&[u8]> = CHUNKED.chunks(1).collect();
    let (_, frames, error, _) = exchange(&bytes).await.unwrap();
    assert!(error.is_none());
    assert_eq!(joined(&frames), expected);
}

#[tokio::test]
async fn data_that_arrived_is_given_at_once_without_waiting_for_its_chunk_to_end() {
    let mut script =
        Script::new(&[b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nhalf"]);
    script.open = true;
    let mut wire = Wire::new(script);
    wire.exchange(&post()).await.unwrap();
    let frame = poll_fn(|cx| wire.poll_data(cx)).await.unwrap().unwrap();
    assert_eq!(&frame[..], b"half");
    let mut cx = Context::from_waker(Waker::noop());
    assert!(wire.poll_data(&mut cx).is_pending());
    assert!(!wire.is_done());
}

#[tokio::test]
async fn a_body_cut_before_its_end_is_an_error_and_the_connection_is_not_reused() {
    let cut: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab";
    let (_, frames, error, wire) = exchange(&[cut]).await.unwrap();
    assert_eq!(joined(&frames), b"ab");
    assert!(matches!(error, Some(WireError::Closed)), "{error:?}");
    assert!(!wire.is_reusable());

    let short: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345";
    let (_, frames, error, wire) = exchange(&[short]).await.unwrap();
    assert_eq!(joined(&frames), b"12345");
    assert!(matches!(error, Some(WireError::Closed)), "{error:?}");
    assert!(!wire.is_reusable());
}

#[tokio::test]
async fn a_length_body_ends_at_its_length_and_what_follows_spoils_the_connection() {
    let exact: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let (_, frames, error, wire) = exchange(&[exact]).await.unwrap();
    assert!(error.is_none());
    assert_eq!(joined(&frames), b"hello");
    assert!(wire.is_reusable());

    let over: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello, more";
    let (_, frames, error, wire) = exchange(&[over]).await.unwrap();
    assert!(error.is_none());
    assert_eq!(joined(&frames), b"hello");
    assert!(!wire.is_reusable());

    let same: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok";
    let (_, frames, _, _) = exchange(&[same]).await.unwrap();
    assert_eq!(joined(&frames), b"ok");
}

#[tokio::test]
async fn a_body_without_length_runs_to_the_close_and_ends_the_connection() {
    let close: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nall of it";
    let (_, frames, error, wire) = exchange(&[close, b" and more"]).await.unwrap();
    assert!(error.is_none());
    assert_eq!(joined(&frames), b"all of it and more");
    assert!(!wire.is_reusable());

    // Chunked is not the last coding: the close delimits it.
    let gzip: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nzz";
    let (_, frames, error, wire) = exchange(&[gzip]).await.unwrap();
    assert!(error.is_none());
    assert_eq!(joined(&frames), b"zz");
    assert!(!wire.is_reusable());
}

#[tokio::test]
async fn interim_responses_are_skipped_and_a_protocol_switch_is_refused() {
    let interim: &[u8] =
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n\
        HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (response, frames, _, _) = exchange(&[interim]).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(joined(&frames), b"ok");

    let switch: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n";
    let error = exchange(&[switch]).await.unwrap_err();
    assert!(matches!(error, WireError::Malformed(_)), "{error:?}");
}

#[tokio::test]
async fn connection_close_and_http_1_0_are_not_reused() {
    let close: &[u8] =
        b"HTTP/1.1 200 OK\r\nconnection: keep-alive, close\r\ncontent-length: 0\r\n\r\n";
    let (_, _, _, wire) = exchange(&[close]).await.unwrap();
    assert!(wire.is_done() && !wire.is_reusable());
    let old: &[u8] = b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n";
    let (_, _, _, wire) = exchange(&[old]).await.unwrap();
    assert!(wire.is_done() && !wire.is_reusable());
}

#[tokio::test]
async fn bad_framing_is_refused() {
    let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
    let long_line = format!("{head}1;{}\r\n", "x".repeat(MAX_SIZE_LINE + 1));
    let long_trailers = format!("{head}0\r\n{}", "t: v\r\n".repeat(MAX_TRAILERS / 4));
    for (body, why) in [
        (format!("{head}zz\r\n"), "not hex"),
        (format!("{head}5x\r\nhello\r\n"), "not hex after digits"),
        (format!("{head}\r\n"), "no digits"),
        (format!("{head}2\r\nokXX"), "no CRLF after data"),
        (format!("{head}2\nok\r\n"), "size line without CR"),
        (format!("{head}11111111111111111\r\n"), "overflow"),
        (long_line, "size line too long"),
        (long_trailers, "trailers too long"),
    ] {
        let (_, _, error, wire) = exchange(&[body.as_bytes()]).await.unwrap();
        assert!(
            matches!(error, Some(WireError::Malformed(_))),
            "{why}: {error:?}"
        );
        assert!(wire.is_done() && !wire.is_reusable(), "{why}");
    }
    for head in [
        "HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
    ] {
        let error = exchange(&[head.as_bytes()]).await.unwrap_err();
        assert!(
            matches!(error, WireError::Malformed(_)),
            "{head:?}: {error:?}"
        );
    }
}

#[tokio::test]
async fn a_response_head_is_bounded_and_a_silent_close_is_not_a_response() {
    let huge = format!("HTTP/1.1 200 OK\r\nx: {}\r\n", "a".repeat(MAX_HEAD));
    let pieces: Vec<&[u8]> = huge.as_bytes().chunks(SCRATCH).collect();
    let error = exchange(&pieces).await.unwrap_err();
    assert!(matches!(error, WireError::HeadTooLarge), "{error:?}");

    let error = exchange(&[b"HTTP/1.1 200"]).await.unwrap_err();
    assert!(matches!(error, WireError::Closed), "{error:?}");
    let error = exchange(&[]).await.unwrap_err();
    assert!(matches!(error, WireError::Closed), "{error:?}");
}

#[tokio::test]
async fn a_large_buffer_is_let_go_once_empty() {
    let mut head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n".to_vec();
    for i in 0..100 {
        head.extend_from_slice(format!("x-filler-{i}: {}\r\n", "v".repeat(40)).as_bytes());
    }
    head.extend_from_slice(b"\r\n5\r\nhello\r\n");
    let mut script = Script::new(&[&head]);
    script.open = true;
    let mut wire = Wire::new(script);
    wire.exchange(&post()).await.unwrap();
    let frame = poll_fn(|cx| wire.poll_data(cx)).await.unwrap().unwrap();
    assert_eq!(&frame[..], b"hello");
    assert!(wire.pending.capacity() <= KEEP_PENDING);
}

#[tokio::test]
async fn a_finished_exchange_keeps_no_buffer_for_the_pool() {
    // Chunked, by length and without a body; the body whole in the head's read, and cut
    // over reads.
    let length: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let empty: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
    for pieces in [
        vec![CHUNKED],
        vec![&CHUNKED[..40], &CHUNKED[40..]],
        vec![length],
        vec![&length[..30], &length[30..]],
        vec![empty],
    ] {
        let (_, _, error, wire) = exchange(&pieces).await.unwrap();
        assert!(error.is_none(), "{error:?}");
        assert!(wire.is_reusable());
        assert_eq!(
            wire.pending.capacity(),
            0,
            "a connection back in the pool holds no read buffer"
        );
    }
}
