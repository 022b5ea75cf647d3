//! One reconcile pass, and the loop that runs it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use switchyard_store::deployments::{Deployment, Replica};
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
    if state.cluster.is_some()
        && let Some(lock) = store
            .try_scheduler_lock()
            .await
            .map_err(|e| e.to_string())?
    {
        let outcome = reconcile(state).await;
        store
            .release_scheduler_lock(&lock)
            .await
            .map_err(|e| e.to_string())?;
        outcome?;
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

    // A drained node's replicas move away: stopped here, placed elsewhere.
    for replica in replicas.iter().filter(|r| {
        r.state != "stopping"
            && nodes_by_id
                .get(r.node_id.as_str())
                .is_some_and(|n| n.state == "draining")
    }) {
        stop_replica(state, replica.clone());
    }
    replicas.retain(|r| {
        nodes_by_id
            .get(r.node_id.as_str())
            .is_none_or(|n| n.state != "draining")
    });

    // Lost nodes: their replicas are placed again elsewhere.
    for replica in replicas.iter().filter(|r| stale.contains(&r.node_id)) {
        tracing::warn!(replica = %replica.id, node = %replica.node_id, "node lost; replacing its replica");
        store
            .delete_replica(&replica.id)
            .await
            .map_err(|e| e.to_string())?;
    }
    replicas.retain(|r| !stale.contains(&r.node_id));

    // What the workers report of the engines.
    for replica in &mut replicas {
        let Some(node) = nodes_by_id.get(replica.node_id.as_str()) else {
            continue;
        };
        let reported = engine_state(node, &replica.id);
        let next = match (replica.state.as_str(), reported.as_deref()) {
            ("starting" | "ready", Some("ready")) => "ready",
            ("ready", Some("starting" | "restarting")) => "starting",
            _ => continue,
        };
        if next != replica.state {
            store
                .set_replica_state(&replica.id, next, None)
                .await
                .map_err(|e| e.to_string())?;
            replica.state = next.to_string();
        }
    }

    for deployment in &deployments {
        let mine: Vec<&Replica> = replicas
            .iter()
            .filter(|r| r.deployment_id == deployment.id && r.state != "stopping")
            .collect();
        let wanted = deployment.replicas.max(0) as usize;
        let mut pending = None;
        if mine.len() < wanted {
            for _ in mine.len()..wanted {
                match place_one(state, deployment, &nodes, &stale, &replicas).await? {
                    Ok(replica) => replicas.push(replica),
                    Err(why) => {
                        pending = Some(why);
                        break;
                    }
                }
            }
        } else if mine.len() > wanted {
            let mut extra: Vec<&Replica> = mine.clone();
            // Stop those not serving first.
            extra.sort_by_key(|r| (r.state == "ready", r.id.clone()));
            for replica in extra.into_iter().take(mine.len() - wanted) {
                stop_replica(state, replica.clone());
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
    Ok(())
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
        let outcome = start(&state, &deployment, &replica).await;
        let (next, detail) = match outcome {
            Ok(()) => ("starting", None),
            // Placed again: the next pass tries once the node is reachable.
            Err(BringUpError::Unreachable(e)) => {
                ("placed", Some(format!("waiting for the node: {e}")))
            }
            Err(BringUpError::Failed(e)) => {
                tracing::warn!(replica = %replica.id, detail = %e, "replica failed to start");
                ("failed", Some(e))
            }
        };
        let _ = state
            .store
            .set_replica_state(&replica.id, next, detail.as_deref())
            .await;
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
    let _ = state
        .store
        .set_replica_state(&replica.id, "staging", Some("checking the worker's files"))
        .await;
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

/// Drains the replica's engine, then forgets the replica.
fn stop_replica(state: &Arc<AppState>, replica: Replica) {
    let state = state.clone();
    tokio::spawn(async move {
        let _ = state
            .store
            .set_replica_state(&replica.id, "stopping", None)
            .await;
        if let Some(cluster) = state.cluster.clone() {
            let payload = json!({"id": replica.id, "deadline_ms": 30_000}).to_string();
            let drained = cluster
                .control
                .active()
                .call(
                    &replica.node_id,
                    "engine.drain",
                    Bytes::from(payload),
                    Duration::from_secs(40),
                )
                .await;
            if let Err(e) = drained {
                tracing::warn!(replica = %replica.id, error = %e, "the replica's engine did not drain");
            }
        }
        let _ = state.store.delete_replica(&replica.id).await;
    });
}
