//! A face whose agent speaks AAP itself (the AAP client in front of an AAP agent): the face's
//! turn runs through the gateway's AAP client (`crate::adapters::aap_client`), and this module
//! owns what joins the two: the stream's [`Owner`], which hands the agent session's record to
//! the face's committer, and the face's [`agent`] as the pair runs it.
//!
//! One face session maps to exactly one agent session:
//! - the face's first turn creates the agent session (seeded with the face session's seed
//!   history); every later turn reuses it and sends only what the agent has not seen;
//! - the mapping (the AAP client's `ThreadRecord`) is kept in the face session itself
//!   (`SessionConfig::upstream`) and written back with each turn by the face's committer, so it
//!   persists, expires and is deleted with the face session, and survives a restart whenever
//!   the face session does (a durable store); there is no mapping to lose on its own;
//! - deleting the face session deletes the agent session (`DELETE` to the agent, best effort);
//!   a face session that expires leaves its agent session to the agent's own retention;
//! - a turn that leaves the face session unchanged (the agent failed before answering) deletes
//!   an agent session it created, and a turn that had to leave its agent session for a new one
//!   (the face's history no longer matched it: `history_divergence = "fork"`) deletes the old
//!   one, so the gateway leaves no agent session behind that no face session names;
//! - an agent that lost the session (404) gets a new one seeded with the face's history
//!   (`[routes.aap_upstream] on_session_lost = "recreate"`, the default), or the turn ends
//!   with `turn_stop: error` (`"error"`).
//!
//! The face's guarantees hold unchanged: the turn lease, principals and quotas are checked
//! before the run; the run is one pipeline (the AAP reader, the AAP writer), so one
//! `turn_stop` is written and the route's limits apply.

use super::commit::{self, TurnOwner};
use crate::adapters::aap_client::Driver;
use crate::config::AapAgent;
use crate::dialect::aap::{AapReader, AapWriter};
use crate::dialect::confirm::DenialAs;
use crate::http::body::{Hold, Next, RunOwner};
use crate::pipeline::Pipeline;
use crate::telemetry::metrics::Outcome;

/// The owner of a face turn's stream on an AAP agent: the AAP client's [`Driver`] decides what
/// follows each of the agent's stops; at the end its record goes into the turn the face's
/// committer writes back.
pub(super) struct Owner {
    driver: Driver,
    turn: TurnOwner,
}

impl Owner {
    pub(super) fn new(driver: Driver, turn: TurnOwner) -> Owner {
        Owner { driver, turn }
    }

    /// Deletes agent session `id` off the stream's path. The stream may end from `Drop` while
    /// the runtime shuts down: then there is no task to run it, and the agent's retention
    /// decides.
    fn forget(&self, id: String) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(self.driver.delete_session(id));
            }
            Err(_) => {
                tracing::debug!(agent_session_id = %id, "no runtime left to delete the agent session")
            }
        }
    }
}

impl RunOwner<AapReader, AapWriter> for Owner {
    fn after_handover(&mut self, pipeline: &mut Pipeline<AapReader, AapWriter>) -> Next {
        self.driver.after_handover(pipeline)
    }

    fn ended(
        &mut self,
        pipeline: &mut Pipeline<AapReader, AapWriter>,
        outcome: Outcome,
    ) -> Option<Hold> {
        // The driver folds the agent's stop into its record (no thread to report to here).
        let _ = self.driver.ended(pipeline, outcome);
        if commit::nothing_ran(pipeline) {
            // The face session stays as it was: it will not name an agent session this turn
            // created.
            if let Some(id) = self.driver.created_session() {
                tracing::info!(
                    agent_session_id = %id,
                    "the turn failed before the agent answered; deleting the agent session it created"
                );
                self.forget(id);
            }
        } else if let Some(mut record) = self.driver.record() {
            let reader = pipeline.reader();
            if reader.final_stop().is_none() {
                // A cut turn: what the agent wrote and the face keeps (completed tool rounds)
                // the agent has seen; the committer drops the rest (`planner::reconcile`).
                record.forwarded.extend(reader.outputs().iter().cloned());
            }
            self.turn.set_upstream(record);
            // A session left for a new one (a diverged history) is named by no face session.
            if let Some(old) = self.driver.replaced_session() {
                self.forget(old);
            }
        }
        self.turn.ended(pipeline, outcome)
    }

    fn holds_end(&self) -> bool {
        RunOwner::<AapReader, AapWriter>::holds_end(&self.turn)
    }
}

/// The face's agent as a turn on an AAP agent runs it: the agent asks its permissions itself,
/// so it is declared no confirm tool, and a denial goes back as a resolved answer, which keeps
/// its reason all the way to the agent's `tool_permission`.
pub(super) fn agent(agent: &AapAgent) -> AapAgent {
    AapAgent {
        inject_confirm_tool: false,
        denial_as: DenialAs::Resolved,
        ..agent.clone()
    }
}
