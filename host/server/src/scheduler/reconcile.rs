//! One reconcile pass, and the loop that runs it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use switchyard_carrier::ControlError;
use switchyard_store::deployments::{Deployment, Replica, STAGING_LEASE, StopClaim};
use switchyard_store::keys::random_id;
use switchyard_store::nodes::Node;
use tokio::sync::watch;

use super::BringUpError;
use super::admit::deploy_denied;
use super::fit::{Need, place};
use super::staging::stage;
use super::view::views;
use crate::state::AppState;

/// How often the reconciler and the routing table look again.
const EVERY: Duration = Duration::from_secs(1);
/// A node silent this long is lost: its replicas are placed again. Long
/// enough that a short disconnect moves nothing.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// A node silent for this fraction of the grace is unhealthy.
const UNHEALTHY_FRACTION: u32 = 3;
const CONTROL_DEADLINE: Duration = Duration::from_secs(30);
/// How long a stopping replica's engine gets to finish its requests.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// A second stop (the first was not confirmed) does not wait for requests.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// What a control call waits beyond the worker's own deadline.
const CONTROL_MARGIN: Duration = Duration::from_secs(10);
/// Replicas placed in one pass, over every deployment; the rest are placed
/// by the next passes (one a second). A pass holds the scheduler lock and
/// each placement asks the deploy chain and writes a row: a deployment of
/// thousands of replicas must not hold the lock for minutes, and a pass
/// must see the GPUs its own placements took before placing many more.
pub const MAX_PLACEMENTS_PER_PASS: usize = 16;

/// Runs until `stop`: every frontend refreshes its routing table; the one
/// holding the scheduler lock reconciles.
pub async fn run(state: Arc<AppState>, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(e) = tick(&state).await {
            tracing::warn!(error = %e, "reconcile pass failed");
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}

async fn tick(state: &Arc<AppState>) -> Result<(), String> {
    let store = &state.store;
    if state.cluster.is_some() {
        store
            .scheduler_pass(reconcile(state))
            .await
            .map_err(|e| e.to_string())?
            .transpose()?;
    }
    let deployments = store.deployments().await.map_err(|e| e.to_string())?;
    let replicas = store.replicas().await.map_err(|e| e.to_string())?;
    // Replicas on unhealthy, offline or pending nodes get no requests.
    let routable = store
        .nodes()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|n| n.state == "healthy" || n.state == "draining")
        .map(|n| n.id)
        .collect();
    state.routing.refresh(deployments, replicas, &routable);
    Ok(())
}

