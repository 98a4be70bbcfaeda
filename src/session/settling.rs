//! [`Settling`]: the marks this process still has to end. A turn or thread run marks its key
//! running in the store and hands the end of the mark to a task; when the run's request or
//! stream is gone (its client left) but the task has not yet ended the mark, a new run on the
//! same key would find it busy. It waits here for the task instead, and is refused only when
//! the run holding the mark is still under way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;

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
    /// True once the mark is ended.
    ended: watch::Receiver<bool>,
}

/// Held by a run while it is under way.
#[derive(Debug)]
pub struct UnderWay(#[allow(dead_code)] Arc<()>);

/// Held by the task that ends a mark; [`Ending::ended`] says it is done.
#[derive(Debug)]
pub struct Ending {
    key: String,
    under_way: Weak<()>,
    ended: watch::Sender<bool>,
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
        let (ended_tx, ended) = watch::channel(false);
        let weak = Arc::downgrade(&under_way);
        self.marks().insert(
            key.to_owned(),
            Mark {
                under_way: weak.clone(),
                ended,
            },
        );
        let ending = Ending {
            key: key.to_owned(),
            under_way: weak,
            ended: ended_tx,
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
            .map(|mark| mark.ended.clone());
        if let Some(mut ended) = waiting {
            let _ = tokio::time::timeout(self.bound, ended.wait_for(|e| *e)).await;
        }
    }
}

impl Ending {
    /// The mark is ended: whoever waits in [`Settling::settled`] goes on.
    pub fn ended(self) {
        let _ = self.ended.send(true);
        let mut marks = self.settling.marks();
        if marks
            .get(&self.key)
            .is_some_and(|m| Weak::ptr_eq(&m.under_way, &self.under_way))
        {
            marks.remove(&self.key);
        }
    }
}
