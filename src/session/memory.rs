//! The in-memory store: dashmaps of sessions and of thread records, each entry with its running
//! flag and last use.
//! Expiry is lazy: an idle session is dropped when it is next looked at, and every creation
//! and listing sweeps the idle ones first, so the count never holds dead sessions at the limit.

use std::time::Instant;

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

impl Store for MemoryStore {
    fn limits(&self) -> SessionLimits {
        self.limits
    }

    fn create(&self, session: Session) -> Result<(), StoreError> {
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

    fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut entry = self.sessions.get_mut(id)?;
        if self.idle(&entry, now) {
            drop(entry);
            self.sessions.remove(id);
            return None;
        }
        entry.used = now;
        Some(entry.session.clone())
    }

    fn config(&self, id: &str) -> Option<SessionConfig> {
        let entry = self.sessions.get(id)?;
        (!self.idle(&entry, Instant::now())).then(|| entry.session.config.clone())
    }

    fn list(&self, face: &str, after: Option<&str>, limit: usize) -> (Vec<Session>, bool) {
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
        (page, more)
    }

    fn delete(&self, id: &str) -> bool {
        self.sessions.remove(id).is_some()
    }

    fn begin_turn(&self, id: &str) -> Result<Session, StoreError> {
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

    fn end_turn(&self, id: &str, commit: Option<TurnCommit>) {
        // A session deleted while its turn ran stays deleted.
        let Some(mut entry) = self.sessions.get_mut(id) else {
            return;
        };
        entry.running = false;
        entry.used = Instant::now();
        if let Some(c) = commit {
            entry.session.config = c.config;
            entry.session.history = c.history;
            entry.session.state = c.state;
            entry.session.pending = c.pending;
        }
    }

    fn begin_thread(&self, key: &str) -> Result<Option<ThreadRecord>, StoreError> {
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

    fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        let mut entry = self.threads.get_mut(key).ok_or(StoreError::NotFound)?;
        entry.record = Some(record);
        entry.used = Instant::now();
        Ok(())
    }

    fn end_thread(&self, key: &str) {
        let Some(mut entry) = self.threads.get_mut(key) else {
            return;
        };
        entry.running = false;
        entry.used = Instant::now();
        if entry.record.is_none() {
            // A run that never reached the agent leaves nothing behind.
            drop(entry);
            self.threads
                .remove_if(key, |_, e| !e.running && e.record.is_none());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::{new_session_id, TurnLease};

    /// Creates a session of `face` and returns its id.
    fn add(s: &MemoryStore, face: &str) -> Result<String, StoreError> {
        let id = new_session_id();
        s.create(Session {
            id: id.clone(),
            config: config(face),
            ..Session::default()
        })?;
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

    #[test]
    fn ids_are_url_safe_and_unique() {
        let s = store(10, Duration::from_secs(60));
        let a = add(&s, "/").unwrap();
        let b = add(&s, "/").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 5 + 32);
        assert!(a[5..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn full_store_refuses_then_accepts_after_delete() {
        let s = store(2, Duration::from_secs(60));
        let a = add(&s, "/").unwrap();
        add(&s, "/").unwrap();
        assert_eq!(add(&s, "/"), Err(StoreError::Full(2)));
        assert!(s.delete(&a));
        assert!(!s.delete(&a));
        assert!(add(&s, "/").is_ok());
    }

    #[test]
    fn list_pages_in_id_order_per_face() {
        let s = store(100, Duration::from_secs(60));
        let mut ids: Vec<String> = (0..5).map(|_| add(&s, "/a").unwrap()).collect();
        add(&s, "/b").unwrap();
        ids.sort();
        let (page, more) = s.list("/a", None, 2);
        assert!(more);
        assert_eq!(
            page.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
            ids[..2]
        );
        let (page, more) = s.list("/a", Some(&ids[1]), 2);
        assert!(more);
        assert_eq!(page[0].id, ids[2]);
        let (page, more) = s.list("/a", Some(&ids[3]), 2);
        assert!(!more);
        assert_eq!(page.len(), 1);
    }

    #[test]
    fn one_turn_at_a_time_and_a_dropped_lease_changes_nothing() {
        let s = store(10, Duration::from_secs(60));
        let id = add(&s, "/").unwrap();
        let shared: std::sync::Arc<dyn Store> = s.clone();
        let (lease, _) = TurnLease::begin(shared.clone(), &id).unwrap();
        assert_eq!(
            TurnLease::begin(shared.clone(), &id).err(),
            Some(StoreError::Busy)
        );
        drop(lease);
        let (lease, session) = TurnLease::begin(shared.clone(), &id).unwrap();
        let mut next = config("/");
        next.agent = "changed".into();
        lease.commit(TurnCommit {
            config: next,
            history: session.history,
            state: Some(serde_json::json!({"n": 1})),
            pending: Vec::new(),
        });
        let after = s.get(&id).unwrap();
        assert_eq!(after.config.agent, "changed");
        assert_eq!(after.state, Some(serde_json::json!({"n": 1})));
    }

    #[test]
    fn idle_sessions_expire() {
        let s = store(10, Duration::from_millis(1));
        let id = add(&s, "/").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.get(&id).is_none());
        assert_eq!(s.begin_turn(&id).err(), Some(StoreError::NotFound));
    }
}
