//! Graceful shutdown of client connections: [`Drain`] tells every connection that a drain has
//! started and waits until the last one has ended; each connection holds a [`DrainWatcher`]
//! from accept. An HTTP/1.1 connection then finishes the request it is serving and closes
//! instead of waiting for another; an HTTP/2 one sends GOAWAY and finishes its open streams.

use tokio::sync::watch;

/// The server's side of a drain.
#[derive(Debug)]
pub(super) struct Drain {
    started: watch::Sender<bool>,
}

/// A connection's side of a drain; dropped when the connection ends.
#[derive(Debug, Clone)]
pub(super) struct DrainWatcher {
    started: watch::Receiver<bool>,
}

impl Drain {
    pub fn new() -> Drain {
        Drain {
            started: watch::Sender::new(false),
        }
    }

    /// A watcher for a connection just accepted.
    pub fn watcher(&self) -> DrainWatcher {
        DrainWatcher {
            started: self.started.subscribe(),
        }
    }

    /// Starts the drain and waits until every watcher has been dropped.
    pub async fn shutdown(self) {
        self.started.send_replace(true);
        self.started.closed().await;
    }
}

impl DrainWatcher {
    /// Whether the drain has started.
    pub fn started(&self) -> bool {
        *self.started.borrow()
    }

    /// Resolves once the drain has started.
    pub async fn wait(&mut self) {
        // An error means the `Drain` is gone, which only happens once the server has returned:
        // that is a drain too.
        let _ = self.started.wait_for(|started| *started).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_is_seen_by_every_watcher_and_ends_when_the_last_one_is_dropped() {
        let drain = Drain::new();
        let mut first = drain.watcher();
        let second = drain.watcher();
        assert!(!first.started());
        let shutdown = tokio::spawn(drain.shutdown());
        first.wait().await;
        assert!(second.started());
        drop(first);
        tokio::task::yield_now().await;
        assert!(!shutdown.is_finished());
        drop(second);
        tokio::time::timeout(std::time::Duration::from_secs(5), shutdown)
            .await
            .unwrap()
            .unwrap();
    }
}
