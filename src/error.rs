//! The closed set of errors the gateway itself reports (`specs/translation.md` §7), and the one
//! place that decides how each is rendered: HTTP status before the body starts, a terminal
//! `RUN_ERROR` code after it, a metric label, and whose fault it was.
//!
//! Pure: must not import the I/O side (`session`, `telemetry`, `config`, `http`, `adapters`,
//! `server`), tokio, hyper or tracing, nor read a clock or a file (`tests/it/layering.rs`).
//! (`http::StatusCode` is the `http` crate's plain data, not the `http` module.)

use std::borrow::Cow;
use std::fmt;

use http::StatusCode;

/// Who caused an error; picks 4xx or 5xx and the log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
    Gateway,
}

/// Declares [`ErrorCode`] and [`ErrorCode::ALL`] from one list of the variants (a tuple
/// variant names its field type and a sample value for `ALL`), so a new code cannot be left out
/// of the list every code-walking test iterates.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident $(($field:ty = $example:expr))?,)+) => {
        /// A gateway error code. Vendor codes passed through from an upstream are plain strings
        /// on the event and never become an `ErrorCode`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant $(($field))?,)+
        }

        impl ErrorCode {
            /// Every code, each variant once (`UpstreamHttp` with a sample status).
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant $(($example))?),+];
        }
    };
}

error_codes! {
    /// The request body is not a valid run input.
    InvalidRequest,
    /// No route for the path.
    NotFound,
    /// Wrong method for the route.
    MethodNotAllowed,
    /// The request body exceeds the configured limit.
    PayloadTooLarge,
    /// The request body did not arrive in time.
    RequestTimeout,
    /// Connecting to the upstream failed or timed out.
    UpstreamUnavailable,
    /// The upstream answered a non-2xx status.
    UpstreamHttp(u16 = 503),
    /// The upstream sent no response headers in time.
    UpstreamHeadersTimeout,
    /// The upstream went silent for longer than the idle timeout.
    UpstreamIdleTimeout,
    /// The upstream stream ended (or broke) without a terminal event.
    UpstreamTruncated,
    /// An upstream payload was not JSON, or not a JSON object.
    UpstreamMalformed,
    /// One upstream event exceeded the size limit.
    UpstreamEventTooLarge,
    /// Tool arguments could not be assembled within the limits.
    InvalidToolArgs,
    /// The upstream opened more entities, or longer ids, than a run may hold.
    UpstreamLimitExceeded,
    /// The gateway is shutting down and ended the stream.
    GatewayShutdown,
    /// The route asks for a translation this build does not have.
    NotImplemented,
    /// The request lacks a valid API key.
    Unauthorized,
    /// A turn is already running on the session.
    TurnInProgress,
    /// The session store is full.
    SessionLimit,
    /// The caller holds as many sessions, or as many bytes of session history, as one
    /// principal may.
    PrincipalSessionLimit,
    /// The gateway's byte budget for session histories is spent.
    SessionStorageFull,
    /// The session store did not answer in time, or cannot be reached.
    StoreUnavailable,
    /// A session's history reached its size limit.
    HistoryLimitExceeded,
    /// A turn does not answer every call the previous turn left pending.
    IncompleteToolResults,
    /// A turn answers a call that is not pending.
    UnknownToolCall,
    /// The client's history was edited and the route refuses to start a new AAP session.
    HistoryDiverged,
    /// An AAP agent stopped its turn with `error` (AAP carries no detail).
    AapError,
    /// An AAP upstream speaks another protocol version than 3.
    AapVersionUnsupported,
    /// An AAP upstream lost the session and the route does not recreate it.
    AapSessionNotFound,
    /// The AAP upstream does not list the agent the run asks for.
    AapAgentNotFound,
    /// A permission is needed and the client cannot be asked (`unconfirmable = "error"`).
    ConfirmationUnavailable,
    /// The gateway is at one of its admission limits (open streams, buffered request bytes);
    /// the client may retry after the `Retry-After` it is given.
    Overloaded,
    /// The upstream said two incompatible things about one message or tool call: a continuation
    /// chunk repeating its opener's role, name, tool name or parent with another value, or
    /// claiming another subagent's item; a continuation no open item can own; a tool call id
    /// reused under another tool's name. No repair could keep every byte with its owner.
    UpstreamConflict,
    /// A `RUN_FINISHED` outcome of the wrong type (not an object, no string `type`, an interrupt
    /// without a non-empty list of interrupts).
    UpstreamInvalidOutcome,
    /// A terminal event's `threadId`/`runId` differ from those of the run it ends.
    UpstreamRunMismatch,
    /// The run lasted longer than its route's `max_stream_duration`.
    StreamDurationExceeded,
    /// The upstream sent more than its route's `max_stream_bytes` in one stream.
    StreamBytesExceeded,
}

