//! One reconcile pass, and the loop that runs it.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use switchyard_protocol::engines::EngineState;
use switchyard_protocol::state::{NodeState, ReplicaState};
use switchyard_store::Store;
use switchyard_store::deployments::{Deployment, Replica};
use switchyard_store::keys::random_id;
use switchyard_store::models::ModelRevision;
use switchyard_store::nodes::Node;
use tokio::sync::watch;

use super::admit::deploy_denied;
use super::fit::{Need, place};
use super::lifecycle::{bring_up, stop_replica};
use super::view::views;
use super::{PassError, Scheduler};

/// How often the reconciler and the routing table look again.
const EVERY: Duration = Duration::from_secs(1);
/// A node silent this long is lost: its replicas are placed again. Long
/// enough that a short disconnect moves nothing.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// A node silent for this fraction of the grace is unhealthy.
const UNHEALTHY_FRACTION: u32 = 3;
/// Replicas placed in one pass, over every deployment; the rest are placed
/// by the next passes (one a second). A pass holds the scheduler lock and
/// each placement asks the deploy chain and writes a row: a deployment of
/// thousands of replicas must not hold the lock for minutes, and a pass
/// must see the GPUs its own placements took before placing many more.
pub const MAX_PLACEMENTS_PER_PASS: usize = 16;

