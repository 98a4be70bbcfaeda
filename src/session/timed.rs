//! [`Timed`]: every operation of a store, bounded. A store that hangs (a networked one whose
//! peer stopped answering) must fail a request within a known time rather than hold it.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use super::{
    Principal, Session, SessionConfig, SessionLimits, Store, StoreError, ThreadRecord, TurnCommit,
};

/// How long one store operation may take before it fails with [`StoreError::Timeout`].
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// A store whose operations fail with [`StoreError::Timeout`] after `timeout`.
#[derive(Debug)]
pub struct Timed<S> {
    inner: S,
    timeout: Duration,
}

impl<S: Store> Timed<S> {
    pub fn new(inner: S, timeout: Duration) -> Timed<S> {
        Timed { inner, timeout }
    }

    async fn bounded<T>(
        &self,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, op)
            .await
            .unwrap_or(Err(StoreError::Timeout(self.timeout)))
    }
}

#[async_trait]
impl<S: Store> Store for Timed<S> {
    fn limits(&self) -> SessionLimits {
        self.inner.limits()
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        self.bounded(self.inner.create(session)).await
    }

    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        self.bounded(self.inner.get(id, owner)).await
    }

    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        self.bounded(self.inner.config(id, owner)).await
    }

    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        self.bounded(self.inner.list(face, owner, after, limit))
            .await
    }

    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        self.bounded(self.inner.delete(id, owner)).await
    }

    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
        self.bounded(self.inner.begin_turn(id, owner)).await
    }

    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        self.bounded(self.inner.charge_input(id, bytes)).await
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        self.bounded(self.inner.end_turn(id, commit)).await
    }

    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        self.bounded(self.inner.begin_thread(key, owner)).await
    }

    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        self.bounded(self.inner.save_thread(key, record)).await
    }

    async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        self.bounded(self.inner.end_thread(key)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose every operation hangs.
    #[derive(Debug)]
    struct Stuck;

    #[async_trait]
    impl Store for Stuck {
        fn limits(&self) -> SessionLimits {
            SessionLimits::default()
        }
        async fn create(&self, _: Session) -> Result<(), StoreError> {
            std::future::pending().await
        }
        async fn get(&self, _: &str, _: &Principal) -> Result<Option<Session>, StoreError> {
            std::future::pending().await
        }
        async fn config(
            &self,
            _: &str,
            _: &Principal,
        ) -> Result<Option<SessionConfig>, StoreError> {
            std::future::pending().await
        }
        async fn list(
            &self,
            _: &str,
            _: &Principal,
            _: Option<&str>,
            _: usize,
        ) -> Result<(Vec<Session>, bool), StoreError> {
            std::future::pending().await
        }
        async fn delete(&self, _: &str, _: &Principal) -> Result<bool, StoreError> {
            std::future::pending().await
        }
        async fn begin_turn(&self, _: &str, _: &Principal) -> Result<Session, StoreError> {
            std::future::pending().await
        }
        async fn charge_input(&self, _: &str, _: usize) -> Result<(), StoreError> {
            std::future::pending().await
        }
        async fn end_turn(&self, _: &str, _: Option<TurnCommit>) -> Result<(), StoreError> {
            std::future::pending().await
        }
        async fn begin_thread(
            &self,
            _: &str,
            _: &Principal,
        ) -> Result<Option<ThreadRecord>, StoreError> {
            std::future::pending().await
        }
        async fn save_thread(&self, _: &str, _: ThreadRecord) -> Result<(), StoreError> {
            std::future::pending().await
        }
        async fn end_thread(&self, _: &str) -> Result<(), StoreError> {
            std::future::pending().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_store_times_out_with_a_typed_error() {
        let store = Timed::new(Stuck, Duration::from_millis(250));
        let started = tokio::time::Instant::now();
        assert_eq!(
            store.begin_turn("s", &Principal::anonymous()).await,
            Err(StoreError::Timeout(Duration::from_millis(250)))
        );
        assert_eq!(started.elapsed(), Duration::from_millis(250));
        assert_eq!(
            store.end_thread("k").await,
            Err(StoreError::Timeout(Duration::from_millis(250)))
        );
    }
}