impl ErrorCode {
    /// The wire string (`"UPSTREAM_IDLE_TIMEOUT"`, `"UPSTREAM_HTTP_503"`).
    pub fn as_str(self) -> Cow<'static, str> {
        match self {
            ErrorCode::UpstreamHttp(status) => Cow::Owned(format!("UPSTREAM_HTTP_{status}")),
            other => Cow::Borrowed(other.label()),
        }
    }

    /// A bounded label for metrics: the wire string, with every `UPSTREAM_HTTP_<status>`
    /// collapsed to `UPSTREAM_HTTP`.
    pub const fn label(self) -> &'static str {
        match self {
            ErrorCode::UpstreamHttp(_) => "UPSTREAM_HTTP",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::RequestTimeout => "REQUEST_TIMEOUT",
            ErrorCode::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
            ErrorCode::UpstreamHeadersTimeout => "UPSTREAM_HEADERS_TIMEOUT",
            ErrorCode::UpstreamIdleTimeout => "UPSTREAM_IDLE_TIMEOUT",
            ErrorCode::UpstreamTruncated => "UPSTREAM_TRUNCATED",
            ErrorCode::UpstreamMalformed => "UPSTREAM_MALFORMED",
            ErrorCode::UpstreamEventTooLarge => "UPSTREAM_EVENT_TOO_LARGE",
            ErrorCode::InvalidToolArgs => "INVALID_TOOL_ARGS",
            ErrorCode::UpstreamLimitExceeded => "UPSTREAM_LIMIT_EXCEEDED",
            ErrorCode::UpstreamConflict => "UPSTREAM_CONFLICT",
            ErrorCode::UpstreamInvalidOutcome => "UPSTREAM_INVALID_OUTCOME",
            ErrorCode::UpstreamRunMismatch => "UPSTREAM_RUN_MISMATCH",
            ErrorCode::StreamDurationExceeded => "STREAM_DURATION_EXCEEDED",
            ErrorCode::StreamBytesExceeded => "STREAM_BYTES_EXCEEDED",
            ErrorCode::GatewayShutdown => "GATEWAY_SHUTDOWN",
            ErrorCode::NotImplemented => "NOT_IMPLEMENTED",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::TurnInProgress => "TURN_IN_PROGRESS",
            ErrorCode::SessionLimit => "SESSION_LIMIT",
            ErrorCode::PrincipalSessionLimit => "PRINCIPAL_SESSION_LIMIT",
            ErrorCode::SessionStorageFull => "SESSION_STORAGE_FULL",
            ErrorCode::StoreUnavailable => "STORE_UNAVAILABLE",
            ErrorCode::HistoryLimitExceeded => "HISTORY_LIMIT_EXCEEDED",
            ErrorCode::IncompleteToolResults => "INCOMPLETE_TOOL_RESULTS",
            ErrorCode::UnknownToolCall => "UNKNOWN_TOOL_CALL",
            ErrorCode::HistoryDiverged => "HISTORY_DIVERGED",
            ErrorCode::AapError => "AAP_ERROR",
            ErrorCode::AapVersionUnsupported => "AAP_VERSION_UNSUPPORTED",
            ErrorCode::AapSessionNotFound => "AAP_SESSION_NOT_FOUND",
            ErrorCode::AapAgentNotFound => "AAP_AGENT_NOT_FOUND",
            ErrorCode::ConfirmationUnavailable => "CONFIRMATION_UNAVAILABLE",
            ErrorCode::Overloaded => "OVERLOADED",
        }
    }

    pub const fn fault(self) -> Fault {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::NotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::PayloadTooLarge
            | ErrorCode::RequestTimeout
            | ErrorCode::Unauthorized
            | ErrorCode::TurnInProgress
            | ErrorCode::SessionLimit
            | ErrorCode::PrincipalSessionLimit
            | ErrorCode::HistoryLimitExceeded
            | ErrorCode::IncompleteToolResults
            | ErrorCode::UnknownToolCall
            | ErrorCode::HistoryDiverged
            | ErrorCode::ConfirmationUnavailable => Fault::Client,
            ErrorCode::UpstreamUnavailable
            | ErrorCode::UpstreamHttp(_)
            | ErrorCode::UpstreamHeadersTimeout
            | ErrorCode::UpstreamIdleTimeout
            | ErrorCode::UpstreamTruncated
            | ErrorCode::UpstreamMalformed
            | ErrorCode::UpstreamEventTooLarge
            | ErrorCode::InvalidToolArgs
            | ErrorCode::UpstreamLimitExceeded
            | ErrorCode::UpstreamConflict
            | ErrorCode::UpstreamInvalidOutcome
            | ErrorCode::UpstreamRunMismatch
            | ErrorCode::StreamDurationExceeded
            | ErrorCode::StreamBytesExceeded
            | ErrorCode::AapError
            | ErrorCode::AapVersionUnsupported
            | ErrorCode::AapSessionNotFound
            | ErrorCode::AapAgentNotFound => Fault::Upstream,
            ErrorCode::GatewayShutdown
            | ErrorCode::NotImplemented
            | ErrorCode::StoreUnavailable
            | ErrorCode::SessionStorageFull
            | ErrorCode::Overloaded => Fault::Gateway,
        }
    }

    /// The status when the error is known before any body byte was sent.
    pub const fn http_status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::TurnInProgress => StatusCode::CONFLICT,
            ErrorCode::SessionLimit | ErrorCode::PrincipalSessionLimit => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ErrorCode::SessionStorageFull => StatusCode::INSUFFICIENT_STORAGE,
            ErrorCode::HistoryLimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::IncompleteToolResults
            | ErrorCode::UnknownToolCall
            | ErrorCode::HistoryDiverged
            | ErrorCode::ConfirmationUnavailable => StatusCode::BAD_REQUEST,
            ErrorCode::UpstreamUnavailable
            | ErrorCode::UpstreamHttp(_)
            | ErrorCode::UpstreamTruncated
            | ErrorCode::UpstreamMalformed
            | ErrorCode::UpstreamEventTooLarge
            | ErrorCode::InvalidToolArgs
            | ErrorCode::UpstreamLimitExceeded
            | ErrorCode::UpstreamConflict
            | ErrorCode::UpstreamInvalidOutcome
            | ErrorCode::UpstreamRunMismatch
            | ErrorCode::StreamBytesExceeded
            | ErrorCode::AapError
            | ErrorCode::AapVersionUnsupported
            | ErrorCode::AapSessionNotFound
            | ErrorCode::AapAgentNotFound => StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamHeadersTimeout
            | ErrorCode::UpstreamIdleTimeout
            | ErrorCode::StreamDurationExceeded => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::GatewayShutdown | ErrorCode::StoreUnavailable | ErrorCode::Overloaded => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::NotImplemented => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// An error with its code and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Failure {
    pub code: ErrorCode,
    pub message: String,
}

