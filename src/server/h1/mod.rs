//! The gateway's own HTTP/1.1 server connection: request heads read and parsed ([`head`]),
//! each request handed to the service with a body read on demand
//! ([`crate::http::h1::inbound`]), its response written as it comes, and the connection kept
//! for the next request when both sides allow (RFC 9112). HTTP/2 is told apart by its preface
//! ([`rewind`]) and served by hyper.
//!
//! Written here rather than taken from hyper for a measured need: every open stream is an open
//! connection, and hyper's keeps a read buffer and a write buffer of at least 8 KiB each for as
//! long as it lives, twice what the rest of a stream costs (`benches/RESULTS.md`, "Memory per
//! open stream"). Here reads go through one per-thread scratch buffer and a response is
//! written straight from the frames its body yields (each chunk's size line, data and CRLF in
//! one vectored write), so between events a connection holds no buffer at all.
//!
//! - **Heads.** A request head larger than `max_request_head_bytes` is answered 431, an
//!   invalid one 400 (a request whose body length cannot be known safely included), and the
//!   connection is closed. The first head is bounded in time by the connection's deadline
//!   (`accept::until_first_head`); each later one by `request_header_timeout`.
//! - **Bodies.** `Expect: 100-continue` is answered at once. A request body the handler left
//!   unread makes the connection close after the response, as does `Connection: close`, an
//!   HTTP/1.0 client without keep-alive, a drain, and the connection's last request
//!   (`max_requests_per_connection`).
//! - **The client leaving.** Once the request body has been read, the connection watches the
//!   socket while the handler works and while the response streams: the client closing its
//!   side drops the response (and with it the upstream exchange) at once. Bytes of a
//!   pipelined request that arrive meanwhile are kept for after the response.

mod head;
pub(super) mod rewind;

use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::num::NonZeroU64;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use self::head::{BadHead, Outgoing, RequestHead};
use super::drain::DrainWatcher;
use crate::http::client_body::ClientBody;
use crate::http::h1::framing::Framing;
use crate::http::h1::inbound::{lock, H1Body, Inbound, SharedInbound};
use crate::http::response::ResponseBody;

/// What an HTTP/1.1 connection is configured with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    /// `max_request_head_bytes`: also what of a pipelined request is kept while a response
    /// is written.
    pub max_head: usize,
    /// `request_header_timeout`, for the heads after the first.
    pub header_timeout: Duration,
    /// `max_requests_per_connection`: the response to the last says `Connection: close`.
    pub max_requests: Option<NonZeroU64>,
}

/// How waiting for the next request head ended.
enum Next {
    /// Boxed: the other outcomes are a word or two.
    Head(Box<RequestHead>),
    /// The client closed the connection (or a drain closed an idle one).
    Closed,
    /// No head within `request_header_timeout`.
    TimedOut,
    Refused(BadHead),
    Failed(io::Error),
}

/// One step of writing a response body.
enum Step {
    /// Data to send (trailers are skipped: HTTP/1.1 responses here carry none).
    Data(Bytes),
    /// The body is over.
    End,
    /// Nothing ready yet, and the head is still unsent: it goes now.
    Idle,
    /// The client closed the connection.
    Gone,
}

