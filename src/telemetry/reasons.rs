//! The label vocabularies of refusals: why a limit of the gateway refused a request
//! ([`Rejection`], `admission_rejections_total{reason}`) and why a connection ended before any
//! request ([`ConnectionRefusal`], `connections_refused_total{reason}`). Closed sets, so the
//! series stay bounded and dashboards can list them.

/// Which limit refused a request. Each is named after what an operator would raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// `[limits] max_streams`: the gateway's requests open at once (503 `OVERLOADED`).
    MaxStreams,
    /// `[routes.limits] max_streams`: one route's requests open at once (503 `OVERLOADED`).
    RouteMaxStreams,
    /// `max_buffered_request_bytes`: bytes of request bodies being read at once (503
    /// `OVERLOADED`).
    MaxBufferedRequestBytes,
    /// `max_request_bytes`, or a body larger than the whole body budget (413).
    RequestTooLarge,
    /// No credential the route accepts (401).
    Unauthenticated,
    /// `max_sessions`: sessions or thread records the gateway holds.
    SessionLimit,
    /// `max_sessions_per_principal`: sessions or thread records one principal holds.
    PrincipalSessionLimit,
    /// `max_bytes_per_principal`: one principal's share of session storage.
    PrincipalSessionStorageFull,
    /// `max_total_bytes`: the gateway's session storage.
    SessionStorageFull,
}

impl Rejection {
    pub const fn as_str(self) -> &'static str {
        match self {
            Rejection::MaxStreams => "max_streams",
            Rejection::RouteMaxStreams => "route_max_streams",
            Rejection::MaxBufferedRequestBytes => "max_buffered_request_bytes",
            Rejection::RequestTooLarge => "request_too_large",
            Rejection::Unauthenticated => "unauthenticated",
            Rejection::SessionLimit => "session_limit",
            Rejection::PrincipalSessionLimit => "principal_session_limit",
            Rejection::PrincipalSessionStorageFull => "principal_session_storage_full",
            Rejection::SessionStorageFull => "session_storage_full",
        }
    }
}

/// Why a connection ended before its first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionRefusal {
    /// No first request head within `request_header_timeout` of the accept.
    HeaderTimeout,
    /// The TLS handshake failed.
    TlsHandshake,
    /// The listener's accept failed (descriptor exhaustion among the causes).
    AcceptError,
}

impl ConnectionRefusal {
    pub const fn as_str(self) -> &'static str {
        match self {
            ConnectionRefusal::HeaderTimeout => "header_timeout",
            ConnectionRefusal::TlsHandshake => "tls_handshake",
            ConnectionRefusal::AcceptError => "accept_error",
        }
    }
}
