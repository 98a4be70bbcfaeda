//! One accepted connection, from its socket to the end of its HTTP, in its own task: the
//! accept loop only hands sockets over ([`Connections::spawn`]).
//!
//! 1. **TLS** (when the listener has `tls_cert`/`tls_key`): the handshake runs here, never in
//!    the accept loop, and is bounded by [`TLS_HANDSHAKE_TIMEOUT`]: a client that opens TCP
//!    and never completes it (never sends a ClientHello, stops halfway) is closed then. A
//!    failed handshake is the client's business and logged at debug.
//! 2. **HTTP**: hyper-util's auto builder serves HTTP/1.1 or HTTP/2 by the connection's
//!    preface. Under TLS the client speaks what ALPN chose (`h2` preferred, `http/1.1`); in
//!    plaintext HTTP/2 needs prior knowledge (h2c). Writes go through the [`StallGuard`]
//!    below TLS, so a client that stops reading is given up as on plaintext.
//! 3. **Shutdown**: each connection holds a graceful-shutdown watcher from the moment it is
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

use super::Router;
use crate::http::stall::StallGuard;
use crate::http::ClientAddr;
use crate::tls::ListenerTls;

/// How long a client has, from the accepted TCP connection, to complete its TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the connections of one listener share. Cheap to clone.
#[derive(Clone)]
pub(super) struct Connections {
    router: Arc<Router>,
    protocols: Arc<auto::Builder<TokioExecutor>>,
    tls: Option<TlsAcceptor>,
    stall_timeout: Duration,
}

impl Connections {
    pub fn new(
        router: Arc<Router>,
        protocols: auto::Builder<TokioExecutor>,
        tls: Option<&ListenerTls>,
        stall_timeout: Duration,
    ) -> Self {
        Connections {
            router,
            protocols: Arc::new(protocols),
            tls: tls.map(|tls| TlsAcceptor::from(Arc::clone(&tls.config))),
            stall_timeout,
        }
    }

    /// Serves `stream` in a task of its own; `watcher` keeps a graceful shutdown waiting until
    /// the connection is done.
    pub fn spawn(&self, stream: TcpStream, peer: SocketAddr, watcher: Watcher) {
        let span = tracing::debug_span!("conn", client.addr = %peer);
        tokio::spawn(self.clone().serve(stream, peer, watcher).instrument(span));
    }

    async fn serve(self, stream: TcpStream, peer: SocketAddr, watcher: Watcher) {
        let _ = stream.set_nodelay(true);
        let stream = StallGuard::new(stream, self.stall_timeout);
        let Some(acceptor) = &self.tls else {
            return self.http(stream, peer, watcher).await;
        };
        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => {
                let (_, session) = stream.get_ref();
                let alpn = session.alpn_protocol().map(String::from_utf8_lossy);
                tracing::trace!(alpn = alpn.as_deref().unwrap_or("none"), "TLS established");
                self.http(stream, peer, watcher).await;
            }
            Ok(Err(error)) => tracing::debug!(%error, "TLS handshake failed"),
            Err(_) => tracing::debug!(
                timeout_s = TLS_HANDSHAKE_TIMEOUT.as_secs_f64(),
                "TLS handshake not completed in time; connection closed"
            ),
        }
    }

    async fn http<S>(&self, stream: S, peer: SocketAddr, watcher: Watcher)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let router = Arc::clone(&self.router);
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ClientAddr(peer));
            let router = Arc::clone(&router);
            async move { Ok::<_, Infallible>(router.handle(request).await) }
        });
        let connection = self
            .protocols
            .serve_connection(TokioIo::new(stream), service);
        if let Err(error) = watcher.watch(connection).await {
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}
