//! The in-memory store: dashmaps of sessions and of thread records, each entry with its running
//! flag and last use, and the usage the quotas and the byte budget are checked against (see the
//! module docs of `session`).
//!
//! Expiry is lazy: an idle session is dropped when it is next looked at, and a creation refused
//! for a quota or the budget sweeps the idle ones and tries once more, so dead sessions never
//! hold a limit. Whoever removes an entry returns its charge, once: removal goes through the
//! map, which hands the entry to one caller only.
//!
//! Locks: a map's shard may be held while taking `usage`, never the other way round.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use dashmap::DashMap;

use super::usage::{Held, Usage};
use super::{
    Principal, Session, SessionConfig, SessionLimits, Store, StoreCounts, StoreError, ThreadRecord,
    TurnCommit,
};
use crate::event::history_bytes;

#[derive(Debug)]
struct Entry {
    session: Session,
    running: bool,
    used: Instant,
    /// Bytes charged for the stored history.
    bytes: usize,
    /// Bytes charged for the input of the running turn.
    input: usize,
}

#[derive(Debug)]
struct ThreadEntry {
    owner: Principal,
    record: Option<ThreadRecord>,
    running: bool,
    used: Instant,
}

/// See the module docs.
#[derive(Debug)]
pub struct MemoryStore {
    sessions: DashMap<String, Entry>,
    threads: DashMap<String, ThreadEntry>,
    /// Thread records held per owner (`max_sessions_per_principal`).
    thread_owners: Mutex<HashMap<Principal, usize>>,
    usage: Mutex<Usage>,
    limits: SessionLimits,
}

impl MemoryStore {
    pub fn new(limits: SessionLimits) -> MemoryStore {
        MemoryStore {
            sessions: DashMap::new(),
            threads: DashMap::new(),
            thread_owners: Mutex::new(HashMap::new()),
            usage: Mutex::new(Usage::default()),
            limits,
        }
    }

    fn usage(&self) -> MutexGuard<'_, Usage> {
        // Every update of `Usage` is complete before its guard drops; a panic cannot leave
        // half of one behind.
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expired(&self, running: bool, used: Instant, now: Instant) -> bool {
        !running && now.duration_since(used) > self.limits.idle_timeout
    }

    fn idle(&self, entry: &Entry, now: Instant) -> bool {
        self.expired(entry.running, entry.used, now)
    }

    /// Counts a new session of `owner` holding `bytes`, unless a quota or the budget refuses it.
    fn admit(&self, owner: &Principal, bytes: usize) -> Result<(), StoreError> {
        let limits = &self.limits;
        let mut usage = self.usage();
        if usage.of(owner).sessions >= limits.max_sessions_per_principal {
            return Err(StoreError::PrincipalFull(limits.max_sessions_per_principal));
        }
        if usage.total.sessions >= limits.max_sessions {
            return Err(StoreError::Full(limits.max_sessions));
        }
        usage.room_for(owner, bytes, limits)?;
        let add = Held { sessions: 1, bytes };
        usage.update(owner, add, Held::default());
        Ok(())
    }

    /// Returns the charge of a removed entry.
    fn release(&self, entry: &Entry) {
        let sub = Held {
            sessions: 1,
            bytes: entry.bytes + entry.input,
        };
        self.usage()
            .update(&entry.session.owner, Held::default(), sub);
    }

    /// Removes session `id` if `remove` says so, returning its charge.
    fn remove_if(&self, id: &str, remove: impl FnOnce(&Entry) -> bool) -> bool {
        match self.sessions.remove_if(id, |_, e| remove(e)) {
            Some((_, entry)) => {
                self.release(&entry);
                true
            }
            None => false,
        }
    }

    fn sweep(&self) {
        let now = Instant::now();
        self.sessions.retain(|_, e| {
            let idle = self.idle(e, now);
            if idle {
                self.release(e);
            }
            !idle
        });
    }

