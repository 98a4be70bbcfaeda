//! Client connections before they are HTTP: how many may be open at once
//! (`max_connections`), how long one may stay without a request head
//! (`request_header_timeout`), and how the accept loop backs off when it cannot accept
//! (descriptors exhausted) instead of spinning.
//!
//! - **Slots.** A [`ConnectionSlot`] is taken before `accept` and held by the connection's task
//!   until it ends. With every slot taken the loop stops accepting: new clients wait in the
//!   kernel's listen backlog, and are accepted as soon as a connection closes (which the header
//!   timeout guarantees for silent ones).
//! - **First request head.** [`until_first_head`] runs a connection's whole task from accept,
//!   whatever it does first (a TLS handshake, reading the bytes that tell HTTP/1 from HTTP/2),
//!   under a deadline that ends when the service sees the first request ([`FirstHead`]). hyper's
//!   own HTTP/1 `header_read_timeout` cannot cover that stretch: it starts only once the
//!   protocol is known. It covers the later requests of a keep-alive connection.
//! - **Idle.** After that, a connection with no open request for `request_header_timeout`
//!   ([`Activity`]) is closed: hyper bounds the wait for an HTTP/1.1 connection's next head,
//!   but an HTTP/2 connection could otherwise stay open, idle, for ever and hold its slot.
//! - **Back-off.** [`AcceptBackoff`]: after a failed accept the loop sleeps, doubling from 5 ms
//!   to 1 s while failures go on, and logs once per second at most (the first failure, then how
//!   many followed), not once per failure.

use std::future::Future;
use std::io;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The connections a gateway may have open at once.
#[derive(Debug, Clone)]
pub(super) struct ConnectionSlots {
    slots: Arc<Semaphore>,
    gauge: Gauge,
}

impl ConnectionSlots {
    pub fn new(max_connections: usize, gauge: Gauge) -> ConnectionSlots {
        ConnectionSlots {
            slots: Arc::new(Semaphore::new(max_connections.min(Semaphore::MAX_PERMITS))),
            gauge,
        }
    }

    /// Waits for a free slot.
    pub async fn take(&self) -> ConnectionSlot {
        // The semaphore is never closed, so acquiring only waits.
        let permit = Arc::clone(&self.slots).acquire_owned().await.ok();
        ConnectionSlot {
            _permit: permit,
            gauge: self.gauge.clone(),
            open: false,
        }
    }
}

/// One connection's place under `max_connections`; given back on drop.
#[derive(Debug)]
pub(super) struct ConnectionSlot {
    _permit: Option<OwnedSemaphorePermit>,
    gauge: Gauge,
    /// Counted as an open connection (the slot waiting in `accept` is not).
    open: bool,
}

impl ConnectionSlot {
    /// The slot now holds an accepted connection.
    pub fn accepted(mut self) -> ConnectionSlot {
        self.gauge.inc();
        self.open = true;
        self
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if self.open {
            self.gauge.dec();
        }
    }
}

/// Told by the service when a connection's first request head has arrived. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(super) struct FirstHead(Arc<(Notify, AtomicBool)>);

impl FirstHead {
    /// A request head was read (called for every request; only the first matters).
    pub fn seen(&self) {
        self.0 .1.store(true, Ordering::Relaxed);
        // `notify_one` keeps the notification when nobody waits yet.
        self.0 .0.notify_one();
    }

    /// Whether a request head has arrived yet: a connection closed before is refused, not
    /// idle.
    pub fn was_seen(&self) -> bool {
        self.0 .1.load(Ordering::Relaxed)
    }
}

/// Runs `connection` (the whole task of one connection, from accept) until it ends; `None`
/// when it sent no request head within `timeout` and was dropped, which closes it.
pub(super) async fn until_first_head<F: Future>(
    timeout: Duration,
    first_head: &FirstHead,
    connection: F,
) -> Option<F::Output> {
    let deadline = async {
        if tokio::time::timeout(timeout, first_head.0 .0.notified())
            .await
            .is_ok()
        {
            // In time: from here on only the connection decides.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        output = connection => Some(output),
        () = deadline => None,
    }
}

/// The requests of one HTTP/2 connection: how many are open, for its idle bound, and how many
/// it has carried, for `max_requests_per_connection`. The service counts each request in
/// ([`Activity::begin`]) and the response body counts it out when it ends or is dropped.
/// Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(super) struct Activity(Arc<tokio::sync::watch::Sender<Requests>>);

/// What [`Activity`] counts.
#[derive(Debug, Clone, Copy, Default)]
struct Requests {
    open: usize,
    begun: u64,
}

impl Activity {
    /// A request opened; it stays open until the returned guard drops.
    pub fn begin(&self) -> OpenRequest {
        self.0.send_modify(|r| {
            r.open += 1;
            r.begun += 1;
        });
        OpenRequest(self.clone())
    }

    /// Resolves once the connection has had no open request for `timeout` (it waits while
    /// any is open, and starts over whenever one opens).
    pub async fn idle_for(&self, timeout: Duration) {
        let mut requests = self.0.subscribe();
        loop {
            // The sender lives as long as `self`: `wait_for` cannot fail.
            let _ = requests.wait_for(|r| r.open == 0).await;
            requests.mark_unchanged();
            tokio::select! {
                () = tokio::time::sleep(timeout) => return,
                _ = requests.changed() => {}
            }
        }
    }

    /// Resolves once `max` requests have begun on the connection; never with no `max`.
    pub async fn begun(&self, max: Option<NonZeroU64>) {
        let Some(max) = max else {
            return std::future::pending().await;
        };
        let mut requests = self.0.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail.
        let _ = requests.wait_for(|r| r.begun >= max.get()).await;
    }
}

/// One open request of a connection ([`Activity::begin`]).
#[derive(Debug)]
pub(super) struct OpenRequest(Activity);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0 .0.send_modify(|r| r.open = r.open.saturating_sub(1));
    }
}

