//! The usage meter's writer: events off the inference core's queue into
//! PostgreSQL in batches (`store::batched`; each batch also adds to the
//! hourly roll-up), until told to stop, then what is left; events and
//! hours past their ages are deleted hourly.

use std::sync::Arc;
use std::time::Duration;

use switchyard_inference::usage::UsageMeter;
use switchyard_protocol::usage::UsageEvent;
use switchyard_store::Store;
use switchyard_store::batched::{Batching, write_batched};
use tokio::sync::watch;

/// How the meter's writer batches: up to 1000 events a statement, at most
/// a second after the first; old events deleted hourly.
const BATCHING: Batching = Batching {
    batch: 1000,
    flush: Duration::from_secs(1),
    prune_every: Duration::from_secs(3600),
};

/// Runs the writer until `stop`.
pub(super) async fn write(
    meter: Arc<UsageMeter>,
    store: Store,
    replica: String,
    (events_max_age, max_age): (Duration, Duration),
    stop: watch::Receiver<bool>,
) {
    let Some(queue) = meter.take_receiver() else {
        return;
    };
    let (store, meter) = (&store, &meter);
    let write = |batch: Vec<UsageEvent>| {
        let replica = replica.clone();
        async move {
            let n = batch.len() as u64;
            let written = store.insert_usage(&replica, &batch).await;
            if let Err(e) = &written {
                tracing::warn!(error = %e, events = n, "could not write usage events; they are lost");
            }
            meter.written(n, written.is_ok());
        }
    };
    let prune = || async move {
        let pruned = store.prune_usage(events_max_age.as_secs_f64(), max_age.as_secs_f64());
        match pruned.await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "usage events pruned"),
            Err(e) => tracing::warn!(error = %e, "could not prune usage events"),
        }
    };
    write_batched(queue, BATCHING, stop, write, prune).await;
}
