//! Upstream HTTP/1.1 connections driven by whoever reads their response, and the keep-alive
//! pool they go back to.
//!
//! hyper's pooled client (`hyper_util`'s legacy `Client`) runs every connection as a task of
//! its own and hands the response body over through a channel with room for one chunk. An
//! upstream that writes one event per HTTP chunk (the AG-UI SDKs do) then costs a wake-up of
//! another task per event, and the reader never sees two chunks at once, so it cannot write
//! them together: measured on one stream of 20,004 such events, 23 upstream socket reads led
//! to 19,998 client `writev` calls and about 9,300 cross-task wake-ups. Here a [`Link`] is
//! read by the response body itself ([`super::CallBody`]), in the task of the client's
//! connection: one socket read is one body frame ([`super::wire`]), and no other task takes
//! part. That need, measured, is why the pooling is written here.
//!
//! One request per connection at a time: dropping a response body drops its connection, which
//! is the cancellation. A connection whose response ended cleanly goes back to the pool of its
//! scheme and authority. Nobody reads an idle connection, so one is checked when it is taken
//! (one read with a no-op waker: an upstream that closed it is seen then), and one idle for
//! longer than [`IDLE_TIMEOUT`] is closed when its pool is next used. A request that a reused
//! connection could not even send is sent again on a new one.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt;

use super::wire::{Sent, Wire, WireError};

type Idle = HashMap<Key, Vec<Parked>>;

/// How long an unused connection is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Idle connections kept per upstream; past it the oldest is closed.
const IDLE_PER_UPSTREAM: usize = 64;

/// Why an upstream exchange failed before its response headers.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the upstream URL has no scheme or host")]
    Url,
    #[error("could not connect to the upstream")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the upstream exchange failed")]
    Wire(#[from] WireError),
}

/// Which pool a connection belongs to: the upstream's scheme and authority, lowercased, as
/// one string (`http://host:port`).
///
/// Not `http`'s `Scheme` and `Authority`: their `Hash` feeds the hasher one lowercased byte at
/// a time, about 1,000 instructions per lookup under callgrind, and a request looks its pool
/// up three times (taken, emptied, given back). One string is hashed in one write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key(Box<str>);

impl Key {
    fn of(uri: &Uri) -> Option<Key> {
        let (scheme, authority) = (uri.scheme_str()?, uri.authority()?.as_str());
        let mut key = String::with_capacity(scheme.len() + 3 + authority.len());
        key.push_str(scheme);
        key.push_str("://");
        key.push_str(authority);
        key.make_ascii_lowercase();
        Some(Key(key.into_boxed_str()))
    }
}

/// An idle connection in the pool.
struct Parked {
    wire: Wire<Io>,
    since: Instant,
}

/// Connects to upstreams and keeps their idle connections. Cheap to clone.
#[derive(Clone)]
pub struct Pool {
    connector: HttpsConnector<HttpConnector>,
    idle: Arc<Mutex<Idle>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    pub fn new(connector: HttpsConnector<HttpConnector>) -> Pool {
        Pool {
            connector,
            idle: Arc::default(),
        }
    }

    /// Sends `request` to the upstream `uri` names (an absolute URL; the request's own URI is
    /// replaced by its origin form) and waits for the response head. The response body is
    /// read through the returned [`Link`].
    pub async fn send(
        &self,
        uri: &Uri,
        mut request: Request<Bytes>,
    ) -> Result<(Response<()>, Link), LinkError> {
        let key = Key::of(uri).ok_or(LinkError::Url)?;
        prepare(uri, &mut request);
        while let Some(mut wire) = self.take(&key) {
            match wire.exchange(&request).await {
                Ok(response) => return Ok((response, self.link(key, wire))),
                // Never (wholly) written: the connection had closed; another one may still do.
                Err(Sent::Unsent(error)) => {
                    tracing::debug!(%error, "a pooled upstream connection could not take the request");
                }
                Err(Sent::Sent(error)) => return Err(error.into()),
            }
        }
        let io = self
            .connector
            .clone()
            .oneshot(uri.clone())
            .await
            .map_err(LinkError::Connect)?;
        let mut wire = Wire::new(Io::from(io));
        let response = wire.exchange(&request).await.map_err(Sent::into_error)?;
        Ok((response, self.link(key, wire)))
    }

