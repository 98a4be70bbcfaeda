//! Which store keeps the sessions (`[sessions] store`), and opening it at start-up.
//!
//! - `memory` ([`MemoryStore`]): one process, lost on exit; the default.
//! - `file` ([`FileStore`]): one process, durable in a directory (an embedded database).
//! - `redis` ([`RedisStore`]): any number of replicas sharing one Redis.
//!
//! Whichever it is, it is wrapped in [`Timed`], so every operation ends within
//! [`StoreSettings::timeout`] and is reported to the metrics.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{
    FileStore, MemoryStore, RedisStore, SessionLimits, Store, StoreObserver, Timed,
    DEFAULT_STORE_TIMEOUT,
};

/// `key_prefix` when none is configured.
pub const DEFAULT_KEY_PREFIX: &str = "dialect-proxy:";
/// `lock_ttl` when none is configured: how long a turn's lock outlives a replica that died.
pub const DEFAULT_LOCK_TTL: Duration = Duration::from_secs(15);

/// Where sessions are kept, and how long an operation may take.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub backend: Backend,
    /// How long one store operation may take before the request fails with a 503
    /// (`store_timeout`).
    pub timeout: Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            backend: Backend::Memory,
            timeout: DEFAULT_STORE_TIMEOUT,
        }
    }
}

/// `store = "memory" | "file" | "redis"` with its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    Memory,
    /// `path`: the directory of the database.
    File {
        path: PathBuf,
    },
    Redis(RedisSettings),
}

impl Backend {
    /// The name `store` takes for it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::File { .. } => "file",
            Backend::Redis(_) => "redis",
        }
    }
}

/// How to reach Redis.
#[derive(Clone, PartialEq)]
pub struct RedisSettings {
    /// `redis://` or `rediss://` (TLS) `[USER[:PASSWORD]@]HOST[:PORT][/DB]`. It may hold a
    /// password: never logged.
    pub url: String,
    /// The environment variable holding the password, when it is not in the URL.
    pub password_env: Option<String>,
    /// Put before every key, so that several gateways (or other programs) share one Redis.
    pub key_prefix: String,
    /// How long a turn's or a thread's lock lives unless renewed; the lock is renewed while the
    /// run goes on, so this is how long a crashed replica keeps a session busy.
    pub lock_ttl: Duration,
    /// Whether `url` is one node of a Redis Cluster (the client finds the others and follows
    /// the cluster's redirects), rather than a single server.
    pub cluster: bool,
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &redacted(&self.url))
            .field("password_env", &self.password_env)
            .field("key_prefix", &self.key_prefix)
            .field("lock_ttl", &self.lock_ttl)
            .field("cluster", &self.cluster)
            .finish()
    }
}

/// `url` with any password replaced, fit for a log line.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparsed url>".into();
    };
    match rest.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}"),
            None => format!("{scheme}://***@{host}"),
        },
        None => url.to_owned(),
    }
}

/// Why a store could not be opened: the gateway does not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the session store in {} is in use by another process; one gateway per directory", path.display())]
    Locked { path: PathBuf },
    #[error("could not open the session store in {}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    #[error("the Redis session store: {0}")]
    Redis(String),
}

/// Opens the store `settings` name, bounded by `limits`, reporting to `observer`.
pub async fn open(
    settings: &StoreSettings,
    limits: SessionLimits,
    observer: Arc<dyn StoreObserver>,
) -> Result<Arc<dyn Store>, OpenError> {
    let timeout = settings.timeout;
    let store: Arc<dyn Store> = match &settings.backend {
        Backend::Memory => {
            Arc::new(Timed::new(MemoryStore::new(limits), timeout).observed(observer))
        }
        Backend::File { path } => {
            let store = FileStore::open(path, limits).await?;
            Arc::new(Timed::new(store, timeout).observed(observer))
        }
        Backend::Redis(redis) => {
            let store = RedisStore::connect(redis, limits, timeout).await?;
            Arc::new(Timed::new(store, timeout).observed(observer))
        }
    };
    tracing::info!(store = settings.backend.name(), "session store open");
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_password_never_reaches_a_log_line() {
        assert_eq!(
            redacted("redis://user:s3cret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redacted("rediss://s3cret@host"), "rediss://***@host");
        assert_eq!(redacted("redis://host:6379"), "redis://host:6379");
        assert_eq!(redacted("s3cret"), "<unparsed url>");
    }
}
