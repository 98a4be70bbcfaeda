//! A client's request body, read whole within a byte limit and a time limit. Run inputs and
//! AAP REST bodies are small JSON documents; anything larger is refused before it is buffered
//! past the limit.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::error::{ErrorCode, Failure};

/// How long a client may take to send its (small) request body.
pub const REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads a request body whole, bounded by `limit` bytes and [`REQUEST_BODY_TIMEOUT`].
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, Failure> {
    let read = tokio::time::timeout(REQUEST_BODY_TIMEOUT, Limited::new(body, limit).collect());
    let body = read
        .await
        .map_err(|_| {
            Failure::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    REQUEST_BODY_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Failure::new(
                    ErrorCode::PayloadTooLarge,
                    format!("the request body exceeds {limit} bytes (max_request_bytes)"),
                )
            } else {
                Failure::new(
                    ErrorCode::InvalidRequest,
                    format!("could not read the request body: {e}"),
                )
            }
        })?;
    Ok(body.to_bytes())
}
