//! The operations on sessions: each a script on the session's slot, then (when the quotas or
//! the listing change) one on the ledger's, in the order the module docs give.

use ::redis::Value;

use super::codec::{self, array, from_json, int, text, unexpected, Fields};
use super::keys::{digest, usable_id};
use super::ledger::{ms, Kind, Verdict};
use super::renew::Lease;
use super::{Inner, Turn};
use crate::event::history_bytes;
use crate::session::{Principal, Session, SessionConfig, StoreError, TurnCommit};

/// The ledger's name of `owner`'s sessions on `face`.
pub(super) fn list_name(owner: &Principal, face: &str) -> String {
    digest(&[owner.as_str(), face])
}

/// How `end_turn`'s script answered.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Ok,
    Gone,
    Lost,
    Short,
}

impl Inner {
    pub(super) async fn create(&self, session: Session) -> Result<(), StoreError> {
        if !usable_id(&session.id) {
            return Err(StoreError::Unavailable(format!(
                "{:?} cannot name a session in Redis",
                session.id
            )));
        }
        let bytes = history_bytes(&session.history);
        let owner = session.owner.as_str();
        let [meta, history, _] = self.keys.session(&session.id);
        let fields = Fields::of(&session.config, session.state.as_ref(), &session.pending)?;
        let messages = codec::messages(&session.history)?;
        let mut invocation = self.scripts.create.prepare_invoke();
        invocation
            .key(&meta)
            .key(&history)
            .arg(owner)
            .arg(&fields.config)
            .arg(&fields.state)
            .arg(&fields.pending)
            .arg(ms(self.limits.idle_timeout))
            .arg(&messages);
        if int(self.run(&invocation).await?, "a session's creation")? != 1 {
            return Err(StoreError::Unavailable(format!(
                "session id {} is already in use",
                session.id
            )));
        }
        let list = list_name(&session.owner, &session.config.face);
        let admitted = self.admit(&session.id, owner, &list, bytes).await;
        if !matches!(admitted, Ok(Verdict::Ok)) {
            // Refused, or not known to be admitted: nothing of it stays.
            self.discard(&session.id, &session.owner).await;
        }
        admitted?.into_result(bytes, &self.limits)
    }

    /// Deletes the keys of a session the ledger did not admit; on failure they expire.
    async fn discard(&self, id: &str, owner: &Principal) {
        let mut invocation = self.scripts.delete.prepare_invoke();
        invocation.key(&self.keys.session(id)).arg(owner.as_str());
        if let Err(error) = self.run(&invocation).await {
            tracing::warn!(%error, session_id = %id, "could not delete a session refused by the ledger; it expires unused");
        }
    }

    /// Reads a session: `Some(fields)` after the owner, or `None`.
    async fn read(
        &self,
        id: &str,
        owner: &Principal,
        touch: bool,
        all: bool,
    ) -> Result<Option<Vec<Value>>, StoreError> {
        if !usable_id(id) {
            return Ok(None);
        }
        let [meta, history, _] = self.keys.session(id);
        let ttl = if touch {
            ms(self.limits.idle_timeout).to_string()
        } else {
            String::new()
        };
        let mut invocation = self.scripts.read.prepare_invoke();
        invocation
            .key(&meta)
            .key(&history)
            .arg(owner.as_str())
            .arg(ttl)
            .arg(if all { "all" } else { "config" });
        match self.run(&invocation).await? {
            Value::Nil => Ok(None),
            reply => array(reply, "a session's read").map(Some),
        }
    }

    pub(super) async fn get(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<Session>, StoreError> {
        let Some(fields) = self.read(id, owner, true, true).await? else {
            return Ok(None);
        };
        let session = codec::session(id, owner, fields, "a session's read")?;
        // The ledger's expiry follows the keys'; if this fails, it is pushed at the next use.
        if let Err(error) = self
            .touch(Kind::Session, id, self.limits.idle_timeout, true)
            .await
        {
            tracing::debug!(%error, session_id = %id, "could not push a session's expiry in the ledger");
        }
        Ok(Some(session))
    }

    pub(super) async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError> {
        let Some(fields) = self.read(id, owner, false, false).await? else {
            return Ok(None);
        };
        let what = "a session's configuration";
        let raw = fields
            .into_iter()
            .next()
            .map(|v| codec::bytes(v, what))
            .transpose()?
            .flatten()
            .ok_or_else(|| unexpected(what))?;
        from_json(&raw, "session configuration").map(Some)
    }

    pub(super) async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
        if !usable_id(id) {
            return Ok(false);
        }
        let mut invocation = self.scripts.delete.prepare_invoke();
        invocation.key(&self.keys.session(id)).arg(owner.as_str());
        if int(self.run(&invocation).await?, "a session's deletion")? != 1 {
            return Ok(false);
        }
        if let Err(error) = self.forget(&[id]).await {
            tracing::warn!(%error, session_id = %id, "a deleted session's charge stays in the ledger until it expires");
        }
        Ok(true)
    }

