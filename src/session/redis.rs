//! The store shared by replicas: sessions, histories, locks and thread records in Redis.
//!
//! Not built yet: connecting fails.

use std::time::Duration;

use super::backend::{OpenError, RedisSettings};
use super::{MemoryStore, SessionLimits};

/// See the module docs.
pub type RedisStore = MemoryStore;

impl MemoryStore {
    /// Connects to the Redis `settings` name.
    pub async fn connect(
        _settings: &RedisSettings,
        _limits: SessionLimits,
        _timeout: Duration,
    ) -> Result<RedisStore, OpenError> {
        Err(OpenError::Redis("not built yet".into()))
    }
}
