//! A client's request body, read whole within a byte limit, a time limit and the gateway's
//! budget of buffered request bytes. Run inputs and AAP REST bodies are small JSON documents;
//! anything larger is refused before it is buffered past the limit.
//!
//! The budget ([`BodyBudget`], `max_buffered_request_bytes`) bounds the bytes of all bodies
//! being read at once, whoever sends them: without it, many clients each holding an unfinished
//! body just under `max_request_bytes` would take the gateway's memory. A body reserves what
//! its `Content-Length` declares before a byte of it is read (a chunked body reserves each
//! chunk as it arrives); a body the budget cannot take now is refused with 503 `OVERLOADED`,
//! one it could never take (larger than the whole budget) with 413. The bytes go back to the
//! budget when the [`BufferedBody`] is dropped: once the body has been parsed, or with the
//! request.
//!
//! A declared `Content-Length` above `max_request_bytes` is refused with 413 at once, without
//! reading the body (hyper then closes the connection after the answer).

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::http::client_body::ClientBody;
use bytes::{Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ErrorCode, Failure};
use crate::telemetry::metrics::{Metrics, Rejection};

/// How long a client may take to send its (small) request body.
pub const REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The bytes of all request bodies being read at once (`max_buffered_request_bytes`), shared
/// by the whole gateway. Cheap to clone.
#[derive(Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    capacity: usize,
    metrics: Arc<Metrics>,
    gauge: Gauge,
}

impl std::fmt::Debug for BodyBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyBudget")
            .field("capacity", &self.capacity)
            .field("available", &self.bytes.available_permits())
            .finish()
    }
}

impl BodyBudget {
    /// A budget of `capacity` bytes (at most `u32::MAX`, as the configuration checks).
    pub fn new(capacity: usize, metrics: &Arc<Metrics>) -> BodyBudget {
        let capacity = capacity.min(Semaphore::MAX_PERMITS);
        BodyBudget {
            bytes: Arc::new(Semaphore::new(capacity)),
            capacity,
            metrics: Arc::clone(metrics),
            gauge: metrics.request_body_bytes(),
        }
    }

    /// Bytes not reserved now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }

    fn reservation(&self) -> Reservation {
        Reservation {
            permit: None,
            bytes: 0,
            gauge: self.gauge.clone(),
        }
    }

    /// Adds `more` bytes to `reservation`, or refuses the body.
    fn reserve(&self, reservation: &mut Reservation, more: usize) -> Result<(), Failure> {
        if more == 0 {
            return Ok(());
        }
        let total = reservation.bytes.saturating_add(more);
        if total > self.capacity {
            self.metrics.rejected(Rejection::RequestTooLarge);
            return Err(Failure::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the request body ({total} bytes or more) exceeds the gateway's whole request body budget of {} bytes (max_buffered_request_bytes)",
                    self.capacity
                ),
            ));
        }
        let permits = u32::try_from(more).ok();
        let acquired = permits.and_then(|n| Arc::clone(&self.bytes).try_acquire_many_owned(n).ok());
        let Some(acquired) = acquired else {
            self.metrics.rejected(Rejection::MaxBufferedRequestBytes);
            return Err(Failure::new(
                ErrorCode::Overloaded,
                format!(
                    "the gateway is reading as many request body bytes as it may at once ({} bytes, max_buffered_request_bytes); retry later",
                    self.capacity
                ),
            ));
        };
        match &mut reservation.permit {
            Some(permit) => permit.merge(acquired),
            None => reservation.permit = Some(acquired),
        }
        reservation.bytes = total;
        reservation.gauge.inc_by(more as i64);
        Ok(())
    }
}

/// Bytes of one body held in the budget; given back on drop.
#[derive(Debug)]
struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    gauge: Gauge,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // The permit itself returns the bytes to the semaphore.
        self.gauge.dec_by(self.bytes as i64);
    }
}

/// A body read whole. Its bytes stay reserved in the budget until it is dropped: drop it as
/// soon as it has been parsed.
#[derive(Debug)]
pub struct BufferedBody {
    bytes: Bytes,
    _reservation: Reservation,
}

impl Deref for BufferedBody {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads a request body whole, bounded by `limit` bytes, [`REQUEST_BODY_TIMEOUT`] and
/// `budget`.
pub async fn read_body(
    body: ClientBody,
    limit: usize,
    budget: &BodyBudget,
) -> Result<BufferedBody, Failure> {
    let too_large = |declared: Option<usize>| {
        budget.metrics.rejected(Rejection::RequestTooLarge);
        let declared = declared.map_or(String::new(), |n| format!(" ({n} bytes declared)"));
        Failure::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body{declared} exceeds {limit} bytes (max_request_bytes)"),
        )
    };
    let mut reservation = budget.reservation();
    // hyper's hint is exact when the request declares its length (Content-Length on HTTP/1
    // and HTTP/2).
    let declared = body.size_hint().exact();
    if let Some(declared) = declared {
        let declared = usize::try_from(declared).unwrap_or(usize::MAX);
        if declared > limit {
            return Err(too_large(Some(declared)));
        }
        budget.reserve(&mut reservation, declared)?;
    }
    let read = async {
        let mut body = body;
        let mut buffer = BytesMut::with_capacity(reservation.bytes);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Failure::new(
                    ErrorCode::InvalidRequest,
                    format!("could not read the request body: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            if buffer.len() + data.len() > limit {
                return Err(too_large(None));
            }
            if declared.is_none() {
                budget.reserve(&mut reservation, data.len())?;
            }
            buffer.extend_from_slice(&data);
        }
        Ok(buffer.freeze())
    };
    let bytes = tokio::time::timeout(REQUEST_BODY_TIMEOUT, read)
        .await
        .map_err(|_| {
            Failure::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    REQUEST_BODY_TIMEOUT.as_secs()
                ),
            )
        })??;
    Ok(BufferedBody {
        bytes,
        _reservation: reservation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_the_budget_and_give_their_bytes_back_on_drop() {
        let metrics = Metrics::new();
        let budget = BodyBudget::new(1000, &metrics);
        let mut a = budget.reservation();
        budget.reserve(&mut a, 600).unwrap();
        budget.reserve(&mut a, 100).unwrap(); // a chunk more
        assert_eq!(budget.available(), 300);
        assert_eq!(metrics.request_body_bytes().get(), 700);
        let mut b = budget.reservation();
        let refused = budget.reserve(&mut b, 400).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Overloaded);
        assert!(refused.message.contains("1000 bytes"), "{refused}");
        // Larger than the whole budget: never admissible, so not worth a retry.
        let mut c = budget.reservation();
        let refused = budget.reserve(&mut c, 1001).unwrap_err();
        assert_eq!(refused.code, ErrorCode::PayloadTooLarge);
        drop(a);
        assert_eq!(budget.available(), 1000);
        assert_eq!(metrics.request_body_bytes().get(), 0);
        budget.reserve(&mut b, 400).unwrap();
        assert_eq!(budget.available(), 600);
        assert!(metrics.encode().contains(
            "dialect_proxy_admission_rejections_total{reason=\"max_buffered_request_bytes\"} 1"
        ));
    }
}
