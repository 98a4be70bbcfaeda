//! The work a stream's owner does once the stream ends — write a turn back to its session, save
//! a thread's record — as a task spawned then, with the [`Hold`] the stream's last frame waits
//! on.
//!
//! A [`Deferred`] holds what the work needs (an [`EndJob`]) for as long as the stream runs, and
//! spawns the task when the owner reports the stream's end, or from its `Drop` when it goes
//! without a report (the request failed before its stream, the client left): the job then runs
//! with no report, so whatever the job owns is always released by the job itself. Spawning at
//! the end rather than at the start matters for memory: a task waiting on a channel for as
//! long as a stream is open cost about half a KiB of RSS per open stream (`benches/RESULTS.md`,
//! 9,950 open AAP turns), the job alone is a few pointers.
//!
//! The task is a task, not work done in `report` or `Drop`: it must finish even if whoever
//! reported goes away, and `Drop` must not block. Outside a runtime (a `Deferred` dropped while
//! the process shuts down) nothing is spawned and the job is dropped unrun: what it owned
//! ends with the process.

use std::future::Future;

use tokio::task::JoinHandle;
use tracing::Instrument;

use super::body::Hold;

/// The work a [`Deferred`] runs once its stream has ended.
pub trait EndJob: Send + Sized + 'static {
    /// What the stream's owner reports when the stream ends.
    type Report: Send + 'static;

    /// Does the work: `report` is `None` when the stream ended without one.
    fn run(self, report: Option<Self::Report>) -> impl Future<Output = ()> + Send + 'static;
}

/// See the module docs.
pub struct Deferred<J: EndJob> {
    /// `None` once spawned.
    job: Option<J>,
    /// The span current when the work began (the request's), which its log lines belong to.
    span: tracing::Span,
}

impl<J: EndJob> Deferred<J> {
    /// Holds `job` until the stream ends, in the current span.
    pub fn new(job: J) -> Deferred<J> {
        Deferred {
            job: Some(job),
            span: tracing::Span::current(),
        }
    }

    /// Runs the job with `report` and holds the stream's last frame until it is done. `None`
    /// outside a runtime: nothing to wait for then.
    pub fn report(mut self, report: J::Report) -> Option<Hold> {
        let task = self.spawn(Some(report))?;
        Some(Box::pin(async move {
            // A job that panicked is done too; the panic is the runtime's to report.
            let _ = task.await;
        }))
    }

    fn spawn(&mut self, report: Option<J::Report>) -> Option<JoinHandle<()>> {
        let job = self.job.take()?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(runtime.spawn(job.run(report).instrument(self.span.clone())))
    }
}

impl<J: EndJob> Drop for Deferred<J> {
    fn drop(&mut self) {
        // Ended without a report: the job still runs, to release what it owns.
        self.spawn(None);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records what it was run with.
    struct Note(Arc<Mutex<Vec<Option<u32>>>>);

    impl EndJob for Note {
        type Report = u32;

        async fn run(self, report: Option<u32>) {
            tokio::task::yield_now().await;
            self.0.lock().unwrap().push(report);
        }
    }

    fn runs() -> Arc<Mutex<Vec<Option<u32>>>> {
        Arc::default()
    }

    #[tokio::test]
    async fn no_task_runs_until_the_report_and_the_hold_waits_for_it() {
        let seen = runs();
        let metrics = tokio::runtime::Handle::current().metrics();
        let deferred = Deferred::new(Note(seen.clone()));
        assert_eq!(
            metrics.num_alive_tasks(),
            0,
            "a task before the stream ended"
        );
        let hold = deferred.report(7).expect("inside a runtime");
        assert_eq!(metrics.num_alive_tasks(), 1);
        hold.await;
        assert_eq!(*seen.lock().unwrap(), [Some(7)]);
    }

    #[tokio::test]
    async fn dropped_without_a_report_it_still_runs() {
        let seen = runs();
        drop(Deferred::new(Note(seen.clone())));
        for _ in 0..10 {
            if !seen.lock().unwrap().is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(*seen.lock().unwrap(), [None]);
    }

    #[test]
    fn outside_a_runtime_nothing_is_spawned_and_nothing_panics() {
        let seen = runs();
        assert!(Deferred::new(Note(seen.clone())).report(1).is_none());
        drop(Deferred::new(Note(seen.clone())));
        assert!(seen.lock().unwrap().is_empty());
    }
}
