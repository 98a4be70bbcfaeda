//! `GET /sessions`: the ledger's page of ids after the cursor, then the sessions read all at
//! once, each in a pipeline of its own (a pipeline stays on one slot: a cluster refuses one
//! that spans slots). An id whose keys are gone (deleted or expired before the ledger heard of
//! it) is left out and forgotten, and the page is read on from there, so a page is short only
//! when the list ends.

use ::redis::Value;

use super::codec::{self, array, text, unexpected};
use super::sessions::list_name;
use super::Inner;
use crate::session::{Principal, Session, StoreError};

/// Rounds of reading a page when entries of the ledger turn out to be gone.
const PAGE_ROUNDS: usize = 4;

impl Inner {
    pub(super) async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        let list = list_name(owner, face);
        let mut cursor = after.unwrap_or("").to_owned();
        let mut found = Vec::new();
        // Whether the ledger may hold more than was read.
        let mut unread = false;
        for _ in 0..PAGE_ROUNDS {
            let want = limit.saturating_add(1) - found.len();
            let ids = self.page(&list, &cursor, want).await?;
            unread = ids.len() == want;
            let (sessions, gone) = self.read_many(&ids, owner, face).await?;
            found.extend(sessions);
            if !gone.is_empty() {
                if let Err(error) = self.forget(&gone).await {
                    tracing::debug!(%error, "could not forget sessions whose keys are gone");
                }
            }
            match ids.last() {
                Some(last) if unread && found.len() <= limit => cursor.clone_from(last),
                _ => break,
            }
        }
        let more = found.len() > limit || unread;
        found.truncate(limit);
        Ok((found, more))
    }

    /// Sessions `ids` of `owner` on `face`, in order, and the ids whose keys are gone.
    async fn read_many<'a>(
        &self,
        ids: &'a [String],
        owner: &Principal,
        face: &str,
    ) -> Result<(Vec<Session>, Vec<&'a str>), StoreError> {
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let what = "a page of sessions";
        let (mut sessions, mut gone) = (Vec::new(), Vec::new());
        for (id, (fields, history)) in ids.iter().zip(self.read_each(ids).await?) {
            let mut fields = array(fields, what)?;
            if fields.is_empty() {
                return Err(unexpected(what));
            }
            match text(fields.remove(0), what)? {
                None => {
                    gone.push(id.as_str());
                    continue;
                }
                Some(stored) if stored != owner.as_str() => continue,
                Some(_) => {}
            }
            fields.push(history);
            match codec::session(id, owner, fields, what) {
                Ok(session) if session.config.face == face => sessions.push(session),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, session_id = %id, "a stored session does not decode; it is left out of the list")
                }
            }
        }
        Ok((sessions, gone))
    }

    /// The meta fields and the history of each of `ids`, in order. The reads run at once (a
    /// multiplexed connection, or one per node, carries them together).
    async fn read_each(&self, ids: &[String]) -> Result<Vec<(Value, Value)>, StoreError> {
        let what = "a page of sessions";
        let conn = self.link.conn()?;
        let mut reads = tokio::task::JoinSet::new();
        for (at, id) in ids.iter().enumerate() {
            let [meta, history, _] = self.keys.session(id);
            let mut pipe = ::redis::pipe();
            pipe.cmd("HMGET")
                .arg(meta)
                .arg(&["owner", "config", "state", "pending"]);
            pipe.cmd("LRANGE").arg(history).arg(0).arg(-1);
            let mut conn = conn.clone();
            reads.spawn(async move { (at, pipe.query_async::<Vec<Value>>(&mut conn).await) });
        }
        let mut read: Vec<Option<(Value, Value)>> = vec![None; ids.len()];
        while let Some(done) = reads.join_next().await {
            let (at, replies) = done.map_err(|_| unexpected(what))?;
            let mut replies = replies.map_err(|e| self.link.failed(e))?.into_iter();
            let (Some(fields), Some(history), None) =
                (replies.next(), replies.next(), replies.next())
            else {
                return Err(unexpected(what));
            };
            if let Some(slot) = read.get_mut(at) {
                *slot = Some((fields, history));
            }
        }
        read.into_iter()
            .map(|pair| pair.ok_or_else(|| unexpected(what)))
            .collect()
    }
}