/// Serves the HTTP/1.1 connection `io`, of which `read` was already read, until either side
/// closes it or a drain does. `timed_out` is called when a later request head does not
/// arrive within `request_header_timeout`.
pub(super) async fn serve<S, F, Fut>(
    io: S,
    read: BytesMut,
    settings: Settings,
    mut drain: DrainWatcher,
    service: F,
    timed_out: impl Fn(),
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    F: Fn(Request<ClientBody>) -> Fut,
    Fut: Future<Output = Response<ResponseBody>>,
{
    let (reader, mut writer) = tokio::io::split(io);
    let inbound = Inbound::new(Box::new(reader), read);
    // Requests read so far: the first head is bounded by the connection's deadline, the last
    // one allowed (`max_requests_per_connection`) is answered with close.
    let mut requests = 0u64;
    loop {
        // Boxed, as is each exchange's work below: the connection's own future then stays a
        // few words for as long as a stream lasts.
        let head = match Box::pin(next_head(&inbound, settings, &mut drain, requests == 0)).await {
            Next::Head(head) => head,
            Next::Closed => return Ok(()),
            Next::TimedOut => {
                timed_out();
                tracing::debug!(
                    timeout_ms = settings.header_timeout.as_millis() as u64,
                    "connection closed: no next request head within request_header_timeout"
                );
                return Ok(());
            }
            Next::Refused(bad) => {
                tracing::debug!(
                    status = bad.status.as_u16(),
                    why = bad.why,
                    "request head refused"
                );
                writer.write_all(&head::refusal(bad)).await?;
                return writer.shutdown().await;
            }
            Next::Failed(error) => return Err(error),
        };
        requests += 1;
        let Some(asked) = Box::pin(ask(&mut writer, &inbound, settings, *head, &service)).await?
        else {
            tracing::debug!("the client closed the connection before the response");
            return Ok(());
        };
        let last = settings
            .max_requests
            .is_some_and(|max| requests >= max.get());
        let keep_alive = asked.keep_alive && !drain.started() && !last;
        match respond(&mut writer, &inbound, settings.max_head, asked, keep_alive).await? {
            Responded::KeepAlive => {}
            Responded::Close => return writer.shutdown().await,
            Responded::Gone => {
                tracing::debug!("the client closed the connection during the response");
                return Ok(());
            }
        }
    }
}

/// How writing a response left the connection.
enum Responded {
    /// Ready for the next request.
    KeepAlive,
    /// To be closed now: the response said so.
    Close,
    /// The client closed it.
    Gone,
}

/// Writes the response to the request `asked` was for; the connection is kept only when
/// `keep_alive` and the exchange allow it.
async fn respond<W: AsyncWrite + Unpin>(
    writer: &mut W,
    inbound: &SharedInbound,
    keep: usize,
    asked: Asked,
    keep_alive: bool,
) -> io::Result<Responded> {
    let (framing, keep_alive, body, head) = {
        let (parts, body) = asked.response.into_parts();
        let framing = outgoing(asked.bodyless, parts.status, asked.version, &body);
        // A body left unread hides where the next request starts.
        let keep_alive = keep_alive && framing != Outgoing::Close && lock(inbound).body_done();
        let mut head = BytesMut::with_capacity(256);
        head::encode_response(
            parts.status,
            &parts.headers,
            framing,
            body.size_hint().exact(),
            keep_alive,
            &mut head,
        );
        (framing, keep_alive, body, head)
    };
    if !write_body(writer, inbound, keep, framing, body, head).await? {
        return Ok(Responded::Gone);
    }
    Ok(if keep_alive && !lock(inbound).is_closed() {
        Responded::KeepAlive
    } else {
        Responded::Close
    })
}

/// A request's response, and what its request said about how it goes.
struct Asked {
    response: Response<ResponseBody>,
    bodyless: bool,
    version: Version,
    keep_alive: bool,
}

/// Hands the request to the service and waits for its response; `None` when the client
/// closes the connection first.
async fn ask<W, F, Fut>(
    writer: &mut W,
    inbound: &SharedInbound,
    settings: Settings,
    head: RequestHead,
    service: &F,
) -> io::Result<Option<Asked>>
where
    W: AsyncWrite + Unpin,
    F: Fn(Request<ClientBody>) -> Fut,
    Fut: Future<Output = Response<ResponseBody>>,
{
    let RequestHead {
        parts,
        body,
        keep_alive,
        expects_continue,
    } = head;
    let bodyless = parts.method == Method::HEAD;
    let version = parts.version;
    let body = match body {
        Framing::Done => ClientBody::Empty,
        framing => ClientBody::H1(H1Body::new(inbound, framing)),
    };
    if expects_continue {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        writer.flush().await?;
    }
    let responding = service(Request::from_parts(parts, body));
    Ok(until_gone(inbound, settings.max_head, responding)
        .await
        .map(|response| Asked {
            response,
            bodyless,
            version,
            keep_alive,
        }))
}

/// Waits for the next request head. A drain closes a connection that has no request under
/// way (no byte of a next head read).
async fn next_head(
    inbound: &SharedInbound,
    settings: Settings,
    drain: &mut DrainWatcher,
    first: bool,
) -> Next {
    let read = async {
        if first {
            Ok(read_head(inbound, settings.max_head).await)
        } else {
            tokio::time::timeout(
                settings.header_timeout,
                read_head(inbound, settings.max_head),
            )
            .await
        }
    };
    tokio::pin!(read);
    let mut draining = drain.started();
    loop {
        if draining && lock(inbound).pending().is_empty() {
            return Next::Closed;
        }
        tokio::select! {
            read = &mut read => return read.unwrap_or(Next::TimedOut),
            () = drain.wait(), if !draining => draining = true,
        }
    }
}

async fn read_head(inbound: &SharedInbound, max_head: usize) -> Next {
    poll_fn(|cx| {
        let mut inbound = lock(inbound);
        loop {
            if !inbound.pending().is_empty() {
                match head::parse(inbound.pending()) {
                    Ok(Some((_, len))) if len > max_head => {
                        return Poll::Ready(Next::Refused(too_large()));
                    }
                    Ok(Some((head, len))) => {
                        inbound.consume(len);
                        return Poll::Ready(Next::Head(Box::new(head)));
                    }
                    Ok(None) if inbound.pending().len() >= max_head => {
                        return Poll::Ready(Next::Refused(too_large()));
                    }
                    Ok(None) => {}
                    Err(bad) => return Poll::Ready(Next::Refused(bad)),
                }
            }
            match std::task::ready!(inbound.poll_fill(cx)) {
                Ok(true) => {}
                // Closed, perhaps in the middle of a head: nobody is left to answer.
                Ok(false) => return Poll::Ready(Next::Closed),
                Err(error) => return Poll::Ready(Next::Failed(error)),
            }
        }
    })
    .await
}

fn too_large() -> BadHead {
    BadHead {
        status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        why: "larger than max_request_head_bytes",
    }
}

/// `responding`'s output, or `None` when the client closes the connection first.
async fn until_gone<F: Future>(
    inbound: &SharedInbound,
    keep: usize,
    responding: F,
) -> Option<F::Output> {
    tokio::pin!(responding);
    poll_fn(|cx| {
        if let Poll::Ready(response) = responding.as_mut().poll(cx) {
            return Poll::Ready(Some(response));
        }
        match lock(inbound).poll_gone(cx, keep) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// How the response body goes (RFC 9112 §6.3): none for `HEAD`, 1xx, 204 and 304; its length
/// when the body knows it; otherwise chunked, or until the close for an HTTP/1.0 client.
fn outgoing(bodyless: bool, status: StatusCode, version: Version, body: &ResponseBody) -> Outgoing {
    if bodyless
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Outgoing::None;
    }
    match body.size_hint().exact() {
        Some(n) => Outgoing::Length(n),
        None if version == Version::HTTP_11 => Outgoing::Chunked,
        None => Outgoing::Close,
    }
}

/// Writes the response: `head`, then the body's frames as they come. The head goes with the
/// first frame when that is ready at once (a whole document), on its own otherwise (a stream's
/// first event may be a while). `false` when the client closed the connection first.
async fn write_body<W: AsyncWrite + Unpin>(
    writer: &mut W,
    inbound: &SharedInbound,
    keep: usize,
    framing: Outgoing,
    mut body: ResponseBody,
    head: BytesMut,
) -> io::Result<bool> {
    if framing == Outgoing::None {
        drop(body);
        writer.write_all(&head).await?;
        writer.flush().await?;
        return Ok(true);
    }
    let mut head = Some(head);
    loop {
        let step = poll_fn(|cx| loop {
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Poll::Ready(Step::Data(data)),
                    _ => continue,
                },
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => return Poll::Ready(Step::End),
                Poll::Pending if head.is_some() => return Poll::Ready(Step::Idle),
                Poll::Pending => {
                    return match lock(inbound).poll_gone(cx, keep) {
                        Poll::Ready(()) => Poll::Ready(Step::Gone),
                        Poll::Pending => Poll::Pending,
                    }
                }
            }
        })
        .await;
        match step {
            Step::Gone => return Ok(false),
            Step::Idle => {
                if let Some(head) = head.take() {
                    writer.write_all(&head).await?;
                    writer.flush().await?;
                }
            }
            Step::End => {
                let end: &[u8] = if framing == Outgoing::Chunked {
                    LAST_CHUNK
                } else {
                    b""
                };
                match head.take() {
                    Some(mut head) => {
                        head.extend_from_slice(end);
                        writer.write_all(&head).await?;
                    }
                    None => writer.write_all(end).await?,
                }
                writer.flush().await?;
                return Ok(true);
            }
            Step::Data(data) => {
                // A stream's last events and its end usually come in one read: when the body
                // says nothing follows, the last chunk takes the end along (one write, one
                // wake-up of the client, instead of two).
                let last = framing == Outgoing::Chunked && body.is_end_stream();
                match head.take() {
                    Some(mut head) => {
                        if framing == Outgoing::Chunked {
                            put_chunk(&mut head, &data);
                            if last {
                                head.extend_from_slice(LAST_CHUNK);
                            }
                        } else {
                            head.extend_from_slice(&data);
                        }
                        writer.write_all(&head).await?;
                    }
                    None if framing == Outgoing::Chunked => {
                        write_chunk(writer, &data, last).await?
                    }
                    None => writer.write_all(&data).await?,
                }
                writer.flush().await?;
                if last {
                    return Ok(true);
                }
            }
        }
    }
}

/// The last chunk of a chunked body, without trailers (RFC 9112 §7.1).
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// One chunk: its size line, its data and its CRLF, in one write; with the last chunk after
/// it when `last`.
async fn write_chunk<W: AsyncWrite + Unpin>(
    writer: &mut W,
    data: &[u8],
    last: bool,
) -> io::Result<()> {
    let end: &[u8] = if last { b"\r\n0\r\n\r\n" } else { b"\r\n" };
    if !writer.is_write_vectored() {
        let mut whole = BytesMut::with_capacity(data.len() + 20 + LAST_CHUNK.len());
        let mut line = [0u8; 20];
        whole.put_slice(size_line(&mut line, data.len()));
        whole.put_slice(data);
        whole.put_slice(end);
        return writer.write_all(&whole).await;
    }
    let mut line = [0u8; 20];
    let line = size_line(&mut line, data.len());
    let mut slices = [IoSlice::new(line), IoSlice::new(data), IoSlice::new(end)];
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        let written = writer.write_vectored(slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, written);
    }
    Ok(())
}

/// `len` in hex and CRLF, at the start of `buf`.
fn size_line(buf: &mut [u8; 20], len: usize) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1) as usize;
    for (i, slot) in buf[..digits].iter_mut().enumerate() {
        let shift = 4 * (digits - 1 - i);
        *slot = HEX[(len >> shift) & 0xf];
    }
    buf[digits] = b'\r';
    buf[digits + 1] = b'\n';
    &buf[..digits + 2]
}

/// `data` as one chunk: size line, data, CRLF.
fn put_chunk(out: &mut BytesMut, data: &[u8]) {
    let mut line = [0u8; 20];
    out.put_slice(size_line(&mut line, data.len()));
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
