//! One accepted connection, from its socket to the end of its HTTP, in its own task: the
//! accept loop only hands sockets over ([`Connections::spawn`]).
//!
//! 1. **Deadline**: the whole task, from accept, runs under `request_header_timeout` until the
//!    service sees the first request head ([`accept::until_first_head`]), so a client that
//!    opens TCP and never completes a TLS handshake or never sends a request head is closed
//!    then. Later, a connection with no open request for as long is closed too
//!    ([`accept::Activity`]), HTTP/2 ones included. The connection holds its [`ConnectionSlot`] (`max_connections`) until it ends.
//! 2. **TLS** (when the listener has `tls_cert`/`tls_key`): the handshake runs here, never in
//!    the accept loop. A failed handshake is the client's business and logged at debug.
//! 3. **HTTP**: hyper-util's auto builder serves HTTP/1.1 or HTTP/2 by the connection's
//!    preface. Under TLS the client speaks what ALPN chose (`h2` preferred, `http/1.1`); in
//!    plaintext HTTP/2 needs prior knowledge (h2c). Writes go through the [`StallGuard`]
//!    below TLS, so a client that stops reading is given up as on plaintext. Every request
//!    carries its [`ClientAddr`] and, under TLS, [`Proto::Https`] as extensions.
//! 4. **Shutdown**: each connection holds a graceful-shutdown watcher from the moment it is
//!    accepted, so a drain also waits for a handshake in flight (bounded as above).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::Instrument;

use super::accept::{until_first_head, Activity, ConnectionSlot, FirstHead};
use super::admission;
use super::Routers;
use crate::http::headers::Proto;
use crate::http::stall::StallGuard;
use crate::http::ClientAddr;
use crate::telemetry::metrics::{self, ConnectionRefusal, Metrics};
use crate::tls::ListenerTls;

/// What the connections of one listener share. Cheap to clone.
#[derive(Clone)]
pub(super) struct Connections {
    /// The current configuration's router; each request loads it anew, so a reload reaches
    /// keep-alive connections at their next request.
    routers: Routers,
    protocols: Arc<auto::Builder<TokioExecutor>>,
    tls: Option<TlsAcceptor>,
    stall_timeout: Duration,
    /// From accept to the first request head (`request_header_timeout`).
    header_timeout: Duration,
    metrics: Arc<Metrics>,
}

impl Connections {
    pub fn new(
        routers: Routers,
        protocols: auto::Builder<TokioExecutor>,
        tls: Option<&ListenerTls>,
        stall_timeout: Duration,
        header_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Connections {
            routers,
            protocols: Arc::new(protocols),
            tls: tls.map(|tls| TlsAcceptor::from(Arc::clone(&tls.config))),
            stall_timeout,
            header_timeout,
            metrics,
        }
    }

    /// Serves `stream` in a task of its own, holding `slot` until it ends; `watcher` keeps a
    /// graceful shutdown waiting until the connection is done.
    pub fn spawn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        watcher: Watcher,
        slot: ConnectionSlot,
    ) {
        let span = tracing::debug_span!("conn", client.addr = %peer);
        let this = self.clone();
        tokio::spawn(
            async move {
                let _slot = slot;
                let first_head = FirstHead::default();
                // Boxed: a future passed by value into another is laid out twice in the task
                // (as the argument and inside the callee), and every open stream pays for
                // the task's size for as long as it lasts.
                let serve = Box::pin(
                    this.clone()
                        .serve(stream, peer, watcher, first_head.clone()),
                );
                if until_first_head(this.header_timeout, &first_head, serve)
                    .await
                    .is_none()
                {
                    this.header_timeout(&first_head);
                    tracing::debug!(
                        timeout_ms = this.header_timeout.as_millis() as u64,
                        "connection closed: no request head within request_header_timeout"
                    );
                }
            }
            .instrument(span),
        );
    }

    /// A connection closed by `request_header_timeout`: refused when no request head had
    /// arrived (whichever timer saw it first), idle otherwise.
    fn header_timeout(&self, first_head: &FirstHead) {
        self.metrics.header_timeout();
        if !first_head.was_seen() {
            self.metrics
                .connection_refused(ConnectionRefusal::HeaderTimeout);
        }
    }

    async fn serve(self, stream: TcpStream, peer: SocketAddr, watcher: Watcher, seen: FirstHead) {
        let _ = stream.set_nodelay(true);
        let stream = StallGuard::new(stream, self.stall_timeout);
        let Some(acceptor) = &self.tls else {
            return self.http(stream, peer, watcher, seen, None).await;
        };
        // Boxed, so that a plaintext connection's task is not as large as a TLS one's (the
        // handshake and the TLS stream are several KiB of state).
        Box::pin(self.https(acceptor, stream, peer, watcher, seen)).await;
    }

    async fn https(
        &self,
        acceptor: &TlsAcceptor,
        stream: StallGuard<TcpStream>,
        peer: SocketAddr,
        watcher: Watcher,
        seen: FirstHead,
    ) {
        match acceptor.accept(stream).await {
            Ok(stream) => {
                let (_, session) = stream.get_ref();
                let alpn = session.alpn_protocol().map(String::from_utf8_lossy);
                tracing::trace!(alpn = alpn.as_deref().unwrap_or("none"), "TLS established");
                self.http(stream, peer, watcher, seen, Some(Proto::Https))
                    .await;
            }
            Err(error) => {
                self.metrics
                    .connection_refused(ConnectionRefusal::TlsHandshake);
                tracing::debug!(%error, "TLS handshake failed");
            }
        }
    }

    async fn http<S>(
        &self,
        stream: S,
        peer: SocketAddr,
        watcher: Watcher,
        seen: FirstHead,
        proto: Option<Proto>,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let routers = Arc::clone(&self.routers);
        let first_head = seen.clone();
        let activity = Activity::default();
        let requests = activity.clone();
        let service = service_fn(move |mut request: Request<Incoming>| {
            let arrived = tokio::time::Instant::now();
            seen.seen();
            let open = requests.begin();
            request.extensions_mut().insert(ClientAddr(peer));
            if let Some(proto) = proto {
                request.extensions_mut().insert(proto);
            }
            let router = routers.load_full();
            // Boxed: hyper keeps the allocation it puts a request's future in for as long as
            // the connection lasts, so the future itself is better freed once it is done.
            Box::pin(async move {
                let response = metrics::arrived(arrived, router.handle(request)).await;
                // Open until its body ends or is dropped.
                Ok::<_, Infallible>(admission::hold(response, open))
            })
        });
        let connection = self
            .protocols
            .serve_connection(TokioIo::new(stream), service);
        let served = tokio::select! {
            served = watcher.watch(connection) => served,
            () = activity.idle_for(self.header_timeout) => {
                // No request open: dropping the connection closes it. The same limit as
                // hyper's wait for a keep-alive connection's next head, counted alike.
                self.header_timeout(&first_head);
                tracing::debug!(
                    timeout_ms = self.header_timeout.as_millis() as u64,
                    "connection closed: idle for request_header_timeout"
                );
                Ok(())
            }
        };
        if let Err(error) = served {
            // hyper's own header timeout (a keep-alive connection's next head, or a first head
            // it raced ours to) is the same limit.
            if error
                .downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_timeout)
            {
                self.header_timeout(&first_head);
            }
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}
