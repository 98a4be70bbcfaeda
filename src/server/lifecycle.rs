//! The gateway's lifecycle as the outside sees it: starting, serving, draining, drained
//! ([`Phase`]), and the one handle that moves it on ([`Control`]).
//!
//! A drain starts on SIGTERM or on the admin's `POST /drain`, whichever comes first; both start
//! the same drain, once. From then on `/ready` answers 503, the data listener is closed (new
//! connections are refused by the kernel, not left waiting in a backlog nobody reads), open
//! requests run on until `drain_timeout`, and whatever is still open then is ended with
//! `GATEWAY_SHUTDOWN`. The phase is `Drained` once nothing is open (or the deadline's short
//! grace for the terminal events has passed); `POST /drain` answers then.
//!
//! A drain started by `POST /drain` does not end the process: in a pod, the agent container's
//! `preStop` hook drains the gateway so that the agent outlives the gateway's streams, and the
//! gateway exits on its own SIGTERM later (at once, having nothing left to drain).

use std::sync::Arc;

use tokio::sync::watch;

/// Where the gateway is in its life. Ordered: a phase never goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Built, not yet serving.
    Starting,
    /// Accepting and answering requests; `/ready` is 200.
    Serving,
    /// Not accepting; open requests run on until they end or the drain deadline.
    Draining,
    /// Nothing is open any more (or the deadline's grace has passed).
    Drained,
}

/// The handle on the lifecycle, shared by the server, the admin listener and the signal
/// handlers. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Control {
    phase: Arc<watch::Sender<Phase>>,
}

impl Default for Control {
    fn default() -> Self {
        Control::new()
    }
}

impl Control {
    pub fn new() -> Control {
        Control {
            phase: Arc::new(watch::Sender::new(Phase::Starting)),
        }
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// True while new requests are welcome (`/ready`).
    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Serving
    }

    /// Starts a drain, unless one has started already; true when this call started it.
    pub fn drain(&self) -> bool {
        self.advance(Phase::Draining)
    }

    /// Resolves once a drain has started.
    pub async fn draining(&self) {
        self.reached(Phase::Draining).await;
    }

    /// Resolves once the drain has finished.
    pub async fn drained(&self) {
        self.reached(Phase::Drained).await;
    }

    pub(super) fn serving(&self) -> bool {
        self.advance(Phase::Serving)
    }

    pub(super) fn finished(&self) -> bool {
        self.advance(Phase::Drained)
    }

    /// Moves to `to` if that is forward; true when it moved.
    fn advance(&self, to: Phase) -> bool {
        self.phase.send_if_modified(|phase| {
            if *phase < to {
                *phase = to;
                true
            } else {
                false
            }
        })
    }

    async fn reached(&self, phase: Phase) {
        let mut seen = self.phase.subscribe();
        // The sender lives in `self`, so the wait cannot fail for want of one.
        let _ = seen.wait_for(|now| *now >= phase).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phases_only_move_forward_and_a_drain_starts_once() {
        let control = Control::new();
        assert!(!control.is_ready());
        assert!(control.serving());
        assert!(control.is_ready());
        assert!(control.drain(), "the first drain starts it");
        assert!(!control.drain(), "a second drain joins the first");
        assert!(!control.serving(), "a draining gateway never serves again");
        assert_eq!(control.phase(), Phase::Draining);
        assert!(control.finished());
        assert!(!control.drain());
        assert_eq!(control.phase(), Phase::Drained);
    }

    #[tokio::test]
    async fn waiters_wake_when_their_phase_is_reached_and_not_before() {
        let control = Control::new();
        control.serving();
        let waiter = {
            let control = control.clone();
            tokio::spawn(async move { control.drained().await })
        };
        control.drain();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "draining is not drained");
        control.draining().await;
        control.finished();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken")
            .expect("no panic");
        // Reached already: resolves at once.
        control.draining().await;
    }
}
