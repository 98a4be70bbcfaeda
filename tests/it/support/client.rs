//! A raw-socket HTTP/1.1 + SSE test client.
//!
//! The request is written by hand (so any header, including hop-by-hop ones, goes out exactly as
//! given); the response head is parsed, then the body is decoded incrementally (chunked,
//! content-length or close-delimited). Body bytes are kept verbatim (`raw_body`) and also parsed
//! into SSE items (`next_item`, `next_event`). Dropping a `Response` (or calling `disconnect`)
//! closes the TCP connection at once, wherever the stream is.
//!
//! Every read waits at most `read_timeout` (default `PATIENCE`) and panics with what was received
//! so far, so a hang is a clear failure rather than a stuck test.

use std::{collections::VecDeque, net::SocketAddr, time::Duration};

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use super::{find_bytes, header_value, header_values, parse_head, PATIENCE};

/// An HTTP request to send.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_string(),
            path: path.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// `POST path` with `content-type: application/json` and `accept: text/event-stream`.
    pub fn post_json(path: &str, body: impl Into<Vec<u8>>) -> Request {
        Request::new("POST", path)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body)
    }

    pub fn get(path: &str) -> Request {
        Request::new("GET", path)
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// The bytes on the wire. `host` and `content-length` are added unless given.
    pub fn to_bytes(&self, addr: SocketAddr) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        if header_value(&self.headers, "host").is_none() {
            head.push_str(&format!("host: {addr}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if header_value(&self.headers, "content-length").is_none()
            && header_value(&self.headers, "transfer-encoding").is_none()
            && (!self.body.is_empty() || self.method != "GET")
        {
            head.push_str(&format!("content-length: {}\r\n", self.body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// An open client connection, before the response head has been read.
pub struct Conn {
    addr: SocketAddr,
    stream: TcpStream,
    buf: Vec<u8>,
    read_timeout: Duration,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = tokio::time::timeout(PATIENCE, TcpStream::connect(addr))
            .await
            .unwrap_or_else(|_| panic!("connect to {addr} timed out"))
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        let _ = stream.set_nodelay(true);
        Conn {
            addr,
            stream,
            buf: Vec::new(),
            read_timeout: PATIENCE,
        }
    }

    pub fn with_read_timeout(mut self, timeout: Duration) -> Conn {
        self.read_timeout = timeout;
        self
    }

    /// Writes the whole request.
    pub async fn send(&mut self, request: &Request) {
        let bytes = request.to_bytes(self.addr);
        self.stream
            .write_all(&bytes)
            .await
            .expect("write request to gateway");
        self.stream.flush().await.expect("flush request");
    }

    /// Reads the response head. The connection is then owned by the `Response`.
    pub async fn response(mut self) -> Response {
        let head_end = loop {
            if let Some(i) = find_bytes(&self.buf, b"\r\n\r\n") {
                break i;
            }
            let n = read_some(&mut self.stream, &mut self.buf, self.read_timeout)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "no response head from gateway: {e}; received so far: {:?}",
                        String::from_utf8_lossy(&self.buf)
                    )
                });
            assert!(
                n > 0,
                "gateway closed the connection before a response head; received: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        };
        let (status_line, headers) = parse_head(&self.buf[..head_end]);
        let rest = self.buf.split_off(head_end + 4);
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));

        let chunked = header_value(&headers, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let framing = if chunked {
            Framing::Chunked(ChunkState::Size)
        } else if let Some(len) = header_value(&headers, "content-length") {
            Framing::Length(len.parse().expect("numeric content-length"))
        } else {
            Framing::Close
        };
        let mut response = Response {
            status,
            status_line,
            headers,
            stream: Some(self.stream),
            wire: rest,
            framing,
            body: Vec::new(),
            parsed_upto: 0,
            items: VecDeque::new(),
            end: None,
            read_timeout: self.read_timeout,
        };
        response.decode();
        response.parse_items();
        response
    }
}

/// Opens a connection, sends `request` and reads the response head.
pub async fn send(addr: SocketAddr, request: &Request) -> Response {
    let mut conn = Conn::open(addr).await;
    conn.send(request).await;
    conn.response().await
}

/// One parsed SSE item.
#[derive(Clone, Debug, PartialEq)]
pub enum SseItem {
    /// A `data:` block that parsed as JSON.
    Event(Value),
    /// A comment line (`: ping` → `"ping"`).
    Comment(String),
    /// A `data:` block that is not JSON (or an event with only non-data fields), verbatim.
    Invalid(String),
}

impl SseItem {
    pub fn as_event(&self) -> Option<&Value> {
        match self {
            SseItem::Event(v) => Some(v),
            _ => None,
        }
    }

    pub fn is_comment(&self, text: &str) -> bool {
        matches!(self, SseItem::Comment(c) if c == text)
    }
}

/// How the response body ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// Terminating chunk, full content-length, or EOF on a close-delimited body.
    Clean,
    /// The connection closed before the body was complete.
    Truncated(String),
}

enum ChunkState {
    Size,
    Data(usize),
    DataCrlf,
    Trailers,
}

enum Framing {
    Chunked(ChunkState),
    Length(usize),
    Close,
}

pub struct Response {
    pub status: u16,
    pub status_line: String,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    stream: Option<TcpStream>,
    /// Received but not yet decoded wire bytes.
    wire: Vec<u8>,
    framing: Framing,
    /// Every decoded body byte so far.
    body: Vec<u8>,
    parsed_upto: usize,
    items: VecDeque<SseItem>,
    end: Option<BodyEnd>,
    read_timeout: Duration,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        header_values(&self.headers, name)
    }

    /// The decoded body bytes received so far (chunk framing removed).
    pub fn raw_body(&self) -> &[u8] {
        &self.body
    }

    /// `Some` once the body has ended (cleanly or not).
    pub fn body_end(&self) -> Option<&BodyEnd> {
        self.end.as_ref()
    }

    pub fn set_read_timeout(&mut self, timeout: Duration) {
        self.read_timeout = timeout;
    }

    /// Reads more of the body. Returns false once the body has ended. Panics after
    /// `read_timeout` without any bytes.
    pub async fn read_more(&mut self) -> bool {
        if self.end.is_some() {
            return false;
        }
        let Some(stream) = self.stream.as_mut() else {
            return false;
        };
        let result = read_some(stream, &mut self.wire, self.read_timeout).await;
        match result {
            Ok(0) => {
                self.end = Some(match self.framing {
                    Framing::Close => BodyEnd::Clean,
                    _ => BodyEnd::Truncated("connection closed mid-body".into()),
                });
                self.stream = None;
            }
            Ok(_) => self.decode(),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => panic!(
                "no body bytes from gateway within {:?}; body so far:\n{}",
                self.read_timeout,
                String::from_utf8_lossy(&self.body)
            ),
            Err(e) => {
                self.end = Some(BodyEnd::Truncated(format!("read error: {e}")));
                self.stream = None;
            }
        }
        self.parse_items();
        self.end.is_none() || !self.items.is_empty()
    }

    /// Next SSE item (event or comment), or `None` at the end of the body.
    pub async fn next_item(&mut self) -> Option<SseItem> {
        loop {
            if let Some(item) = self.items.pop_front() {
                return Some(item);
            }
            if self.end.is_some() {
                return None;
            }
            self.read_more().await;
        }
    }

    /// Next parsed JSON event, skipping comments. Panics on a non-JSON `data:` block.
    pub async fn next_event(&mut self) -> Option<Value> {
        loop {
            match self.next_item().await? {
                SseItem::Event(v) => return Some(v),
                SseItem::Comment(_) => {}
                SseItem::Invalid(text) => panic!("gateway sent a non-JSON SSE event: {text:?}"),
            }
        }
    }

    /// Reads exactly `n` events (panics if the stream ends first).
    pub async fn read_events(&mut self, n: usize) -> Vec<Value> {
        let mut events = Vec::with_capacity(n);
        while events.len() < n {
            match self.next_event().await {
                Some(e) => events.push(e),
                None => panic!(
                    "stream ended after {} of {n} events: {events:?}\nbody: {}",
                    events.len(),
                    String::from_utf8_lossy(&self.body)
                ),
            }
        }
        events
    }

    /// All remaining items until the body ends.
    pub async fn items_to_end(&mut self) -> Vec<SseItem> {
        let mut items = Vec::new();
        while let Some(item) = self.next_item().await {
            items.push(item);
        }
        items
    }

    /// All remaining events until the body ends (comments skipped).
    pub async fn events_to_end(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(e) = self.next_event().await {
            events.push(e);
        }
        events
    }

    /// Reads until the body ends; returns the whole decoded body.
    pub async fn read_to_end(&mut self) -> &[u8] {
        while self.end.is_none() {
            self.read_more().await;
        }
        &self.body
    }

    /// The whole body as text.
    pub async fn text(&mut self) -> String {
        String::from_utf8_lossy(self.read_to_end().await).into_owned()
    }

    /// The whole body parsed as JSON (panics with the text otherwise).
    pub async fn json(&mut self) -> Value {
        let text = self.text().await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {text:?}"))
    }

    /// Closes the TCP connection now.
    pub fn disconnect(self) {
        drop(self);
    }

    fn decode(&mut self) {
        loop {
            match &mut self.framing {
                Framing::Close => {
                    self.body.append(&mut self.wire);
                    return;
                }
                Framing::Length(remaining) => {
                    let take = (*remaining).min(self.wire.len());
                    self.body.extend(self.wire.drain(..take));
                    *remaining -= take;
                    if *remaining == 0 {
                        self.end = Some(BodyEnd::Clean);
                    }
                    return;
                }
                Framing::Chunked(state) => match state {
                    ChunkState::Size => {
                        let Some(i) = find_bytes(&self.wire, b"\r\n") else {
                            return;
                        };
                        let line = String::from_utf8_lossy(&self.wire[..i]).into_owned();
                        self.wire.drain(..i + 2);
                        let size_text = line.split(';').next().unwrap_or("").trim();
                        let size = usize::from_str_radix(size_text, 16)
                            .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
                        *state = if size == 0 {
                            ChunkState::Trailers
                        } else {
                            ChunkState::Data(size)
                        };
                    }
                    ChunkState::Data(remaining) => {
                        if self.wire.is_empty() {
                            return;
                        }
                        let take = (*remaining).min(self.wire.len());
                        self.body.extend(self.wire.drain(..take));
                        *remaining -= take;
                        if *remaining == 0 {
                            *state = ChunkState::DataCrlf;
                        }
                    }
                    ChunkState::DataCrlf => {
                        if self.wire.len() < 2 {
                            return;
                        }
                        assert_eq!(&self.wire[..2], b"\r\n", "chunk not followed by CRLF");
                        self.wire.drain(..2);
                        *state = ChunkState::Size;
                    }
                    ChunkState::Trailers => {
                        let Some(i) = find_bytes(&self.wire, b"\r\n") else {
                            return;
                        };
                        self.wire.drain(..i + 2);
                        if i == 0 {
                            self.end = Some(BodyEnd::Clean);
                            return;
                        }
                    }
                },
            }
        }
    }

    /// Splits complete SSE blocks (terminated by a blank line) off the decoded body. A last block
    /// without the blank line is parsed once the body has ended.
    fn parse_items(&mut self) {
        loop {
            let rest = &self.body[self.parsed_upto..];
            let (block, consumed) = match find_bytes(rest, b"\n\n") {
                Some(i) => (&rest[..i], i + 2),
                None if self.end.is_some() && !rest.is_empty() => (rest, rest.len()),
                None => return,
            };
            let block = String::from_utf8_lossy(block).into_owned();
            self.parsed_upto += consumed;
            let mut data: Option<String> = None;
            let mut other = false;
            for line in block.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if let Some(comment) = line.strip_prefix(':') {
                    let comment = comment.strip_prefix(' ').unwrap_or(comment);
                    self.items.push_back(SseItem::Comment(comment.to_string()));
                } else if let Some(d) = line.strip_prefix("data:") {
                    let d = d.strip_prefix(' ').unwrap_or(d);
                    match &mut data {
                        Some(acc) => {
                            acc.push('\n');
                            acc.push_str(d);
                        }
                        None => data = Some(d.to_string()),
                    }
                } else if !line.is_empty() {
                    other = true;
                }
            }
            match data {
                Some(d) => self.items.push_back(match serde_json::from_str(&d) {
                    Ok(v) => SseItem::Event(v),
                    Err(_) => SseItem::Invalid(d),
                }),
                None if other => self.items.push_back(SseItem::Invalid(block)),
                None => {}
            }
        }
    }
}

async fn read_some(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> std::io::Result<usize> {
    buf.reserve(16 * 1024);
    match tokio::time::timeout(timeout, stream.read_buf(buf)).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "read timed out",
        )),
    }
}