impl Failure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// The JSON body of an HTTP error: `{"error":{"code":"…","message":"…"}}`.
    pub fn to_json_body(&self) -> Vec<u8> {
        let body = serde_json::json!({
            "error": {"code": self.code.as_str(), "message": self.message}
        });
        // Serialising a `Value` built from strings cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_wire_string_status_and_fault() {
        for &code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(s
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()));
            let status = code.http_status();
            match code.fault() {
                Fault::Client => assert!(status.is_client_error(), "{code}"),
                Fault::Upstream | Fault::Gateway => assert!(status.is_server_error(), "{code}"),
            }
        }
        assert_eq!(ErrorCode::UpstreamHttp(503).as_str(), "UPSTREAM_HTTP_503");
        assert_eq!(ErrorCode::UpstreamHttp(503).label(), "UPSTREAM_HTTP");
        assert_eq!(
            ErrorCode::SessionStorageFull.http_status(),
            StatusCode::INSUFFICIENT_STORAGE
        );
        assert_eq!(
            ErrorCode::PrincipalSessionLimit.http_status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    #[test]
    fn every_code_has_its_own_label() {
        let mut labels: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), ErrorCode::ALL.len(), "{labels:?}");
    }

    #[test]
    fn json_body_shape() {
        let body =
            Failure::new(ErrorCode::InvalidRequest, "missing field `threadId`").to_json_body();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "INVALID_REQUEST");
        assert_eq!(v["error"]["message"], "missing field `threadId`");
    }
}