    fn link(&self, key: Key, wire: Wire<Io>) -> Link {
        Link {
            wire: Some(wire),
            key,
            pool: Arc::downgrade(&self.idle),
        }
    }

    /// The newest idle connection to `key` that is still open, closing the ones found closed
    /// or too old on the way.
    fn take(&self, key: &Key) -> Option<Wire<Io>> {
        loop {
            let parked = {
                let mut idle = lock(&self.idle);
                let list = idle.get_mut(key)?;
                let parked = list.pop();
                if list.is_empty() {
                    idle.remove(key);
                }
                parked?
            };
            if parked.since.elapsed() >= IDLE_TIMEOUT {
                // The rest of the list is older still.
                lock(&self.idle).remove(key);
                return None;
            }
            let mut wire = parked.wire;
            if wire.still_open() {
                return Some(wire);
            }
        }
    }
}

/// One upstream connection and the response being read on it; see the module docs.
pub struct Link {
    /// `None` once the response is over (the connection went back to its pool, or closed).
    wire: Option<Wire<Io>>,
    key: Key,
    pool: Weak<Mutex<Idle>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("upstream", &self.key.0)
            .field("open", &self.wire.is_some())
            .finish()
    }
}

impl Link {
    /// The next part of the response body (all one socket read brought); `None` at its end,
    /// when the connection goes back to its pool if it can carry another request.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, WireError>>> {
        let Some(wire) = self.wire.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = wire.poll_data(cx);
        match &polled {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Err(_))) => self.wire = None,
            _ => {}
        }
        polled
    }

    /// The response body is over.
    pub fn is_end_stream(&self) -> bool {
        self.wire.as_ref().is_none_or(Wire::is_done)
    }

    /// The body bytes still to come, when the upstream said.
    pub fn remaining(&self) -> Option<u64> {
        self.wire.as_ref().map_or(Some(0), Wire::remaining)
    }

    /// The response was read to its end: the connection goes back to its pool, if it can take
    /// another request.
    fn release(&mut self) {
        let (Some(wire), Some(pool)) = (self.wire.take(), self.pool.upgrade()) else {
            return;
        };
        if !wire.is_reusable() {
            return;
        }
        let now = Instant::now();
        let mut idle = lock(&pool);
        let list = idle.entry(self.key.clone()).or_default();
        list.retain(|parked| now.duration_since(parked.since) < IDLE_TIMEOUT);
        if list.len() >= IDLE_PER_UPSTREAM {
            list.remove(0);
        }
        list.push(Parked { wire, since: now });
    }
}

/// A `Host` header from `uri` unless one is set (the request line takes the origin form from
/// the request's URI, which is replaced by `uri`).
fn prepare(uri: &Uri, request: &mut Request<Bytes>) {
    *request.uri_mut() = uri.clone();
    if request.headers().contains_key(http::header::HOST) {
        return;
    }
    let Some(host) = uri.host() else { return };
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    let value = match uri.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host.to_string(),
    };
    if let Ok(value) = http::HeaderValue::from_str(&value) {
        request.headers_mut().insert(http::header::HOST, value);
    }
}

/// The pool's lock; a panic elsewhere while holding it leaves nothing half-done worth refusing.
fn lock(idle: &Mutex<Idle>) -> std::sync::MutexGuard<'_, Idle> {
    idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An upstream connection's stream. TLS is boxed, so that a plaintext connection (a sidecar's
/// to its agent) is not laid out as large as a TLS one: a rustls client connection is over a
/// KiB, and every open stream holds its connection.
enum Io {
    Plain(TcpStream),
    Tls(Box<TokioIo<MaybeHttpsStream<TokioIo<TcpStream>>>>),
}

