//! Upstream HTTP/1.1 connections driven by whoever reads their response, and the keep-alive
//! pool they go back to.
//!
//! hyper's pooled client (`hyper_util`'s legacy `Client`) runs every connection as a task of
//! its own and hands the response body over through a channel with room for one chunk. An
//! upstream that writes one event per HTTP chunk (the AG-UI SDKs do) then costs a wake-up of
//! another task per event, and the reader never sees two chunks at once, so it cannot write
//! them together: measured on one stream of 20,004 such events, 23 upstream socket reads led
//! to 19,998 client `writev` calls and about 9,300 cross-task wake-ups. Here a [`Link`] is
//! polled by the response body itself ([`super::CallBody`]), in the task of the client's
//! connection: every chunk one socket read brought is decoded within one poll of the body, and
//! no other task takes part. That need, measured, is why the pooling is written here; hyper
//! still speaks the HTTP/1.1 (`hyper::client::conn::http1`).
//!
//! One request per connection at a time: dropping a response body drops its connection, which
//! is the cancellation. A connection whose response ended cleanly goes back to the pool of its
//! scheme and authority. Nobody polls an idle connection, so one is checked when it is put back
//! and again when it is taken (one poll with a no-op waker: an upstream that closed it is seen
//! then), and one idle for longer than [`IDLE_TIMEOUT`] is closed when its pool is next used. A
//! request that a reused connection could not even send is sent again on a new one.

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, Scheme};
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt;

/// The body of every upstream request: the gateway sends whole, small requests.
pub type RequestBody = Full<Bytes>;

type Io = MaybeHttpsStream<TokioIo<TcpStream>>;
type Conn = http1::Connection<Io, RequestBody>;
type Sender = http1::SendRequest<RequestBody>;
type Idle = HashMap<Key, Vec<Parked>>;

/// How long an unused connection is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Idle connections kept per upstream; past it the oldest is closed.
const IDLE_PER_UPSTREAM: usize = 64;

/// The largest upstream read buffer. hyper grows a connection's buffer to fit what the socket
/// has, from 8 KiB, up to this.
const MAX_READ_BUFFER: usize = 64 * 1024;

/// Why an upstream exchange failed before its response headers.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("the upstream URL has no scheme or host")]
    Url,
    #[error("could not connect to the upstream")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the upstream exchange failed")]
    Http(#[from] hyper::Error),
}

/// Which pool a connection belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    scheme: Scheme,
    authority: Authority,
}

impl Key {
    fn of(uri: &Uri) -> Option<Key> {
        Some(Key {
            scheme: uri.scheme()?.clone(),
            authority: uri.authority()?.clone(),
        })
    }
}

/// An idle connection in the pool.
struct Parked {
    sender: Sender,
    conn: Conn,
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
    /// replaced by its origin form) and waits for the response headers. The response body
    /// must be read through the returned [`Link`], which drives the connection.
    pub async fn send(
        &self,
        uri: &Uri,
        mut request: Request<RequestBody>,
    ) -> Result<(Response<Incoming>, Link), LinkError> {
        let key = Key::of(uri).ok_or(LinkError::Url)?;
        prepare(uri, &mut request);
        while let Some((sender, conn)) = self.take(&key) {
            let mut link = self.link(key.clone(), sender, conn);
            let sent = link.sender.try_send_request(request);
            match link.drive_until(sent).await {
                Ok(response) => return Ok((response, link)),
                Err(mut failed) => match failed.take_message() {
                    // Never written: the connection had closed; another one may still do.
                    Some(unsent) => request = unsent,
                    None => return Err(failed.into_error().into()),
                },
            }
        }
        let io = self
            .connector
            .clone()
            .oneshot(uri.clone())
            .await
            .map_err(LinkError::Connect)?;
        let (sender, conn) = http1::Builder::new()
            .max_buf_size(MAX_READ_BUFFER)
            .handshake(io)
            .await?;
        let mut link = self.link(key, sender, conn);
        let sent = link.sender.send_request(request);
        let response = link.drive_until(sent).await?;
        Ok((response, link))
    }

