//! One run's state across its turns, and the [`Driver`] that owns the run's stream: at each
//! turn's stop it decides what follows (the user's messages after an answers turn, the
//! gateway's own answers for a client that cannot be asked, or the end), and when the stream
//! ends it hands the thread's record to the thread's committer.

use std::sync::{Arc, Mutex, PoisonError};

use crate::config::aap_client::Unconfirmable;
use crate::config::AapUpstream;
use crate::dialect::aap::read::{AapCall, Hitl};
use crate::dialect::aap::types::{AapMessage, StopReason, StreamMode, TurnRequest};
use crate::dialect::aap::AapReader;
use crate::dialect::Writer;
use crate::error::{ErrorCode, Failure};
use crate::event::RunAgentInput;
use crate::http::body::{Hold, Next, RunOwner};
use crate::pipeline::Pipeline;
use crate::session::{PendingCall, Principal, ThreadRecord};
use crate::telemetry::metrics::Outcome;

use super::link::Link;
use super::planner::RunPlan;
use super::thread::ThreadReporter;

/// Permission turns the gateway answers on its own within one run (A3), at most.
const MAX_AUTO_TURNS: usize = 8;

/// Which turn of the run is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Tool results and permissions (or, without any, the user's messages).
    First,
    /// The user's messages after the answers' turn.
    Users,
    /// Permissions the gateway answered itself.
    Auto(usize),
}

/// One run's state, shared by the request that opens the first turn and the [`Driver`].
pub(super) struct RunState {
    pub(super) key: String,
    /// Whom the thread record belongs to (its quota).
    pub(super) owner: Principal,
    pub(super) config: AapUpstream,
    pub(super) input: RunAgentInput,
    /// Where the thread's record goes when the stream ends; set once the thread is marked
    /// running.
    pub(super) thread: Option<ThreadReporter>,
    pub(super) record: ThreadRecord,
    pub(super) plan: Option<RunPlan>,
    pub(super) stage: Stage,
    pub(super) mode: StreamMode,
    /// Permissions answered for the client, kept for its next run when it also has results
    /// to give (A3 with a mixed stop).
    pub(super) held: Vec<(String, bool)>,
    /// The agent session this run created, if it created one.
    pub(super) created: Option<String>,
    /// The agent session a diverged history made this run leave, if any.
    pub(super) replaced: Option<String>,
}

impl RunState {
    /// A run about to open its first turn: no thread reporter, record or plan yet.
    pub(super) fn shared(
        key: String,
        owner: Principal,
        config: AapUpstream,
        input: RunAgentInput,
    ) -> Shared {
        Arc::new(Mutex::new(RunState {
            key,
            owner,
            config,
            input,
            thread: None,
            record: ThreadRecord::default(),
            plan: None,
            stage: Stage::First,
            mode: StreamMode::None,
            held: Vec::new(),
            created: None,
            replaced: None,
        }))
    }
}

pub(super) type Shared = Arc<Mutex<RunState>>;

pub(super) fn lock(state: &Shared) -> std::sync::MutexGuard<'_, RunState> {
    // A panic elsewhere cannot leave the state half-written in a way that matters more than
    // ending the run; keep going with what is there.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Decides what follows each turn, and hands the record over when the run ends.
pub(crate) struct Driver {
    pub(super) link: Link,
    pub(super) state: Shared,
}

impl Driver {
    /// A further turn on the run's session.
    fn follow(&self, messages: Vec<AapMessage>) -> Next {
        let (session_id, mode) = {
            let s = lock(&self.state);
            (s.record.session_id.clone(), s.mode)
        };
        let link = self.link.clone();
        let turn = TurnRequest {
            agent: None,
            stream: Some(mode.as_str().to_owned()),
            messages,
            tools: None,
        };
        Next::Open(Box::pin(async move {
            link.turn(&session_id, &turn).await.map_err(|f| {
                if f.code == ErrorCode::UpstreamHttp(404) {
                    tracing::warn!(session_id = %session_id, "the AAP agent lost the session in the middle of a run");
                    Failure::new(
                        ErrorCode::AapSessionNotFound,
                        "the AAP agent lost the session in the middle of a run",
                    )
                } else {
                    f
                }
            })
        }))
    }
}

