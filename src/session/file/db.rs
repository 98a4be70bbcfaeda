//! The tables of the file store and every transaction on them; blocking calls, made from
//! `spawn_blocking` by the store.
//!
//! | Table | Key | Value |
//! | --- | --- | --- |
//! | `format` | `"version"` | [`FORMAT`], refused at open when it is another |
//! | `sessions` | session id | JSON [`MetaRow`]: owner, configuration, state, pending calls, history length and bytes, last use |
//! | `history` | (session id, index) | JSON of one message |
//! | `threads` | thread key | JSON [`ThreadRow`]: owner, record, last use |
//!
//! A history is one row per message, so a turn writes the messages it added (and deletes the
//! rows past what it kept) rather than the whole history. Every write transaction commits with
//! redb's default, immediate durability: it is on disk when [`Db`]'s method returns. redb
//! checksums what it writes and a commit takes effect whole or not at all, so a crash mid-write
//! leaves the previous commit.

use std::path::Path;

use redb::{
    Database, DatabaseError, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dialect::aap::Pending;
use crate::event::Message;
use crate::session::backend::OpenError;
use crate::session::{Principal, Session, SessionConfig, StoreError, ThreadRecord, TurnCommit};

/// The layout these tables follow; a file written in another is not opened.
pub(super) const FORMAT: u64 = 1;

const FORMAT_TABLE: TableDefinition<&str, u64> = TableDefinition::new("format");
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
const HISTORY: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("history");
const THREADS: TableDefinition<&str, &[u8]> = TableDefinition::new("threads");

/// Pages redb keeps in memory. Its default (1 GiB) is sized for a database, not for a gateway's
/// side store; histories are read once per turn, so a small cache costs little.
const CACHE_BYTES: usize = 32 << 20;

/// A session's row, everything but its history.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct MetaRow {
    pub(super) owner: Principal,
    pub(super) config: SessionConfig,
    pub(super) state: Option<Value>,
    pub(super) pending: Vec<Pending>,
    /// Messages in the `history` table, indexes `0..len`.
    pub(super) len: u64,
    /// Content bytes of the history (`event::history_bytes`), what the session is charged.
    pub(super) bytes: u64,
    /// Last write, in Unix milliseconds.
    pub(super) used_ms: u64,
}

/// A thread record's row.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ThreadRow {
    pub(super) owner: Principal,
    pub(super) record: ThreadRecord,
    /// Last write, in Unix milliseconds.
    pub(super) used_ms: u64,
}

/// The last write of a session's or a thread record's row, read alone.
#[derive(Deserialize)]
struct Written {
    used_ms: u64,
}

/// What the open found in the tables.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub(super) sessions: Vec<(String, MetaRow)>,
    pub(super) threads: Vec<(String, ThreadRow)>,
}

/// The open database; see the module docs.
#[derive(Debug)]
pub(super) struct Db {
    db: Database,
}

/// A failure of the database as the store reports it.
fn failed(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Unavailable(format!("the session database failed: {}", e.into()))
}

/// A row that does not read back.
fn unreadable(what: &str, key: &str, e: serde_json::Error) -> StoreError {
    StoreError::Unavailable(format!(
        "{what} {key} in the session database does not read: {e}"
    ))
}

fn json(value: &impl Serialize) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value)
        .map_err(|e| StoreError::Unavailable(format!("a session does not serialize: {e}")))
}

/// Every history row of session `id`.
fn rows_of(id: &str) -> std::ops::RangeInclusive<(&str, u64)> {
    (id, 0)..=(id, u64::MAX)
}

