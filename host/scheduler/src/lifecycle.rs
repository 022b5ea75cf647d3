//! A replica's life on its worker once the pass placed or stopped it:
//! bringing it up (stage its files, then `engine.start`) and stopping it
//! (`engine.stop`), each on a task of its own so that the pass never waits
//! on a worker.

use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::ControlError;
use switchyard_protocol::control::{EngineRef, EngineStart, verbs};
use switchyard_protocol::engines::EngineKind;
use switchyard_protocol::state::ReplicaState;
use switchyard_store::deployments::{Deployment, Replica, STAGING_LEASE, StopClaim};

use super::staging::stage;
use super::{BringUpError, Scheduler};

/// How long a worker gets to answer a start.
const CONTROL_DEADLINE: Duration = Duration::from_secs(30);
/// How long a stopping replica's engine gets to finish its requests.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// A second stop (the first was not confirmed) does not wait for requests.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// What a control call waits beyond the worker's own deadline.
const CONTROL_MARGIN: Duration = Duration::from_secs(10);

/// A lease renewal that ends with its owner, however it ends.
struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Stages the files and starts the engine, on a task of its own.
pub(super) fn bring_up(scheduler: &Scheduler, deployment: Deployment, replica: Replica) {
    if !scheduler
        .in_progress
        .lock()
        .expect("scheduler lock")
        .insert(replica.id.clone())
    {
        return;
    }
    let scheduler = scheduler.clone();
    tokio::spawn(async move {
        // Another frontend's pass may have taken it (passes alternate).
        let claimed = scheduler
            .store
            .claim_staging(&replica.id, "checking the worker's files")
            .await
            .unwrap_or(false);
        let outcome = if claimed {
            // The lease is renewed while this task lives: a frontend that
            // dies stops renewing, and the next pass after the lease brings
            // the replica up again.
            let _renewal = {
                let (store, id) = (scheduler.store.clone(), replica.id.clone());
                Renewal(tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(STAGING_LEASE / 4).await;
                        let _ = store.renew_staging(&id).await;
                    }
                }))
            };
            Some(start(&scheduler, &deployment, &replica).await)
        } else {
            None
        };
        let Some(outcome) = outcome else {
            scheduler
                .in_progress
                .lock()
                .expect("scheduler lock")
                .remove(&replica.id);
            return;
        };
        let _ = match outcome {
            Ok(()) => {
                scheduler
                    .store
                    .set_replica_state(&replica.id, ReplicaState::Starting, None)
                    .await
            }
            // Placed again: the next pass tries once the node is reachable.
            Err(BringUpError::Unreachable(e)) => {
                let detail = format!("waiting for the node: {e}");
                scheduler
                    .store
                    .set_replica_state(&replica.id, ReplicaState::Placed, Some(&detail))
                    .await
            }
            // Tried again after a backoff that doubles with each failure.
            Err(BringUpError::Failed(e)) => {
                tracing::warn!(replica = %replica.id, detail = %e, "replica failed to start");
                scheduler.store.fail_replica(&replica.id, &e).await
            }
        };
        scheduler
            .in_progress
            .lock()
            .expect("scheduler lock")
            .remove(&replica.id);
    });
}

