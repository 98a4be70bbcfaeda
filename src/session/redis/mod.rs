//! The store shared by replicas: sessions, histories, turn locks and thread records in Redis
//! (7.0 or later), one server or a Redis Cluster (`cluster = true`), reached through `redis`'s
//! connection manager or cluster connection ([`link`]).
//!
//! # Keys ([`keys`])
//!
//! Under `key_prefix`, every key of one session or thread shares one hash tag, so every script
//! touches one Redis Cluster slot:
//! - `s:{<id>}`: a hash of the session's `owner`, `config`, `state` and `pending` (JSON), and
//!   `ended`, the token of its last turn (a turn's end sent twice knows itself, [`scripts`]);
//! - `s:{<id>}:h`: its history, a list of messages (JSON). A commit trims the list to the
//!   messages it kept ([`TurnCommit::kept`](super::TurnCommit::kept)) and appends the rest: a
//!   turn writes its new messages, not the whole history;
//! - `s:{<id>}:lock`: the running turn's lock, a random token with an expiry (`lock_ttl`);
//! - `t:{<sha256 of the thread key>}` (the record, JSON, and its owner) and `…:lock`;
//! - `{ledger}:…`: the quotas' and the listing's bookkeeping ([`ledger`]), one slot.
//!
//! No script crosses a slot, so on a cluster each runs on the master of its first key's slot,
//! which the cluster client picks and corrects by following `MOVED`/`ASK` redirects; the
//! sessions spread over the masters, and the ledger lives on one. `url` then names one node,
//! from which the client learns the others. Redis must be 7.0 or later (`PEXPIRE … GT`,
//! `ZRANGE … BYSCORE|BYLEX`, scripts replicated by effects), and should not evict keys
//! (`maxmemory-policy noeviction`): an evicted session is a lost one, and an evicted ledger
//! key forgets charges.
//!
//! # Expiry
//!
//! Every key of a session gets `PEXPIRE idle_timeout` whenever it is used, and the ledger
//! records the same expiry. While a turn runs, its lock is renewed every `lock_ttl / 3`
//! ([`renew`]), and each renewal pushes the session's keys and ledger entry to
//! `idle_timeout + lock_ttl` ahead, so a long turn never loses its session, and the session of
//! a replica that crashed mid-turn still lives `idle_timeout` after its lock expired. Redis
//! drops the keys by itself; the ledger purges expired entries in every script, giving their
//! charge back.
//!
//! # Turns and threads
//!
//! `begin_turn` takes the lock (`SET NX PX`; held: [`StoreError::Busy`]) and reads the session
//! in one script, then this process renews the lock until `end_turn`, which writes the commit
//! in one script that first checks the lock is still its own (fencing: a replica whose lock
//! expired, and which another turn may have taken, writes nothing and gets an error) and
//! releases it. A process that exits mid-turn leaves the lock to expire after `lock_ttl`, and
//! so does an operation cut short by [`super::Timed`] after it took a lock or before it
//! released one. Thread runs take the same kind of lock, so two replicas never run one thread
//! at once. What this process holds is kept locally (id → token, owner, renewal task); a
//! second turn on a session this process still has a turn on is busy without asking Redis.
//!
//! The locks and the ledger are written here, as Lua scripts ([`scripts`]), rather than taken
//! from a crate: a lock crate checks and releases in commands of its own, while fencing needs
//! the check and the write in one script on the session's slot; and no crate keeps quotas
//! across the processes sharing a Redis.
//!
//! # Two slots, two steps
//!
//! A session's keys and the ledger are in different slots, so an operation that changes both
//! does it in two steps, ordered so that a failure between them over-counts rather than loses
//! track of a session:
//! - `create` writes the session first, then asks the ledger to admit it, and deletes the
//!   session if refused. A failure between leaves keys no client knows the id of; they expire.
//! - `delete` deletes the keys, then the ledger entry; `list` forgets entries whose keys are
//!   gone (possible only after such a failure, or an expiry the ledger has not purged yet).
//! - a turn's end writes the session, then sets its charge in the ledger; the next turn's start
//!   sets it again from the stored history, so a lost step is corrected by the next turn (or
//!   the entry's expiry).
//! - a thread run that saved no record gives its place back before it releases its lock, so a
//!   run that starts next is never uncounted.
//!
//! # Redis away
//!
//! Operations fail with [`StoreError::Unavailable`] (503 `STORE_UNAVAILABLE`): at once while
//! the connection is known down, else within `store_timeout` (the client's connection and
//! response timeouts are a tenth under it, a cluster client's bounding a command with all its
//! redirects and retries too, so a Redis that stops answering is noticed and the requests
//! after fail at once; [`super::Timed`] enforces the bound). A watcher probes with exponential
//! backoff (to [`BACKOFF_MAX`]) and logs the loss and the return of the connection; the
//! gateway starts even when Redis is not reachable yet. On a cluster, the probe pings every
//! master the client holds a connection to, then runs on the ledger's; one master away fails
//! the operations on its slots (each within the bound, and each marks the link down until the
//! next probe answers, so the other masters' sessions see 503s too, now and then), until it
//! returns, a replica takes its place, or the cluster declares itself down. Streams
//! already running go on (they do not use the store until their end; a commit that cannot be
//! written is logged and counted by the committer, and the turn's lock expires).
//!
//! # Counts
//!
//! [`Store::counts`] answers from the counts of the ledger's last reply to this process: any
//! of its operations, or the watcher's refresh every [`REFRESH`]. They are that stale at most
//! on a replica without traffic, and include expired entries not purged yet.

