//! The in-memory store: dashmaps of sessions and of thread records, each entry with its running
//! flag and last use.
//! Expiry is lazy: an idle session is dropped when it is next looked at, and every creation
//! and listing sweeps the idle ones first, so the count never holds dead sessions at the limit.

use std::time::Instant;

use async_trait::async_trait;
use dashmap::DashMap;

use super::{Session, SessionConfig, SessionLimits, Store, StoreError, ThreadRecord, TurnCommit};

#[derive(Debug)]
struct Entry {
    session: Session,
    running: bool,
    used: Instant,
}

#[derive(Debug)]
struct ThreadEntry {
    record: Option<ThreadRecord>,
    running: bool,
    used: Instant,
}

/// See the module docs.
#[derive(Debug)]
pub struct MemoryStore {
    sessions: DashMap<String, Entry>,
    threads: DashMap<String, ThreadEntry>,
    limits: SessionLimits,
}

impl MemoryStore {
    pub fn new(limits: SessionLimits) -> MemoryStore {
        MemoryStore {
            sessions: DashMap::new(),
            threads: DashMap::new(),
            limits,
        }
    }

    fn expired(&self, running: bool, used: Instant, now: Instant) -> bool {
        !running && now.duration_since(used) > self.limits.idle_timeout
    }

    fn idle(&self, entry: &Entry, now: Instant) -> bool {
        self.expired(entry.running, entry.used, now)
    }

    fn sweep(&self) {
        let now = Instant::now();
        self.sessions.retain(|_, e| !self.idle(e, now));
    }

    fn sweep_threads(&self) {
        let now = Instant::now();
        self.threads
            .retain(|_, e| !self.expired(e.running, e.used, now));
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn limits(&self) -> SessionLimits {
        self.limits
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        if self.sessions.len() >= self.limits.max_sessions {
            self.sweep();
            if self.sessions.len() >= self.limits.max_sessions {
                return Err(StoreError::Full(self.limits.max_sessions));
            }
        }
        self.sessions.insert(
            session.id.clone(),
            Entry {
                session,
                running: false,
                used: Instant::now(),
            },
        );
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<Session>, StoreError> {
        let now = Instant::now();
        let Some(mut entry) = self.sessions.get_mut(id) else {
            return Ok(None);
        };
        if self.idle(&entry, now) {
            drop(entry);
            self.sessions.remove(id);
            return Ok(None);
        }
        entry.used = now;
        Ok(Some(entry.session.clone()))
    }

    async fn config(&self, id: &str) -> Result<Option<SessionConfig>, StoreError> {
        let Some(entry) = self.sessions.get(id) else {
            return Ok(None);
        };
        Ok((!self.idle(&entry, Instant::now())).then(|| entry.session.config.clone()))
    }

    async fn list(
        &self,
        face: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        self.sweep();
        let mut ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|e| e.session.config.face == face && after.is_none_or(|a| e.key().as_str() > a))
            .map(|e| e.key().clone())
            .collect();
        ids.sort_unstable();
        let more = ids.len() > limit;
        let page = ids
            .iter()
            .take(limit)
            .filter_map(|id| self.sessions.get(id).map(|e| e.session.clone()))
            .collect();
        Ok((page, more))
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.sessions.remove(id).is_some())
    }

    async fn begin_turn(&self, id: &str) -> Result<Session, StoreError> {
        let now = Instant::now();
        let mut entry = self.sessions.get_mut(id).ok_or(StoreError::NotFound)?;
        if self.idle(&entry, now) {
            drop(entry);
            self.sessions.remove(id);
            return Err(StoreError::NotFound);
        }
        if entry.running {
            return Err(StoreError::Busy);
        }
        entry.running = true;
        entry.used = now;
        Ok(entry.session.clone())
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        // A session deleted while its turn ran stays deleted.
        let Some(mut entry) = self.sessions.get_mut(id) else {
            return Ok(());
        };
        entry.running = false;
        entry.used = Instant::now();
        if let Some(c) = commit {
            entry.session.config = c.config;
            entry.session.history = c.history;
            entry.session.state = c.state;
            entry.session.pending = c.pending;
        }
        Ok(())
    }

