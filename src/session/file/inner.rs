//! The file store's operations, each a blocking whole: the database's transaction and the
//! update of the index that goes with it, run by [`super::FileStore`] on a blocking thread. The
//! marks a caller is handed are taken apart ([`Inner::mark_turn`], [`Inner::mark_thread`]), in
//! the caller's own poll.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::db::Db;
use super::index::{Index, SessionEntry, ThreadEntry};
use crate::event::history_bytes;
use crate::session::backend::OpenError;
use crate::session::{
    Principal, Session, SessionConfig, SessionLimits, StoreError, ThreadRecord, TurnCommit,
};

/// The database file in the store's directory.
pub(super) const DATABASE_FILE: &str = "sessions.redb";

/// How often a write sweeps idle entries out, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The store's state, shared with its blocking calls.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) db: Db,
    index: Mutex<Index>,
    pub(super) limits: SessionLimits,
}

/// Now, in Unix milliseconds (0 for a clock before 1970).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a thread's look-up found, before its run is marked.
pub(super) enum Seen {
    /// No record: the run makes one.
    New,
    /// The record as of `version`.
    Stored(Option<Box<ThreadRecord>>, u64),
}

impl Inner {
    pub(super) fn open(dir: PathBuf, limits: SessionLimits) -> Result<Inner, OpenError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|e| OpenError::File {
            path: dir.clone(),
            reason: format!("cannot create the directory: {e}"),
        })?;
        let file = dir.join(DATABASE_FILE);
        // Options hold secrets: the file is the gateway's alone, whatever the directory allows.
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&file).map_err(|e| OpenError::File {
            path: dir.clone(),
            reason: format!("cannot create {DATABASE_FILE}: {e}"),
        })?;
        let (db, found) = Db::open(&file)?;

        let (now, now_ms) = (Instant::now(), now_ms());
        let idle = limits.idle_timeout;
        // Last use, as an instant of this process: the age since the last write. A clock set
        // back makes the age 0; an age older than this boot restarts the clock.
        let used = |used_ms: u64| {
            let age = Duration::from_millis(now_ms.saturating_sub(used_ms));
            (age > idle, now.checked_sub(age).unwrap_or(now))
        };
        let mut index = Index::new();
        let (mut expired, mut expired_threads) = (Vec::new(), Vec::new());
        for (id, row) in found.sessions {
            let (gone, used) = used(row.used_ms);
            if gone {
                expired.push(id);
                continue;
            }
            let entry = SessionEntry {
                owner: row.owner,
                face: row.config.face,
                len: usize::try_from(row.len).unwrap_or(usize::MAX),
                bytes: usize::try_from(row.bytes).unwrap_or(usize::MAX),
                input: 0,
                running: false,
                used,
                version: 0,
            };
            index.insert(id, entry, false);
        }
        for (key, row) in found.threads {
            let (gone, used) = used(row.used_ms);
            if gone {
                expired_threads.push(key);
                continue;
            }
            let entry = ThreadEntry {
                owner: row.owner,
                saved: true,
                running: false,
                used,
                version: 0,
            };
            index.insert_thread(key, entry);
        }
        if !expired.is_empty() || !expired_threads.is_empty() {
            db.remove(&expired, &expired_threads, Some(now_ms))
                .map_err(|e| OpenError::File {
                    path: dir.clone(),
                    reason: format!("cannot delete the expired sessions: {e}"),
                })?;
        }
        tracing::info!(
            path = %dir.display(),
            sessions = index.sessions.len(),
            thread_records = index.threads.len(),
            expired = expired.len() + expired_threads.len(),
            "session database open"
        );
        Ok(Inner {
            db,
            index: Mutex::new(index),
            limits,
        })
    }

    pub(super) fn index(&self) -> MutexGuard<'_, Index> {
        // Every update of the index is complete before its guard drops; a panic cannot leave
        // half of one behind.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Deletes every idle session and thread record, from the database and then the index.
    fn sweep(&self) -> Result<(), StoreError> {
        let (now, written_before) = (Instant::now(), now_ms());
        let (sessions, threads) = {
            let mut index = self.index();
            index.swept = now;
            index.idle(now, &self.limits)
        };
        if sessions.is_empty() && threads.is_empty() {
            return Ok(());
        }
        self.db.remove(&sessions, &threads, Some(written_before))?;
        // Idle at `now` is idle for good: whatever revives an entry checks it is not idle first.
        let mut index = self.index();
        for id in &sessions {
            index.remove_if(id, |e| e.idle(now, &self.limits));
        }
        for key in &threads {
            index.remove_thread_if(key, |e| e.idle(now, &self.limits));
        }
        tracing::debug!(
            sessions = sessions.len(),
            thread_records = threads.len(),
            "idle sessions swept out"
        );
        Ok(())
    }

    /// [`Inner::sweep`] when the last one is [`SWEEP_EVERY`] old; a failure is only logged (the
    /// write that asked goes on).
    fn sweep_now_and_then(&self) {
        let due = self.index().swept.elapsed() >= SWEEP_EVERY.min(self.limits.idle_timeout);
        if due {
            if let Err(error) = self.sweep() {
                tracing::warn!(%error, "could not sweep idle sessions out");
            }
        }
    }

    /// Deletes session `id`, found idle at `now`.
    fn expire(&self, id: &str, now: Instant) -> Result<(), StoreError> {
        self.db.remove(&[id.to_owned()], &[], Some(now_ms()))?;
        self.index().remove_if(id, |e| e.idle(now, &self.limits));
        Ok(())
    }

    /// Deletes thread record `key`, found idle at `now`.
    fn expire_thread(&self, key: &str, now: Instant) -> Result<(), StoreError> {
        self.db.remove(&[], &[key.to_owned()], Some(now_ms()))?;
        self.index()
            .remove_thread_if(key, |e| e.idle(now, &self.limits));
        Ok(())
    }

    pub(super) fn create(&self, session: Session) -> Result<(), StoreError> {
        self.sweep_now_and_then();
        let bytes = history_bytes(&session.history);
        let admitted = self.index().admit(&session.owner, bytes, &self.limits);
        if admitted.is_err() {
            self.sweep()?;
            self.index().admit(&session.owner, bytes, &self.limits)?;
        }
        if let Err(e) = self.db.insert(&session, bytes, now_ms()) {
            self.index().unadmit(&session.owner, bytes);
            return Err(e);
        }
        let entry = SessionEntry {
            owner: session.owner,
            face: session.config.face,
            len: session.history.len(),
            bytes,
            input: 0,
            running: false,
            used: Instant::now(),
            version: 0,
        };
        self.index().insert(session.id, entry, true);
        Ok(())
    }

    /// Whether `owner` sees session `id`: `None` when not, else whether it is idle (refreshing
    /// its last use when `touch` and it is not).
    fn visible(&self, id: &str, owner: &Principal, now: Instant, touch: bool) -> Option<bool> {
        let mut index = self.index();
        let entry = index.sessions.get_mut(id).filter(|e| e.owner == *owner)?;
        let idle = entry.idle(now, &self.limits);
        if touch && !idle {
            entry.used = now;
        }
        Some(idle)
    }

    pub(super) fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        let now = Instant::now();
        match self.visible(id, owner, now, true) {
            None => Ok(None),
            Some(true) => {
                self.expire(id, now)?;
                Ok(None)
            }
            Some(false) => Ok(self.db.sessions(&[id.to_owned()])?.pop()),
        }
    }

    pub(super) fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        match self.visible(id, owner, Instant::now(), false) {
            Some(false) => self.db.config(id),
            _ => Ok(None),
        }
    }

    pub(super) fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        if let Err(error) = self.sweep() {
            tracing::warn!(%error, "could not sweep idle sessions out");
        }
        let now = Instant::now();
        let mut ids: Vec<String> = {
            let index = self.index();
            let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            index
                .sessions
                .range::<str, _>((from, std::ops::Bound::Unbounded))
                .filter(|(_, e)| e.owner == *owner && e.face == face && !e.idle(now, &self.limits))
                .map(|(id, _)| id.clone())
                .take(limit.saturating_add(1))
                .collect()
        };
        let more = ids.len() > limit;
        ids.truncate(limit);
        Ok((self.db.sessions(&ids)?, more))
    }

    pub(super) fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        if self.visible(id, owner, Instant::now(), false).is_none() {
            return Ok(false);
        }
        let removed = self.db.remove(&[id.to_owned()], &[], None)?;
        self.index().remove_if(id, |e| e.owner == *owner);
        Ok(removed > 0)
    }

    /// Session `id` as stored, and the version it was read at, for a turn to mark.
    pub(super) fn read_for_turn(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<(Session, u64), StoreError> {
        let now = Instant::now();
        let version = {
            let index = self.index();
            let entry = index
                .sessions
                .get(id)
                .filter(|e| e.owner == *owner)
                .ok_or(StoreError::NotFound)?;
            if entry.running {
                return Err(StoreError::Busy);
            }
            (!entry.idle(now, &self.limits)).then_some(entry.version)
        };
        let Some(version) = version else {
            self.expire(id, now)?;
            return Err(StoreError::NotFound);
        };
        let session = self.db.sessions(&[id.to_owned()])?.pop();
        Ok((session.ok_or(StoreError::NotFound)?, version))
    }

    /// Marks a turn running on session `id`, read at `version`; `None` when a write overtook
    /// the read.
    pub(super) fn mark_turn(
        &self,
        id: &str,
        owner: &Principal,
        version: u64,
    ) -> Option<Result<(), StoreError>> {
        let now = Instant::now();
        let mut index = self.index();
        let Some(entry) = index.sessions.get_mut(id).filter(|e| e.owner == *owner) else {
            return Some(Err(StoreError::NotFound));
        };
        if entry.running {
            return Some(Err(StoreError::Busy));
        }
        if entry.idle(now, &self.limits) {
            return Some(Err(StoreError::NotFound));
        }
        if entry.version != version {
            return None;
        }
        entry.running = true;
        entry.used = now;
        Some(Ok(()))
    }

    pub(super) fn end_turn(&self, id: &str, commit: TurnCommit) -> Result<(), StoreError> {
        // A session deleted while its turn ran stays deleted (its deletion returned the charge).
        let Some((owner, stored)) = self
            .index()
            .sessions
            .get(id)
            .map(|e| (e.owner.clone(), e.len))
        else {
            return Ok(());
        };
        let (len, bytes) = (commit.history.len(), history_bytes(&commit.history));
        let kept = commit.kept.min(stored);
        let written = self
            .db
            .commit_turn(id, &owner, commit, kept, bytes, now_ms());
        // The mark ends whatever the write did: a failed write leaves the session as it was
        // last written, free for the next turn.
        let wrote = matches!(written, Ok(true)).then_some((len, bytes));
        self.index().end_turn(id, wrote, Instant::now());
        written.map(|_| ())
    }

    /// Thread `key`'s record as stored, for a run of `owner` to mark.
    pub(super) fn look_up_thread(&self, key: &str, owner: &Principal) -> Result<Seen, StoreError> {
        let now = Instant::now();
        let found = {
            let index = self.index();
            match index.threads.get(key) {
                Some(e) if e.running => return Err(StoreError::Busy),
                Some(e) if e.idle(now, &self.limits) => Some(None),
                Some(e) => Some(Some((e.saved, e.version))),
                None => None,
            }
        };
        match found {
            Some(Some((saved, version))) => {
                let record = if saved { self.db.thread(key)? } else { None };
                let record = record.map(Box::new);
                return Ok(Seen::Stored(record, version));
            }
            // An expired record is dropped; the run starts the thread anew.
            Some(None) => self.expire_thread(key, now)?,
            None => {}
        }
        self.sweep_now_and_then();
        if self.index().room_for_thread(owner, &self.limits).is_err() {
            self.sweep()?;
        }
        Ok(Seen::New)
    }

    /// Marks a run of thread `key` as `seen`; `None` when the thread changed since.
    pub(super) fn mark_thread(
        &self,
        key: &str,
        owner: &Principal,
        seen: Seen,
    ) -> Option<Result<Option<ThreadRecord>, StoreError>> {
        let now = Instant::now();
        let mut index = self.index();
        match (index.threads.get_mut(key), seen) {
            (Some(e), _) if e.running => Some(Err(StoreError::Busy)),
            (Some(e), Seen::Stored(record, version))
                if e.version == version && !e.idle(now, &self.limits) =>
            {
                e.running = true;
                e.used = now;
                Some(Ok(record.map(|r| *r)))
            }
            (None, Seen::New) => {
                if let Err(e) = index.room_for_thread(owner, &self.limits) {
                    return Some(Err(e));
                }
                let entry = ThreadEntry {
                    owner: owner.clone(),
                    saved: false,
                    running: true,
                    used: now,
                    version: 0,
                };
                index.insert_thread(key.to_owned(), entry);
                Some(Ok(None))
            }
            _ => None,
        }
    }

    pub(super) fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        let owner = self
            .index()
            .threads
            .get(key)
            .map(|e| e.owner.clone())
            .ok_or(StoreError::NotFound)?;
        self.db.save_thread(key, &owner, record, now_ms())?;
        if let Some(entry) = self.index().threads.get_mut(key) {
            entry.saved = true;
            entry.used = Instant::now();
            entry.version += 1;
        }
        Ok(())
    }
}
