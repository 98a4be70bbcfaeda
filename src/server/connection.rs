//! One accepted connection, from its socket to the end of its HTTP, in its own task: the
//! accept loop only hands sockets over ([`Connections::spawn`]).
//!
//! 1. **Deadline**: the whole task, from accept, runs under `request_header_timeout` until the
//!    service sees the first request head ([`accept::until_first_head`]), so a client that
//!    opens TCP and never completes a TLS handshake or never sends a request head is closed
//!    then. Later, a connection with no open request for as long is closed too: an HTTP/1.1
//!    one waiting for its next head, an HTTP/2 one with no stream open ([`accept::Activity`]).
//!    The connection holds its [`ConnectionSlot`] (`max_connections`) until it ends.
//! 2. **TLS** (when the listener has `tls_cert`/`tls_key`): the handshake runs here, never in
//!    the accept loop. A failed handshake is the client's business and logged at debug.
//! 3. **HTTP**: HTTP/1.1 on the gateway's own connection ([`super::h1`]), HTTP/2 on hyper's.
//!    Under TLS the client speaks what ALPN chose (`h2` preferred, `http/1.1`); otherwise the
//!    connection's first bytes tell (HTTP/2 needs prior knowledge in plaintext: h2c). Writes
//!    go through the [`StallGuard`] below TLS, so a client that stops reading is given up as
//!    on plaintext. Every request carries its [`ClientAddr`] and, under TLS,
//!    [`Proto::Https`] as extensions.
//! 4. **Shutdown**: each connection holds a [`DrainWatcher`] from the moment it is accepted,
//!    so a drain also waits for a handshake in flight (bounded as above). A connection that
//!    has carried `max_requests_per_connection` requests is ended the same way: an HTTP/1.1
//!    one closes after that response, an HTTP/2 one is sent GOAWAY and finishes its streams.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;

use bytes::BytesMut;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::Instrument;

use super::accept::{until_first_head, Activity, ConnectionSlot, FirstHead};
use super::admission;
use super::drain::DrainWatcher;
use super::h1;
use super::h1::rewind::{sniff, Rewind, Sniffed};
use super::Routers;
use crate::config::Admission;
use crate::http::client_body::ClientBody;
use crate::http::headers::Proto;
use crate::http::response::ResponseBody;
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
    h2: Arc<http2::Builder<TokioExecutor>>,
    /// `max_request_head_bytes`.
    max_head: usize,
    /// `max_requests_per_connection`.
    max_requests: Option<NonZeroU64>,
    tls: Option<TlsAcceptor>,
    stall_timeout: Duration,
    /// From accept to the first request head (`request_header_timeout`).
    header_timeout: Duration,
    metrics: Arc<Metrics>,
}

impl Connections {
    pub fn new(
        routers: Routers,
        h2: http2::Builder<TokioExecutor>,
        admission: &Admission,
        tls: Option<&ListenerTls>,
        stall_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Connections {
            routers,
            h2: Arc::new(h2),
            max_head: admission.max_request_head_bytes,
            max_requests: admission.max_requests_per_connection,
            tls: tls.map(|tls| TlsAcceptor::from(Arc::clone(&tls.config))),
            stall_timeout,
            header_timeout: admission.request_header_timeout,
            metrics,
        }
    }

    /// Serves `stream` in a task of its own, holding `slot` until it ends; `watcher` keeps a
    /// drain waiting until the connection is done.
    pub fn spawn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        watcher: DrainWatcher,
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

