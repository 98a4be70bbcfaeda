//! The connection to Redis, and whether it is believed up.
//!
//! To one server, `redis`'s [`ConnectionManager`] multiplexes every operation on one connection
//! and reconnects it after a drop. To a Redis Cluster (`cluster = true`), its
//! [`ClusterConnection`] learns the slot map from the seed node the URL names, keeps a
//! connection per node, sends each command to the node of its first key's slot (a script's
//! `EVALSHA` by its first key, a keyless `PING` to every master, `SCRIPT LOAD` to every node)
//! and follows `MOVED`/`ASK` redirects. [`Conn`] is either, so the operations do not care which.
//!
//! What neither does is fail fast while Redis is away: a command sent during a reconnection
//! waits for it. So the link keeps its own verdict: an operation that sees the connection fail
//! marks the link down (logged once), and until the store's watcher (`super::watch`) gets an
//! answer again, operations fail at once with [`StoreError::Unavailable`] instead of queueing
//! behind a dead socket. The watcher probes with exponential backoff; a probe that fails for a
//! reason a reconnection of the same connection cannot cure (authentication, a read-only
//! replica after a failover, a cluster client that lost every node) replaces the connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionInfo, ErrorKind, Pipeline, RedisError,
    RedisFuture, ServerErrorKind, Value,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::super::StoreError;

/// Longest pause of the manager's own reconnection attempts.
const MANAGER_MAX_DELAY: Duration = Duration::from_secs(1);
/// How often the cluster client tries one command again: a redirect (`MOVED`, `ASK`) is a try,
/// and so is a wait while a slot moves or a failover ends (`TRYAGAIN`, `CLUSTERDOWN`). Every
/// try stays within the operation's bound.
const CLUSTER_RETRIES: u32 = 4;
/// The cluster client's pause before try `n` is random, at least this (ms) and under
/// `CLUSTER_WAIT_FACTOR * 2^n` (ms, at most [`CLUSTER_WAIT_MAX`]): 50, 100, 200, 400 ms. The
/// crate's defaults start above a second, more than a store operation may take.
const CLUSTER_WAIT_MIN: u64 = 10;
const CLUSTER_WAIT_FACTOR: u64 = 25;
const CLUSTER_WAIT_MAX: u64 = 500;

/// A connection to one server or to a cluster; a clone shares it.
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// How a fresh [`Conn`] is made.
enum Connector {
    Single {
        client: Client,
        config: ConnectionManagerConfig,
    },
    Cluster {
        client: ClusterClient,
        /// Each node's connection and response timeout.
        bound: Duration,
    },
}

impl Connector {
    /// A connection that connects in the background: the first commands wait for it (within
    /// their bound), and nothing here waits for Redis.
    fn connect(&self) -> Result<Conn, RedisError> {
        match self {
            Connector::Single { client, config } => {
                ConnectionManager::new_lazy_with_config(client.clone(), config.clone())
                    .map(Conn::Single)
            }
            Connector::Cluster { client, bound } => Ok(Conn::Cluster(
                client.get_pending_async_connection_with_config(
                    ClusterConfig::new()
                        .set_connection_timeout(*bound)
                        .set_response_timeout(*bound),
                ),
            )),
        }
    }
}

pub(super) struct Link {
    connector: Connector,
    conn: RwLock<Conn>,
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

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target)
            .field(
                "cluster",
                &matches!(self.connector, Connector::Cluster { .. }),
            )
            .field("up", &self.is_up())
            .finish()
    }
}

impl Link {
    /// A link to the server `info` names, or to the cluster it is a node of; not connected yet
    /// (down until the first answer).
    pub(super) fn new(
        info: ConnectionInfo,
        cluster: bool,
        timeout: Duration,
        target: String,
    ) -> Result<Link, RedisError> {
        // A little under the bound `Timed` enforces, so that a Redis that stopped answering
        // is seen here (and the link marked down: later requests fail at once) rather than
        // only by `Timed` dropping each request in turn.
        let bound = timeout
            .saturating_sub(timeout / 10)
            .max(Duration::from_millis(1));
        let connector = if cluster {
            // The response timeout is also the bound of a whole command with its redirects and
            // waits (the crate's overall response timeout follows it).
            let client = ClusterClientBuilder::new([info])
                .connection_timeout(bound)
                .response_timeout(bound)
                .retries(CLUSTER_RETRIES)
                .min_retry_wait(CLUSTER_WAIT_MIN)
                .max_retry_wait(CLUSTER_WAIT_MAX)
                .retry_wait_formula(CLUSTER_WAIT_FACTOR, 2)
                .build()?;
            Connector::Cluster { client, bound }
        } else {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(bound))
                .set_response_timeout(Some(bound))
                .set_min_delay(Duration::from_millis(50))
                .set_max_delay(MANAGER_MAX_DELAY)
                .set_exponent_base(2.0)
                // Few: the watcher retries for as long as it takes, and a caller never waits on
                // these because a down link fails fast.
                .set_number_of_retries(2);
            Connector::Single {
                client: Client::open(info)?,
                config,
            }
        };
        let conn = connector.connect()?;
        Ok(Link {
            connector,
            conn: RwLock::new(conn),
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
    pub(super) fn conn(&self) -> Result<Conn, StoreError> {
        if !self.is_up() {
            return Err(StoreError::Unavailable(format!(
                "not connected to Redis at {}; reconnecting",
                self.target
            )));
        }
        Ok(self.current())
    }

    /// The connection, whatever the verdict: for the watcher's probe.
    pub(super) fn current(&self) -> Conn {
        // A clone is a reference count; the lock is never held across anything that panics.
        self.conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A fresh connection in place of the current one (which ends once no operation holds it).
    pub(super) fn replace(&self) {
        match self.connector.connect() {
            Ok(fresh) => {
                *self.conn.write().unwrap_or_else(PoisonError::into_inner) = fresh;
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

/// Whether the server `info` names is a Redis Cluster node (`INFO cluster`), asked once at
/// start on a connection of its own, within `bound`: `None` when it does not say (`INFO`
/// refused to this user); an error when it cannot be asked (not reachable, or it refuses the
/// credentials).
pub(super) async fn cluster_enabled(
    info: ConnectionInfo,
    bound: Duration,
) -> Result<Option<bool>, RedisError> {
    let ask = async {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(bound))
            .set_response_timeout(Some(bound));
        let mut conn = Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        ::redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(&mut conn)
            .await
    };
    let answer = tokio::time::timeout(bound, ask).await.map_err(|_| {
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {bound:?}"),
        ))
    })?;
    match answer {
        Ok(text) => {
            Ok(text
                .lines()
                .find_map(|line| match line.trim().strip_prefix("cluster_enabled:") {
                    Some("1") => Some(true),
                    Some("0") => Some(false),
                    _ => None,
                }))
        }
        Err(error) if connection_lost(&error) || refused_credentials(&error) => Err(error),
        // Redis answered, refusing `INFO` (an ACL, a renamed command): it does not say.
        Err(_) => Ok(None),
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
                | ErrorKind::ClusterConnectionNotFound
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

/// Whether `error` is one a reconnection of the same connection does not cure. A cluster
/// client that lost every node reconnects only from the seed it started from, and only when a
/// command tells it to: a fresh one starts over from the seed at once.
pub(super) fn needs_new_connection(error: &RedisError) -> bool {
    !error.is_io_error()
}

/// Whether `error` says the credentials are wrong: at start-up, a configuration error.
pub(super) fn refused_credentials(error: &RedisError) -> bool {
    error.kind() == ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
}
