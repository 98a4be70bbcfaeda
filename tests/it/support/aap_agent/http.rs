//! HTTP/1.1 for the agent: one task per connection reads requests (content-length or chunked
//! bodies), has each answered by `handle.rs`, and writes the answer: a `content-length` body,
//! or a chunked stream, one chunk per step, that ends cleanly, is cut or stalls. While an answer
//! is written the read side is watched, so a peer that leaves is counted as a cancellation.

use std::sync::Arc;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpStream,
    },
};

use super::{
    super::{find_bytes, header_value, parse_head},
    handle::{Incoming, Shared},
    reply::{Body, End, Planned, Step},
};

enum Outcome {
    /// The answer is complete; the connection may serve another request.
    Completed,
    /// The answer ends by dropping the connection.
    Closed,
    /// The peer went away while the answer was being written.
    PeerClosed,
}

pub(super) async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = Vec::new();
    loop {
        let Some(incoming) = read_request(&mut rd, &mut buf).await else {
            return;
        };
        let close = header_value(&incoming.headers, "connection")
            .is_some_and(|v| v.to_ascii_lowercase().contains("close"));
        let planned = shared.handle(incoming);
        shared.request_count.send_modify(|c| *c += 1);
        let outcome = tokio::select! {
            outcome = write_planned(&planned, close, &mut wr) => outcome,
            () = wait_peer_close(&mut rd, &mut buf) => Outcome::PeerClosed,
        };
        match outcome {
            Outcome::Completed if !close => continue,
            Outcome::Completed | Outcome::Closed => {
                let _ = wr.shutdown().await;
                return;
            }
            Outcome::PeerClosed => {
                shared.cancellations.send_modify(|c| *c += 1);
                return;
            }
        }
    }
}

async fn write_planned(planned: &Planned, close: bool, wr: &mut OwnedWriteHalf) -> Outcome {
    if !planned.delay.is_zero() {
        tokio::time::sleep(planned.delay).await;
    }
    let reason = http::StatusCode::from_u16(planned.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Scripted");
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", planned.status);
    for (name, value) in &planned.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if close {
        head.push_str("connection: close\r\n");
    }
    match &planned.body {
        Body::NoResponse => std::future::pending().await,
        Body::Fixed(bytes) => {
            if planned.status != 204 {
                head.push_str(&format!("content-length: {}\r\n", bytes.len()));
            }
            head.push_str("\r\n");
            let mut all = head.into_bytes();
            all.extend_from_slice(bytes);
            match write_flush(wr, &all).await {
                Ok(()) => Outcome::Completed,
                Err(_) => Outcome::PeerClosed,
            }
        }
        Body::Chunked(steps, end) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if write_flush(wr, head.as_bytes()).await.is_err() {
                return Outcome::PeerClosed;
            }
            for step in steps {
                match step {
                    Step::Bytes(bytes) if bytes.is_empty() => {}
                    Step::Bytes(bytes) => {
                        let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                        chunk.extend_from_slice(bytes);
                        chunk.extend_from_slice(b"\r\n");
                        if write_flush(wr, &chunk).await.is_err() {
                            return Outcome::PeerClosed;
                        }
                    }
                    Step::Sleep(d) => tokio::time::sleep(*d).await,
                }
            }
            match end {
                End::Clean => match write_flush(wr, b"0\r\n\r\n").await {
                    Ok(()) => Outcome::Completed,
                    Err(_) => Outcome::PeerClosed,
                },
                End::Cut => Outcome::Closed,
                End::Stall => std::future::pending().await,
            }
        }
    }
}

async fn write_flush(wr: &mut OwnedWriteHalf, bytes: &[u8]) -> std::io::Result<()> {
    wr.write_all(bytes).await?;
    wr.flush().await
}

/// Resolves when the read side reports EOF or an error; bytes read meanwhile are kept.
async fn wait_peer_close(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) {
    loop {
        buf.reserve(4096);
        if let Ok(0) | Err(_) = rd.read_buf(buf).await {
            return;
        }
    }
}

/// Reads one request (head plus a content-length or chunked body). `None` on EOF or garbage.
async fn read_request(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<Incoming> {
    let head_end = loop {
        if let Some(i) = find_bytes(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 || !fill(rd, buf).await {
            return None;
        }
    };
    let (request_line, headers) = parse_head(&buf[..head_end]);
    buf.drain(..head_end + 4);
    let mut parts = request_line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let chunked = header_value(&headers, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked_body(rd, buf).await?
    } else {
        let len: usize = header_value(&headers, "content-length")
            .map(|v| v.parse().ok())
            .unwrap_or(Some(0))?;
        while buf.len() < len {
            if !fill(rd, buf).await {
                return None;
            }
        }
        buf.drain(..len).collect()
    };
    Some(Incoming {
        method,
        target,
        headers,
        body,
    })
}

async fn read_line(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<String> {
    let end = loop {
        if let Some(i) = find_bytes(buf, b"\r\n") {
            break i;
        }
        if !fill(rd, buf).await {
            return None;
        }
    };
    let line = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 2);
    Some(line)
}

async fn read_chunked_body(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(rd, buf).await?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, then the blank line.
            while !read_line(rd, buf).await?.is_empty() {}
            return Some(body);
        }
        while buf.len() < size + 2 {
            if !fill(rd, buf).await {
                return None;
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn fill(rd: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> bool {
    buf.reserve(8192);
    matches!(rd.read_buf(buf).await, Ok(n) if n > 0)
}