/// How the accept loop waits after failed accepts. See the module docs.
#[derive(Debug)]
pub(super) struct AcceptBackoff {
    delay: Duration,
    /// Failures since the last log line.
    unlogged: u64,
    last_log: Option<Instant>,
}

const FIRST_DELAY: Duration = Duration::from_millis(5);
const MAX_DELAY: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(1);

impl Default for AcceptBackoff {
    fn default() -> Self {
        AcceptBackoff {
            delay: FIRST_DELAY,
            unlogged: 0,
            last_log: None,
        }
    }
}

impl AcceptBackoff {
    /// A failed accept: how long to wait before the next one. Logs at most once per second.
    pub fn failed(&mut self, error: &io::Error) -> Duration {
        if is_connection_error(error) {
            // The peer gave up between its handshake and our accept: nothing to wait for.
            tracing::debug!(%error, "accept: a connection was gone before it was accepted");
            return Duration::ZERO;
        }
        self.unlogged += 1;
        let now = Instant::now();
        let due = self
            .last_log
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY);
        if due {
            tracing::warn!(
                %error,
                failures = self.unlogged,
                backoff_ms = self.delay.as_millis() as u64,
                "accept failed; backing off (logged at most once a second)"
            );
            self.unlogged = 0;
            self.last_log = Some(now);
        }
        let delay = self.delay;
        self.delay = (self.delay * 2).min(MAX_DELAY);
        delay
    }

    /// A successful accept ends the back-off.
    pub fn succeeded(&mut self) {
        if self.last_log.is_some() {
            tracing::info!(unlogged_failures = self.unlogged, "accept recovered");
        }
        *self = AcceptBackoff::default();
    }
}

/// Errors that concern one connection only, not the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_head_is_dropped_at_the_deadline() {
        let first_head = FirstHead::default();
        let started = Instant::now();
        let ended = until_first_head(
            Duration::from_millis(500),
            &first_head,
            std::future::pending::<()>(),
        )
        .await;
        assert_eq!(ended, None);
        assert_eq!(started.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_in_time_lifts_the_deadline() {
        let first_head = FirstHead::default();
        let seen = first_head.clone();
        let connection = async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen.seen();
            // A long stream after the head.
            tokio::time::sleep(Duration::from_secs(60)).await;
            7
        };
        let ended = until_first_head(Duration::from_millis(500), &first_head, connection).await;
        assert_eq!(ended, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_while_no_request_is_open() {
        let activity = Activity::default();
        let started = Instant::now();
        let request = activity.begin();
        let watch = activity.clone();
        let idle = tokio::spawn(async move { watch.idle_for(Duration::from_millis(500)).await });
        // Open for 2 s: not idle meanwhile.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!idle.is_finished());
        drop(request);
        // Closed 300 ms later a second request comes and goes: the count starts over.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(activity.begin());
        idle.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(2800));
    }

    #[test]
    fn the_backoff_doubles_to_a_second_and_resets() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let mut backoff = AcceptBackoff::default();
            let emfile = io::Error::other("Too many open files");
            let delays: Vec<Duration> = (0..10).map(|_| backoff.failed(&emfile)).collect();
            assert_eq!(delays[0], Duration::from_millis(5));
            assert_eq!(delays[1], Duration::from_millis(10));
            assert_eq!(delays[9], MAX_DELAY);
            let reset = io::Error::from(io::ErrorKind::ConnectionAborted);
            assert_eq!(backoff.failed(&reset), Duration::ZERO);
            backoff.succeeded();
            assert_eq!(backoff.failed(&emfile), FIRST_DELAY);
        });
    }

    #[tokio::test]
    async fn slots_bound_open_connections() {
        let gauge = Gauge::default();
        let slots = ConnectionSlots::new(2, gauge.clone());
        let a = slots.take().await.accepted();
        let _b = slots.take().await;
        assert_eq!(
            gauge.get(),
            1,
            "a slot waiting in accept is no open connection"
        );
        let third = tokio::time::timeout(Duration::from_millis(20), slots.take()).await;
        assert!(third.is_err(), "a third connection waits");
        drop(a);
        let _c = tokio::time::timeout(Duration::from_secs(5), slots.take())
            .await
            .expect("a freed slot is taken")
            .accepted();
        assert_eq!(gauge.get(), 1);
    }
}