async fn reconcile(state: &Arc<AppState>) -> Result<(), String> {
    let store = &state.store;
    // Replicas whose staging lease ran out (the frontend staging them died
    // or gave up) and failed replicas whose backoff passed: placed again.
    let working: Vec<String> = state
        .scheduler
        .in_progress
        .lock()
        .expect("scheduler lock")
        .iter()
        .cloned()
        .collect();
    for id in store
        .recover_replicas(&working)
        .await
        .map_err(|e| e.to_string())?
    {
        tracing::info!(replica = %id, "bringing a replica up again");
    }
    let deployments = store.deployments().await.map_err(|e| e.to_string())?;
    let mut replicas = store.replicas().await.map_err(|e| e.to_string())?;
    let nodes = store.nodes().await.map_err(|e| e.to_string())?;
    let stale: BTreeSet<String> = store
        .stale_nodes(state.node_grace)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    let nodes_by_id: HashMap<&str, &Node> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let silent: Vec<String> = stale.iter().cloned().collect();
    store
        .mark_offline(&silent)
        .await
        .map_err(|e| e.to_string())?;
    // Late but within the grace: unhealthy, so requests avoid it while its
    // replicas stay (a short disconnect moves nothing).
    let late: Vec<String> = store
        .stale_nodes(state.node_grace / UNHEALTHY_FRACTION)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|id| !stale.contains(id))
        .collect();
    store
        .mark_unhealthy(&late)
        .await
        .map_err(|e| e.to_string())?;

    // Lost nodes: their replicas are placed again elsewhere (a worker that
    // comes back stops the engines no replica names any more).
    for replica in replicas.iter().filter(|r| stale.contains(&r.node_id)) {
        tracing::warn!(replica = %replica.id, node = %replica.node_id, "node lost; replacing its replica");
        store
            .delete_replica(&replica.id)
            .await
            .map_err(|e| e.to_string())?;
    }
    replicas.retain(|r| !stale.contains(&r.node_id));

    // Replicas to stop: those of a deleted deployment and those on a
    // draining node (placed elsewhere). They stay `stopping`, their GPUs
    // counted, until their worker confirms.
    for replica in &mut replicas {
        if replica.state == "stopping" {
            continue;
        }
        let why = if !deployments.iter().any(|d| d.id == replica.deployment_id) {
            "its deployment was deleted"
        } else if nodes_by_id
            .get(replica.node_id.as_str())
            .is_some_and(|n| n.state == "draining")
        {
            "its node is draining"
        } else {
            continue;
        };
        store
            .begin_stop(&replica.id, why)
            .await
            .map_err(|e| e.to_string())?;
        replica.state = "stopping".into();
    }

    // What the workers report of the engines.
    for replica in &mut replicas {
        let Some(node) = nodes_by_id.get(replica.node_id.as_str()) else {
            continue;
        };
        let reported = engine_state(node, &replica.id);
        let lists_engines = node.inventory["engines"].is_array();
        let next = match (replica.state.as_str(), reported.as_deref()) {
            ("starting" | "ready", Some("ready")) => "ready",
            ("ready", Some("starting" | "restarting")) => "starting",
            // The worker lost a serving engine (it restarted): brought up
            // again (`engine.start` of the same spec is idempotent there).
            ("ready", None) if lists_engines => "placed",
            _ => continue,
        };
        if next != replica.state {
            let detail = (next == "placed").then_some("its worker no longer runs the engine");
            store
                .set_replica_state(&replica.id, next, detail)
                .await
                .map_err(|e| e.to_string())?;
            replica.state = next.to_string();
        }
    }

    let mut budget = MAX_PLACEMENTS_PER_PASS;
    for deployment in &deployments {
        let mine: Vec<&Replica> = replicas
            .iter()
            .filter(|r| r.deployment_id == deployment.id && r.state != "stopping")
            .collect();
        let wanted = deployment.replicas.max(0) as usize;
        let mut pending = None;
        if mine.len() < wanted {
            let missing = wanted - mine.len();
            let now = take_budget(missing, &mut budget);
            if now < missing {
                // The rest wait for the next pass; the reason shown stays.
                pending = deployment.pending_reason.clone();
            }
            for _ in 0..now {
                match place_one(state, deployment, &nodes, &stale, &replicas).await? {
                    Ok(replica) => replicas.push(replica),
                    Err(why) => {
                        pending = Some(why);
                        break;
                    }
                }
            }
        } else if mine.len() > wanted {
            let mut extra: Vec<String> = Vec::new();
            let mut sorted = mine.clone();
            // Stop those not serving first.
            sorted.sort_by_key(|r| (r.state == "ready", r.id.clone()));
            for replica in sorted.into_iter().take(mine.len() - wanted) {
                extra.push(replica.id.clone());
            }
            for id in extra {
                store
                    .begin_stop(&id, "scaled down")
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(r) = replicas.iter_mut().find(|r| r.id == id) {
                    r.state = "stopping".into();
                }
            }
        }
        // Written only when it changes: every pass sees every deployment.
        if pending != deployment.pending_reason {
            store
                .set_deployment_pending(&deployment.id, pending.as_deref())
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    for replica in replicas.iter().filter(|r| r.state == "placed") {
        if let Some(deployment) = deployments.iter().find(|d| d.id == replica.deployment_id) {
            bring_up(state, deployment.clone(), replica.clone());
        }
    }
    for claim in store.claim_stops().await.map_err(|e| e.to_string())? {
        stop_replica(state, claim);
    }
    Ok(())
}

/// How many of a deployment's `missing` replicas this pass places: at most
/// what is left of the pass's `budget`, which they take.
fn take_budget(missing: usize, budget: &mut usize) -> usize {
    let now = missing.min(*budget);
    *budget -= now;
    now
}

/// The state a node's last heartbeat reports for an engine.
fn engine_state(node: &Node, id: &str) -> Option<String> {
    node.inventory["engines"]
        .as_array()?
        .iter()
        .find(|e| e["id"] == id)
        .and_then(|e| e["state"]["state"].as_str())
        .map(str::to_string)
}

/// Places one replica of `deployment`; the inner error says why it cannot
/// be placed now (the deployment stays pending with that reason).
async fn place_one(
    state: &Arc<AppState>,
    deployment: &Deployment,
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &[Replica],
) -> Result<Result<Replica, String>, String> {
    let revision = state
        .store
        .model_revision(&deployment.model_id, &deployment.revision)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("deployment {}: its model revision is gone", deployment.id))?;
    let need = Need {
        gpus: deployment.gpus_per_replica.max(0) as u32,
        memory_per_gpu: deployment.gpu_memory_bytes.max(0) as u64,
        model_bytes: revision.size().max(0) as u64,
        spread: deployment.strategy == "spread",
        selector: &deployment.node_selector,
    };
    let seen = views(nodes, stale, replicas, &deployment.id, &revision);
    let (node_id, gpus) = match place(&seen, need) {
        Ok(placed) => placed,
        Err(why) => {
            tracing::info!(deployment = %deployment.id, why, "a replica does not fit yet");
            return Ok(Err(format!("no node fits a replica: {why}")));
        }
    };
    let node = nodes
        .iter()
        .find(|n| n.id == node_id)
        .expect("placed on a known node");
    if let Some(denial) = deploy_denied(state, deployment, node, &gpus).await? {
        tracing::info!(deployment = %deployment.id, node = %node_id, denial, "the deploy chain refused a placement");
        return Ok(Err(format!(
            "the deploy chain refused node {node_id}: {denial}"
        )));
    }
    let replica = Replica {
        id: random_id("rep"),
        deployment_id: deployment.id.clone(),
        node_id,
        gpus: gpus.iter().map(|g| *g as i32).collect(),
        state: "placed".into(),
        detail: None,
        staged_bytes: None,
        staging_total_bytes: None,
    };
    state
        .store
        .insert_replica(&replica)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(replica = %replica.id, deployment = %deployment.id, node = %replica.node_id, gpus = ?replica.gpus, "replica placed");
    Ok(Ok(replica))
}

