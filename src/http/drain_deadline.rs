//! [`DrainDeadline`]: the moment a drain stops waiting and open streams must end, and
//! [`DrainSignal`], one stream's view of it.
//!
//! A stream checks the deadline on every poll (an upstream that always has data must not hide
//! it), so the check has to cost next to nothing. A `watch` channel's `changed()` future takes
//! its waiter list's lock on each poll; it was about a twentieth of a streamed event's
//! instructions. Here a poll is one atomic load, plus a waker comparison: a stream registers
//! its task's waker once (again only if the task's waker changes), and the deadline wakes every
//! registered stream when it is reached. Hand-written because neither tokio's `watch`/`Notify`
//! nor tokio-util's `CancellationToken` offers a wait that stays registered across polls
//! without a lock per poll.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// See the module docs. Cheap to clone: clones share the deadline.
#[derive(Clone, Default)]
pub struct DrainDeadline {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    reached: AtomicBool,
    waiting: Mutex<Waiting>,
}

/// The wakers of the streams waiting for the deadline, in reusable slots.
#[derive(Default)]
struct Waiting {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Waiting {
    fn insert(&mut self, waker: Waker) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(waker);
                slot
            }
            None => {
                self.slots.push(Some(waker));
                self.slots.len() - 1
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        if let Some(waker) = self.slots.get_mut(slot) {
            if waker.take().is_some() {
                self.free.push(slot);
            }
        }
    }
}

impl Shared {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        // A panic while holding the lock leaves the slots consistent: every step is one store.
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl DrainDeadline {
    pub fn new() -> DrainDeadline {
        DrainDeadline::default()
    }

    /// The deadline is reached: every stream waiting is woken, and every signal is ready from
    /// now on.
    pub fn reach(&self) {
        self.shared.reached.store(true, Ordering::Release);
        let wakers: Vec<Waker> = {
            let mut waiting = self.shared.waiting();
            waiting.free.clear();
            waiting.slots.drain(..).flatten().collect()
        };
        for waker in wakers {
            waker.wake();
        }
    }

    pub fn is_reached(&self) -> bool {
        self.shared.reached.load(Ordering::Acquire)
    }

    /// A signal for one stream (or one request waiting for its upstream).
    pub fn signal(&self) -> DrainSignal {
        DrainSignal {
            shared: Some(Arc::clone(&self.shared)),
            registered: None,
        }
    }
}

/// One waiter's view of a [`DrainDeadline`]: ready once it is reached. Registers its waker
/// once; dropping it unregisters.
pub struct DrainSignal {
    /// `None` for a signal that never fires.
    shared: Option<Arc<Shared>>,
    /// The slot holding this signal's waker, and a copy to tell whether it is still current.
    registered: Option<(usize, Waker)>,
}

impl DrainSignal {
    /// A signal no deadline will ever reach.
    pub fn never() -> DrainSignal {
        DrainSignal {
            shared: None,
            registered: None,
        }
    }

    /// Ready once the deadline is reached; otherwise the task is woken when it is.
    pub fn poll_reached(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(shared) = &self.shared else {
            return Poll::Pending;
        };
        if shared.reached.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if let Some((_, waker)) = &self.registered {
            if waker.will_wake(cx.waker()) {
                return Poll::Pending;
            }
        }
        let mut waiting = shared.waiting();
        // Checked again under the lock: `reach` sets the flag before it takes the lock, so a
        // waker stored now is either seen by it or not needed.
        if shared.reached.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if let Some((slot, _)) = self.registered.take() {
            waiting.remove(slot);
        }
        let slot = waiting.insert(cx.waker().clone());
        self.registered = Some((slot, cx.waker().clone()));
        Poll::Pending
    }
}

impl Future for DrainSignal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_reached(cx)
    }
}

impl Drop for DrainSignal {
    fn drop(&mut self) {
        if let (Some(shared), Some((slot, _))) = (&self.shared, self.registered.take()) {
            if !shared.reached.load(Ordering::Acquire) {
                shared.waiting().remove(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn every_registered_signal_is_woken_once_and_then_ready() {
        let deadline = DrainDeadline::new();
        let (counts, mut signals): (Vec<_>, Vec<_>) = (0..3)
            .map(|_| {
                let (count, waker) = counted();
                let mut signal = deadline.signal();
                let mut cx = Context::from_waker(&waker);
                assert!(signal.poll_reached(&mut cx).is_pending());
                // Polled again with the same waker: still one registration.
                assert!(signal.poll_reached(&mut cx).is_pending());
                (count, (signal, waker))
            })
            .unzip();
        assert_eq!(deadline.shared.waiting().slots.len(), 3);
        deadline.reach();
        for count in &counts {
            assert_eq!(count.0.load(Ordering::SeqCst), 1);
        }
        for (signal, waker) in &mut signals {
            let mut cx = Context::from_waker(waker);
            assert!(signal.poll_reached(&mut cx).is_ready());
        }
        assert!(deadline.is_reached());
    }

    #[test]
    fn a_new_waker_replaces_the_old_one_and_a_dropped_signal_frees_its_slot() {
        let deadline = DrainDeadline::new();
        let (first, first_waker) = counted();
        let (second, second_waker) = counted();
        let mut signal = deadline.signal();
        assert!(signal
            .poll_reached(&mut Context::from_waker(&first_waker))
            .is_pending());
        assert!(signal
            .poll_reached(&mut Context::from_waker(&second_waker))
            .is_pending());
        let waiting = |d: &DrainDeadline| d.shared.waiting().slots.iter().flatten().count();
        assert_eq!(waiting(&deadline), 1, "the first waker was replaced");
        let mut other = deadline.signal();
        assert!(other
            .poll_reached(&mut Context::from_waker(&first_waker))
            .is_pending());
        drop(other);
        assert_eq!(waiting(&deadline), 1, "a dropped signal leaves");
        deadline.reach();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        drop(signal);
    }

    #[test]
    fn a_signal_made_after_the_deadline_is_ready_and_never_stays_pending() {
        let deadline = DrainDeadline::new();
        deadline.reach();
        let (_, waker) = counted();
        let mut cx = Context::from_waker(&waker);
        assert!(deadline.signal().poll_reached(&mut cx).is_ready());
        assert!(DrainSignal::never().poll_reached(&mut cx).is_pending());
    }

    #[tokio::test]
    async fn a_task_waiting_on_the_signal_ends_when_the_deadline_is_reached() {
        let deadline = DrainDeadline::new();
        let waiting = tokio::spawn(deadline.signal());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        deadline.reach();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
    }
}