impl<W: Writer + Send + 'static> RunOwner<AapReader, W> for Driver {
    fn after_handover(&mut self, pipeline: &mut Pipeline<AapReader, W>) -> Next {
        let Some(stop) = pipeline.reader().stop().cloned() else {
            return Next::End;
        };
        let options = pipeline.reader().options().clone();
        let mut s = lock(&self.state);
        if stop.reason == StopReason::EndTurn && s.stage == Stage::First {
            let users = s.plan.as_ref().map(|p| p.users.clone()).unwrap_or_default();
            if !users.is_empty() {
                let ids = s
                    .plan
                    .as_ref()
                    .map(|p| p.user_ids.clone())
                    .unwrap_or_default();
                s.record.forwarded.extend(ids);
                s.stage = Stage::Users;
                drop(s);
                return self.follow(users);
            }
        }
        if stop.reason != StopReason::ToolUse
            || options.hitl != Hitl::Unconfirmable
            || pipeline.reader().stop_carries_terminal()
        {
            return Next::End;
        }
        let (permissions, client): (Vec<&AapCall>, Vec<&AapCall>) =
            stop.unresolved.iter().partition(|c| !c.is_client(&options));
        if permissions.is_empty() {
            return Next::End;
        }
        let granted = match s.config.unconfirmable {
            Unconfirmable::Error => {
                let names: Vec<&str> = permissions.iter().map(|c| c.name.as_str()).collect();
                tracing::info!(
                    tools = %names.join(", "),
                    "the agent needs permissions this client cannot be asked for (unconfirmable = \"error\")"
                );
                return Next::Fail(Failure::new(
                    ErrorCode::ConfirmationUnavailable,
                    "the agent needs permission to run a tool and this client cannot be asked (declare the confirm tool, or send protocolVersion 1.0 for interrupts)",
                ));
            }
            Unconfirmable::Deny => false,
            Unconfirmable::Grant => true,
        };
        let auto = match s.stage {
            Stage::Auto(n) => n + 1,
            _ => 1,
        };
        if !client.is_empty() || auto > MAX_AUTO_TURNS {
            // The client still owes results: the verdicts wait for them.
            s.held = permissions
                .iter()
                .map(|c| (c.id.clone(), granted))
                .collect();
            return Next::End;
        }
        tracing::info!(
            granted,
            calls = permissions.len(),
            "the client cannot be asked for permission; the gateway answers (unconfirmable)"
        );
        let answers = permissions
            .iter()
            .map(|c| AapMessage::ToolPermission {
                tool_call_id: c.id.clone(),
                granted,
                reason: (!granted).then(|| "the user could not be asked for permission".to_owned()),
            })
            .collect();
        s.stage = Stage::Auto(auto);
        drop(s);
        self.follow(answers)
    }

    fn ended(&mut self, pipeline: &mut Pipeline<AapReader, W>, _outcome: Outcome) -> Option<Hold> {
        self.settle(pipeline.reader());
        let mut s = lock(&self.state);
        let thread = s.thread.take()?;
        // A run that never reached a session leaves no record.
        let record = (!s.record.session_id.is_empty()).then(|| s.record.clone());
        thread.report(record)
    }

    fn holds_end(&self) -> bool {
        lock(&self.state).thread.is_some()
    }
}

impl Driver {
    /// Folds the run's end into the record: what the agent produced counts as seen once its
    /// turn stopped, with the calls it stopped on; a cut turn leaves the record as the accepted
    /// input made it.
    fn settle(&self, reader: &AapReader) {
        let mut s = lock(&self.state);
        let Some(stop) = reader.final_stop() else {
            return;
        };
        let options = reader.options().clone();
        s.record.forwarded.extend(reader.outputs().iter().cloned());
        s.record.pending = if stop.reason == StopReason::ToolUse {
            stop.unresolved
                .iter()
                .map(|c| PendingCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    client: c.is_client(&options),
                    held: s
                        .held
                        .iter()
                        .find(|(id, _)| *id == c.id)
                        .map(|(_, g)| (*g, None)),
                })
                .collect()
        } else {
            Vec::new()
        };
    }

    /// The record as the run leaves it, once the stream has ended; `None` when the run never
    /// reached an agent session (the record it started from still stands then).
    pub(crate) fn record(&self) -> Option<ThreadRecord> {
        let s = lock(&self.state);
        (!s.record.session_id.is_empty()).then(|| s.record.clone())
    }

    /// The agent session this run created, if it created one.
    pub(crate) fn created_session(&self) -> Option<String> {
        lock(&self.state).created.clone()
    }

    /// The agent session this run left for a new one because the history diverged, if any.
    pub(crate) fn replaced_session(&self) -> Option<String> {
        lock(&self.state).replaced.clone()
    }

    /// Deletes agent session `session_id` (best effort, logged): for a task to run, the stream
    /// being over.
    pub(crate) fn delete_session(
        &self,
        session_id: String,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let link = self.link.clone();
        async move { link.delete_session(&session_id).await }
    }
}
