//! The ledger: what the quotas and `GET /sessions` read, shared by every replica. Small keys
//! under one hash tag (`<prefix>{ledger}:…`, [`super::keys::LEDGER`]), changed only by the
//! scripts of [`super::scripts`], each atomic:
//!
//! - per session: its owner, its (owner, face) list, the bytes of its history and of its
//!   running turn's input, and when it expires; per owner and in total, sessions and bytes;
//! - per thread record: its owner and when it expires; per owner, thread records.
//!
//! Every script first purges what expired (a bounded batch), giving its charge back, so a
//! session whose keys Redis expired never holds a quota for long; and every reply carries the
//! counts, which refresh the store's cache ([`Counts`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ::redis::{Script, Value};

use super::codec::{array, count, text, unexpected};
use super::Inner;
use crate::session::{SessionLimits, StoreCounts, StoreError};

/// At most this many expired sessions (and as many thread records) are purged per script.
pub(super) const PURGE_BATCH: usize = 100;

/// What the ledger held at its last reply: [`crate::session::Store::counts`] answers from
/// here without waiting.
#[derive(Debug, Default)]
pub(super) struct Counts {
    sessions: AtomicUsize,
    threads: AtomicUsize,
}

impl Counts {
    pub(super) fn get(&self) -> StoreCounts {
        StoreCounts {
            sessions: self.sessions.load(Ordering::Relaxed),
            thread_records: self.threads.load(Ordering::Relaxed),
        }
    }

    fn set(&self, sessions: usize, threads: usize) {
        self.sessions.store(sessions, Ordering::Relaxed);
        self.threads.store(threads, Ordering::Relaxed);
    }
}

/// How a ledger script answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Ok,
    Full,
    PrincipalFull,
    OutOfSpace,
    PrincipalOutOfSpace,
    Missing,
}

impl Verdict {
    /// The refusal for `bytes` more under `limits`, if this is one.
    pub(super) fn into_result(
        self,
        bytes: usize,
        limits: &SessionLimits,
    ) -> Result<(), StoreError> {
        match self {
            Verdict::Ok => Ok(()),
            Verdict::Full => Err(StoreError::Full(limits.max_sessions)),
            Verdict::PrincipalFull => {
                Err(StoreError::PrincipalFull(limits.max_sessions_per_principal))
            }
            Verdict::OutOfSpace => Err(StoreError::OutOfSpace {
                needed: bytes,
                limit: limits.max_total_bytes,
            }),
            Verdict::PrincipalOutOfSpace => Err(StoreError::PrincipalOutOfSpace {
                needed: bytes,
                limit: limits.max_bytes_per_principal,
            }),
            Verdict::Missing => Err(StoreError::NotFound),
        }
    }
}

/// Which expiry set a touch moves.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Session,
    Thread,
}