    async fn serve(
        self,
        stream: TcpStream,
        peer: SocketAddr,
        watcher: DrainWatcher,
        seen: FirstHead,
    ) {
        let _ = stream.set_nodelay(true);
        let stream = StallGuard::new(stream, self.stall_timeout);
        let Some(acceptor) = &self.tls else {
            return self.http(stream, peer, watcher, seen, None, false).await;
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
        watcher: DrainWatcher,
        seen: FirstHead,
    ) {
        match acceptor.accept(stream).await {
            Ok(stream) => {
                let (_, session) = stream.get_ref();
                let h2 = session.alpn_protocol() == Some(b"h2");
                let alpn = session.alpn_protocol().map(String::from_utf8_lossy);
                tracing::trace!(alpn = alpn.as_deref().unwrap_or("none"), "TLS established");
                self.http(stream, peer, watcher, seen, Some(Proto::Https), h2)
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
        mut stream: S,
        peer: SocketAddr,
        mut drain: DrainWatcher,
        seen: FirstHead,
        proto: Option<Proto>,
        alpn_h2: bool,
    ) where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let first_head = seen.clone();
        // Under TLS, ALPN may have chosen HTTP/2 already; otherwise the first bytes tell.
        let sniffed = if alpn_h2 {
            Sniffed::H2(BytesMut::new())
        } else {
            // A drain closes a connection that has not said anything yet.
            let sniffed = tokio::select! {
                sniffed = sniff(&mut stream) => sniffed,
                () = drain.wait() => return,
            };
            match sniffed {
                Ok(sniffed) => sniffed,
                Err(error) => {
                    tracing::debug!(%error, "connection ended before its first request");
                    return;
                }
            }
        };
        match sniffed {
            Sniffed::H1(read) => {
                // An HTTP/1.1 connection's idle time is its wait for the next head (`h1`).
                let service = self.service(peer, proto, seen, None);
                let settings = h1::Settings {
                    max_head: self.max_head,
                    header_timeout: self.header_timeout,
                    max_requests: self.max_requests,
                };
                let timed_out = || self.header_timeout(&first_head);
                if let Err(error) =
                    h1::serve(stream, read, settings, drain, service, timed_out).await
                {
                    tracing::debug!(%error, "connection ended with an error");
                }
            }
            Sniffed::H2(read) => {
                let activity = Activity::default();
                let service = self.service(peer, proto, seen, Some(activity.clone()));
                // Boxed: hyper's HTTP/2 connection is large, and most connections are not it.
                Box::pin(self.h2(
                    Rewind::new(read, stream),
                    drain,
                    service,
                    activity,
                    &first_head,
                ))
                .await;
            }
        }
    }

    /// The service every request of a connection goes to: the current router, with the
    /// request's [`ClientAddr`] and [`Proto`], counted open until its response body ends.
    fn service(
        &self,
        peer: SocketAddr,
        proto: Option<Proto>,
        seen: FirstHead,
        activity: Option<Activity>,
    ) -> impl Fn(Request<ClientBody>) -> Responding + Clone + Send + Sync + 'static {
        let routers = Arc::clone(&self.routers);
        move |mut request: Request<ClientBody>| {
            let arrived = tokio::time::Instant::now();
            seen.seen();
            let open = activity.as_ref().map(Activity::begin);
            request.extensions_mut().insert(ClientAddr(peer));
            if let Some(proto) = proto {
                request.extensions_mut().insert(proto);
            }
            let router = routers.load_full();
            // Boxed: freed once answered, and kept out of the connection's own future.
            Box::pin(async move {
                let response = metrics::arrived(arrived, router.handle(request)).await;
                // Open until its body ends or is dropped.
                admission::hold(response, open)
            })
        }
    }

    /// An HTTP/2 connection, served by hyper until it ends, a drain or its last request
    /// (`max_requests_per_connection`) has it finish its streams, or it has had no open request
    /// for `request_header_timeout`.
    async fn h2<S>(
        &self,
        stream: S,
        mut drain: DrainWatcher,
        service: impl Fn(Request<ClientBody>) -> Responding + Clone + Send + Sync + 'static,
        activity: Activity,
        first_head: &FirstHead,
    ) where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let service = service_fn(move |request: Request<Incoming>| {
            let responding = service(request.map(ClientBody::from));
            async move { Ok::<_, Infallible>(responding.await) }
        });
        let connection = self.h2.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let served = tokio::select! {
            served = connection.as_mut() => served,
            () = drain.wait() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
            () = activity.begun(self.max_requests) => {
                // GOAWAY: streams the client opened before it reads it are still served.
                tracing::debug!("max_requests_per_connection reached: GOAWAY");
                connection.as_mut().graceful_shutdown();
                connection.await
            }
            () = activity.idle_for(self.header_timeout) => {
                // No request open: dropping the connection closes it.
                self.header_timeout(first_head);
                tracing::debug!(
                    timeout_ms = self.header_timeout.as_millis() as u64,
                    "connection closed: idle for request_header_timeout"
                );
                Ok(())
            }
        };
        if let Err(error) = served {
            tracing::debug!(%error, "HTTP/2 connection ended with an error");
        }
    }
}

/// A request's response, on its way.
type Responding = Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;
