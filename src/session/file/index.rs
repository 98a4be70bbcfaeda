//! What the file store keeps in memory of what its database holds: per session and per thread
//! record, its owner and the marks and clocks the database does not hold, and the usage the
//! quotas and the byte budget are checked against. Built at open from the rows, kept up to date
//! by every operation under one lock that is never held across I/O. Histories and records stay
//! on disk.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::super::usage::{Held, Usage};
use super::super::{Principal, SessionLimits, StoreError};

/// A stored session.
#[derive(Debug)]
pub(super) struct SessionEntry {
    pub(super) owner: Principal,
    /// The face that created it (sessions are listed per face).
    pub(super) face: String,
    /// Messages of its stored history.
    pub(super) len: usize,
    /// Bytes charged for the stored history.
    pub(super) bytes: usize,
    /// Bytes charged for the input of the running turn.
    pub(super) input: usize,
    pub(super) running: bool,
    pub(super) used: Instant,
    /// Counts the writes of the session: a read made before one is stale.
    pub(super) version: u64,
}

/// A thread record, stored or being made by its first run.
#[derive(Debug)]
pub(super) struct ThreadEntry {
    pub(super) owner: Principal,
    /// Whether the database holds its record.
    pub(super) saved: bool,
    pub(super) running: bool,
    pub(super) used: Instant,
    /// Counts the writes of the record: a read made before one is stale.
    pub(super) version: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Index {
    /// In id order, the order of `GET /sessions`.
    pub(super) sessions: BTreeMap<String, SessionEntry>,
    pub(super) threads: HashMap<String, ThreadEntry>,
    pub(super) usage: Usage,
    /// Thread records held per owner (`max_sessions_per_principal`).
    pub(super) thread_owners: HashMap<Principal, usize>,
    /// When idle entries were last swept out.
    pub(super) swept: Instant,
}

/// Whether an entry last used at `used` has expired by `now`: never while it runs.
pub(super) fn expired(running: bool, used: Instant, now: Instant, idle: Duration) -> bool {
    !running && now.saturating_duration_since(used) > idle
}

impl SessionEntry {
    pub(super) fn idle(&self, now: Instant, limits: &SessionLimits) -> bool {
        expired(self.running, self.used, now, limits.idle_timeout)
    }
}

impl ThreadEntry {
    pub(super) fn idle(&self, now: Instant, limits: &SessionLimits) -> bool {
        expired(self.running, self.used, now, limits.idle_timeout)
    }
}

impl Index {
    pub(super) fn new() -> Index {
        Index {
            sessions: BTreeMap::new(),
            threads: HashMap::new(),
            usage: Usage::default(),
            thread_owners: HashMap::new(),
            swept: Instant::now(),
        }
    }

    /// Counts a new session of `owner` holding `bytes`, unless a quota or the budget refuses it.
    pub(super) fn admit(
        &mut self,
        owner: &Principal,
        bytes: usize,
        limits: &SessionLimits,
    ) -> Result<(), StoreError> {
        if self.usage.of(owner).sessions >= limits.max_sessions_per_principal {
            return Err(StoreError::PrincipalFull(limits.max_sessions_per_principal));
        }
        if self.usage.total.sessions >= limits.max_sessions {
            return Err(StoreError::Full(limits.max_sessions));
        }
        self.usage.room_for(owner, bytes, limits)?;
        self.usage
            .update(owner, Held { sessions: 1, bytes }, Held::default());
        Ok(())
    }

    /// Gives back what [`Index::admit`] counted, for a session that was not stored after all.
    pub(super) fn unadmit(&mut self, owner: &Principal, bytes: usize) {
        self.usage
            .update(owner, Held::default(), Held { sessions: 1, bytes });
    }

    /// Adds a stored session, counted by [`Index::admit`] (or, at open, `counted` false: counts
    /// it now, whatever the limits say, since it is already stored).
    pub(super) fn insert(&mut self, id: String, entry: SessionEntry, counted: bool) {
        if !counted {
            let add = Held {
                sessions: 1,
                bytes: entry.bytes,
            };
            self.usage.update(&entry.owner, add, Held::default());
        }
        if let Some(old) = self.sessions.insert(id, entry) {
            // Only a reused id gets here; its charge goes with it.
            self.release(&old);
        }
    }