    fn link(&self, key: Key, sender: Sender, conn: Conn) -> Link {
        Link {
            sender,
            conn: Some(conn),
            key,
            pool: Arc::downgrade(&self.idle),
        }
    }

    /// The newest idle connection to `key` that can take a request, closing the ones found
    /// closed or too old on the way.
    fn take(&self, key: &Key) -> Option<(Sender, Conn)> {
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
            let Parked {
                sender, mut conn, ..
            } = parked;
            if still_open(&mut conn) && sender.is_ready() {
                return Some((sender, conn));
            }
        }
    }
}

/// One upstream connection and the exchange on it; see the module docs.
pub struct Link {
    sender: Sender,
    /// `None` once the connection is over (closed, failed, or not reusable).
    conn: Option<Conn>,
    key: Key,
    pool: Weak<Mutex<Idle>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("authority", &self.key.authority)
            .field("open", &self.conn.is_some())
            .finish()
    }
}

impl Link {
    /// Lets the connection read, decode and write what it can. A connection that is over is
    /// let go; the response body learns why (hyper hands it the error, or its end).
    pub fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = self.conn.as_mut() {
            if let Poll::Ready(result) = Pin::new(conn).poll(cx) {
                if let Err(error) = result {
                    tracing::debug!(%error, "upstream connection ended with an error");
                }
                self.conn = None;
            }
        }
    }

    /// Polls `exchange` (a request sent on this connection) with the connection driven.
    async fn drive_until<F: Future>(&mut self, exchange: F) -> F::Output {
        let mut exchange = pin!(exchange);
        poll_fn(|cx| {
            self.drive(cx);
            exchange.as_mut().poll(cx)
        })
        .await
    }

    /// The response was read to its end: the connection goes back to its pool, if it can take
    /// another request.
    pub fn release(mut self) {
        let (Some(mut conn), Some(pool)) = (self.conn.take(), self.pool.upgrade()) else {
            return;
        };
        if !still_open(&mut conn) {
            return;
        }
        let now = Instant::now();
        let mut idle = lock(&pool);
        let list = idle.entry(self.key).or_default();
        list.retain(|parked| now.duration_since(parked.since) < IDLE_TIMEOUT);
        if list.len() >= IDLE_PER_UPSTREAM {
            list.remove(0);
        }
        list.push(Parked {
            sender: self.sender,
            conn,
            since: now,
        });
    }
}

/// Polls an idle connection once, with nobody to wake: it takes in what ended its last
/// response, and an upstream's close is seen. False when the connection is over.
fn still_open(conn: &mut Conn) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(conn).poll(&mut cx).is_pending()
}

/// The origin form of the request target, and a `Host` header from `uri` unless one is set.
fn prepare(uri: &Uri, request: &mut Request<RequestBody>) {
    let target = uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .filter(|pq| !pq.is_empty())
        .unwrap_or("/");
    if let Ok(target) = target.parse() {
        *request.uri_mut() = target;
    }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body::Body;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::tls::client::https_connector;

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
        let request = Request::post(uri.clone())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (response, mut link) = pool.send(uri, request).await?;
        let mut body = response.into_body();
        let mut text = Vec::new();
        let done = poll_fn(|cx| {
            let mut driven = false;
            loop {
                match Pin::new(&mut body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        text.extend_from_slice(&frame.into_data().unwrap_or_default());
                        driven = false;
                    }
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error)),
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Pending if driven => return Poll::Pending,
                    Poll::Pending => {
                        link.drive(cx);
                        driven = true;
                    }
                }
            }
        });
        done.await?;
        link.release();
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
        let request = Request::post(uri.clone())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (response, link) = pool.send(&uri, request).await.unwrap();
        drop((response, link));
        assert_eq!(post(&pool, &uri).await.unwrap(), "hi");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }
}
