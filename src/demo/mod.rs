//! The built-in demo agent: a scripted AG-UI 1.0 agent, served over HTTP.
//!
//! Why it exists: the gateway must work on a fresh machine with nothing else running. The
//! README's first run command points the gateway at `builtin:demo`, and `dialect-proxy
//! demo-agent` serves the same agent on a port of its own, so every dialect can be tried, and
//! every client tested, without an LLM, a key or a second process.
//!
//! Three pieces:
//!
//! - [`script()`] decides what the agent says: a pure function from the request to a legal run
//!   (the [`script` module](mod@script) describes the three shapes of run and the id scheme).
//! - [`DemoBody`] streams those events as AG-UI SSE (`data: <json>\n\n`, `agui.md` §6.1).
//! - [`serve`] is a minimal HTTP/1.1 server: `POST` on any path with a `RunAgentInput` body.
//!
//! ## Pacing and frame cuts
//!
//! The body is pull-based: nothing runs unless hyper polls it, there is no task and no channel.
//! Between two frames it waits `pace` on one pinned [`Sleep`], reset after each frame; with
//! `Duration::ZERO` it never waits. The pause is counted from the moment a frame is handed
//! out, so a slow reader is not made to wait twice.
//!
//! The bytes are deliberately cut where a careless decoder breaks. The stream has as many
//! frames as the run has events, but shifted: each frame ends *inside the next event*, so it
//! carries the end of one event and the beginning of the following one, and every frame
//! boundary falls across an event boundary. Where the next event's JSON holds a non-ASCII
//! character, the cut falls one byte into the first such character, so that frame ends with
//! an incomplete UTF-8 sequence (every text delta of the script carries some); otherwise the cut
//! falls in the middle of the event. The offsets depend only on the bytes, so a run always
//! arrives in the same frames, whatever the network then does with them. A client that decodes
//! UTF-8 per read, or that expects one event per read, fails here first.
//!
//! ## HTTP
//!
//! `POST` with a valid body answers `200`, `content-type: text/event-stream`, `cache-control:
//! no-cache`, no `content-length`. A body that is not a `RunAgentInput` answers `400` with
//! `{"error":{"code":"INVALID_REQUEST","message":…}}`, the message naming the field serde
//! stumbled on; a body over [`MAX_REQUEST_BYTES`] answers `413` (`PAYLOAD_TOO_LARGE`); any
//! other method answers `405` (`METHOD_NOT_ALLOWED`) with the same shape.
//!
//! Must not import `http`, `adapters`, `server` or `session`: the gateway uses the agent, not
//! the reverse.

pub mod script;

pub use script::script;

use crate::error::{ErrorCode, Failure};

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tracing::{debug, error};

use crate::dialect::field_error;
use crate::event::{Event, RunAgentInput};
use crate::sse::encode_json;

/// Default pause between two frames of a [`DemoBody`].
pub const DEFAULT_PACE: Duration = Duration::from_millis(40);

/// Largest request body the demo server reads.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The demo run answering `input`, as an SSE body paced at `pace` per frame.
pub fn demo_response(input: &RunAgentInput, pace: Duration) -> DemoBody {
    DemoBody::new(&script(input), pace)
}

// === impl DemoBody ===

/// Events encoded as AG-UI SSE, handed out in paced frames cut across events and characters
/// (see the module docs).
///
/// `Error` is [`Infallible`]: the stream always runs to its last byte. `is_end_stream` is exact;
/// `size_hint` stays unknown so that no `content-length` is sent.
#[derive(Debug)]
pub struct DemoBody {
    /// The whole stream, encoded once; frames are zero-copy slices of it.
    wire: Bytes,
    /// Exclusive end offset of each frame, strictly increasing; the last is `wire.len()`.
    frame_ends: Vec<usize>,
    /// Index of the next frame in `frame_ends`.
    next_frame: usize,
    pace: Duration,
    /// Created on the first frame (polling runs inside a runtime, construction may not), then
    /// reset after every frame but the last. `None` while `pace` is zero.
    pause: Option<Pin<Box<Sleep>>>,
}

impl DemoBody {
    /// Encodes `events` as `data: <json>\n\n` each, to be sent `pace` apart.
    pub fn new(events: &[Event], pace: Duration) -> DemoBody {
        let mut wire = BytesMut::new();
        let mut event_starts = Vec::with_capacity(events.len());
        for event in events {
            let start = wire.len();
            if let Err(error) = encode_json(&mut wire, None, event) {
                // Unreachable: events hold strings and `serde_json::Value`s, which always
                // serialise. Skip the event whole rather than send half of it.
                error!(%error, event = event.event_type().as_str(), "demo event not encodable");
                wire.truncate(start);
                continue;
            }
            event_starts.push(start);
        }
        let wire = wire.freeze();
        let frame_ends = frame_ends(&wire, &event_starts);
        DemoBody {
            wire,
            frame_ends,
            next_frame: 0,
            pace,
            pause: None,
        }
    }

