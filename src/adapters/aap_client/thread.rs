//! The end of a thread's run, off the stream's path: the run marks its AG-UI thread running in
//! the store (one run per thread at a time), then [`spawn`]s a task that owns the end of that
//! mark. When the stream ends, the [`super::driver::Driver`] sends the thread's final record
//! over a one-shot channel; the task saves it and ends the mark. A channel closed without a
//! report (the run failed before its first turn, or was dropped) ends the mark with what was
//! saved so far. Store failures are logged and counted, never a panic; the stream's last frame
//! waits for the task, so the thread is free when the client sends its next run, and a run of
//! a client that left is waited for by the thread's next run ([`Settling`]).
//!
//! A record's [`key`] holds the route, the principal and the AG-UI thread id, so each caller
//! has threads of its own whatever ids clients choose.

use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::Instrument;

use crate::http::body::{self, report_and_hold, Hold};
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

/// The record to save (none: leave the saved one), and where the task says it is done.
type Report = body::Report<Option<ThreadRecord>>;

/// Where a run reports its thread's final record.
pub(super) struct ThreadReporter(oneshot::Sender<Report>, #[allow(dead_code)] UnderWay);

impl ThreadReporter {
    /// Hands `record` to the task; the returned hold resolves once it is saved and the thread
    /// is free.
    pub(super) fn report(self, record: Option<ThreadRecord>) -> Option<Hold> {
        report_and_hold(self.0, record)
    }
}

/// Spawns the task that ends the run now marked on thread `key`.
pub(super) fn spawn(
    store: Arc<dyn Store>,
    key: String,
    metrics: Arc<Metrics>,
    settling: &Arc<Settling>,
) -> ThreadReporter {
    let (tx, rx) = oneshot::channel();
    let (under_way, ending) = settling.track(&key);
    let span = tracing::Span::current();
    tokio::spawn(end_run(store, key, rx, metrics, ending).instrument(span));
    ThreadReporter(tx, under_way)
}

/// Saves a record within a run, logging and counting a failure (the run goes on: a lost
/// record degrades to a fresh session seeded from the client's history).
pub(super) async fn save(store: &dyn Store, key: &str, record: ThreadRecord, metrics: &Metrics) {
    if let Err(error) = store.save_thread(key, record).await {
        tracing::warn!(%error, "could not save the thread's record");
        metrics.store_error("save_thread");
    }
}

async fn end_run(
    store: Arc<dyn Store>,
    key: String,
    report: oneshot::Receiver<Report>,
    metrics: Arc<Metrics>,
    ending: Ending,
) {
    // `_done` tells the stream the thread is free when it drops, after the writes.
    let (record, _done) = match report.await {
        Ok((record, done)) => (record, Some(done)),
        Err(_) => (None, None),
    };
    if let Some(record) = record {
        save(store.as_ref(), &key, record, &metrics).await;
    }
    if let Err(error) = store.end_thread(&key).await {
        tracing::error!(%error, "could not end the thread's run");
        metrics.store_error("end_thread");
    }
    ending.ended();
}

#[cfg(test)]
mod tests {
    use super::*;

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
