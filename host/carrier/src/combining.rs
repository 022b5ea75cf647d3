//! State that whichever task hands it work runs, one task at a time: the
//! tunnel session's driver (`tunnel/core.rs`) and a carrier's reactor
//! (`reactor/core.rs`). Neither has a thread of its own; a thread hop per
//! message was the largest cost of both.
//!
//! Work queues; the first caller to find the state free runs everything
//! queued, then checks the queue again after letting go, so work queued
//! meanwhile is never left behind. A caller that finds the state busy
//! (another task, or a drop inside the state's own work) only queues.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, TryLockError, TryLockResult};

/// The state and its queue of work.
pub(crate) struct Combining<S, W> {
    queue: Mutex<VecDeque<W>>,
    state: Mutex<S>,
}

impl<S, W> Combining<S, W> {
    pub(crate) fn new(state: S) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            state: Mutex::new(state),
        }
    }

    /// Queues `work` without running the queue; how much is queued with
    /// it: 1 when the queue was empty, so that this caller should run it
    /// ([`Combining::drain`]).
    pub(crate) fn defer(&self, work: W) -> usize {
        let mut queue = self.queue.lock().expect("queue lock");
        queue.push_back(work);
        queue.len()
    }

    /// Hands `run` everything queued, batch after batch, unless another
    /// caller is at it. `run` must not panic: a panic would poison the
    /// state (callers catch host panics inside it).
    pub(crate) fn drain(&self, mut run: impl FnMut(&mut S, VecDeque<W>)) {
        loop {
            let mut state = match self.state.try_lock() {
                Ok(state) => state,
                // Whoever holds it drains after us.
                Err(TryLockError::WouldBlock) => return,
                Err(TryLockError::Poisoned(_)) => return,
            };
            loop {
                let batch = std::mem::take(&mut *self.queue.lock().expect("queue lock"));
                if batch.is_empty() {
                    break;
                }
                run(&mut state, batch);
            }
            drop(state);
            if self.queue.lock().expect("queue lock").is_empty() {
                return;
            }
        }
    }

    /// The state, waiting for whoever runs it now. The caller drains after
    /// letting go: work queued meanwhile waits for that.
    pub(crate) fn lock(&self) -> Option<MutexGuard<'_, S>> {
        self.state.lock().ok()
    }

    /// The state if no one runs it now.
    pub(crate) fn try_lock(&self) -> TryLockResult<MutexGuard<'_, S>> {
        self.state.try_lock()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn work_queued_while_another_caller_runs_the_state_is_run_by_that_caller() {
        let combining = Arc::new(Combining::<Vec<u32>, u32>::new(Vec::new()));
        let inner = combining.clone();
        combining.defer(1);
        combining.drain(|seen, batch| {
            for work in batch {
                seen.push(work);
                if work == 1 {
                    // Queued from inside a run (a drop inside the state's
                    // own work): this drain finds the state busy and only
                    // queues; the outer one runs it.
                    inner.defer(2);
                    inner.drain(|_, _| panic!("the state is busy"));
                }
            }
        });
        assert_eq!(*combining.lock().unwrap(), [1, 2]);
        assert!(combining.try_lock().is_ok(), "free after the drain");
        assert_eq!(combining.defer(3), 1, "the queue was empty");
        assert_eq!(combining.defer(4), 2);
    }
}
