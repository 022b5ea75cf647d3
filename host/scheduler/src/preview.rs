//! A placement preview: where the reconciler would place a new
//! deployment's replicas on the cluster as it is now, and why each node
//! refuses one. The same views, filter, scoring and `deploy` chain as a
//! reconcile pass ([`super::reconcile`]), one replica after another so each
//! sees the GPUs the previous took; nothing is written, and the chain's
//! answers are not recorded in the decision log.

use std::collections::BTreeSet;

use switchyard_protocol::admin::{DeploymentPreview, PreviewPlacement, PreviewRefusal};
use switchyard_protocol::state::ReplicaState;
use switchyard_store::deployments::{Deployment, Replica};
use switchyard_store::models::ModelRevision;
use switchyard_store::nodes::Node;

use super::PassError;
use super::admit::deploy_denied_unrecorded;
use super::fit::{place, suitable};
use super::reconcile::need_of;
use super::view::{unschedulable, views};
use switchyard_binding::admission::Admission;

/// Where `deployment`'s replicas would go among `nodes`, beside the
/// `replicas` placed now.
pub async fn preview(
    admission: &Admission,
    deployment: &Deployment,
    revision: &ModelRevision,
    nodes: &[Node],
    replicas: &[Replica],
) -> Result<DeploymentPreview, PassError> {
    // Silent nodes are already unhealthy or offline in their rows: the
    // reconciler writes that every second, so no grace is applied here.
    let stale = BTreeSet::new();
    let need = need_of(deployment, revision);
    let mut placed: Vec<Replica> = replicas.to_vec();
    let mut placements = Vec::new();
    let mut refused = Vec::new();
    let mut pending_reason = None;
    for replica in 0..deployment.replicas.max(0) as u32 {
        let seen = views(nodes, &stale, &placed, &deployment.id, revision);
        refused = seen
            .iter()
            .zip(nodes)
            .filter_map(|(view, node)| {
                let why = suitable(view, need).err()?;
                // "not schedulable" says more as the node's own reason.
                let why = unschedulable(node, &stale).map_or(why, str::to_string);
                Some(refusal(node, why))
            })
            .collect();
        let (node_id, gpus) = match place(&seen, need) {
            Ok(chosen) => chosen,
            Err(why) => {
                pending_reason = Some(format!("no node fits a replica: {why}"));
                break;
            }
        };
        let node = nodes
            .iter()
            .find(|n| n.id == node_id)
            .expect("placed on a known node");
        if let Some(denial) = deploy_denied_unrecorded(admission, deployment, node, &gpus).await? {
            refused.push(refusal(node, format!("the deploy chain refused: {denial}")));
            pending_reason = Some(format!("the deploy chain refused node {node_id}: {denial}"));
            break;
        }
        placements.push(PreviewPlacement {
            replica,
            node: node.id.clone(),
            node_name: node.name.clone(),
            gpus: gpus.clone(),
        });
        placed.push(Replica {
            id: format!("preview-{replica}"),
            deployment_id: deployment.id.clone(),
            node_id,
            gpus: gpus.iter().map(|g| *g as i32).collect(),
            state: ReplicaState::Placed,
            detail: None,
            staged_bytes: None,
            staging_total_bytes: None,
        });
    }
    Ok(DeploymentPreview {
        placeable: pending_reason.is_none(),
        placements,
        refused,
        pending_reason,
    })
}

fn refusal(node: &Node, reason: String) -> PreviewRefusal {
    PreviewRefusal {
        node: node.id.clone(),
        node_name: node.name.clone(),
        reason,
    }
}
