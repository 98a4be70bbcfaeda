//! [`Settling`]: the marks this process still has to end. A turn or thread run marks its key
//! running in the store and hands the end of the mark to a task; when the run's request or
//! stream is gone (its client left) but the task has not yet ended the mark, a new run on the
//! same key would find it busy. It waits here for the task instead, and is refused only when
//! the run holding the mark is still under way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::SetOnce;

/// See the module docs. One per gateway, shared by every adapter (their keys do not collide).
#[derive(Debug)]
pub struct Settling {
    marks: Mutex<HashMap<String, Mark>>,
    /// The longest wait for a mark's end: the store's bound on the one write that ends it.
    bound: Duration,
}

impl Default for Settling {
    fn default() -> Self {
        Settling::new(super::DEFAULT_STORE_TIMEOUT)
    }
}

#[derive(Debug)]
struct Mark {
    /// Alive while the run's request or stream is.
    under_way: Weak<()>,
    /// Set once the mark is ended. One per open turn: a `SetOnce` is a few words where a
    /// `watch` channel keeps eight wakers' worth of room (about 300 bytes per open AAP stream).
    ended: Arc<SetOnce<()>>,
}

/// Held by a run while it is under way.
#[derive(Debug)]
pub struct UnderWay(#[allow(dead_code)] Arc<()>);

/// Held by the task that ends a mark; [`Ending::ended`] says it is done, and so does its drop
/// (the task is gone: nothing will end the mark later).
#[derive(Debug)]
pub struct Ending {
    key: String,
    under_way: Weak<()>,
    ended: Arc<SetOnce<()>>,
    settling: Arc<Settling>,
}

impl Settling {
    /// Waits in [`Settling::settled`] last at most `bound` (the store's `store_timeout`).
    pub fn new(bound: Duration) -> Settling {
        Settling {
            marks: Mutex::new(HashMap::new()),
            bound,
        }
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Mark>> {
        // The map holds no invariant a panic elsewhere could break halfway.
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts tracking the mark just taken on `key`.
    pub fn track(self: &Arc<Self>, key: &str) -> (UnderWay, Ending) {
        let under_way = Arc::new(());
        let ended = Arc::new(SetOnce::new());
        let weak = Arc::downgrade(&under_way);
        self.marks().insert(
            key.to_owned(),
            Mark {
                under_way: weak.clone(),
                ended: Arc::clone(&ended),
            },
        );
        let ending = Ending {
            key: key.to_owned(),
            under_way: weak,
            ended,
            settling: Arc::clone(self),
        };
        (UnderWay(under_way), ending)
    }

    /// Returns once no run of this process that is over still holds `key`'s mark: at once when
    /// none does or when the run holding it is still under way (the caller then answers busy);
    /// else when its mark is ended, or after the bound [`Settling::new`] was given.
    pub async fn settled(&self, key: &str) {
        let waiting = self
            .marks()
            .get(key)
            .filter(|mark| mark.under_way.strong_count() == 0)
            .map(|mark| Arc::clone(&mark.ended));
        if let Some(ended) = waiting {
            let _ = tokio::time::timeout(self.bound, ended.wait()).await;
        }
    }
}

impl Ending {
    /// The mark is ended: whoever waits in [`Settling::settled`] goes on.
    pub fn ended(self) {
        drop(self);
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        // Set only here, once: an error would mean it was set before.
        let _ = self.ended.set(());
        let mut marks = self.settling.marks();
        if marks
            .get(&self.key)
            .is_some_and(|m| Weak::ptr_eq(&m.under_way, &self.under_way))
        {
            marks.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A run that is over waits for its mark's end; a run still under way, or no mark, does
    /// not wait; a dropped ending ends the wait too.
    #[tokio::test]
    async fn a_run_over_waits_for_its_mark_and_only_then() {
        let settling = Arc::new(Settling::new(Duration::from_secs(5)));
        let start = Instant::now();
        settling.settled("none").await;
        let (under_way, ending) = settling.track("k");
        settling.settled("k").await;
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "under way: no wait"
        );
        drop(under_way);
        let ender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            ending.ended();
        });
        let waited = Instant::now();
        settling.settled("k").await;
        let waited = waited.elapsed();
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_secs(4), "{waited:?}");
        ender.await.unwrap();
        assert!(settling.marks().is_empty(), "the ended mark is gone");
        let (under_way, ending) = settling.track("k");
        drop(under_way);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(ending);
        });
        let waited = Instant::now();
        settling.settled("k").await;
        assert!(waited.elapsed() < Duration::from_secs(4));
        assert!(settling.marks().is_empty());
    }
}
