//! Writing a turn back to its session, off the stream's path (`translation.md` §4.1).
//!
//! A turn marks its session running in the store, then [`begin`]s its commit: a [`Reporter`]
//! that owns the end of that mark, and [`Committed`], which says how the turn ended once it is
//! written back. The stream's [`TurnOwner`] settles the turn when the stream ends (terminal
//! event, or the client went away: then from the body's `Drop`) and hands the result to the
//! reporter, which spawns the task that writes it to the store ([`Deferred`]: spawned when the
//! turn ends, not while it streams). A reporter dropped without a report (the request failed
//! before its stream started, or its future was dropped) spawns the task that ends the mark
//! with the session unchanged. Nothing writes the store from `Drop` itself; a store failure is
//! logged and counted (`session_store_errors_total`), never a panic.
//!
//! The stream's last frame waits for the write ([`crate::http::body::Hold`]), and a request
//! refused after the mark was taken waits for it too ([`Reporter::close`]): a client that has
//! its answer can send the next turn at once and find the session free and up to date. A client
//! that left mid-turn has no answer to wait for: its next turn, finding the session marked,
//! waits for this process's write of the abandoned turn ([`Settling`]) before it is refused as
//! busy.
//!
//! What a turn leaves ([`settle`]):
//! - `tool_use`: everything the run produced, with the pending calls.
//! - `end_turn`, `max_tokens`, `refusal`: everything, less calls left without a result.
//! - an error, a cut stream or a client that left: the input and the completed tool rounds;
//!   the assistant step the failure interrupted is dropped, so the history never holds half an
//!   answer or a call without its stop, and the session takes the next turn.
//! - a failure before the upstream's first event: nothing (the turn may be sent again).

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::adapters::aap_client::planner;
use crate::dialect::aap::types::StopReason;
use crate::dialect::aap::AapWriter;
use crate::dialect::Reader;
use crate::error::{ErrorCode, Failure};
use crate::http::body::{Hold, RunOwner};
use crate::http::deferred::{Deferred, EndJob};
use crate::pipeline::Pipeline;
use crate::session::{Ending, SessionConfig, Settling, Store, ThreadRecord, TurnCommit, UnderWay};
use crate::telemetry::metrics::{Metrics, Outcome};

/// What the stream reports when it ends.
#[derive(Debug)]
enum Settled {
    Commit(Box<TurnCommit>),
    /// The upstream failed before its first event; the session stays as it was.
    NothingRan(Failure),
}

/// How a turn ended, once it is written back.
#[derive(Debug)]
pub(super) enum Ended {
    Committed,
    /// Nothing was committed: the upstream failed before its first event.
    NothingRan(Failure),
    /// The stream ended without a report, or the store failed (logged and counted).
    Unchanged,
}

/// The owner of a turn's stream: settles the turn when the stream ends and reports it.
pub(super) struct TurnOwner {
    report: Option<Reporter>,
    /// The session's configuration as the turn leaves it.
    config: Option<SessionConfig>,
    /// Messages in the session's stored history when the turn began.
    stored: usize,
}

impl TurnOwner {
    /// The owner reporting to `report`, for a session configured as `config` once the turn is
    /// done, whose stored history held `stored` messages.
    pub(super) fn new(report: Reporter, config: SessionConfig, stored: usize) -> TurnOwner {
        TurnOwner {
            report: Some(report),
            config: Some(config),
            stored,
        }
    }
}

impl TurnOwner {
    /// The agent session the turn leaves, for a session running on an AAP agent: written back
    /// with the turn (`SessionConfig::upstream`), as the history it commits keeps it.
    pub(super) fn set_upstream(&mut self, record: ThreadRecord) {
        if let Some(config) = self.config.as_mut() {
            config.upstream = Some(record);
        }
    }
}

impl<R: Reader + 'static> RunOwner<R, AapWriter> for TurnOwner {
    fn ended(&mut self, pipeline: &mut Pipeline<R, AapWriter>, _outcome: Outcome) -> Option<Hold> {
        let (Some(report), Some(config)) = (self.report.take(), self.config.take()) else {
            return None;
        };
        report.report(settle(pipeline, config, self.stored))
    }

    fn holds_end(&self) -> bool {
        self.report.is_some()
    }
}

/// Where a turn's end is reported: held by the request until its stream owns it, and by the
/// stream until it ends. While it lives the turn is under way ([`Settling`] watches it).
pub(super) struct Reporter {
    write: Deferred<WriteBack>,
    _under_way: UnderWay,
}