    pub(super) async fn begin_turn(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Session, StoreError> {
        if !usable_id(id) {
            return Err(StoreError::NotFound);
        }
        if let Some(turn) = self.turns.get(id) {
            // A turn of this process has not ended: busy, to its owner only.
            return Err(if turn.owner == *owner {
                StoreError::Busy
            } else {
                StoreError::NotFound
            });
        }
        let keys = self.keys.session(id);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut invocation = self.scripts.begin_turn.prepare_invoke();
        invocation
            .key(&keys)
            .arg(owner.as_str())
            .arg(token.as_str())
            .arg(ms(self.lock_ttl))
            .arg(ms(self.running_ttl()));
        let what = "a turn's start";
        let mut reply = array(self.run(&invocation).await?, what)?.into_iter();
        let status = reply.next().map(|v| text(v, what)).transpose()?.flatten();
        match status.as_deref() {
            Some("missing") => return Err(StoreError::NotFound),
            Some("busy") => return Err(StoreError::Busy),
            Some("ok") => {}
            _ => return Err(unexpected(what)),
        }
        let begun = async {
            let session = codec::session(id, owner, reply.collect(), what)?;
            let bytes = history_bytes(&session.history);
            let list = list_name(owner, &session.config.face);
            self.ledger_begin(id, owner.as_str(), &list, bytes).await?;
            Ok::<_, StoreError>((session, bytes))
        };
        let (session, bytes) = match begun.await {
            Ok(begun) => begun,
            Err(error) => {
                if let Err(e) = self.end_script(&keys, &token, None).await {
                    tracing::warn!(error = %e, session_id = %id, "could not release a turn's lock; it expires");
                }
                return Err(error);
            }
        };
        let [meta, history, lock] = keys;
        let renewal = self.keep_renewed(Lease {
            keys: vec![lock, meta, history],
            token: token.clone(),
            kind: Kind::Session,
            member: id.to_owned(),
        });
        self.turns.insert(
            id.to_owned(),
            Turn {
                token,
                owner: owner.clone(),
                bytes,
                renewal,
            },
        );
        Ok(session)
    }

    pub(super) async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
        if !self.turns.contains_key(id) {
            return Err(StoreError::NotFound);
        }
        self.charge(id, bytes)
            .await?
            .into_result(bytes, &self.limits)
    }

    pub(super) async fn end_turn(
        &self,
        id: &str,
        commit: Option<TurnCommit>,
    ) -> Result<(), StoreError> {
        let Some((_, turn)) = self.turns.remove(id) else {
            return match commit {
                None => Ok(()),
                Some(_) => Err(StoreError::NotFound),
            };
        };
        turn.renewal.abort();
        let keys = self.keys.session(id);
        let mut ended = self.end_script(&keys, &turn.token, commit.as_ref()).await?;
        if ended == Ended::Short {
            // The commit counted on more stored messages than there are: write it whole.
            tracing::warn!(session_id = %id, "a commit kept more messages than were stored; writing its whole history");
            let whole = commit.as_ref().map(|c| TurnCommit {
                kept: 0,
                ..c.clone()
            });
            ended = self.end_script(&keys, &turn.token, whole.as_ref()).await?;
        }
        match ended {
            Ended::Ok => {
                let bytes = commit
                    .as_ref()
                    .map_or(turn.bytes, |c| history_bytes(&c.history));
                if let Err(error) = self.settle(id, bytes).await {
                    tracing::warn!(%error, session_id = %id, "the turn is written but the ledger still holds its old charge, until the next turn or its expiry");
                }
                Ok(())
            }
            Ended::Gone => {
                // Deleted (which gave its charge back) or expired during the turn.
                if let Err(error) = self.forget(&[id]).await {
                    tracing::debug!(%error, session_id = %id, "could not forget a session gone during its turn");
                }
                Ok(())
            }
            Ended::Lost | Ended::Short => match commit {
                None => {
                    tracing::warn!(session_id = %id, "the turn's lock had expired by its end");
                    Ok(())
                }
                Some(_) => {
                    tracing::error!(session_id = %id, "the turn's lock expired before its end and another turn may hold the session: its result is not written");
                    Err(StoreError::Unavailable(format!(
                        "the lock of session {id} expired before the turn ended; its result was not written"
                    )))
                }
            },
        }
    }

    /// The end of a turn in one script: `commit` written if the lock is `token`, the lock
    /// released.
    async fn end_script(
        &self,
        keys: &[String; 3],
        token: &str,
        commit: Option<&TurnCommit>,
    ) -> Result<Ended, StoreError> {
        let mut invocation = self.scripts.end_turn.prepare_invoke();
        invocation
            .key(keys)
            .arg(token)
            .arg(ms(self.limits.idle_timeout));
        match commit {
            None => {
                invocation.arg("none");
            }
            Some(c) => {
                let kept = c.kept.min(c.history.len());
                let fields = Fields::of(&c.config, c.state.as_ref(), &c.pending)?;
                invocation
                    .arg("commit")
                    .arg(kept)
                    .arg(fields.config)
                    .arg(fields.state)
                    .arg(fields.pending)
                    .arg(codec::messages(&c.history[kept..])?);
            }
        }
        let what = "a turn's end";
        match text(self.run(&invocation).await?, what)?.as_deref() {
            Some("ok") => Ok(Ended::Ok),
            Some("gone") => Ok(Ended::Gone),
            Some("lost") => Ok(Ended::Lost),
            Some("short") => Ok(Ended::Short),
            _ => Err(unexpected(what)),
        }
    }
}