async fn start(
    scheduler: &Scheduler,
    deployment: &Deployment,
    replica: &Replica,
) -> Result<(), BringUpError> {
    let failed = BringUpError::Failed;
    let cluster = scheduler
        .carriers
        .clone()
        .ok_or_else(|| BringUpError::Unreachable("this frontend runs no carrier set".into()))?;
    let revision = scheduler
        .store
        .model_revision(&deployment.model_id, &deployment.revision)
        .await
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed("the model revision is gone".into()))?;
    // The model may have been imported through another replica: its blobs
    // come from there first (a failure is retried with the failed backoff).
    switchyard_library::ensure_revision(
        &scheduler.library,
        &scheduler.store,
        &scheduler.instance_id,
        &revision,
    )
    .await
    .map_err(|e| failed(e.to_string()))?;
    let control = cluster.control.active();
    let streams = cluster.streams.active();
    // Progress is written in order by one task, finished before the state moves on.
    let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel::<(u64, u64)>();
    let writer = {
        let (store, id) = (scheduler.store.clone(), replica.id.clone());
        tokio::spawn(async move {
            while let Some((held, total)) = updates.recv().await {
                let detail = format!(
                    "staging {:.1} of {:.1} MiB",
                    held as f64 / 1048576.0,
                    total as f64 / 1048576.0
                );
                let bytes = |b: u64| i64::try_from(b).unwrap_or(i64::MAX);
                let _ = store
                    .set_replica_staging(&id, bytes(held), bytes(total), &detail)
                    .await;
            }
        })
    };
    let mut last = std::time::Instant::now();
    let staged = stage(
        &*control,
        &*streams,
        &scheduler.library,
        &replica.node_id,
        &revision,
        |held, total| {
            if last.elapsed() > Duration::from_millis(500) || held == total {
                last = std::time::Instant::now();
                let _ = progress.send((held, total));
            }
        },
    )
    .await;
    drop(progress);
    let _ = writer.await;
    staged?;
    // The engine runs the revision's largest file (a GGUF, for the kinds here).
    let model = revision
        .files
        .iter()
        .max_by_key(|f| f.size)
        .ok_or_else(|| failed("the revision has no files".into()))?;
    let kind = deployment
        .engine
        .parse::<EngineKind>()
        .map_err(|e| failed(e.to_string()))?;
    let spec = EngineStart {
        id: replica.id.clone(),
        kind,
        model_sha256: Some(model.sha256.clone()),
        model_path: None,
        served_model_name: deployment.served_model_name.clone(),
        gpus: replica.gpus.iter().map(|g| *g as u32).collect(),
        extra_args: Vec::new(),
        env: Default::default(),
        token_delay_ms: deployment.token_delay_ms.max(0) as u64,
    };
    let spec = serde_json::to_vec(&spec).map_err(|e| failed(e.to_string()))?;
    control
        .call(
            &replica.node_id,
            verbs::ENGINE_START,
            Bytes::from(spec),
            CONTROL_DEADLINE,
        )
        .await
        .map_err(|e| BringUpError::from_control(verbs::ENGINE_START, e))?;
    Ok(())
}

/// Stops a claimed replica's engine and forgets the replica once its
/// worker confirms. The first stop drains; when it is not confirmed the
/// row stays (its GPUs counted) until the claim's lease runs out, and the
/// next claim stops the engine once more and forgets the replica whatever
/// the answer: a worker that never answers stops the engine itself once no
/// heartbeat answer names it, and until then the scheduler counts the GPUs
/// the worker reports in use.
pub(super) fn stop_replica(scheduler: &Scheduler, claim: StopClaim) {
    let scheduler = scheduler.clone();
    tokio::spawn(async move {
        let confirmed = match scheduler.carriers.clone() {
            None => false,
            Some(cluster) => {
                let (verb, deadline) = if claim.again {
                    (verbs::ENGINE_STOP, STOP_DEADLINE)
                } else {
                    (verbs::ENGINE_DRAIN, DRAIN_DEADLINE)
                };
                let payload = serde_json::to_vec(&EngineRef {
                    id: claim.id.clone(),
                    deadline_ms: Some(DRAIN_DEADLINE.as_millis() as u64),
                })
                .expect("an engine reference serializes");
                let answer = cluster
                    .control
                    .active()
                    .call(
                        &claim.node_id,
                        verb,
                        Bytes::from(payload),
                        deadline + CONTROL_MARGIN,
                    )
                    .await;
                match answer {
                    Ok(_) => true,
                    // Not there: nothing runs for it.
                    Err(ControlError::Refused(r)) if r.code == "unknown_engine" => true,
                    Err(e) => {
                        tracing::warn!(replica = %claim.id, again = claim.again, error = %e, "the replica's engine did not confirm its stop");
                        false
                    }
                }
            }
        };
        if confirmed || claim.again {
            let _ = scheduler.store.delete_replica(&claim.id).await;
        }
    });
}