/// What writing a turn back needs, until the stream ends and a task does it.
struct WriteBack {
    store: Arc<dyn Store>,
    id: String,
    metrics: Arc<Metrics>,
    /// Ends the session's mark in [`Settling`] once the write is done, or when dropped.
    ending: Ending,
    ended: oneshot::Sender<Ended>,
}

/// How the turn ended, once it is written back: [`Ended::Unchanged`] if the write never ran
/// (the runtime shut down first).
pub(super) struct Committed(oneshot::Receiver<Ended>);

impl Committed {
    pub(super) async fn ended(self) -> Ended {
        self.0.await.unwrap_or(Ended::Unchanged)
    }
}

/// Begins the commit of the turn now running on session `id`.
pub(super) fn begin(
    store: Arc<dyn Store>,
    id: String,
    metrics: Arc<Metrics>,
    settling: &Arc<Settling>,
) -> (Reporter, Committed) {
    let (ended, committed) = oneshot::channel();
    let (under_way, ending) = settling.track(&id);
    let write = WriteBack {
        store,
        id,
        metrics,
        ending,
        ended,
    };
    let reporter = Reporter {
        write: Deferred::new(write),
        _under_way: under_way,
    };
    (reporter, Committed(committed))
}

impl Reporter {
    /// The request ends without a stream: the session stays as it was, and this returns once
    /// the mark is ended.
    pub(super) async fn close(self, committed: Committed) {
        drop(self);
        committed.ended().await;
    }

    /// Writes the turn's end back and holds the stream's last frame until it is written.
    /// `None` when the runtime is shutting down: nothing to wait for then.
    fn report(self, settled: Settled) -> Option<Hold> {
        self.write.report(settled)
    }
}

impl EndJob for WriteBack {
    type Report = Settled;

    /// No report: the session's mark is ended with the session unchanged.
    async fn run(self, settled: Option<Settled>) {
        let (commit, outcome) = match settled {
            Some(Settled::Commit(commit)) => (Some(*commit), Ended::Committed),
            Some(Settled::NothingRan(failure)) => (None, Ended::NothingRan(failure)),
            None => (None, Ended::Unchanged),
        };
        let op = if commit.is_some() {
            "commit_turn"
        } else {
            "end_turn"
        };
        let outcome = match self.store.end_turn(&self.id, commit).await {
            Ok(()) => outcome,
            Err(error) => {
                tracing::error!(%error, session_id = %self.id, "could not write the turn back to its session");
                self.metrics.store_error(op);
                Ended::Unchanged
            }
        };
        self.ending.ended();
        let _ = self.ended.send(outcome);
    }
}

/// Whether the upstream failed before its first event: the turn then leaves the session as it
/// was (read before the stream's end takes the writer's stop).
pub(super) fn nothing_ran<R: Reader>(pipeline: &Pipeline<R, AapWriter>) -> bool {
    let reason = pipeline.writer().stop().map(|s| s.reason);
    pipeline.stats().events_in == 0 && reason.is_none_or(|r| r == StopReason::Error)
}