impl From<MaybeHttpsStream<TokioIo<TcpStream>>> for Io {
    fn from(stream: MaybeHttpsStream<TokioIo<TcpStream>>) -> Io {
        match stream {
            MaybeHttpsStream::Http(tcp) => Io::Plain(tcp.into_inner()),
            tls => Io::Tls(Box::new(TokioIo::new(tls))),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Io::Tls(tls) => Pin::new(&mut **tls).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Io::Tls(tls) => Pin::new(&mut **tls).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Io::Tls(tls) => Pin::new(&mut **tls).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(tcp) => tcp.is_write_vectored(),
            Io::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Io::Tls(tls) => Pin::new(&mut **tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Io::Tls(tls) => Pin::new(&mut **tls).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use std::future::poll_fn;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::tls::client::https_connector;

    /// One pool per scheme and authority, whatever their case; the path does not matter.
    #[test]
    fn the_pool_key_is_the_lowercased_origin() {
        let key = |uri: &str| Key::of(&uri.parse().unwrap());
        let base = key("http://Agent.Example:8080/run").unwrap();
        assert_eq!(&*base.0, "http://agent.example:8080");
        assert_eq!(
            Some(base.clone()),
            key("HTTP://agent.EXAMPLE:8080/other?q=1")
        );
        assert_ne!(Some(base.clone()), key("https://agent.example:8080/run"));
        assert_ne!(Some(base.clone()), key("http://agent.example:8081/run"));
        assert_eq!(key("/run"), None);
    }

    /// An upstream on a real socket answering every request on a connection with `body`,
    /// keeping the connection unless `close_after` (then it closes it after one answer,
    /// without saying so). Counts the connections it accepted.
    async fn upstream(close_after: bool) -> (Uri, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/run", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0; 4096];
                    loop {
                        let mut seen = Vec::new();
                        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        let text = String::from_utf8_lossy(&seen);
                        assert!(text.starts_with("POST /run HTTP/1.1\r\n"), "{text}");
                        assert!(
                            text.to_lowercase().contains("\r\nhost: 127.0.0.1:"),
                            "{text}"
                        );
                        let answer = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                                      2\r\nhi\r\n0\r\n\r\n";
                        if socket.write_all(answer.as_bytes()).await.is_err() || close_after {
                            return;
                        }
                    }
                });
            }
        });
        (uri, accepted)
    }

    /// One POST through `pool`, its body read to the end through the link.
    async fn post(pool: &Pool, uri: &Uri) -> Result<String, LinkError> {
        let request = Request::post(uri.clone()).body(Bytes::new()).unwrap();
        let (_, mut link) = pool.send(uri, request).await?;
        let mut text = Vec::new();
        while let Some(data) = poll_fn(|cx| link.poll_data(cx)).await {
            text.extend_from_slice(&data?);
        }
        assert!(link.is_end_stream());
        Ok(String::from_utf8(text).unwrap())
    }

    fn pool() -> Pool {
        Pool::new(https_connector(Duration::from_secs(2), None))
    }

    #[tokio::test]
    async fn a_connection_whose_response_ended_serves_the_next_request() {
        let (uri, accepted) = upstream(false).await;
        let pool = pool();
        for _ in 0..3 {
            assert_eq!(post(&pool, &uri).await.unwrap(), "hi");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_while_idle_is_not_used_again() {
        let (uri, accepted) = upstream(true).await;
        let pool = pool();
        for round in 1..=3 {
            assert_eq!(post(&pool, &uri).await.unwrap(), "hi", "round {round}");
            // Let the upstream's close reach the pooled connection's socket.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_link_dropped_mid_response_is_not_pooled() {
        let (uri, accepted) = upstream(false).await;
        let pool = pool();
        let request = Request::post(uri.clone()).body(Bytes::new()).unwrap();
        let (response, link) = pool.send(&uri, request).await.unwrap();
        drop((response, link));
        assert_eq!(post(&pool, &uri).await.unwrap(), "hi");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }
}