/// Runs until `stop`: every frontend refreshes its routing table; the one
/// holding the scheduler lock reconciles.
pub async fn run(scheduler: Scheduler, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(e) = tick(&scheduler).await {
            tracing::warn!(error = %e, "reconcile pass failed");
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}

async fn tick(scheduler: &Scheduler) -> Result<(), PassError> {
    let store = &scheduler.store;
    if scheduler.carriers.is_some() {
        store
            .scheduler_pass(reconcile(scheduler))
            .await?
            .transpose()?;
    }
    let deployments = store.deployments().await?;
    let replicas = store.replicas().await?;
    // Replicas on unhealthy, offline or pending nodes get no requests.
    let routable = store
        .nodes()
        .await?
        .into_iter()
        .filter(|n| matches!(n.state, NodeState::Healthy | NodeState::Draining))
        .map(|n| n.id)
        .collect();
    scheduler.routing.refresh(deployments, replicas, &routable);
    Ok(())
}

async fn reconcile(scheduler: &Scheduler) -> Result<(), PassError> {
    let store = &scheduler.store;
    // Replicas whose staging lease ran out (the frontend staging them died
    // or gave up) and failed replicas whose backoff passed: placed again.
    let working: Vec<String> = scheduler
        .in_progress
        .lock()
        .expect("scheduler lock")
        .iter()
        .cloned()
        .collect();
    for id in store.recover_replicas(&working).await? {
        tracing::info!(replica = %id, "bringing a replica up again");
    }
    let deployments = store.deployments().await?;
    let mut replicas = store.replicas().await?;
    let nodes = store.nodes().await?;
    let (stale, late) = node_liveness(store, scheduler.node_grace).await?;
    let nodes_by_id: HashMap<&str, &Node> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    // Lost nodes: their replicas are placed again elsewhere (a worker that
    // comes back stops the engines no replica names any more).
    for replica in replicas.iter().filter(|r| stale.contains(&r.node_id)) {
        tracing::warn!(replica = %replica.id, node = %replica.node_id, "node lost; replacing its replica");
        store.delete_replica(&replica.id).await?;
    }
    replicas.retain(|r| !stale.contains(&r.node_id));

    stop_unwanted(store, &mut replicas, &deployments, &nodes_by_id).await?;
    follow_engines(store, &mut replicas, &nodes_by_id).await?;
    // A replica the API now shows ready takes requests at once, not when
    // the rest of this pass is done (the pass's end refreshes again).
    let routable = nodes
        .iter()
        .filter(|n| matches!(n.state, NodeState::Healthy | NodeState::Draining))
        .filter(|n| !stale.contains(&n.id) && !late.contains(&n.id))
        .map(|n| n.id.clone())
        .collect();
    scheduler
        .routing
        .refresh(deployments.clone(), replicas.clone(), &routable);

    scale(scheduler, &deployments, &nodes, &stale, &mut replicas).await?;
    for replica in replicas.iter().filter(|r| r.state == ReplicaState::Placed) {
        if let Some(deployment) = deployments.iter().find(|d| d.id == replica.deployment_id) {
            bring_up(scheduler, deployment.clone(), replica.clone());
        }
    }
    for claim in store.claim_stops().await? {
        stop_replica(scheduler, claim);
    }
    Ok(())
}

/// Nodes silent past the grace (`stale`, marked offline) and those late by
/// a fraction of it (`late`, marked unhealthy: requests avoid them while
/// their replicas stay, so a short disconnect moves nothing).
async fn node_liveness(
    store: &Store,
    grace: Duration,
) -> Result<(BTreeSet<String>, Vec<String>), PassError> {
    let stale: BTreeSet<String> = store.stale_nodes(grace).await?.into_iter().collect();
    let silent: Vec<String> = stale.iter().cloned().collect();
    store.mark_offline(&silent).await?;
    // Late but within the grace: unhealthy, so requests avoid it while its
    // replicas stay (a short disconnect moves nothing).
    let late: Vec<String> = store
        .stale_nodes(grace / UNHEALTHY_FRACTION)
        .await?
        .into_iter()
        .filter(|id| !stale.contains(id))
        .collect();
    store.mark_unhealthy(&late).await?;
    Ok((stale, late))
}

/// Replicas to stop: those of a deleted deployment and those on a draining
/// node (placed elsewhere). They stay `stopping`, their GPUs counted, until
/// their worker confirms.
async fn stop_unwanted(
    store: &Store,
    replicas: &mut [Replica],
    deployments: &[Deployment],
    nodes_by_id: &HashMap<&str, &Node>,
) -> Result<(), PassError> {
    for replica in replicas.iter_mut() {
        if replica.state == ReplicaState::Stopping {
            continue;
        }
        let why = if !deployments.iter().any(|d| d.id == replica.deployment_id) {
            "its deployment was deleted"
        } else if nodes_by_id
            .get(replica.node_id.as_str())
            .is_some_and(|n| n.state == NodeState::Draining)
        {
            "its node is draining"
        } else {
            continue;
        };
        store.begin_stop(&replica.id, why).await?;
        replica.state = ReplicaState::Stopping;
    }
    Ok(())
}

/// What the workers report of the engines moves their replicas' states.
async fn follow_engines(
    store: &Store,
    replicas: &mut [Replica],
    nodes_by_id: &HashMap<&str, &Node>,
) -> Result<(), PassError> {
    for replica in replicas.iter_mut() {
        let Some(node) = nodes_by_id.get(replica.node_id.as_str()) else {
            continue;
        };
        let reported = engine_state(node, &replica.id);
        let lists_engines = node.inventory.engines.is_some();
        let next = match (replica.state, reported) {
            (ReplicaState::Starting | ReplicaState::Ready, Some(EngineState::Ready { .. })) => {
                ReplicaState::Ready
            }
            (ReplicaState::Ready, Some(EngineState::Starting | EngineState::Restarting { .. })) => {
                ReplicaState::Starting
            }
            // The worker lost a serving engine (it restarted): brought up
            // again (`engine.start` of the same spec is idempotent there).
            (ReplicaState::Ready, None) if lists_engines => ReplicaState::Placed,
            _ => continue,
        };
        if next != replica.state {
            let detail =
                (next == ReplicaState::Placed).then_some("its worker no longer runs the engine");
            store.set_replica_state(&replica.id, next, detail).await?;
            replica.state = next;
        }
    }
    Ok(())
}

/// Places the replicas each deployment lacks (within the pass's budget)
/// and stops those it has too many of; keeps its pending reason.
async fn scale(
    scheduler: &Scheduler,
    deployments: &[Deployment],
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &mut Vec<Replica>,
) -> Result<(), PassError> {
    let store = &scheduler.store;
    let mut budget = MAX_PLACEMENTS_PER_PASS;
    for deployment in deployments {
        let mine: Vec<&Replica> = replicas
            .iter()
            .filter(|r| r.deployment_id == deployment.id && r.state != ReplicaState::Stopping)
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
                match place_one(scheduler, deployment, nodes, stale, replicas).await? {
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
            sorted.sort_by_key(|r| (r.state == ReplicaState::Ready, r.id.clone()));
            for replica in sorted.into_iter().take(mine.len() - wanted) {
                extra.push(replica.id.clone());
            }
            for id in extra {
                store.begin_stop(&id, "scaled down").await?;
                if let Some(r) = replicas.iter_mut().find(|r| r.id == id) {
                    r.state = ReplicaState::Stopping;
                }
            }
        }
        // Written only when it changes: every pass sees every deployment.
        if pending != deployment.pending_reason {
            store
                .set_deployment_pending(&deployment.id, pending.as_deref())
                .await?;
        }
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
fn engine_state<'a>(node: &'a Node, id: &str) -> Option<&'a EngineState> {
    node.inventory
        .engines
        .as_ref()?
        .iter()
        .find(|e| e.id == id)
        .map(|e| &e.state)
}

/// Places one replica of `deployment`; the inner error says why it cannot
/// be placed now (the deployment stays pending with that reason).
async fn place_one(
    scheduler: &Scheduler,
    deployment: &Deployment,
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &[Replica],
) -> Result<Result<Replica, String>, PassError> {
    let revision = scheduler
        .store
        .model_revision(&deployment.model_id, &deployment.revision)
        .await?
        .ok_or_else(|| PassError::RevisionGone(deployment.id.clone()))?;
    let need = need_of(deployment, &revision);
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
    if let Some(denial) = deploy_denied(&scheduler.admission, deployment, node, &gpus).await? {
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
        state: ReplicaState::Placed,
        detail: None,
        staged_bytes: None,
        staging_total_bytes: None,
    };
    scheduler.store.insert_replica(&replica).await?;
    tracing::info!(replica = %replica.id, deployment = %deployment.id, node = %replica.node_id, gpus = ?replica.gpus, "replica placed");
    Ok(Ok(replica))
}

/// What one replica of `deployment` serving `revision` needs of a node.
pub(crate) fn need_of<'a>(deployment: &'a Deployment, revision: &ModelRevision) -> Need<'a> {
    Need {
        gpus: deployment.gpus_per_replica.max(0) as u32,
        memory_per_gpu: deployment.gpu_memory_bytes.max(0) as u64,
        model_bytes: revision.size().max(0) as u64,
        spread: deployment.strategy == "spread",
        selector: &deployment.node_selector,
        nodes: &deployment.nodes,
    }
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
