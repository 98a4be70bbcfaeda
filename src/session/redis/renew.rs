//! Keeping a run's lock: a task per running turn or thread renews the lock every third of
//! `lock_ttl` (only while its value is still this run's token), and with it the expiry of what
//! the lock guards, in Redis and in the ledger. It stops when the run ends (aborted), when the
//! store is dropped, or when the lock turns out to be gone; a failed renewal is retried at the
//! next tick, so a lock is lost only after about `lock_ttl` of failures.

use std::time::Duration;

use tokio::task::AbortHandle;

use super::codec::int;
use super::ledger::{ms, Kind};
use super::Inner;

/// What a run's renewal keeps alive.
#[derive(Debug)]
pub(super) struct Lease {
    /// The lock, then the keys it guards.
    pub keys: Vec<String>,
    pub token: String,
    /// The ledger entry that expires with them.
    pub kind: Kind,
    pub member: String,
}

/// The shortest pause between renewals, whatever `lock_ttl` is.
const MIN_PERIOD: Duration = Duration::from_millis(10);

impl Inner {
    /// Starts renewing `lease`; abort the handle when the run ends.
    pub(super) fn keep_renewed(&self, lease: Lease) -> AbortHandle {
        let me = self.me.clone();
        let every = (self.lock_ttl / 3).max(MIN_PERIOD);
        tokio::spawn(async move {
            // Ticks keep their pace however long a renewal takes (each is bounded by the
            // period), so a slow answer never delays the next attempt past the lock's life.
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(inner) = me.upgrade() else {
                    return;
                };
                if !inner.renew(&lease, every).await {
                    return;
                }
            }
        })
        .abort_handle()
    }

    /// One renewal, within `bound`; whether to go on.
    async fn renew(&self, lease: &Lease, bound: Duration) -> bool {
        let mut invocation = self.scripts.renew.prepare_invoke();
        invocation
            .key(&lease.keys)
            .arg(lease.token.as_str())
            .arg(ms(self.lock_ttl))
            .arg(ms(self.running_ttl()));
        let bound = bound.min(self.link.timeout);
        let outcome = tokio::time::timeout(bound, self.run(&invocation)).await;
        let what = match lease.kind {
            Kind::Session => "session",
            Kind::Thread => "thread",
        };
        match outcome.map(|r| r.and_then(|v| int(v, "a lock's renewal"))) {
            Ok(Ok(1)) => {
                let touched = self.touch(lease.kind, &lease.member, self.running_ttl(), true);
                match tokio::time::timeout(bound, touched).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::debug!(%error, kind = what, "could not push a running entry's expiry in the ledger")
                    }
                    Err(_) => {
                        tracing::debug!(
                            kind = what,
                            "pushing a running entry's expiry in the ledger timed out"
                        )
                    }
                }
                true
            }
            Ok(Ok(-1)) if matches!(lease.kind, Kind::Session) => {
                tracing::info!(kind = what, id = %lease.member, "the run's lock is gone with what it guarded (deleted)");
                false
            }
            Ok(Ok(_)) => {
                tracing::error!(
                    kind = what,
                    id = %lease.member,
                    "the run's lock expired and is no longer this process's: its result will not be written"
                );
                false
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, kind = what, id = %lease.member, "could not renew a run's lock; retrying");
                true
            }
            Err(_) => {
                tracing::warn!(kind = what, id = %lease.member, "renewing a run's lock timed out; retrying");
                true
            }
        }
    }
}
