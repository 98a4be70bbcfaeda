//! The operations on thread records: a run locks its thread like a turn locks its session, so
//! two replicas never run (and fork) one AG-UI thread; a new thread is admitted by the ledger
//! against `max_sessions` and the owner's share, and gives its place back if its run saved no
//! record.

use super::codec::{self, array, from_json, int, text, unexpected};
use super::keys::digest;
use super::ledger::{ms, Kind, Verdict};
use super::renew::Lease;
use super::{Inner, Run};
use crate::session::{Principal, StoreError, ThreadRecord};

impl Inner {
    pub(super) async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        if self.runs.contains_key(key) {
            return Err(StoreError::Busy);
        }
        let digest = digest(&[key]);
        let keys = self.keys.thread(&digest);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut invocation = self.scripts.begin_thread.prepare_invoke();
        invocation
            .key(&keys)
            .arg(token.as_str())
            .arg(ms(self.lock_ttl))
            .arg(ms(self.running_ttl()));
        let what = "a thread run's start";
        let mut reply = array(self.run(&invocation).await?, what)?.into_iter();
        match reply
            .next()
            .map(|v| text(v, what))
            .transpose()?
            .flatten()
            .as_deref()
        {
            Some("busy") => return Err(StoreError::Busy),
            Some("ok") => {}
            _ => return Err(unexpected(what)),
        }
        let raw = reply
            .next()
            .map(|v| codec::bytes(v, what))
            .transpose()?
            .flatten();
        let record = raw.and_then(|raw| match from_json::<ThreadRecord>(&raw, "thread record") {
            Ok(record) => Some(record),
            Err(error) => {
                // A lost record degrades to a fresh agent session, as the client expects.
                tracing::warn!(%error, "a stored thread record does not decode; the thread starts afresh");
                None
            }
        });
        let admitted = self
            .admit_thread(&digest, owner.as_str(), record.is_none())
            .await;
        if !matches!(admitted, Ok(Verdict::Ok)) {
            self.release_thread(&keys, &token).await;
        }
        admitted?.into_result(0, &self.limits)?;
        let [record_key, lock] = keys;
        let renewal = self.keep_renewed(Lease {
            keys: vec![lock, record_key],
            token: token.clone(),
            kind: Kind::Thread,
            member: digest.clone(),
        });
        self.runs.insert(
            key.to_owned(),
            Run {
                token,
                owner: owner.clone(),
                digest,
                renewal,
            },
        );
        Ok(record)
    }

    pub(super) async fn save_thread(
        &self,
        key: &str,
        record: ThreadRecord,
    ) -> Result<(), StoreError> {
        let (token, owner, digest) = match self.runs.get(key) {
            Some(run) => (run.token.clone(), run.owner.clone(), run.digest.clone()),
            None => return Err(StoreError::NotFound),
        };
        let raw = codec::json(&record, "thread record")?;
        let mut invocation = self.scripts.save_thread.prepare_invoke();
        invocation
            .key(&self.keys.thread(&digest))
            .arg(token.as_str())
            .arg(owner.as_str())
            .arg(raw)
            .arg(ms(self.running_ttl()));
        match int(self.run(&invocation).await?, "a thread record's save")? {
            1 => Ok(()),
            _ => Err(StoreError::Unavailable(
                "the run's lock on its thread expired; the record was not saved".into(),
            )),
        }
    }

    pub(super) async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
        let Some((_, run)) = self.runs.remove(key) else {
            return Ok(());
        };
        run.renewal.abort();
        let keys = self.keys.thread(&run.digest);
        match self
            .end_thread_script(&keys, &run.token, true)
            .await?
            .as_str()
        {
            "ok" => {
                if let Err(error) = self
                    .touch(Kind::Thread, &run.digest, self.limits.idle_timeout, false)
                    .await
                {
                    tracing::debug!(%error, "could not set a thread's expiry in the ledger");
                }
                Ok(())
            }
            "none" => {
                // Nothing reached the agent: the place is given back while the lock still
                // keeps any other run of the thread out.
                if let Err(error) = self.forget_thread(&run.digest).await {
                    tracing::warn!(%error, "a thread without a record keeps its place in the ledger until it expires");
                }
                self.release_thread(&keys, &run.token).await;
                Ok(())
            }
            _ => {
                tracing::warn!("a thread run's lock expired before its end");
                Err(StoreError::Unavailable(
                    "the run's lock on its thread expired before the run ended".into(),
                ))
            }
        }
    }

    /// The end script: 'check' first (whether a record exists), or 'release'.
    async fn end_thread_script(
        &self,
        keys: &[String; 2],
        token: &str,
        check: bool,
    ) -> Result<String, StoreError> {
        let mut invocation = self.scripts.end_thread.prepare_invoke();
        invocation
            .key(keys)
            .arg(token)
            .arg(ms(self.limits.idle_timeout))
            .arg(if check { "check" } else { "release" });
        let what = "a thread run's end";
        text(self.run(&invocation).await?, what)?.ok_or_else(|| unexpected(what))
    }

    /// Releases a thread's lock; on failure it expires.
    async fn release_thread(&self, keys: &[String; 2], token: &str) {
        if let Err(error) = self.end_thread_script(keys, token, false).await {
            tracing::warn!(%error, "could not release a thread's lock; it expires");
        }
    }
}