    /// Arms the pause before the next frame, counted from now.
    fn arm_pause(&mut self) {
        if self.pace.is_zero() {
            return;
        }
        match &mut self.pause {
            Some(pause) => pause.as_mut().reset(Instant::now() + self.pace),
            None => self.pause = Some(Box::pin(tokio::time::sleep(self.pace))),
        }
    }
}

impl Body for DemoBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let Some(&end) = this.frame_ends.get(this.next_frame) else {
            return Poll::Ready(None);
        };
        if let Some(pause) = &mut this.pause {
            // Armed after the previous frame; a fired `Sleep` stays ready until reset.
            ready!(pause.as_mut().poll(cx));
        }
        let start = match this.next_frame {
            0 => 0,
            n => this.frame_ends[n - 1],
        };
        this.next_frame += 1;
        if this.next_frame < this.frame_ends.len() {
            this.arm_pause();
        }
        Poll::Ready(Some(Ok(Frame::data(this.wire.slice(start..end)))))
    }

    fn is_end_stream(&self) -> bool {
        self.next_frame >= self.frame_ends.len()
    }
}

/// One frame per event, each ending inside the following event: one byte into its first
/// non-ASCII character if it has one, else at its middle. `event_starts[0]` is 0.
fn frame_ends(wire: &[u8], event_starts: &[usize]) -> Vec<usize> {
    let mut ends = Vec::with_capacity(event_starts.len());
    for (i, &start) in event_starts.iter().enumerate().skip(1) {
        let end = event_starts.get(i + 1).copied().unwrap_or(wire.len());
        let event = &wire[start..end];
        let cut = match event.iter().position(|b| !b.is_ascii()) {
            Some(first_non_ascii) => first_non_ascii + 1,
            None => event.len() / 2,
        };
        // An encoded event is at least `data: {}\n\n`, so the cut is strictly inside it.
        ends.push(start + cut.clamp(1, event.len() - 1));
    }
    if !wire.is_empty() {
        ends.push(wire.len());
    }
    ends
}

// === HTTP server ===

/// What the server answers with: a demo stream, or a JSON error.
type ReplyBody = Either<DemoBody, Full<Bytes>>;

/// Serves the demo agent on `listener` until accepting fails for a reason that is not about a
/// single connection (then returns that error). One task per connection, HTTP/1.1 only; every
/// stream is paced at `pace`. Dropping the future stops accepting; open connections finish.
pub async fn serve(listener: TcpListener, pace: Duration) -> io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        debug!(%addr, ?pace, "demo agent listening");
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) if is_per_connection(&error) => {
                debug!(%error, "demo agent: a connection failed before it was accepted");
                continue;
            }
            Err(error) => return Err(error),
        };
        tokio::spawn(serve_connection(stream, peer, pace));
    }
}

/// Accept errors that concern one connection only; the listener is still fine.
fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

async fn serve_connection(stream: TcpStream, peer: SocketAddr, pace: Duration) {
    let service = service_fn(move |request| respond(request, pace));
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        // Typically the client leaving mid-stream, which is how AG-UI cancels a run.
        debug!(%peer, %error, "demo connection closed with an error");
    }
}

async fn respond(
    request: Request<Incoming>,
    pace: Duration,
) -> Result<Response<ReplyBody>, Infallible> {
    let method = request.method().clone();
    debug!(%method, path = request.uri().path(), "demo request");
    if method != Method::POST {
        let message = format!("the demo agent answers POST only, not {method}");
        let mut response = error_response(ErrorCode::MethodNotAllowed, &message);
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return Ok(response);
    }

    let body = match Limited::new(request.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<LengthLimitError>() => {
            let message = format!("the request body exceeds {MAX_REQUEST_BYTES} bytes");
            debug!(%message, "demo request rejected");
            return Ok(error_response(ErrorCode::PayloadTooLarge, &message));
        }
        Err(error) => {
            let message = format!("could not read the request body: {error}");
            debug!(%message, "demo request rejected");
            return Ok(error_response(ErrorCode::InvalidRequest, &message));
        }
    };

    let mut de = serde_json::Deserializer::from_slice(&body);
    let input = match serde_path_to_error::deserialize::<_, RunAgentInput>(&mut de) {
        Ok(input) => input,
        Err(error) => {
            let message = field_error::describe(&error.path().to_string(), error.inner());
            debug!(%message, "demo request rejected");
            return Ok(error_response(ErrorCode::InvalidRequest, &message));
        }
    };
    debug!(
        thread_id = %input.thread_id,
        run_id = %input.run_id,
        messages = input.messages.len(),
        tools = input.tools.len(),
        "demo run"
    );

    let mut response = Response::new(Either::Left(demo_response(&input, pace)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// `{"error":{"code":…,"message":…}}` with `status`.
/// The gateway's error shape and statuses (`crate::error`), so both speak alike.
fn error_response(code: ErrorCode, message: &str) -> Response<ReplyBody> {
    let body = Failure::new(code, message).to_json_body();
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(body))));
    *response.status_mut() = code.http_status();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests;
