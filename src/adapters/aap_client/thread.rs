//! The end of a thread's run, off the stream's path: the run marks its AG-UI thread running in
//! the store (one run per thread at a time) and [`begin`]s the end of that mark, a
//! [`ThreadReporter`]. When the stream ends, the [`super::driver::Driver`] reports the
//! thread's final record; a task then saves it and ends the mark ([`Deferred`]: spawned when
//! the run ends, not while it streams). A reporter dropped without a report (the run failed
//! before its first turn, or was dropped) ends the mark with what was saved so far. Store
//! failures are logged and counted, never a panic; the stream's last frame waits for the task,
//! so the thread is free when the client sends its next run, and a run of a client that left is
//! waited for by the thread's next run ([`Settling`]).
//!
//! A record's [`key`] holds the route, the principal and the AG-UI thread id, so each caller
//! has threads of its own whatever ids clients choose.

use std::sync::Arc;

use crate::http::body::Hold;
use crate::http::deferred::{Deferred, EndJob};
use crate::session::{Ending, Principal, Settling, Store, ThreadRecord, UnderWay};
use crate::telemetry::metrics::Metrics;

/// The store key of the record of thread `thread_id` of `principal` on the route at `path`.
/// The principal is length-prefixed, so no choice of principal and thread id can spell
/// another pair's key.
pub(super) fn key(path: &str, principal: &Principal, thread_id: &str) -> String {
    let principal = principal.as_str();
    format!(
        "{path}\u{1f}{}:{principal}\u{1f}{thread_id}",
        principal.len()
    )
}

/// Where a run reports its thread's final record.
pub(super) struct ThreadReporter(Deferred<EndRun>, #[allow(dead_code)] UnderWay);

impl ThreadReporter {
    /// Hands `record` (none: leave the saved one) to the task that saves it; the returned hold
    /// resolves once it is saved and the thread is free.
    pub(super) fn report(self, record: Option<ThreadRecord>) -> Option<Hold> {
        self.0.report(record)
    }
}

/// Begins the end of the run now marked on thread `key`.
pub(super) fn begin(
    store: Arc<dyn Store>,
    key: String,
    metrics: Arc<Metrics>,
    settling: &Arc<Settling>,
) -> ThreadReporter {
    let (under_way, ending) = settling.track(&key);
    let end = EndRun {
        store,
        key,
        metrics,
        ending,
    };
    ThreadReporter(Deferred::new(end), under_way)
}

/// What ending a thread's run needs, until the run ends and a task does it.
struct EndRun {
    store: Arc<dyn Store>,
    key: String,
    metrics: Arc<Metrics>,
    /// Ends the thread's mark in [`Settling`] once the writes are done, or when dropped.
    ending: Ending,
}

impl EndJob for EndRun {
    /// The record to save; none: leave the saved one.
    type Report = Option<ThreadRecord>;

    async fn run(self, record: Option<Option<ThreadRecord>>) {
        if let Some(record) = record.flatten() {
            save(self.store.as_ref(), &self.key, record, &self.metrics).await;
        }
        if let Err(error) = self.store.end_thread(&self.key).await {
            tracing::error!(%error, "could not end the thread's run");
            self.metrics.store_error("end_thread");
        }
        self.ending.ended();
    }
}

/// Saves a record within a run, logging and counting a failure (the run goes on: a lost
/// record degrades to a fresh session seeded from the client's history).
pub(super) async fn save(store: &dyn Store, key: &str, record: ThreadRecord, metrics: &Metrics) {
    if let Err(error) = store.save_thread(key, record).await {
        tracing::warn!(%error, "could not save the thread's record");
        metrics.store_error("save_thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{MemoryStore, SessionLimits};

    /// A running thread holds no task; its record is saved and the thread freed by one spawned
    /// when the run reports, before the hold resolves.
    #[tokio::test]
    async fn no_task_runs_for_a_thread_until_its_run_ends() {
        let runtime = tokio::runtime::Handle::current().metrics();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let owner = Principal::new("a");
        let key = key("/r", &owner, "t");
        assert!(store.begin_thread(&key, &owner).await.unwrap().is_none());
        let before = runtime.num_alive_tasks();
        let reporter = begin(
            Arc::clone(&store),
            key.clone(),
            Metrics::new(),
            &Arc::default(),
        );
        assert_eq!(runtime.num_alive_tasks(), before, "nothing spawned yet");
        let record = ThreadRecord {
            session_id: "sess_1".into(),
            ..ThreadRecord::default()
        };
        let hold = reporter.report(Some(record)).expect("a hold");
        assert_eq!(runtime.num_alive_tasks(), before + 1, "the save runs");
        hold.await;
        let saved = store
            .begin_thread(&key, &owner)
            .await
            .expect("the thread is free");
        assert_eq!(saved.map(|r| r.session_id), Some("sess_1".to_owned()));
    }

    /// A run dropped without a report still frees its thread, the saved record unchanged.
    #[tokio::test]
    async fn a_run_dropped_without_a_report_frees_its_thread() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let owner = Principal::new("a");
        let key = key("/r", &owner, "t");
        store.begin_thread(&key, &owner).await.unwrap();
        let settling = Arc::new(Settling::new(std::time::Duration::from_secs(5)));
        drop(begin(
            Arc::clone(&store),
            key.clone(),
            Metrics::new(),
            &settling,
        ));
        tokio::time::timeout(std::time::Duration::from_secs(5), settling.settled(&key))
            .await
            .expect("the mark ends");
        assert!(
            store.begin_thread(&key, &owner).await.is_ok(),
            "the thread is free"
        );
    }

    #[test]
    fn keys_differ_per_principal_and_cannot_be_forged() {
        let (a, b) = (Principal::new("a"), Principal::new("b"));
        assert_ne!(key("/r", &a, "t"), key("/r", &b, "t"));
        assert_ne!(key("/r", &a, "t"), key("/s", &a, "t"));
        assert_eq!(key("/r", &a, "t"), key("/r", &Principal::new("a"), "t"));
        // A separator inside a principal or a thread id does not make two pairs meet.
        let tricky = Principal::new("a\u{1f}b");
        assert_ne!(key("/r", &tricky, "c"), key("/r", &a, "b\u{1f}c"));
    }
}
