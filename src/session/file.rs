//! The durable store of one gateway (`[sessions] store = "file"`): sessions, histories, thread
//! records and the quotas they count against survive a restart, `kill -9` included, in the
//! directory `path` (created 0700 when missing), in the embedded database `sessions.redb`
//! (created 0600: session options hold secrets).
//!
//! The database is redb: transactions, checksummed copy-on-write pages and file locking are
//! what a hand-written log would have to get right, and redb gets them right. Its tables and
//! every transaction are in [`db`]; what this process keeps in memory is in [`index`]; each
//! operation, the transaction and the index's update together, is in [`inner`].
//!
//! # Guarantees
//!
//! - **Durable before success.** Every write (a creation, a deletion, a turn written back, a
//!   thread record) is one transaction that commits with immediate durability (fsync) before
//!   the store call returns; the stream of a turn ends only after its `end_turn`, so a client
//!   that saw a turn succeed finds it after any crash.
//! - **Crash-consistent.** A transaction takes effect whole or not at all: a torn write is
//!   detected by redb's checksums at the next open and rolled back to the last commit, so a
//!   session is never half written. After a crash the next open repairs the file (it walks the
//!   whole file, so its time grows with the file).
//! - **One process per directory.** redb locks its file; a second gateway (or a second open in
//!   the same process) fails at start-up with [`OpenError::Locked`].
//! - **Bounded memory.** Histories and records stay on disk and are read per call (a read
//!   transaction is cheap); memory holds per session its owner, face, lengths, charges, marks
//!   and last use (about a hundred bytes), and redb's page cache, bounded in [`db`].
//!
//! # What lives in memory only
//!
//! - **Running marks.** One process owns the directory, so after a crash no turn runs: every
//!   session is free at open, holding what the last successful `end_turn` wrote; a turn the
//!   crash interrupted leaves nothing.
//! - **Last use, partly.** The last use is written with every write (creation, a turn written
//!   back, a thread record saved); reads and turns that write nothing refresh it in memory
//!   only, so after a restart a session's idle clock runs from its last write.
//!
//! # Expiry and space
//!
//! Expiry is lazy, as in the memory store: an idle session is dropped when it is next looked
//! at, a creation a quota or the budget would refuse sweeps the idle ones out first, as does a
//! listing, and a write sweeps when the last sweep is a minute old. Open sweeps too. An expired
//! or deleted session's row and all its history rows, and expired thread records, are deleted
//! in one transaction; redb reuses the pages they held, so the file stops growing at what the
//! live sessions need (it is not compacted).
//!
//! # Cancellation
//!
//! [`crate::session::Timed`] drops a call that takes too long, but blocking work cannot be
//! stopped, so each call runs in `spawn_blocking` and is whole there: a write and the update of
//! the index that follows it both happen, whoever still waits. The one mark a call hands to
//! its caller (a turn's, a thread run's) is taken after the blocking part, in the caller's own
//! poll: a dropped call leaves no mark behind. A read taken before the mark is checked against
//! the entry's version, so it is never older than the last write.

mod db;
mod index;
mod inner;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use self::inner::Inner;
#[cfg(test)]
use self::inner::DATABASE_FILE;
use super::backend::OpenError;
use super::{
    Principal, Session, SessionConfig, SessionLimits, Store, StoreCounts, StoreError, ThreadRecord,
    TurnCommit,
};

/// How many times a mark is tried when writes keep overtaking its read, before it is refused
/// as busy.
const ATTEMPTS: usize = 3;

/// See the module docs.
#[derive(Debug)]
pub struct FileStore {
    inner: Arc<Inner>,
}

impl FileStore {
    /// Opens (or creates) the store in directory `path`.
    pub async fn open(path: &Path, limits: SessionLimits) -> Result<FileStore, OpenError> {
        let dir = path.to_owned();
        match tokio::task::spawn_blocking(move || Inner::open(dir, limits)).await {
            Ok(opened) => opened.map(|inner| FileStore {
                inner: Arc::new(inner),
            }),
            Err(e) => Err(OpenError::File {
                path: path.to_owned(),
                reason: if e.is_panic() {
                    "the database failed while opening (is the file damaged?)".into()
                } else {
                    "the open was cancelled".into()
                },
            }),
        }
    }

    /// Runs `op` on a blocking thread; see "Cancellation" in the module docs.
    async fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || op(&inner)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => Err(StoreError::Unavailable(
                "the session database failed (a panic in its thread)".into(),
            )),
            Err(_) => Err(StoreError::Unavailable(
                "the session database call was cancelled".into(),
            )),
        }
    }

    /// The database's row counts (sessions, history, threads), for tests.
    #[cfg(test)]
    fn rows(&self) -> (u64, u64, u64) {
        self.inner.db.rows()
    }
}

#[async_trait]
impl Store for FileStore {
    fn limits(&self) -> SessionLimits {
        self.inner.limits
    }

    fn counts(&self) -> StoreCounts {
        let index = self.inner.index();
        StoreCounts {
            sessions: index.sessions.len(),
            thread_records: index.threads.len(),
        }
    }

    async fn create(&self, session: Session) -> Result<(), StoreError> {
        self.run(move |inner| inner.create(session)).await
    }

    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
        let (id, owner) = (id.to_owned(), owner.clone());
        self.run(move |inner| inner.get(&id, &owner)).await
    }

    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        let (id, owner) = (id.to_owned(), owner.clone());
        self.run(move |inner| inner.config(&id, &owner)).await
    }

    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        let (face, owner, after) = (face.to_owned(), owner.clone(), after.map(str::to_owned));
        self.run(move |inner| inner.list(&face, &owner, after.as_deref(), limit))
            .await
    }

    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        let (id, owner) = (id.to_owned(), owner.clone());
        self.run(move |inner| inner.delete(&id, &owner)).await
    }

    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
        for _ in 0..ATTEMPTS {
            let (key, who) = (id.to_owned(), owner.clone());
            let (session, version) = self
                .run(move |inner| inner.read_for_turn(&key, &who))
                .await?;
            // No await from here on: the mark is taken and handed over in one poll.
            if let Some(marked) = self.inner.mark_turn(id, owner, version) {
                return marked.map(|()| session);
            }
        }
        Err(StoreError::Busy)
    }

    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        self.inner.index().charge(id, bytes, &self.inner.limits)
    }

    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError> {
        match commit {
            // Nothing to write: the last use is refreshed in memory only.
            None => {
                self.inner.index().end_turn(id, None, Instant::now());
                Ok(())
            }
            Some(commit) => {
                let id = id.to_owned();
                self.run(move |inner| inner.end_turn(&id, commit)).await
            }
        }
    }

    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        for _ in 0..ATTEMPTS {
            let (k, who) = (key.to_owned(), owner.clone());
            let seen = self
                .run(move |inner| inner.look_up_thread(&k, &who))
                .await?;
            // No await from here on: the mark is taken and handed over in one poll.
            if let Some(marked) = self.inner.mark_thread(key, owner, seen) {
                return marked;
            }
        }
        Err(StoreError::Busy)
    }

    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.run(move |inner| inner.save_thread(&key, record)).await
    }

    async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        let mut index = self.inner.index();
        let Some(entry) = index.threads.get_mut(key) else {
            return Ok(());
        };
        entry.running = false;
        entry.used = Instant::now();
        // A run that never reached the agent leaves nothing behind.
        index.remove_thread_if(key, |e| !e.running && !e.saved);
        Ok(())
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
