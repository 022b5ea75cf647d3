//! A replica's background tasks as one named list: each is started with
//! its name, told to stop through one signal, and joined at shutdown. A
//! replica's task runs until it is told to stop, so one that ends before
//! is a fault: it is logged with its name (a panic included), and the
//! replica goes on serving what does not depend on it.

use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The running tasks and the signal that stops them.
pub(super) struct Tasks {
    stop: watch::Sender<bool>,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Tasks {
    pub(super) fn new() -> Self {
        Self {
            stop: watch::channel(false).0,
            running: Vec::new(),
        }
    }

    /// What a task watches to learn that it should stop.
    pub(super) fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Starts `task` under `name`.
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let stopping = self.stop_signal();
        let handle = tokio::spawn(async move {
            task.await;
            if !*stopping.borrow() {
                tracing::error!(task = name, "a background task ended before shutdown");
            }
        });
        self.running.push((name, handle));
    }

    /// Adopts a task its module spawned itself (it watches [`Self::stop_signal`]).
    pub(super) fn adopt(&mut self, name: &'static str, handle: JoinHandle<()>) {
        self.spawn(name, async move {
            if let Err(e) = handle.await {
                tracing::error!(task = name, error = %e, "a background task failed");
            }
        });
    }

    /// The names of the tasks started, in order.
    #[cfg(test)]
    fn names(&self) -> Vec<&'static str> {
        self.running.iter().map(|(name, _)| *name).collect()
    }

    /// Tells every task to stop and waits for each.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        for (name, handle) in self.running {
            if let Err(e) = handle.await {
                tracing::error!(task = name, error = %e, "a background task failed while stopping");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_task_is_stopped_and_joined_and_an_early_end_does_not_stop_the_rest() {
        let mut tasks = Tasks::new();
        let (stopped_tx, mut stopped_rx) = tokio::sync::mpsc::unbounded_channel();
        for name in ["first", "second"] {
            let mut stop = tasks.stop_signal();
            let stopped = stopped_tx.clone();
            tasks.spawn(name, async move {
                let _ = stop.wait_for(|stop| *stop).await;
                let _ = stopped.send(name);
            });
        }
        tasks.spawn("ends early", async {});
        tasks.adopt("panics", tokio::spawn(async { panic!("a fault") }));
        assert_eq!(tasks.names(), ["first", "second", "ends early", "panics"]);
        tasks.stop().await;
        drop(stopped_tx);
        let mut stopped = Vec::new();
        while let Some(name) = stopped_rx.recv().await {
            stopped.push(name);
        }
        stopped.sort_unstable();
        assert_eq!(stopped, ["first", "second"]);
    }
}
