//! [`Deadlines`]: a stream's timers, on one tokio [`Sleep`]: its idle timeout and its heartbeat,
//! whose deadlines move with every event and fire rarely, and the fixed end of a bounded run
//! (`max_stream_duration`).
//!
//! Re-arming a tokio [`Sleep`] takes the timer wheel's lock; done for every event it was the
//! largest cost on the per-event path after the writes. A moved deadline is a store here; the
//! sleep is re-armed only when it fires before the deadlines, or when the nearer one moves
//! earlier than it. One sleep for every timer: a stream waiting for its upstream polls one
//! timer, not three. Nor is the sleep polled on every event: once it has the task's waker, it
//! is polled again only when it has fired or that waker changed (polling it registers the
//! waker again under the timer's lock each time, about 115 of an event's instructions).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::time::{Instant, Sleep};

/// See the module docs.
#[derive(Debug)]
pub struct Deadlines {
    idle: Instant,
    heartbeat: Instant,
    /// When the run must end, if it is bounded; it never moves.
    end: Option<Instant>,
    sleep: Pin<Box<Sleep>>,
    /// The waker the sleep was last polled with, while it has not fired or been reset since.
    registered: Option<Waker>,
}

/// Which deadline has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// The run has lasted as long as it may.
    End,
    Idle,
    Heartbeat,
}

impl Deadlines {
    /// `end`: when a bounded run must end.
    pub fn new(idle: Instant, heartbeat: Instant, end: Option<Instant>) -> Deadlines {
        let first = end.map_or(idle.min(heartbeat), |end| end.min(idle).min(heartbeat));
        Deadlines {
            idle,
            heartbeat,
            end,
            sleep: Box::pin(tokio::time::sleep_until(first)),
            registered: None,
        }
    }

    /// Whether the run's end (if it is bounded) has come by `now`.
    pub fn ended_by(&self, now: Instant) -> bool {
        self.end.is_some_and(|end| now >= end)
    }

    /// Moves the idle deadline to `at`.
    pub fn set_idle(&mut self, at: Instant) {
        self.idle = at;
    }

    /// Moves the heartbeat deadline to `at`.
    pub fn set_heartbeat(&mut self, at: Instant) {
        self.heartbeat = at;
    }

    /// Ready with the deadline that has passed: the run's end first, then the idle one (which
    /// counts only when `idle_counts`), then the heartbeat. Registers the waker otherwise.
    pub fn poll(&mut self, cx: &mut Context<'_>, idle_counts: bool) -> Poll<Due> {
        let mut next = if idle_counts {
            self.idle.min(self.heartbeat)
        } else {
            self.heartbeat
        };
        if let Some(end) = self.end {
            next = next.min(end);
        }
        if self.sleep.deadline() > next {
            self.sleep.as_mut().reset(next);
            self.registered = None;
        }
        if !self.sleep.is_elapsed()
            && self
                .registered
                .as_ref()
                .is_some_and(|waker| waker.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                self.registered = Some(cx.waker().clone());
                return Poll::Pending;
            }
            self.registered = None;
            let fired = self.sleep.deadline();
            if self.ended_by(fired) {
                return Poll::Ready(Due::End);
            }
            if idle_counts && fired >= self.idle {
                return Poll::Ready(Due::Idle);
            }
            if fired >= self.heartbeat {
                return Poll::Ready(Due::Heartbeat);
            }
            // Fired for deadlines that have since moved on: sleep until the nearer one.
            self.sleep.as_mut().reset(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn poll(deadlines: &mut Deadlines, idle_counts: bool) -> Poll<Due> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        deadlines.poll(&mut cx, idle_counts)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[tokio::test(start_paused = true)]
    async fn fires_at_the_last_deadline_it_was_moved_to() {
        let start = Instant::now();
        let mut deadlines = Deadlines::new(start + secs(10), start + secs(100), None);
        assert!(poll(&mut deadlines, true).is_pending());
        tokio::time::advance(secs(6)).await;
        deadlines.set_idle(Instant::now() + secs(10));
        tokio::time::advance(secs(5)).await;
        assert!(
            poll(&mut deadlines, true).is_pending(),
            "11 s: the moved deadline is 16 s"
        );
        tokio::time::advance(secs(4)).await;
        assert!(poll(&mut deadlines, true).is_pending(), "15 s");
        tokio::time::advance(secs(1)).await;
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Idle), "16 s");
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_task_that_polled_last_is_woken_when_a_deadline_passes() {
        let start = Instant::now();
        let mut deadlines = Deadlines::new(start + secs(10), start + secs(100), None);
        assert!(poll(&mut deadlines, true).is_pending());
        assert!(
            poll(&mut deadlines, true).is_pending(),
            "the same waker again"
        );
        let woken = std::sync::Arc::new(Woken::default());
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(deadlines.poll(&mut cx, true).is_pending(), "another waker");
        tokio::time::advance(secs(10)).await;
        assert_eq!(woken.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(deadlines.poll(&mut cx, true), Poll::Ready(Due::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_moved_earlier_fires_earlier() {
        let start = Instant::now();
        let mut deadlines = Deadlines::new(start + secs(10), start + secs(100), None);
        assert!(poll(&mut deadlines, true).is_pending());
        deadlines.set_idle(start + secs(2));
        tokio::time::advance(secs(2)).await;
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn the_nearer_deadline_fires_first_and_idle_only_when_it_counts() {
        let start = Instant::now();
        let mut deadlines = Deadlines::new(start + secs(3), start + secs(5), None);
        tokio::time::advance(secs(3)).await;
        assert!(
            poll(&mut deadlines, false).is_pending(),
            "idle does not count (a request opening)"
        );
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Idle));
        tokio::time::advance(secs(2)).await;
        assert_eq!(poll(&mut deadlines, false), Poll::Ready(Due::Heartbeat));
        // The heartbeat went: its deadline moves on, and the idle one still comes first.
        deadlines.set_heartbeat(Instant::now() + secs(5));
        deadlines.set_idle(Instant::now() + secs(1));
        assert!(poll(&mut deadlines, true).is_pending());
        tokio::time::advance(secs(1)).await;
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Idle));
        deadlines.set_idle(Instant::now() + secs(60));
        tokio::time::advance(secs(4)).await;
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Heartbeat));
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_a_bounded_run_fires_first_and_does_not_move() {
        let start = Instant::now();
        let mut deadlines = Deadlines::new(start + secs(3), start + secs(2), Some(start + secs(7)));
        assert!(!deadlines.ended_by(start + secs(6)));
        tokio::time::advance(secs(2)).await;
        assert_eq!(poll(&mut deadlines, true), Poll::Ready(Due::Heartbeat));
        // Events keep the idle and heartbeat deadlines ahead; the end stays where it was.
        for _ in 0..4 {
            deadlines.set_idle(Instant::now() + secs(3));
            deadlines.set_heartbeat(Instant::now() + secs(2));
            assert!(poll(&mut deadlines, true).is_pending());
            tokio::time::advance(secs(1)).await;
        }
        assert!(poll(&mut deadlines, false).is_pending(), "6 s");
        tokio::time::advance(secs(1)).await;
        assert_eq!(
            poll(&mut deadlines, false),
            Poll::Ready(Due::End),
            "7 s, though idle does not count"
        );
        assert!(deadlines.ended_by(Instant::now()));
    }
}
