//! The read side of a client's HTTP/1.1 connection ([`Inbound`]), shared between the
//! connection, which reads request heads from it and watches it for the client leaving, and the
//! request body a handler reads ([`H1Body`]).
//!
//! Both run in the connection's task, one after the other, so the lock around it is never
//! contended: it only lets the body outlive a borrow of the connection. Reads go through the
//! per-thread scratch buffer; between requests the connection keeps only bytes that have
//! arrived and not been used (a cut head, a pipelined request).
//!
//! While a response streams, the connection's task wakes for every event the upstream sends,
//! and each wake-up polled the client's socket for a close that almost never comes: a lock,
//! tokio's readiness check and its waiters' lock each time, about 240 of a streamed event's
//! 6,500 instructions (`benches/request_instructions.sh --events`). The socket is polled
//! there with a waker of its own ([`Watch`]) instead, which notes that the socket woke the
//! task; until it has, the socket is not polled again. This holds because nothing but this
//! read side reads the socket: a read with another waker (a request head, a request body)
//! goes through [`Inbound::poll_fill`], which marks the watch as no longer registered.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use atomic_waker::AtomicWaker;
use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::io::AsyncRead;

use super::framing::{decode, poll_read_with, Framing, Malformed};

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("client connection error: {0}")]
    Io(#[from] io::Error),
    #[error("the client closed the connection before the request body was complete")]
    Closed,
    #[error("the request body's framing is not valid HTTP/1.1: {0}")]
    Malformed(#[from] Malformed),
}

/// A connection's read side: the socket, the bytes read and not used yet, and how far the
/// current request's body has been read.
pub struct Inbound {
    io: Box<dyn AsyncRead + Send + Unpin>,
    pending: BytesMut,
    body: Framing,
    /// The client closed its side, or reading failed.
    closed: bool,
    /// The waker [`Inbound::poll_gone`] polls the socket with: a [`Watch`].
    watch: Waker,
    watched: Arc<Watch>,
    /// The socket's read side holds `watch` and has not woken it since: it is not polled
    /// again by [`Inbound::poll_gone`] until it does.
    watching: bool,
}

/// The waker the client's socket is watched with while a response streams: it wakes the task
/// that polled it last, and notes that the socket did.
#[derive(Debug, Default)]
struct Watch {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Watch {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("pending", &self.pending.len())
            .field("body", &self.body)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// An [`Inbound`] shared by a connection and its current request body.
pub type SharedInbound = Arc<Mutex<Inbound>>;

/// Locks `inbound`; a poisoned lock (a panic elsewhere in the task) still holds valid bytes.
pub fn lock(inbound: &SharedInbound) -> MutexGuard<'_, Inbound> {
    inbound.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inbound {
    /// The read side `io`, with `pending` bytes already read from it.
    pub fn new(io: Box<dyn AsyncRead + Send + Unpin>, pending: BytesMut) -> SharedInbound {
        let watched = Arc::new(Watch::default());
        Arc::new(Mutex::new(Inbound {
            io,
            pending,
            body: Framing::Done,
            closed: false,
            watch: Waker::from(Arc::clone(&watched)),
            watched,
            watching: false,
        }))
    }

    /// Bytes read and not used yet.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Uses the first `n` pending bytes (a request head).
    pub fn consume(&mut self, n: usize) {
        self.pending.advance(n);
        self.settle();
    }

    /// Reads more into the pending bytes; `false` once the client has closed its side.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        // The socket now holds `cx`'s waker, not the watch's.
        self.watching = false;
        self.fill(cx, false)
    }

    /// Reads more with `cx`'s waker, or the watch's when `watched`.
    fn fill(&mut self, cx: &mut Context<'_>, watched: bool) -> Poll<io::Result<bool>> {
        let Inbound {
            io, pending, watch, ..
        } = self;
        let read = if watched {
            poll_read_with(io, &mut Context::from_waker(watch), |read| {
                pending.extend_from_slice(read)
            })
        } else {
            poll_read_with(io, cx, |read| pending.extend_from_slice(read))
        };
        match std::task::ready!(read) {
            Ok(Some(())) => Poll::Ready(Ok(true)),
            Ok(None) => {
                self.closed = true;
                Poll::Ready(Ok(false))
            }
            Err(error) => {
                self.closed = true;
                Poll::Ready(Err(error))
            }
        }
    }

    /// The current request's body starts here, delimited by `framing`.
    pub fn start_body(&mut self, framing: Framing) {
        self.body = framing;
    }

    /// The current request's body has been read to its end (or had none).
    pub fn body_done(&self) -> bool {
        self.body == Framing::Done
    }

    /// While a response is on its way: ready once the client has closed the connection (or it
    /// failed). Bytes it sends meanwhile (a pipelined request) are kept, up to `keep` bytes;
    /// past that it is not read until the response is done.
    ///
    /// Only once the request body is done: before, its bytes are the handler's to read.
    ///
    /// The socket is polled with the [`Watch`] waker, and only when it has woken the task since
    /// the last poll (see the module docs); `cx`'s task is the one woken.
    pub fn poll_gone(&mut self, cx: &mut Context<'_>, keep: usize) -> Poll<()> {
        if self.closed {
            return Poll::Ready(());
        }
        if !self.body_done() || self.pending.len() >= keep {
            return Poll::Pending;
        }
        // Registered before the flag is read: a wake-up in between is then not lost.
        self.watched.task.register(cx.waker());
        let fired = self.watched.fired.swap(false, Ordering::AcqRel);
        if self.watching && !fired {
            return Poll::Pending;
        }
        self.watching = false;
        loop {
            match self.fill(cx, true) {
                Poll::Ready(Ok(true)) if self.pending.len() < keep => {}
                Poll::Ready(Ok(true)) => return Poll::Pending,
                Poll::Ready(Ok(false) | Err(_)) => return Poll::Ready(()),
                Poll::Pending => {
                    self.watching = true;
                    return Poll::Pending;
                }
            }
        }
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        loop {
            if self.body == Framing::Done {
                return Poll::Ready(None);
            }
            if !self.pending.is_empty() {
                let mut out = BytesMut::new();
                match decode(&mut self.body, &self.pending, &mut out) {
                    Ok(used) => self.consume(used),
                    Err(error) => return Poll::Ready(Some(Err(self.failed(error.into())))),
                }
                if !out.is_empty() {
                    return Poll::Ready(Some(Ok(out.freeze())));
                }
                if self.body == Framing::Done {
                    continue;
                }
            }
            match std::task::ready!(self.poll_fill(cx)) {
                Ok(true) => {}
                Ok(false) => return Poll::Ready(Some(Err(self.failed(BodyError::Closed)))),
                Err(error) => return Poll::Ready(Some(Err(self.failed(error.into())))),
            }
        }
    }

    fn failed(&mut self, error: BodyError) -> BodyError {
        // The connection cannot find the next request's head after a broken body.
        self.closed = true;
        error
    }

    /// The client closed its side, or reading failed: the connection can take no more
    /// requests.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// An empty pending buffer is let go: reads land in the per-thread scratch buffer, so a
    /// connection between requests, or between a stream's events, holds none.
    fn settle(&mut self) {
        if self.pending.is_empty() && self.pending.capacity() > 0 {
            self.pending = BytesMut::new();
        }
    }
}

/// A request body read from the client's HTTP/1.1 connection as the handler asks for it: all
/// the body data one socket read brought, as one frame.
#[derive(Debug)]
pub struct H1Body {
    inbound: SharedInbound,
}

impl H1Body {
    /// The body of the request whose head was just read: `framing` is set on `inbound`.
    pub fn new(inbound: &SharedInbound, framing: Framing) -> H1Body {
        lock(inbound).start_body(framing);
        H1Body {
            inbound: Arc::clone(inbound),
        }
    }
}

impl Body for H1Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        lock(&self.inbound)
            .poll_body(cx)
            .map(|data| data.map(|data| data.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        lock(&self.inbound).body_done()
    }

    fn size_hint(&self) -> SizeHint {
        lock(&self.inbound)
            .body
            .remaining()
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
