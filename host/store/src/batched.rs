//! The shape every queue-to-table writer of a replica shares (the decision
//! log, the usage meter): records taken off a bounded queue in batches of
//! at most `batch`, each batch written at most `flush` after its first
//! record; on `stop`, what is queued is written before returning; every
//! `prune_every`, the table is pruned. Writing and pruning are the
//! caller's (one statement each, and their errors logged there).

use std::future::Future;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

/// How a writer batches.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Records written together at most.
    pub batch: usize,
    /// How long a batch waits to fill once its first record is in.
    pub flush: Duration,
    /// How often the table is pruned.
    pub prune_every: Duration,
}

/// Runs until `stop` (or until every sender is gone).
pub async fn write_batched<T, W, WF, P, PF>(
    mut queue: mpsc::Receiver<T>,
    batching: Batching,
    mut stop: watch::Receiver<bool>,
    mut write: W,
    mut prune: P,
) where
    W: FnMut(Vec<T>) -> WF,
    WF: Future<Output = ()>,
    P: FnMut() -> PF,
    PF: Future<Output = ()>,
{
    let size = batching.batch.max(1);
    let mut every = tokio::time::interval(batching.prune_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut batch = Vec::with_capacity(size);
        tokio::select! {
            _ = stop.changed() => {
                while let Ok(record) = queue.try_recv() {
                    batch.push(record);
                    if batch.len() == size {
                        write(std::mem::take(&mut batch)).await;
                    }
                }
                if !batch.is_empty() {
                    write(batch).await;
                }
                return;
            }
            _ = every.tick() => {
                prune().await;
                continue;
            }
            n = queue.recv_many(&mut batch, size) => if n == 0 { return },
        }
        let deadline = tokio::time::Instant::now() + batching.flush;
        while batch.len() < size {
            let room = size - batch.len();
            match tokio::time::timeout_at(deadline, queue.recv_many(&mut batch, room)).await {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        write(batch).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn records_are_written_in_batches_and_what_is_queued_at_stop_is_written() {
        let (sender, queue) = mpsc::channel(100);
        let (stop_tx, stop) = watch::channel(false);
        let written: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let batching = Batching {
            batch: 3,
            flush: Duration::from_millis(10),
            prune_every: Duration::from_secs(3600),
        };
        for n in 0..7 {
            sender.send(n).await.unwrap();
        }
        let w = written.clone();
        let task = tokio::spawn(write_batched(
            queue,
            batching,
            stop,
            move |batch| {
                w.lock().unwrap().push(batch);
                async {}
            },
            || async {},
        ));
        sender.send(7).await.unwrap();
        stop_tx.send(true).unwrap();
        task.await.unwrap();
        let written = written.lock().unwrap().clone();
        assert!(written.iter().all(|b| b.len() <= 3), "{written:?}");
        assert_eq!(written.concat(), (0..8).collect::<Vec<_>>());
    }
}