mod codec;
mod keys;
mod ledger;
mod link;
mod list;
mod renew;
mod scripts;
mod sessions;
mod threads;

use std::sync::{Arc, Weak};
use std::time::Duration;

use ::redis::{ConnectionAddr, IntoConnectionInfo, ScriptInvocation, Value};
use async_trait::async_trait;
use dashmap::DashMap;
use tokio::task::AbortHandle;

use super::backend::{redacted, OpenError, RedisSettings};
use super::{
    Principal, Session, SessionConfig, SessionLimits, Store, StoreCounts, StoreError, ThreadRecord,
    TurnCommit,
};
use keys::Keys;
use ledger::Counts;
use link::Link;
use scripts::Scripts;

/// How often the watcher refreshes the counts while the connection is up.
const REFRESH: Duration = Duration::from_secs(5);
/// The first pause between probes of a lost connection; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(3);

/// See the module docs.
pub struct RedisStore {
    inner: Arc<Inner>,
    watcher: AbortHandle,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("RedisStore")
            .field("redis", &inner.link.target)
            .field("connected", &inner.link.is_up())
            .field("keys", &inner.keys)
            .field("lock_ttl", &inner.lock_ttl)
            .field("limits", &inner.limits)
            .field("turns", &inner.turns.len())
            .field("thread_runs", &inner.runs.len())
            .finish()
    }
}

/// A turn this process runs.
#[derive(Debug)]
struct Turn {
    token: String,
    owner: Principal,
    /// Bytes of the stored history when it began.
    bytes: usize,
    renewal: AbortHandle,
}

/// A thread run this process runs.
#[derive(Debug)]
struct Run {
    token: String,
    owner: Principal,
    digest: String,
    renewal: AbortHandle,
}

struct Inner {
    /// For the tasks this store spawns: they never keep it alive.
    me: Weak<Inner>,
    link: Arc<Link>,
    keys: Keys,
    scripts: Scripts,
    limits: SessionLimits,
    lock_ttl: Duration,
    counts: Counts,
    turns: DashMap<String, Turn>,
    runs: DashMap<String, Run>,
}

impl Inner {
    /// How far ahead a running session's (or thread's) keys and ledger entry expire.
    fn running_ttl(&self) -> Duration {
        self.limits.idle_timeout.saturating_add(self.lock_ttl)
    }

    /// Runs a script on the slot of its keys.
    async fn run(&self, invocation: &ScriptInvocation<'_>) -> Result<Value, StoreError> {
        let mut conn = self.link.conn()?;
        invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.link.failed(e))
    }

    /// Probes Redis (the ledger's refresh) and judges the connection by the outcome; the error
    /// when it says the connection is not usable.
    async fn check(&self) -> Option<::redis::RedisError> {
        match self.refresh().await {
            Ok(()) => None,
            Err(error) if link::connection_lost(&error) => {
                self.link.down(&error.to_string());
                if link::needs_new_connection(&error) {
                    self.link.replace();
                }
                Some(error)
            }
            Err(error) => {
                // Redis answered, with an error: the connection works.
                tracing::warn!(redis = %self.link.target, %error, "the session ledger's refresh failed");
                self.link.answered();
                None
            }
        }
    }
}

