//! The one place where a refusal becomes an HTTP response, in the client dialect's error
//! shape: AG-UI and HAI clients get `{"error":{"code","message"}}`, AAP clients
//! `{"error":"<CODE>: <message>"}` (`aap.md` §2); the status comes from the error code, `Allow`
//! from the refusal, a 401 names the Bearer scheme and the realm (the front adds
//! `error="invalid_token"` when a credential was rejected), and a 503 `OVERLOADED` says when to
//! come back (`Retry-After`, [`OVERLOADED_RETRY_AFTER_SECS`]). A failure's message is already
//! safe to show (no upstream text, no internal address: `http::upstream`); nothing else is added.
//! The failure also rides in the response's extensions, for the log line that ends the request.

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use serde_json::json;

use crate::auth::AuthError;
use crate::dialect::Dialect;
use crate::error::ErrorCode;
use crate::http::response::{full, json, Refusal, ResponseBody};

/// The `Retry-After` of an `OVERLOADED` refusal, in seconds: streams end and bodies are read
/// within seconds, so a client may come back soon.
pub const OVERLOADED_RETRY_AFTER_SECS: u32 = 1;

/// The response for `refusal`, before any body byte, as a `client` expects it.
pub fn refused(client: Dialect, refusal: Refusal) -> Response<ResponseBody> {
    let Refusal { failure, allow } = refusal;
    let status = failure.code.http_status();
    let mut response = match client {
        // AAP's error is one string: the code leads it, as the other dialects' `code` field.
        Dialect::Aap => json(status, &json!({ "error": failure.to_string() })),
        Dialect::AgUi | Dialect::Hai => full(
            status,
            Some("application/json"),
            Bytes::from(failure.to_json_body()),
        ),
    };
    if let Some(allow) = allow {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
    }
    if failure.code == ErrorCode::Unauthorized {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, AuthError::Missing.challenge());
    }
    if failure.code == ErrorCode::Overloaded {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(OVERLOADED_RETRY_AFTER_SECS),
        );
    }
    // For the line that ends the request (`log_end`), which sees only the response.
    response.extensions_mut().insert(failure);
    response
}