/// A lease renewal that ends with its owner, however it ends.
struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Stages the files and starts the engine, on a task of its own.
fn bring_up(state: &Arc<AppState>, deployment: Deployment, replica: Replica) {
    if !state
        .scheduler
        .in_progress
        .lock()
        .expect("scheduler lock")
        .insert(replica.id.clone())
    {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        // Another frontend's pass may have taken it (passes alternate).
        let claimed = state
            .store
            .claim_staging(&replica.id, "checking the worker's files")
            .await
            .unwrap_or(false);
        let outcome = if claimed {
            // The lease is renewed while this task lives: a frontend that
            // dies stops renewing, and the next pass after the lease brings
            // the replica up again.
            let _renewal = {
                let (store, id) = (state.store.clone(), replica.id.clone());
                Renewal(tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(STAGING_LEASE / 4).await;
                        let _ = store.renew_staging(&id).await;
                    }
                }))
            };
            Some(start(&state, &deployment, &replica).await)
        } else {
            None
        };
        let Some(outcome) = outcome else {
            state
                .scheduler
                .in_progress
                .lock()
                .expect("scheduler lock")
                .remove(&replica.id);
            return;
        };
        let _ = match outcome {
            Ok(()) => {
                state
                    .store
                    .set_replica_state(&replica.id, "starting", None)
                    .await
            }
            // Placed again: the next pass tries once the node is reachable.
            Err(BringUpError::Unreachable(e)) => {
                let detail = format!("waiting for the node: {e}");
                state
                    .store
                    .set_replica_state(&replica.id, "placed", Some(&detail))
                    .await
            }
            // Tried again after a backoff that doubles with each failure.
            Err(BringUpError::Failed(e)) => {
                tracing::warn!(replica = %replica.id, detail = %e, "replica failed to start");
                state.store.fail_replica(&replica.id, &e).await
            }
        };
        state
            .scheduler
            .in_progress
            .lock()
            .expect("scheduler lock")
            .remove(&replica.id);
    });
}