    fn thread_owners(&self) -> MutexGuard<'_, HashMap<Principal, usize>> {
        // Every update is one complete count change.
        self.thread_owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One thread record of `owner` is gone.
    fn release_thread(&self, owner: &Principal) {
        let mut owners = self.thread_owners();
        if let Some(count) = owners.get_mut(owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                owners.remove(owner);
            }
        }
    }

    fn sweep_threads(&self) {
        let now = Instant::now();
        self.threads.retain(|_, e| {
            let expired = self.expired(e.running, e.used, now);
            if expired {
                self.release_thread(&e.owner);
            }
            !expired
        });
    }

    /// Room for a new thread record of `owner`: under its share and the gateway's cap.
    fn room_for_thread(&self, owner: &Principal) -> Result<(), StoreError> {
        let per_owner = self.thread_owners().get(owner).copied().unwrap_or(0);
        if per_owner >= self.limits.max_sessions_per_principal {
            return Err(StoreError::PrincipalFull(
                self.limits.max_sessions_per_principal,
            ));
        }
        if self.threads.len() >= self.limits.max_sessions {
            return Err(StoreError::Full(self.limits.max_sessions));
        }
        Ok(())
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn limits(&self) -> SessionLimits {
        self.limits
    }

    fn counts(&self) -> StoreCounts {
        StoreCounts {
            sessions: self.sessions.len(),
            thread_records: self.threads.len(),
        }
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        let bytes = history_bytes(&session.history);
        if self.admit(&session.owner, bytes).is_err() {
            self.sweep();
            self.admit(&session.owner, bytes)?;
        }
        self.sessions.insert(
            session.id.clone(),
            Entry {
                session,
                running: false,
                used: Instant::now(),
                bytes,
                input: 0,
            },
        );
        Ok(())
    }

    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        let now = Instant::now();
        let Some(mut entry) = self.sessions.get_mut(id) else {
            return Ok(None);
        };
        if entry.session.owner != *owner {
            return Ok(None);
        }
        if self.idle(&entry, now) {
            drop(entry);
            self.remove_if(id, |e| self.idle(e, now));
            return Ok(None);
        }
        entry.used = now;
        Ok(Some(entry.session.clone()))
    }

    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        let Some(entry) = self.sessions.get(id) else {
            return Ok(None);
        };
        let visible = entry.session.owner == *owner && !self.idle(&entry, Instant::now());
        Ok(visible.then(|| entry.session.config.clone()))
    }

    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        self.sweep();
        let mut ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|e| {
                e.session.owner == *owner
                    && e.session.config.face == face
                    && after.is_none_or(|a| e.key().as_str() > a)
            })
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

    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        Ok(self.remove_if(id, |e| e.session.owner == *owner))
    }

    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
        let now = Instant::now();
        let mut entry = self
            .sessions
            .get_mut(id)
            .filter(|e| e.session.owner == *owner)
            .ok_or(StoreError::NotFound)?;
        if self.idle(&entry, now) {
            drop(entry);
            self.remove_if(id, |e| self.idle(e, now));
            return Err(StoreError::NotFound);
        }
        if entry.running {
            return Err(StoreError::Busy);
        }
        entry.running = true;
        entry.used = now;
        Ok(entry.session.clone())
    }

    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        let mut entry = self
            .sessions
            .get_mut(id)
            .filter(|e| e.running)
            .ok_or(StoreError::NotFound)?;
        let mut usage = self.usage();
        usage.room_for(&entry.session.owner, bytes, &self.limits)?;
        let add = Held { sessions: 0, bytes };
        usage.update(&entry.session.owner, add, Held::default());
        entry.input += bytes;
        Ok(())
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        // A session deleted while its turn ran stays deleted (its deletion returned the charge).
        let Some(mut entry) = self.sessions.get_mut(id) else {
            return Ok(());
        };
        entry.running = false;
        entry.used = Instant::now();
        let before = entry.bytes + std::mem::take(&mut entry.input);
        if let Some(c) = commit {
            entry.bytes = history_bytes(&c.history);
            entry.session.config = c.config;
            entry.session.history = c.history;
            entry.session.state = c.state;
            entry.session.pending = c.pending;
        }
        let (add, sub) = (
            Held {
                sessions: 0,
                bytes: entry.bytes,
            },
            Held {
                sessions: 0,
                bytes: before,
            },
        );
        self.usage().update(&entry.session.owner, add, sub);
        Ok(())
    }

    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        let now = Instant::now();
        if !self.threads.contains_key(key) && self.room_for_thread(owner).is_err() {
            self.sweep_threads();
            self.room_for_thread(owner)?;
        }
        let mut entry = self.threads.entry(key.to_owned()).or_insert_with(|| {
            *self.thread_owners().entry(owner.clone()).or_insert(0) += 1;
            ThreadEntry {
                owner: owner.clone(),
                record: None,
                running: false,
                used: now,
            }
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
            if let Some((_, gone)) = self
                .threads
                .remove_if(key, |_, e| !e.running && e.record.is_none())
            {
                self.release_thread(&gone.owner);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