/// `d` in whole milliseconds, at least 1 (Redis refuses an expiry of 0).
pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Inner {
    /// Runs ledger script `script` with `args` after the batch size; the verdict and the
    /// script's extra reply.
    async fn ledger(
        &self,
        script: &Script,
        what: &str,
        args: impl FnOnce(&mut ::redis::ScriptInvocation<'_>),
    ) -> Result<(Verdict, Value), StoreError> {
        let mut invocation = script.prepare_invoke();
        invocation.key(self.keys.ledger()).arg(PURGE_BATCH);
        args(&mut invocation);
        let mut conn = self.link.conn()?;
        let reply: Value = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.link.failed(e))?;
        self.read_ledger_reply(reply, what)
    }

    fn read_ledger_reply(&self, reply: Value, what: &str) -> Result<(Verdict, Value), StoreError> {
        let mut items = array(reply, what)?.into_iter();
        let mut next = || items.next().ok_or_else(|| unexpected(what));
        let status = text(next()?, what)?.ok_or_else(|| unexpected(what))?;
        let sessions = count(next()?, what)?;
        let threads = count(next()?, what)?;
        let extra = items.next().unwrap_or(Value::Nil);
        self.counts.set(sessions, threads);
        let verdict = match status.as_str() {
            "ok" => Verdict::Ok,
            "full" => Verdict::Full,
            "principal_full" => Verdict::PrincipalFull,
            "space" => Verdict::OutOfSpace,
            "principal_space" => Verdict::PrincipalOutOfSpace,
            "missing" => Verdict::Missing,
            _ => return Err(unexpected(what)),
        };
        Ok((verdict, extra))
    }

    /// The watcher's refresh and probe: a `PING` (which a server that wants credentials
    /// answers plainly, where it would cut a longer command short), then the purge, which
    /// reads the counts. Not gated on the link being up, and bounded by the store's timeout.
    pub(super) async fn refresh(&self) -> Result<(), ::redis::RedisError> {
        let mut invocation = self.scripts.purge.prepare_invoke();
        invocation.key(self.keys.ledger()).arg(PURGE_BATCH);
        let mut conn = self.link.current();
        let probe = async {
            ::redis::cmd("PING").query_async::<()>(&mut conn).await?;
            invocation.invoke_async::<Value>(&mut conn).await
        };
        let reply = tokio::time::timeout(self.link.timeout, probe)
            .await
            .map_err(|_| {
                ::redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {:?}", self.link.timeout),
                ))
            })??;
        // A reply of another shape is not a connection problem: the link is up.
        if let Err(error) = self.read_ledger_reply(reply, "the ledger refresh") {
            tracing::warn!(%error, "the session ledger's refresh");
        }
        self.link.answered();
        Ok(())
    }

    /// Admits new session `id` holding `bytes`, against every limit.
    pub(super) async fn admit(
        &self,
        id: &str,
        owner: &str,
        list: &str,
        bytes: usize,
    ) -> Result<Verdict, StoreError> {
        let l = self.limits;
        let ttl = ms(l.idle_timeout);
        let (verdict, _) = self
            .ledger(&self.scripts.admit, "a session's admission", |i| {
                i.arg(id)
                    .arg(owner)
                    .arg(list)
                    .arg(bytes)
                    .arg(ttl)
                    .arg(l.max_sessions)
                    .arg(l.max_sessions_per_principal)
                    .arg(l.max_total_bytes)
                    .arg(l.max_bytes_per_principal);
            })
            .await?;
        Ok(verdict)
    }

    /// A turn on `id` began, its history holding `bytes`.
    pub(super) async fn ledger_begin(
        &self,
        id: &str,
        owner: &str,
        list: &str,
        bytes: usize,
    ) -> Result<(), StoreError> {
        let ttl = ms(self.running_ttl());
        self.ledger(&self.scripts.begin, "a turn's start", |i| {
            i.arg(id).arg(owner).arg(list).arg(bytes).arg(ttl);
        })
        .await
        .map(drop)
    }

    /// Charges `bytes` of input to the turn on `id`.
    pub(super) async fn charge(&self, id: &str, bytes: usize) -> Result<Verdict, StoreError> {
        let l = self.limits;
        let ttl = ms(self.running_ttl());
        let (verdict, _) = self
            .ledger(&self.scripts.charge, "a turn's input charge", |i| {
                i.arg(id)
                    .arg(bytes)
                    .arg(l.max_total_bytes)
                    .arg(l.max_bytes_per_principal)
                    .arg(ttl);
            })
            .await?;
        Ok(verdict)
    }

    /// The turn on `id` ended: its history holds `bytes`, and it has no input.
    pub(super) async fn settle(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        let ttl = ms(self.limits.idle_timeout);
        self.ledger(&self.scripts.settle, "a turn's end", |i| {
            i.arg(id).arg(bytes).arg(ttl);
        })
        .await
        .map(drop)
    }

    /// Sessions `ids` are gone: their charges are given back.
    pub(super) async fn forget(&self, ids: &[&str]) -> Result<(), StoreError> {
        self.ledger(&self.scripts.forget, "a session's removal", |i| {
            i.arg(ids);
        })
        .await
        .map(drop)
    }

    /// Up to `n` ids of `list` after `after`, in byte order.
    pub(super) async fn page(
        &self,
        list: &str,
        after: &str,
        n: usize,
    ) -> Result<Vec<String>, StoreError> {
        let what = "a page of sessions";
        let (_, ids) = self
            .ledger(&self.scripts.page, what, |i| {
                i.arg(list).arg(after).arg(n.max(1));
            })
            .await?;
        array(ids, what)?
            .into_iter()
            .map(|id| text(id, what)?.ok_or_else(|| unexpected(what)))
            .collect()
    }

    /// Moves the expiry of `member` to `ttl` from now: only later (`only_later`), or to
    /// exactly that (a run ending).
    pub(super) async fn touch(
        &self,
        kind: Kind,
        member: &str,
        ttl: Duration,
        only_later: bool,
    ) -> Result<(), StoreError> {
        let which = match kind {
            Kind::Session => "s",
            Kind::Thread => "t",
        };
        let mode = if only_later { "gt" } else { "set" };
        self.ledger(&self.scripts.touch, "an expiry's refresh", |i| {
            i.arg(which).arg(ms(ttl)).arg(mode).arg(member);
        })
        .await
        .map(drop)
    }

    /// A run of thread `digest` began: counted if new (`fresh`, against the quotas), and its
    /// expiry moved.
    pub(super) async fn admit_thread(
        &self,
        digest: &str,
        owner: &str,
        fresh: bool,
    ) -> Result<Verdict, StoreError> {
        let l = self.limits;
        let ttl = ms(self.running_ttl());
        let (verdict, _) = self
            .ledger(&self.scripts.admit_thread, "a thread's admission", |i| {
                i.arg(digest)
                    .arg(owner)
                    .arg(ttl)
                    .arg(l.max_sessions)
                    .arg(l.max_sessions_per_principal)
                    .arg(if fresh { "1" } else { "0" });
            })
            .await?;
        Ok(verdict)
    }

    /// Thread `digest` has no record: its place is given back.
    pub(super) async fn forget_thread(&self, digest: &str) -> Result<(), StoreError> {
        self.ledger(&self.scripts.forget_thread, "a thread's removal", |i| {
            i.arg(digest);
        })
        .await
        .map(drop)
    }
}