    /// Removes session `id` if `remove` says so, returning its charge.
    pub(super) fn remove_if(&mut self, id: &str, remove: impl FnOnce(&SessionEntry) -> bool) {
        if self.sessions.get(id).is_some_and(remove) {
            if let Some(entry) = self.sessions.remove(id) {
                self.release(&entry);
            }
        }
    }

    fn release(&mut self, entry: &SessionEntry) {
        let sub = Held {
            sessions: 1,
            bytes: entry.bytes + entry.input,
        };
        self.usage.update(&entry.owner, Held::default(), sub);
    }

    /// Charges `bytes` of input to the turn running on `id`.
    pub(super) fn charge(
        &mut self,
        id: &str,
        bytes: usize,
        limits: &SessionLimits,
    ) -> Result<(), StoreError> {
        let entry = self
            .sessions
            .get_mut(id)
            .filter(|e| e.running)
            .ok_or(StoreError::NotFound)?;
        self.usage.room_for(&entry.owner, bytes, limits)?;
        let add = Held { sessions: 0, bytes };
        self.usage.update(&entry.owner, add, Held::default());
        entry.input += bytes;
        Ok(())
    }

    /// Ends the turn running on `id`; `written`, when the turn wrote a history of `len`
    /// messages and `bytes` bytes back, charges those instead of the former ones.
    pub(super) fn end_turn(&mut self, id: &str, written: Option<(usize, usize)>, now: Instant) {
        let Some(entry) = self.sessions.get_mut(id) else {
            return;
        };
        entry.running = false;
        entry.used = now;
        let before = entry.bytes + std::mem::take(&mut entry.input);
        if let Some((len, bytes)) = written {
            entry.len = len;
            entry.bytes = bytes;
            entry.version += 1;
        }
        let owner = entry.owner.clone();
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
        self.usage.update(&owner, add, sub);
    }

    /// Room for a new thread record of `owner`: under its share and the gateway's cap.
    pub(super) fn room_for_thread(
        &self,
        owner: &Principal,
        limits: &SessionLimits,
    ) -> Result<(), StoreError> {
        let per_owner = self.thread_owners.get(owner).copied().unwrap_or(0);
        if per_owner >= limits.max_sessions_per_principal {
            return Err(StoreError::PrincipalFull(limits.max_sessions_per_principal));
        }
        if self.threads.len() >= limits.max_sessions {
            return Err(StoreError::Full(limits.max_sessions));
        }
        Ok(())
    }

    /// Adds thread record `key`.
    pub(super) fn insert_thread(&mut self, key: String, entry: ThreadEntry) {
        *self.thread_owners.entry(entry.owner.clone()).or_insert(0) += 1;
        if let Some(old) = self.threads.insert(key, entry) {
            self.release_thread(&old.owner);
        }
    }

    /// Removes thread record `key` if `remove` says so.
    pub(super) fn remove_thread_if(
        &mut self,
        key: &str,
        remove: impl FnOnce(&ThreadEntry) -> bool,
    ) {
        if self.threads.get(key).is_some_and(remove) {
            if let Some(entry) = self.threads.remove(key) {
                self.release_thread(&entry.owner);
            }
        }
    }

    /// One thread record of `owner` is gone.
    fn release_thread(&mut self, owner: &Principal) {
        if let Some(count) = self.thread_owners.get_mut(owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.thread_owners.remove(owner);
            }
        }
    }

    /// Sessions and thread records that have expired by `now`.
    pub(super) fn idle(&self, now: Instant, limits: &SessionLimits) -> (Vec<String>, Vec<String>) {
        let sessions = self
            .sessions
            .iter()
            .filter(|(_, e)| e.idle(now, limits))
            .map(|(id, _)| id.clone())
            .collect();
        let threads = self
            .threads
            .iter()
            .filter(|(_, e)| e.idle(now, limits))
            .map(|(key, _)| key.clone())
            .collect();
        (sessions, threads)
    }
}
