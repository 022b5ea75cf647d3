//! One reconcile pass, and the loop that runs it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest, Decision};
use switchyard_store::deployments::{Deployment, Replica};
use switchyard_store::keys::random_id;
use switchyard_store::nodes::Node;
use tokio::sync::watch;

use super::BringUpError;
use super::fit::{GpuView, Need, NodeView, place};
use super::staging::stage;
use crate::state::AppState;

/// How often the reconciler and the routing table look again.
const EVERY: Duration = Duration::from_secs(1);
/// A node silent this long is lost: its replicas are placed again. Long
/// enough that a short disconnect moves nothing.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
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
    state.routing.refresh(deployments, replicas);
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
        if mine.len() < wanted {
            for _ in mine.len()..wanted {
                let placed = place_one(state, deployment, &nodes, &stale, &replicas).await?;
                match placed {
                    Some(replica) => replicas.push(replica),
                    None => break,
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

fn views(
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &[Replica],
    deployment: &str,
) -> Vec<NodeView> {
    nodes
        .iter()
        .map(|node| NodeView {
            id: node.id.clone(),
            schedulable: node.state == "healthy" && !node.maintenance && !stale.contains(&node.id),
            gpus: node.inventory["gpus"]
                .as_array()
                .map(|gpus| {
                    gpus.iter()
                        .map(|g| GpuView {
                            index: g["index"].as_u64().unwrap_or_default() as u32,
                            memory_total_bytes: g["memory_total_bytes"]
                                .as_u64()
                                .unwrap_or_default(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            used: replicas
                .iter()
                .filter(|r| r.node_id == node.id)
                .flat_map(|r| r.gpus.iter().map(|g| *g as u32))
                .collect(),
            disk_available_bytes: node.inventory["disk"]["available_bytes"].as_u64(),
            holds_files: false,
            siblings: replicas
                .iter()
                .filter(|r| r.node_id == node.id && r.deployment_id == deployment)
                .count() as u32,
        })
        .collect()
}

async fn place_one(
    state: &Arc<AppState>,
    deployment: &Deployment,
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &[Replica],
) -> Result<Option<Replica>, String> {
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
    };
    let (node_id, gpus) = match place(&views(nodes, stale, replicas, &deployment.id), need) {
        Ok(placed) => placed,
        Err(why) => {
            tracing::info!(deployment = %deployment.id, why, "a replica does not fit yet");
            return Ok(None);
        }
    };
    let node = nodes
        .iter()
        .find(|n| n.id == node_id)
        .expect("placed on a known node");
    if let Some(denial) = deploy_denied(state, deployment, node, &gpus).await? {
        tracing::info!(deployment = %deployment.id, node = %node_id, denial, "the deploy chain refused a placement");
        return Ok(None);
    }
    let replica = Replica {
        id: random_id("rep"),
        deployment_id: deployment.id.clone(),
        node_id,
        gpus: gpus.iter().map(|g| *g as i32).collect(),
        state: "placed".into(),
        detail: None,
    };
    state
        .store
        .insert_replica(&replica)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(replica = %replica.id, deployment = %deployment.id, node = %replica.node_id, gpus = ?replica.gpus, "replica placed");
    Ok(Some(replica))
}

/// The `deploy` chain's refusal of this placement, if it refuses.
async fn deploy_denied(
    state: &Arc<AppState>,
    deployment: &Deployment,
    node: &Node,
    gpus: &[u32],
) -> Result<Option<String>, String> {
    let all = node.inventory["gpus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let chosen: Vec<Value> = all
        .iter()
        .filter(|g| gpus.contains(&(g["index"].as_u64().unwrap_or(u64::MAX) as u32)))
        .map(|g| {
            let total = g["memory_total_bytes"].as_u64().unwrap_or_default();
            let used = g["memory_used_bytes"].as_u64().unwrap_or_default();
            json!({"index": g["index"], "name": g["name"], "memory_total_bytes": total,
                   "memory_free_bytes": total.saturating_sub(used)})
        })
        .collect();
    let record = json!({
        "caller": {"key_id": "scheduler", "project": null, "scopes": ["admin"]},
        "deployment": deployment.id,
        "model": deployment.model_id,
        "revision": deployment.revision,
        "engine": deployment.engine,
        "node": node.name,
        "node_labels": [],
        "gpus": chosen,
        "memory_per_gpu_bytes": deployment.gpu_memory_bytes,
    });
    let request =
        AdmissionRequest::from_json(AdmissionPoint::Deploy, record).map_err(|e| e.to_string())?;
    let chain = state.admission.chain(AdmissionPoint::Deploy);
    let verdict = tokio::task::spawn_blocking(move || chain.evaluate(request))
        .await
        .map_err(|e| e.to_string())?;
    Ok(match verdict.decision {
        Decision::Deny(denial) => Some(format!("{}: {}", denial.code, denial.message)),
        _ => None,
    })
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
    let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = {
        let (store, id) = (state.store.clone(), replica.id.clone());
        tokio::spawn(async move {
            while let Some(detail) = updates.recv().await {
                let _ = store.set_replica_state(&id, "staging", Some(&detail)).await;
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
                let _ = progress.send(format!(
                    "staging {:.1} of {:.1} MiB",
                    held as f64 / 1048576.0,
                    total as f64 / 1048576.0
                ));
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