/// What the turn leaves in its session; see the module docs.
fn settle<R: Reader>(
    pipeline: &mut Pipeline<R, AapWriter>,
    config: SessionConfig,
    stored: usize,
) -> Settled {
    let failure = pipeline.failure();
    let nothing = nothing_ran(pipeline);
    let (mut transcript, stop) = pipeline.writer_mut().take();
    let reason = stop.as_ref().map(|s| s.reason);
    if nothing {
        let code = failure.unwrap_or(ErrorCode::UpstreamTruncated);
        tracing::warn!(code = %code, "the upstream failed before its first event; the session is unchanged");
        return Settled::NothingRan(Failure::new(
            code,
            format!("the agent failed before answering ({code}); the session is unchanged, the turn may be sent again"),
        ));
    }
    let pending = match stop {
        Some(stop) if stop.reason == StopReason::ToolUse => stop.pending,
        Some(stop) if stop.reason != StopReason::Error => {
            transcript.drop_unresolved_calls();
            Vec::new()
        }
        _ => {
            transcript.truncate_to_last_tool_round();
            Vec::new()
        }
    };
    tracing::info!(
        stop = reason.map_or("none", StopReason::as_str),
        pending = pending.len(),
        "turn committed"
    );
    let kept = transcript.unchanged().min(stored);
    let (history, state) = transcript.into_parts();
    let mut config = config;
    if let Some(record) = config.upstream.as_mut() {
        planner::reconcile(record, &history);
    }
    Settled::Commit(Box::new(TurnCommit {
        config,
        history,
        kept,
        state,
        pending,
    }))
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use bytes::BytesMut;

    use super::*;
    use crate::dialect::aap::transcript::Transcript;
    use crate::dialect::aap::types::StreamMode;
    use crate::dialect::aap::TurnOptions;
    use crate::dialect::{CodecOptions, Dialect};
    use crate::event::RunIds;
    use crate::pipeline::PipelineOptions;
    use crate::session::{
        MemoryStore, Principal, Session, SessionLimits, StoreError, ThreadRecord,
    };

    /// The memory store, but writing a turn back fails.
    #[derive(Debug)]
    struct FailingCommit(MemoryStore);

    #[async_trait]
    impl Store for FailingCommit {
        fn limits(&self) -> SessionLimits {
            self.0.limits()
        }
        fn counts(&self) -> crate::session::StoreCounts {
            self.0.counts()
        }
        async fn create(&self, s: Session) -> Result<(), StoreError> {
            self.0.create(s).await
        }
        async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError> {
            self.0.get(id, owner).await
        }
        async fn config(
            &self,
            id: &str,
            owner: &Principal,
        ) -> Result<Option<SessionConfig>, StoreError> {
            self.0.config(id, owner).await
        }
        async fn list(
            &self,
            face: &str,
            owner: &Principal,
            after: Option<&str>,
            limit: usize,
        ) -> Result<(Vec<Session>, bool), StoreError> {
            self.0.list(face, owner, after, limit).await
        }
        async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError> {
            self.0.delete(id, owner).await
        }
        async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError> {
            self.0.begin_turn(id, owner).await
        }
        async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError> {
            self.0.charge_input(id, bytes).await
        }
        async fn end_turn(&self, _: &str, _: Option<TurnCommit>) -> Result<(), StoreError> {
            Err(StoreError::Unavailable("the disk is full".into()))
        }
        async fn begin_thread(
            &self,
            key: &str,
            owner: &Principal,
        ) -> Result<Option<ThreadRecord>, StoreError> {
            self.0.begin_thread(key, owner).await
        }
        async fn save_thread(&self, key: &str, r: ThreadRecord) -> Result<(), StoreError> {
            self.0.save_thread(key, r).await
        }
        async fn end_thread(&self, key: &str) -> Result<(), StoreError> {
            self.0.end_thread(key).await
        }
    }

    const RUN: &[u8] = b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hello\"}\n\n\
data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n\
data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

    /// A session marked running in `store`, and a finished AG-UI → AAP run of one reply.
    async fn finished_turn(
        store: &Arc<dyn Store>,
    ) -> (String, Pipeline<crate::dialect::AnyReader, AapWriter>) {
        let id = crate::session::new_session_id();
        let session = Session {
            id: id.clone(),
            ..Session::default()
        };
        store.create(session).await.unwrap();
        store
            .begin_turn(&id, &Principal::anonymous())
            .await
            .unwrap();
        let ids = RunIds {
            thread_id: "t".into(),
            run_id: "r".into(),
        };
        let reader = Dialect::AgUi.reader(&ids, crate::sse::Framing::Sse, &CodecOptions::default());
        let writer = AapWriter::new(
            TurnOptions {
                mode: StreamMode::Delta,
                ..TurnOptions::default()
            },
            Transcript::new(Vec::new(), None, 1 << 20),
        );
        let mut pipeline = Pipeline::from_parts(reader, writer, PipelineOptions::new(ids));
        let mut out = BytesMut::new();
        pipeline.push(RUN, &mut out);
        // A turn's stop waits for the upstream's end (a second run may follow the first).
        pipeline.end(&mut out);
        assert!(pipeline.is_finished());
        (id, pipeline)
    }

    #[tokio::test]
    async fn the_turn_is_in_the_session_before_the_last_frame_may_leave() {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let (id, mut pipeline) = finished_turn(&store).await;
        let (reporter, committed) = begin(
            Arc::clone(&store),
            id.clone(),
            Arc::clone(&metrics),
            &Arc::default(),
        );
        let mut owner = TurnOwner::new(reporter, SessionConfig::default(), 0);
        let hold = owner
            .ended(&mut pipeline, Outcome::Completed)
            .expect("a hold");
        hold.await;
        let session = store
            .get(&id, &Principal::anonymous())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(session.history.len(), 1, "the reply was written back");
        assert!(
            store.begin_turn(&id, &Principal::anonymous()).await.is_ok(),
            "the session is free"
        );
        assert!(matches!(committed.ended().await, Ended::Committed));
    }

    /// An open turn holds no task: the write is spawned once the turn reports its end.
    #[tokio::test]
    async fn no_task_runs_for_a_turn_until_it_ends() {
        let runtime = tokio::runtime::Handle::current().metrics();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let (id, mut pipeline) = finished_turn(&store).await;
        let before = runtime.num_alive_tasks();
        let (reporter, committed) = begin(
            Arc::clone(&store),
            id.clone(),
            Metrics::new(),
            &Arc::default(),
        );
        let mut owner = TurnOwner::new(reporter, SessionConfig::default(), 0);
        assert_eq!(runtime.num_alive_tasks(), before, "nothing spawned yet");
        let hold = owner
            .ended(&mut pipeline, Outcome::Completed)
            .expect("a hold");
        assert_eq!(runtime.num_alive_tasks(), before + 1, "the write runs");
        hold.await;
        assert!(matches!(committed.ended().await, Ended::Committed));
    }

    /// A reporter dropped where no runtime can take the write (a shutdown) does not panic, and
    /// its mark no longer holds a next turn of this process.
    #[test]
    fn a_reporter_dropped_outside_a_runtime_ends_its_mark() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let settling = Arc::new(Settling::new(std::time::Duration::from_secs(5)));
        let (id, _pipeline) = runtime.block_on(finished_turn(&store));
        let (reporter, committed) =
            begin(Arc::clone(&store), id.clone(), Metrics::new(), &settling);
        drop(reporter);
        runtime.block_on(async {
            assert!(matches!(committed.ended().await, Ended::Unchanged));
            tokio::time::timeout(std::time::Duration::from_secs(1), settling.settled(&id))
                .await
                .expect("no wait for a mark nobody will end");
        });
    }

    #[tokio::test]
    async fn a_failed_commit_is_logged_and_counted_and_the_stream_still_ends() {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> =
            Arc::new(FailingCommit(MemoryStore::new(SessionLimits::default())));
        let (id, mut pipeline) = finished_turn(&store).await;
        let (reporter, committed) = begin(
            Arc::clone(&store),
            id,
            Arc::clone(&metrics),
            &Arc::default(),
        );
        let mut owner = TurnOwner::new(reporter, SessionConfig::default(), 0);
        owner
            .ended(&mut pipeline, Outcome::Completed)
            .expect("a hold")
            .await;
        assert!(matches!(committed.ended().await, Ended::Unchanged));
        let exposition = metrics.encode();
        assert!(
            exposition.contains("session_store_errors_total{op=\"commit_turn\"} 1"),
            "{exposition}"
        );
    }

    #[tokio::test]
    async fn a_request_refused_before_its_stream_leaves_the_session_unchanged_and_free() {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let (id, _pipeline) = finished_turn(&store).await;
        let (reporter, committed) = begin(Arc::clone(&store), id.clone(), metrics, &Arc::default());
        reporter.close(committed).await;
        let session = store
            .begin_turn(&id, &Principal::anonymous())
            .await
            .expect("the session is free");
        assert!(session.history.is_empty());
    }

    #[tokio::test]
    async fn the_next_turn_waits_for_an_abandoned_turn_and_not_for_a_running_one() {
        let metrics = Metrics::new();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SessionLimits::default()));
        let settling = Arc::new(Settling::new(std::time::Duration::from_secs(5)));
        let (id, _pipeline) = finished_turn(&store).await;
        let (reporter, committed) = begin(Arc::clone(&store), id.clone(), metrics, &settling);
        // Under way: nothing to wait for, the next turn is busy.
        tokio::time::timeout(std::time::Duration::from_secs(1), settling.settled(&id))
            .await
            .expect("no wait while the turn is under way");
        assert_eq!(
            store.begin_turn(&id, &Principal::anonymous()).await.err(),
            Some(StoreError::Busy)
        );
        // Abandoned (its request dropped): the next turn waits for the write-back.
        drop(reporter);
        settling.settled(&id).await;
        assert!(
            store.begin_turn(&id, &Principal::anonymous()).await.is_ok(),
            "the session is free"
        );
        assert!(matches!(committed.ended().await, Ended::Unchanged));
    }
}