    async fn begin_thread(&self, key: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let now = Instant::now();
        if !self.threads.contains_key(key) && self.threads.len() >= self.limits.max_sessions {
            self.sweep_threads();
            if self.threads.len() >= self.limits.max_sessions {
                return Err(StoreError::Full(self.limits.max_sessions));
            }
        }
        let mut entry = self.threads.entry(key.to_owned()).or_insert(ThreadEntry {
            record: None,
            running: false,
            used: now,
        });
        if entry.running {
            return Err(StoreError::Busy);
        }
        if self.expired(entry.running, entry.used, now) {
            entry.record = None;
        }
        entry.running = true;
        entry.used = now;
        Ok(entry.record.clone())
    }

    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        let mut entry = self.threads.get_mut(key).ok_or(StoreError::NotFound)?;
        entry.record = Some(record);
        entry.used = Instant::now();
        Ok(())
    }

    async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        let Some(mut entry) = self.threads.get_mut(key) else {
            return Ok(());
        };
        entry.running = false;
        entry.used = Instant::now();
        if entry.record.is_none() {
            // A run that never reached the agent leaves nothing behind.
            drop(entry);
            self.threads
                .remove_if(key, |_, e| !e.running && e.record.is_none());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::new_session_id;

    /// Creates a session of `face` and returns its id.
    async fn add(s: &MemoryStore, face: &str) -> Result<String, StoreError> {
        let id = new_session_id();
        s.create(Session {
            id: id.clone(),
            config: config(face),
            ..Session::default()
        })
        .await?;
        Ok(id)
    }

    fn config(face: &str) -> SessionConfig {
        SessionConfig {
            face: face.into(),
            agent: "a".into(),
            ..SessionConfig::default()
        }
    }

    fn store(max_sessions: usize, idle: Duration) -> std::sync::Arc<MemoryStore> {
        std::sync::Arc::new(MemoryStore::new(SessionLimits {
            max_sessions,
            idle_timeout: idle,
            ..SessionLimits::default()
        }))
    }

    #[tokio::test]
    async fn ids_are_url_safe_and_unique() {
        let s = store(10, Duration::from_secs(60));
        let a = add(&s, "/").await.unwrap();
        let b = add(&s, "/").await.unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 5 + 32);
        assert!(a[5..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[tokio::test]
    async fn full_store_refuses_then_accepts_after_delete() {
        let s = store(2, Duration::from_secs(60));
        let a = add(&s, "/").await.unwrap();
        add(&s, "/").await.unwrap();
        assert_eq!(add(&s, "/").await, Err(StoreError::Full(2)));
        assert!(s.delete(&a).await.unwrap());
        assert!(!s.delete(&a).await.unwrap());
        assert!(add(&s, "/").await.is_ok());
    }

    #[tokio::test]
    async fn list_pages_in_id_order_per_face() {
        let s = store(100, Duration::from_secs(60));
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(add(&s, "/a").await.unwrap());
        }
        add(&s, "/b").await.unwrap();
        ids.sort();
        let (page, more) = s.list("/a", None, 2).await.unwrap();
        assert!(more);
        assert_eq!(
            page.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
            ids[..2]
        );
        let (page, more) = s.list("/a", Some(&ids[1]), 2).await.unwrap();
        assert!(more);
        assert_eq!(page[0].id, ids[2]);
        let (page, more) = s.list("/a", Some(&ids[3]), 2).await.unwrap();
        assert!(!more);
        assert_eq!(page.len(), 1);
    }

    #[tokio::test]
    async fn one_turn_at_a_time_and_an_uncommitted_end_changes_nothing() {
        let s = store(10, Duration::from_secs(60));
        let id = add(&s, "/").await.unwrap();
        s.begin_turn(&id).await.unwrap();
        assert_eq!(s.begin_turn(&id).await.err(), Some(StoreError::Busy));
        s.end_turn(&id, None).await.unwrap();
        let session = s.begin_turn(&id).await.unwrap();
        let mut next = config("/");
        next.agent = "changed".into();
        s.end_turn(
            &id,
            Some(TurnCommit {
                config: next,
                history: session.history,
                state: Some(serde_json::json!({"n": 1})),
                pending: Vec::new(),
            }),
        )
        .await
        .unwrap();
        let after = s.get(&id).await.unwrap().unwrap();
        assert_eq!(after.config.agent, "changed");
        assert_eq!(after.state, Some(serde_json::json!({"n": 1})));
    }

    #[tokio::test]
    async fn idle_sessions_expire() {
        let s = store(10, Duration::from_millis(1));
        let id = add(&s, "/").await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.get(&id).await.unwrap().is_none());
        assert_eq!(s.begin_turn(&id).await.err(), Some(StoreError::NotFound));
    }
}
