//! [`Timed`]: every operation of a store, bounded and observed. A store that hangs (a networked
//! one whose peer stopped answering) must fail a request within a known time rather than hold
//! it; how long each operation took, and how it ended, goes to a [`StoreObserver`] (the
//! metrics), whatever the store behind it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{
    Principal, Session, SessionConfig, SessionLimits, Store, StoreCounts, StoreError, ThreadRecord,
    TurnCommit,
};

/// How long one store operation may take before it fails with [`StoreError::Timeout`].
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// Told of every operation of a [`Timed`] store once it ends: its name (a bounded set, the
/// [`Store`] method's), how long it took (a timeout included), and its error if it failed.
/// Called on the request's task: it must be cheap and must not wait.
pub trait StoreObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, op: &'static str, took: Duration, error: Option<&StoreError>);
}

/// A store whose operations fail with [`StoreError::Timeout`] after `timeout`.
#[derive(Debug)]
pub struct Timed<S> {
    inner: S,
    timeout: Duration,
    observer: Option<Arc<dyn StoreObserver>>,
}

impl<S: Store> Timed<S> {
    pub fn new(inner: S, timeout: Duration) -> Timed<S> {
        Timed {
            inner,
            timeout,
            observer: None,
        }
    }

    /// The same store, reporting every operation to `observer`.
    pub fn observed(self, observer: Arc<dyn StoreObserver>) -> Timed<S> {
        Timed {
            observer: Some(observer),
            ..self
        }
    }

    async fn bounded<T>(
        &self,
        name: &'static str,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = tokio::time::timeout(self.timeout, op)
            .await
            .unwrap_or(Err(StoreError::Timeout(self.timeout)));
        if let Some(observer) = &self.observer {
            observer.observe(name, started.elapsed(), result.as_ref().err());
        }
        result
    }
}

#[async_trait]
impl<S: Store> Store for Timed<S> {
    fn limits(&self) -> SessionLimits {
        self.inner.limits()
    }

    fn counts(&self) -> StoreCounts {
        self.inner.counts()
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        self.bounded("create", self.inner.create(session)).await
    }

    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        self.bounded("get", self.inner.get(id, owner)).await
    }

    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        self.bounded("config", self.inner.config(id, owner)).await
    }

    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        self.bounded("list", self.inner.list(face, owner, after, limit))
            .await
    }

    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        self.bounded("delete", self.inner.delete(id, owner)).await
    }

    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
        self.bounded("begin_turn", self.inner.begin_turn(id, owner))
            .await
    }

    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        self.bounded("charge_input", self.inner.charge_input(id, bytes))
            .await
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        self.bounded("end_turn", self.inner.end_turn(id, commit))
            .await
    }

    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        self.bounded("begin_thread", self.inner.begin_thread(key, owner))
            .await
    }

    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        self.bounded("save_thread", self.inner.save_thread(key, record))
            .await
    }

    async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        self.bounded("end_thread", self.inner.end_thread(key)).await
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
        fn counts(&self) -> StoreCounts {
            StoreCounts::default()
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

    /// What an observer was told.
    #[derive(Debug, Default)]
    struct Seen(std::sync::Mutex<Vec<(&'static str, Duration, Option<StoreError>)>>);

    impl StoreObserver for Seen {
        fn observe(&self, op: &'static str, took: Duration, error: Option<&StoreError>) {
            self.0.lock().unwrap().push((op, took, error.cloned()));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_store_times_out_with_a_typed_error() {
        let seen = Arc::new(Seen::default());
        let store = Timed::new(Stuck, Duration::from_millis(250)).observed(Arc::clone(&seen) as _);
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
        let timeout = Some(StoreError::Timeout(Duration::from_millis(250)));
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                ("begin_turn", Duration::from_millis(250), timeout.clone()),
                ("end_thread", Duration::from_millis(250), timeout),
            ]
        );
    }

    #[tokio::test]
    async fn operations_and_what_they_hold_are_reported() {
        let seen = Arc::new(Seen::default());
        let store = Timed::new(
            super::super::MemoryStore::new(SessionLimits::default()),
            DEFAULT_STORE_TIMEOUT,
        )
        .observed(Arc::clone(&seen) as _);
        let owner = Principal::anonymous();
        store
            .create(Session {
                id: "s1".into(),
                owner: owner.clone(),
                ..Session::default()
            })
            .await
            .unwrap();
        assert_eq!(store.counts().sessions, 1);
        store.begin_thread("k", &owner).await.unwrap();
        assert_eq!(store.counts().thread_records, 1);
        assert!(store.delete("s1", &owner).await.unwrap());
        assert_eq!(
            store.begin_turn("s1", &owner).await,
            Err(StoreError::NotFound)
        );
        assert_eq!(
            store.counts(),
            StoreCounts {
                sessions: 0,
                thread_records: 1
            }
        );
        let ops: Vec<_> = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(op, _, error)| (*op, error.clone()))
            .collect();
        assert_eq!(
            ops,
            [
                ("create", None),
                ("begin_thread", None),
                ("delete", None),
                ("begin_turn", Some(StoreError::NotFound)),
            ]
        );
    }
}
