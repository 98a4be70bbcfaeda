//! [`Deadline`]: a timer whose deadline moves with every event and fires rarely (a stream's
//! idle timeout and heartbeat).
//!
//! Re-arming a tokio [`Sleep`] takes the timer wheel's lock; done for every event it was the
//! largest cost on the per-event path after the writes. A moved deadline is a store here; the
//! sleep is re-armed only when it fires before the deadline, or when the deadline moves earlier.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::time::{Instant, Sleep};

/// See the module docs.
#[derive(Debug)]
pub struct Deadline {
    at: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl Deadline {
    pub fn new(at: Instant) -> Deadline {
        Deadline {
            at,
            sleep: Box::pin(tokio::time::sleep_until(at)),
        }
    }

    /// Moves the deadline to `at`.
    pub fn set(&mut self, at: Instant) {
        if at < self.sleep.deadline() {
            self.sleep.as_mut().reset(at);
        }
        self.at = at;
    }

    /// Ready once the deadline has passed; registers the waker otherwise.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            ready!(self.sleep.as_mut().poll(cx));
            if self.sleep.deadline() >= self.at {
                return Poll::Ready(());
            }
            // Fired for a deadline that has since moved on: sleep until the new one.
            self.sleep.as_mut().reset(self.at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn poll(deadline: &mut Deadline) -> Poll<()> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        deadline.poll(&mut cx)
    }

    #[tokio::test(start_paused = true)]
    async fn fires_at_the_last_deadline_it_was_moved_to() {
        let start = Instant::now();
        let mut deadline = Deadline::new(start + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(6)).await;
        deadline.set(Instant::now() + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(
            poll(&mut deadline).is_pending(),
            "11 s: the moved deadline is 16 s"
        );
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(poll(&mut deadline).is_pending(), "15 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(poll(&mut deadline).is_ready(), "16 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_moved_earlier_fires_earlier() {
        let start = Instant::now();
        let mut deadline = Deadline::new(start + Duration::from_secs(10));
        deadline.set(start + Duration::from_secs(2));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(poll(&mut deadline).is_ready());
    }
}