impl Db {
    /// Opens (or creates) the database file `file` and reads every row of the sessions and
    /// threads tables. Rows that do not read are skipped with a warning.
    pub(super) fn open(file: &Path) -> Result<(Db, Found), OpenError> {
        let fail = |reason: String| OpenError::File {
            path: file.to_owned(),
            reason,
        };
        let db = match Database::builder().set_cache_size(CACHE_BYTES).create(file) {
            Ok(db) => db,
            Err(DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch) => {
                let dir = file.parent().unwrap_or(file);
                return Err(OpenError::Locked {
                    path: dir.to_owned(),
                });
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        let db = Db { db };
        let found = db.prepare().map_err(|e| match e {
            StoreError::Unavailable(reason) => fail(reason),
            other => fail(other.to_string()),
        })?;
        Ok((db, found))
    }

    /// Creates the tables of a new file, checks the format of an existing one, and reads it.
    fn prepare(&self) -> Result<Found, StoreError> {
        let txn = self.db.begin_write().map_err(failed)?;
        {
            let mut format = txn.open_table(FORMAT_TABLE).map_err(failed)?;
            let written = format.get("version").map_err(failed)?.map(|v| v.value());
            match written {
                Some(FORMAT) => {}
                Some(other) => {
                    return Err(StoreError::Unavailable(format!(
                        "the database is in format {other}, this gateway reads format {FORMAT}"
                    )))
                }
                None => {
                    format.insert("version", FORMAT).map_err(failed)?;
                }
            }
            txn.open_table(HISTORY).map_err(failed)?;
        }
        let found = Found {
            sessions: read_all(&txn, SESSIONS, "session")?,
            threads: read_all(&txn, THREADS, "thread record")?,
        };
        txn.commit().map_err(failed)?;
        Ok(found)
    }

    /// Writes a new session.
    pub(super) fn insert(
        &self,
        session: &Session,
        bytes: usize,
        used_ms: u64,
    ) -> Result<(), StoreError> {
        let meta = json(&MetaRow {
            owner: session.owner.clone(),
            config: session.config.clone(),
            state: session.state.clone(),
            pending: session.pending.clone(),
            len: session.history.len() as u64,
            bytes: bytes as u64,
            used_ms,
        })?;
        let txn = self.db.begin_write().map_err(failed)?;
        {
            let mut sessions = txn.open_table(SESSIONS).map_err(failed)?;
            let mut history = txn.open_table(HISTORY).map_err(failed)?;
            // Rows a former session of this id left would corrupt its history.
            history
                .retain_in(rows_of(&session.id), |_, _| false)
                .map_err(failed)?;
            for (i, message) in session.history.iter().enumerate() {
                history
                    .insert((session.id.as_str(), i as u64), json(message)?.as_slice())
                    .map_err(failed)?;
            }
            sessions
                .insert(session.id.as_str(), meta.as_slice())
                .map_err(failed)?;
        }
        txn.commit().map_err(failed)
    }

    /// Writes a finished turn back to session `id`, whose first `kept` messages are stored and
    /// unchanged: the rows from `kept` on are replaced by `commit.history[kept..]`. Whether the
    /// session was there (a session deleted while its turn ran stays deleted).
    pub(super) fn commit_turn(
        &self,
        id: &str,
        owner: &Principal,
        commit: TurnCommit,
        kept: usize,
        bytes: usize,
        used_ms: u64,
    ) -> Result<bool, StoreError> {
        let kept = kept.min(commit.history.len());
        let meta = json(&MetaRow {
            owner: owner.clone(),
            config: commit.config,
            state: commit.state,
            pending: commit.pending,
            len: commit.history.len() as u64,
            bytes: bytes as u64,
            used_ms,
        })?;
        let txn = self.db.begin_write().map_err(failed)?;
        {
            let mut sessions = txn.open_table(SESSIONS).map_err(failed)?;
            if sessions.get(id).map_err(failed)?.is_none() {
                return Ok(false);
            }
            let mut history = txn.open_table(HISTORY).map_err(failed)?;
            history
                .retain_in((id, kept as u64)..=(id, u64::MAX), |_, _| false)
                .map_err(failed)?;
            for (i, message) in commit.history.iter().enumerate().skip(kept) {
                history
                    .insert((id, i as u64), json(message)?.as_slice())
                    .map_err(failed)?;
            }
            sessions.insert(id, meta.as_slice()).map_err(failed)?;
        }
        txn.commit().map_err(failed)?;
        Ok(true)
    }

    /// Deletes sessions (their row and history) and thread records, in one transaction; how
    /// many of the sessions were there. With `written_before`, a row written at or after that
    /// Unix millisecond is kept: it was written anew (a thread key run again) after whoever
    /// deletes found the entry idle.
    pub(super) fn remove(
        &self,
        sessions: &[String],
        threads: &[String],
        written_before: Option<u64>,
    ) -> Result<usize, StoreError> {
        let stale = |row: &[u8]| {
            written_before.is_none_or(|before| {
                // A row whose time does not read is deleted: it is expired or foreign.
                serde_json::from_slice::<Written>(row).map_or(true, |w| w.used_ms < before)
            })
        };
        let txn = self.db.begin_write().map_err(failed)?;
        let mut removed = 0;
        {
            let mut metas = txn.open_table(SESSIONS).map_err(failed)?;
            let mut history = txn.open_table(HISTORY).map_err(failed)?;
            for id in sessions {
                let Some(row) = metas.get(id.as_str()).map_err(failed)? else {
                    continue;
                };
                if !stale(row.value()) {
                    continue;
                }
                drop(row);
                metas.remove(id.as_str()).map_err(failed)?;
                history
                    .retain_in(rows_of(id), |_, _| false)
                    .map_err(failed)?;
                removed += 1;
            }
            let mut records = txn.open_table(THREADS).map_err(failed)?;
            for key in threads {
                let Some(row) = records.get(key.as_str()).map_err(failed)? else {
                    continue;
                };
                if !stale(row.value()) {
                    continue;
                }
                drop(row);
                records.remove(key.as_str()).map_err(failed)?;
            }
        }
        txn.commit().map_err(failed)?;
        Ok(removed)
    }

    /// The whole sessions `ids`, from one snapshot; missing ones are left out.
    pub(super) fn sessions(&self, ids: &[String]) -> Result<Vec<Session>, StoreError> {
        let txn = self.db.begin_read().map_err(failed)?;
        let metas = txn.open_table(SESSIONS).map_err(failed)?;
        let history = txn.open_table(HISTORY).map_err(failed)?;
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(meta) = metas.get(id.as_str()).map_err(failed)? else {
                continue;
            };
            let meta: MetaRow =
                serde_json::from_slice(meta.value()).map_err(|e| unreadable("session", id, e))?;
            let mut messages = Vec::with_capacity(usize::try_from(meta.len).unwrap_or(0).min(4096));
            for row in history.range(rows_of(id)).map_err(failed)? {
                let (key, value) = row.map_err(failed)?;
                let index = key.value().1;
                if index != messages.len() as u64 {
                    return Err(StoreError::Unavailable(format!(
                        "session {id} in the session database misses message {}",
                        messages.len()
                    )));
                }
                let message: Message = serde_json::from_slice(value.value())
                    .map_err(|e| unreadable("a message of session", id, e))?;
                messages.push(message);
            }
            if messages.len() as u64 != meta.len {
                return Err(StoreError::Unavailable(format!(
                    "session {id} in the session database holds {} of its {} messages",
                    messages.len(),
                    meta.len
                )));
            }
            found.push(Session {
                id: id.clone(),
                owner: meta.owner,
                config: meta.config,
                history: messages,
                state: meta.state,
                pending: meta.pending,
            });
        }
        Ok(found)
    }

    /// Session `id`'s configuration.
    pub(super) fn config(&self, id: &str) -> Result<Option<SessionConfig>, StoreError> {
        let txn = self.db.begin_read().map_err(failed)?;
        let metas = txn.open_table(SESSIONS).map_err(failed)?;
        let Some(meta) = metas.get(id).map_err(failed)? else {
            return Ok(None);
        };
        let meta: MetaRow =
            serde_json::from_slice(meta.value()).map_err(|e| unreadable("session", id, e))?;
        Ok(Some(meta.config))
    }

    /// Thread `key`'s record.
    pub(super) fn thread(&self, key: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(failed)?;
        let records = txn.open_table(THREADS).map_err(failed)?;
        let Some(row) = records.get(key).map_err(failed)? else {
            return Ok(None);
        };
        let row: ThreadRow =
            serde_json::from_slice(row.value()).map_err(|e| unreadable("thread record", key, e))?;
        Ok(Some(row.record))
    }

    /// Writes thread `key`'s record.
    pub(super) fn save_thread(
        &self,
        key: &str,
        owner: &Principal,
        record: ThreadRecord,
        used_ms: u64,
    ) -> Result<(), StoreError> {
        let row = json(&ThreadRow {
            owner: owner.clone(),
            record,
            used_ms,
        })?;
        let txn = self.db.begin_write().map_err(failed)?;
        {
            let mut records = txn.open_table(THREADS).map_err(failed)?;
            records.insert(key, row.as_slice()).map_err(failed)?;
        }
        txn.commit().map_err(failed)
    }

    /// Rows in the sessions, history and threads tables (tests check that deletion empties them).
    #[cfg(test)]
    pub(super) fn rows(&self) -> (u64, u64, u64) {
        let txn = self.db.begin_read().unwrap();
        let count = |t: TableDefinition<&str, &[u8]>| txn.open_table(t).unwrap().len().unwrap();
        let history = txn.open_table(HISTORY).unwrap().len().unwrap();
        (count(SESSIONS), history, count(THREADS))
    }
}

/// Every row of `table` that reads as a `T`, keyed; the others are logged and left alone (a
/// newer gateway's rows, or damage), so one bad row does not keep the gateway from starting.
fn read_all<T: serde::de::DeserializeOwned>(
    txn: &WriteTransaction,
    table: TableDefinition<&str, &[u8]>,
    what: &str,
) -> Result<Vec<(String, T)>, StoreError> {
    let table = txn.open_table(table).map_err(failed)?;
    let mut found = Vec::with_capacity(usize::try_from(table.len().map_err(failed)?).unwrap_or(0));
    for row in table.iter().map_err(failed)? {
        let (key, value) = row.map_err(failed)?;
        match serde_json::from_slice(value.value()) {
            Ok(row) => found.push((key.value().to_owned(), row)),
            Err(error) => {
                tracing::warn!(key = key.value(), %error, "a {what} in the session database does not read; skipped")
            }
        }
    }
    Ok(found)
}
