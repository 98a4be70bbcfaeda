//! The connection to Redis, and whether it is believed up.
//!
//! `redis`'s [`ConnectionManager`] multiplexes every operation on one connection and
//! reconnects it after a drop. What it does not do is fail fast while Redis is away: a command
//! sent during a reconnection waits for it. So the link keeps its own verdict: an operation
//! that sees the connection fail marks the link down (logged once), and until the store's
//! watcher (`super::watch`) gets an answer again, operations fail at once with
//! [`StoreError::Unavailable`] instead of queueing behind a dead socket. The watcher probes with
//! exponential backoff; a probe that fails for a reason a reconnection of the same manager
//! cannot cure (authentication, a read-only replica after a failover) replaces the manager.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{Client, ErrorKind, RedisError, ServerErrorKind};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::super::StoreError;

/// Longest pause of the manager's own reconnection attempts.
const MANAGER_MAX_DELAY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct Link {
    client: Client,
    config: ConnectionManagerConfig,
    manager: RwLock<ConnectionManager>,
    up: AtomicBool,
    /// When the link was lost (not set before the first connection): the reconnection's log
    /// line says for how long.
    down_since: std::sync::Mutex<Option<Instant>>,
    /// Wakes the watcher when an operation saw the link go down.
    pub(super) wake: Notify,
    /// The URL without its password, for messages.
    pub(super) target: String,
    /// The bound of one operation (`store_timeout`).
    pub(super) timeout: Duration,
}

impl Link {
    /// A link that has not connected yet (down until the first answer).
    pub(super) fn new(
        client: Client,
        timeout: Duration,
        target: String,
    ) -> Result<Link, RedisError> {
        // A little under the bound `Timed` enforces, so that a Redis that stopped answering
        // is seen here (and the link marked down: later requests fail at once) rather than
        // only by `Timed` dropping each request in turn.
        let bound = timeout
            .saturating_sub(timeout / 10)
            .max(Duration::from_millis(1));
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(bound))
            .set_response_timeout(Some(bound))
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(MANAGER_MAX_DELAY)
            .set_exponent_base(2.0)
            // Few: the watcher retries for as long as it takes, and a caller never waits on
            // these because a down link fails fast.
            .set_number_of_retries(2);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
        Ok(Link {
            client,
            config,
            manager: RwLock::new(manager),
            up: AtomicBool::new(false),
            down_since: std::sync::Mutex::new(None),
            wake: Notify::new(),
            target,
            timeout,
        })
    }

    pub(super) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// The connection, for an operation: refused at once while the link is down.
    pub(super) fn conn(&self) -> Result<ConnectionManager, StoreError> {
        if !self.is_up() {
            return Err(StoreError::Unavailable(format!(
                "not connected to Redis at {}; reconnecting",
                self.target
            )));
        }
        Ok(self.manager())
    }

    /// The connection, whatever the verdict: for the watcher's probe.
    pub(super) fn manager(&self) -> ConnectionManager {
        // A clone is a reference count; the lock is never held across anything that panics.
        self.manager
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A fresh manager in place of the current one (which ends once no operation holds it).
    pub(super) fn replace(&self) {
        match ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone()) {
            Ok(fresh) => {
                *self.manager.write().unwrap_or_else(PoisonError::into_inner) = fresh;
            }
            Err(error) => {
                tracing::warn!(redis = %self.target, %error, "could not make a new Redis connection")
            }
        }
    }

    /// An operation failed with `error`: the error for the caller, and the link marked down if
    /// the connection is the cause.
    pub(super) fn failed(&self, error: RedisError) -> StoreError {
        if connection_lost(&error) {
            self.down(&error.to_string());
        }
        StoreError::Unavailable(format!("Redis at {}: {error}", self.target))
    }

    /// The link is down (logged on the transition only).
    pub(super) fn down(&self, reason: &str) {
        if self.up.swap(false, Ordering::AcqRel) {
            *self
                .down_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            tracing::warn!(
                redis = %self.target,
                %reason,
                "lost the connection to the Redis session store; requests that need it fail \
                 with 503 until it is back (reconnecting with backoff)"
            );
            self.wake.notify_one();
        }
    }

    /// An answer came back: the link is up (logged on the transition only).
    pub(super) fn answered(&self) {
        if !self.up.swap(true, Ordering::AcqRel) {
            let since = self
                .down_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match since {
                Some(since) => tracing::info!(
                    redis = %self.target,
                    down_for = ?since.elapsed(),
                    "connected to the Redis session store again"
                ),
                None => {
                    tracing::info!(redis = %self.target, "connected to the Redis session store")
                }
            }
        }
    }
}

/// Whether `error` says the connection (or the server behind it) cannot serve now, rather than
/// that one command was wrong.
pub(super) fn connection_lost(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_unrecoverable_error()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::AuthenticationFailed
                | ErrorKind::Server(
                    ServerErrorKind::BusyLoading
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::ReadOnly
                )
        )
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// Whether `error` is one a reconnection of the same manager does not cure.
pub(super) fn needs_new_manager(error: &RedisError) -> bool {
    !error.is_io_error()
}

/// Whether `error` says the credentials are wrong: at start-up, a configuration error.
pub(super) fn refused_credentials(error: &RedisError) -> bool {
    error.kind() == ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
}