async fn start(
    state: &Arc<AppState>,
    deployment: &Deployment,
    replica: &Replica,
) -> Result<(), BringUpError> {
    let failed = BringUpError::Failed;
    let cluster = state
        .cluster
        .clone()
        .ok_or_else(|| BringUpError::Unreachable("this frontend runs no carrier set".into()))?;
    let revision = state
        .store
        .model_revision(&deployment.model_id, &deployment.revision)
        .await
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed("the model revision is gone".into()))?;
    // The model may have been imported through another replica: its blobs
    // come from there first (a failure is retried with the failed backoff).
    crate::library::ensure_revision(state, &revision)
        .await
        .map_err(failed)?;
    let control = cluster.control.active();
    let streams = cluster.streams.active();
    // Progress is written in order by one task, finished before the state moves on.
    let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel::<(u64, u64)>();
    let writer = {
        let (store, id) = (state.store.clone(), replica.id.clone());
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
        &state.library,
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
    let spec = json!({
        "id": replica.id,
        "kind": deployment.engine,
        "model_sha256": model.sha256,
        "model_path": "",
        "served_model_name": deployment.served_model_name,
        "gpus": replica.gpus,
        "token_delay_ms": deployment.token_delay_ms,
    });
    control
        .call(
            &replica.node_id,
            "engine.start",
            Bytes::from(spec.to_string()),
            CONTROL_DEADLINE,
        )
        .await
        .map_err(|e| BringUpError::from_control("engine.start", e))?;
    Ok(())
}

/// Stops a claimed replica's engine and forgets the replica once its
/// worker confirms. The first stop drains; when it is not confirmed the
/// row stays (its GPUs counted) until the claim's lease runs out, and the
/// next claim stops the engine once more and forgets the replica whatever
/// the answer: a worker that never answers stops the engine itself once no
/// heartbeat answer names it, and until then the scheduler counts the GPUs
/// the worker reports in use.
fn stop_replica(state: &Arc<AppState>, claim: StopClaim) {
    let state = state.clone();
    tokio::spawn(async move {
        let confirmed = match state.cluster.clone() {
            None => false,
            Some(cluster) => {
                let (verb, deadline) = if claim.again {
                    ("engine.stop", STOP_DEADLINE)
                } else {
                    ("engine.drain", DRAIN_DEADLINE)
                };
                let payload =
                    json!({"id": claim.id, "deadline_ms": DRAIN_DEADLINE.as_millis() as u64});
                let answer = cluster
                    .control
                    .active()
                    .call(
                        &claim.node_id,
                        verb,
                        Bytes::from(payload.to_string()),
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
            let _ = state.store.delete_replica(&claim.id).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_places_at_most_its_budget_over_every_deployment() {
        let mut budget = MAX_PLACEMENTS_PER_PASS;
        let missing = [10, MAX_PLACEMENTS_PER_PASS, 3];
        let now: Vec<usize> = missing
            .iter()
            .map(|m| take_budget(*m, &mut budget))
            .collect();
        assert_eq!(now, [10, MAX_PLACEMENTS_PER_PASS - 10, 0]);
        assert_eq!(budget, 0);
        // The next pass places the rest.
        let mut next = MAX_PLACEMENTS_PER_PASS;
        assert_eq!(take_budget(10 + 3, &mut next), 13);
    }
}