impl RedisStore {
    /// Connects to the Redis `settings` name. Refused only for settings that cannot work (a
    /// URL that does not parse, a `password_env` that is not set, credentials Redis refuses, a
    /// server that is a Cluster node when `cluster` is off or the reverse, a database other
    /// than 0 in a cluster); a Redis that does not answer yet is connected to in the
    /// background.
    pub async fn connect(
        settings: &RedisSettings,
        limits: SessionLimits,
        timeout: Duration,
    ) -> Result<RedisStore, OpenError> {
        let target = redacted(&settings.url);
        if settings.key_prefix.contains(['{', '}']) {
            return Err(OpenError::Redis(
                "key_prefix must not hold { or }: they would change which slot a key is in".into(),
            ));
        }
        let mut info = settings.url.as_str().into_connection_info().map_err(|e| {
            OpenError::Redis(format!("url {target} is not a usable Redis URL: {e}"))
        })?;
        if info.redis_settings().password().is_none() {
            if let Some(var) = &settings.password_env {
                let password = std::env::var(var)
                    .ok()
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| {
                        OpenError::Redis(format!(
                            "password_env names {var}, which is not set (or is empty)"
                        ))
                    })?;
                let redis = info.redis_settings().clone().set_password(password);
                info = info.set_redis_settings(redis);
            }
        }
        if settings.cluster && info.redis_settings().db() != 0 {
            return Err(OpenError::Redis(format!(
                "url {target} selects database {}, but a Redis Cluster has database 0 only: \
                 drop the /{} from the url",
                info.redis_settings().db(),
                info.redis_settings().db()
            )));
        }
        if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
            // The client builds its TLS configuration with rustls's process default, which
            // must be ring, the gateway's provider (`crate::tls` installs the same one; it
            // comes later in the data flow, so it is not called from here). Installing fails
            // only when a default is already there, which is then left alone.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let link = Link::new(info.clone(), settings.cluster, timeout, target.clone())
            .map_err(|e| OpenError::Redis(format!("url {target} cannot be used: {e}")))?;
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            link: Arc::new(link),
            keys: Keys::new(&settings.key_prefix),
            scripts: Scripts::new(),
            limits,
            lock_ttl: settings.lock_ttl,
            counts: Counts::default(),
            turns: DashMap::new(),
            runs: DashMap::new(),
        });
        // The server is asked what it is on a connection of its own, so that the answer is its
        // and not a cluster client's, which hides a seed's refusal behind its own retries.
        let failure = match link::cluster_enabled(info, inner.link.timeout).await {
            Ok(Some(cluster)) if cluster != settings.cluster => {
                return Err(OpenError::Redis(if cluster {
                    format!(
                        "{target} is a Redis Cluster node: set cluster = true, or the keys on \
                         its other nodes are out of reach"
                    )
                } else {
                    format!("{target} is not a Redis Cluster node: remove cluster = true")
                }));
            }
            Ok(_) => inner.check().await,
            // Not reachable: probing again at once would only double the wait; the watcher
            // probes from here on.
            Err(error) => Some(error),
        };
        if let Some(error) = failure {
            if link::refused_credentials(&error) {
                return Err(OpenError::Redis(format!(
                    "{target} refused the credentials: {error}"
                )));
            }
            tracing::warn!(
                redis = %target,
                %error,
                "the Redis session store does not answer yet; starting anyway and connecting \
                 in the background (requests that need sessions get 503 until then)"
            );
        }
        let watcher = tokio::spawn(watch(Arc::downgrade(&inner))).abort_handle();
        Ok(RedisStore { inner, watcher })
    }
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        // Locks this process holds expire by themselves (`lock_ttl`).
        self.watcher.abort();
        for turn in self.inner.turns.iter() {
            turn.renewal.abort();
        }
        for run in self.inner.runs.iter() {
            run.renewal.abort();
        }
    }
}

/// Refreshes the counts every [`REFRESH`] while the connection is up; once it is lost (seen
/// by an operation or by this probe), probes with backoff until it answers.
async fn watch(me: Weak<Inner>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let Some(link) = me.upgrade().map(|inner| Arc::clone(&inner.link)) else {
            return;
        };
        if link.is_up() {
            backoff = BACKOFF_MIN;
            tokio::select! {
                () = tokio::time::sleep(REFRESH) => {}
                () = link.wake.notified() => {}
            }
        } else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        drop(link);
        let Some(inner) = me.upgrade() else {
            return;
        };
        if let Some(error) = inner.check().await {
            tracing::debug!(redis = %inner.link.target, %error, next = ?backoff, "Redis probe failed");
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    fn limits(&self) -> SessionLimits {
        self.inner.limits
    }

    fn counts(&self) -> StoreCounts {
        self.inner.counts.get()
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        self.inner.create(session).await
    }

    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        self.inner.get(id, owner).await
    }

    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        self.inner.config(id, owner).await
    }

    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        self.inner.list(face, owner, after, limit).await
    }

    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        self.inner.delete(id, owner).await
    }

    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
        self.inner.begin_turn(id, owner).await
    }

    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        self.inner.charge_input(id, bytes).await
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        self.inner.end_turn(id, commit).await
    }

    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        self.inner.begin_thread(key, owner).await
    }

    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        self.inner.save_thread(key, record).await
    }

    async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        self.inner.end_thread(key).await
    }
}

#[cfg(test)]
mod tests;
