//! The `deploy` admission chain's say on a placement: the record a policy
//! sees (the deployment, the node with its labels, the chosen GPUs with
//! their free memory) and its verdict.

use serde_json::{Value, json};
use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest, Decision};
use switchyard_store::deployments::Deployment;
use switchyard_store::nodes::Node;

use super::PassError;
use switchyard_binding::admission::Admission;

/// The `deploy` chain's refusal of this placement (`code: message`), if it refuses.
pub async fn deploy_denied(
    admission: &Admission,
    deployment: &Deployment,
    node: &Node,
    gpus: &[u32],
) -> Result<Option<String>, PassError> {
    let request = deploy_request(deployment, node, gpus)?;
    let verdict = admission
        .judge(request)
        .await
        .map_err(|e| PassError::DeployChain(e.to_string()))?;
    Ok(denial(verdict.decision))
}

/// [`deploy_denied`] for a preview: the chain serving the point judges the
/// record, and nothing is recorded in the decision log (as a dry run).
pub async fn deploy_denied_unrecorded(
    admission: &Admission,
    deployment: &Deployment,
    node: &Node,
    gpus: &[u32],
) -> Result<Option<String>, PassError> {
    let request = deploy_request(deployment, node, gpus)?;
    let chain = admission.chain(AdmissionPoint::Deploy);
    let verdict = switchyard_binding::admission::evaluate(&chain, &request)
        .await
        .map_err(|e| PassError::DeployChain(e.to_string()))?;
    Ok(denial(verdict.decision))
}

fn deploy_request(
    deployment: &Deployment,
    node: &Node,
    gpus: &[u32],
) -> Result<AdmissionRequest, PassError> {
    AdmissionRequest::from_json(
        AdmissionPoint::Deploy,
        deploy_record(deployment, node, gpus),
    )
    .map_err(|e| PassError::DeployChain(e.to_string()))
}

fn denial(decision: Decision) -> Option<String> {
    match decision {
        Decision::Deny(denial) => Some(format!("{}: {}", denial.code, denial.message)),
        _ => None,
    }
}

/// The request record of the `deploy` point for placing a replica of
/// `deployment` on `gpus` of `node`.
fn deploy_record(deployment: &Deployment, node: &Node, gpus: &[u32]) -> Value {
    let chosen: Vec<Value> = node
        .inventory
        .gpus
        .iter()
        .filter(|g| gpus.contains(&g.index))
        .map(|g| {
            // Memory in use unknown (a declared GPU): all of it is free.
            let free = g.memory_free_bytes().unwrap_or(g.memory_total_bytes);
            json!({"index": g.index, "name": g.name, "memory_total_bytes": g.memory_total_bytes,
                   "memory_free_bytes": free})
        })
        .collect();
    json!({
        "caller": {"key_id": "scheduler", "project": null, "scopes": ["admin"]},
        "deployment": deployment.id,
        "model": deployment.model_id,
        "revision": deployment.revision,
        "engine": deployment.engine,
        "node": node.name,
        // The WIT record's list<tuple<string, string>>.
        "node_labels": node.labels.iter().map(|(k, v)| [k, v]).collect::<Vec<_>>(),
        "gpus": chosen,
        "memory_per_gpu_bytes": deployment.gpu_memory_bytes,
    })
}

#[cfg(test)]
mod tests {
    use switchyard_protocol::state::NodeState;

    use super::*;

    #[test]
    fn the_record_carries_the_nodes_labels_and_the_chosen_gpus() {
        let deployment = Deployment {
            id: "dep_1".into(),
            model_id: "m".into(),
            revision: "r".into(),
            engine: "reference".into(),
            served_model_name: "m".into(),
            replicas: 1,
            gpus_per_replica: 1,
            gpu_memory_bytes: 1 << 30,
            max_concurrency: 8,
            token_delay_ms: 0,
            strategy: "binpack".into(),
            node_selector: Default::default(),
            pending_reason: None,
            nodes: Vec::new(),
        };
        let node = Node {
            id: "node_1".into(),
            name: "gpu-1".into(),
            state: NodeState::Healthy,
            address: None,
            inventory: serde_json::from_value(json!({"gpus": [
                {"index": 0, "name": "L4", "memory_total_bytes": 100, "memory_used_bytes": 30},
                {"index": 1, "name": "L4", "memory_total_bytes": 100, "memory_used_bytes": 0},
            ]}))
            .unwrap(),
            registered_at: String::new(),
            approved_at: None,
            last_heartbeat_at: None,
            maintenance: false,
            labels: [
                ("gpu".to_string(), "l4".to_string()),
                ("zone".to_string(), "a".to_string()),
            ]
            .into(),
            files_held: vec![],
        };
        let record = deploy_record(&deployment, &node, &[0]);
        let parsed = AdmissionRequest::from_json(AdmissionPoint::Deploy, record).unwrap();
        let AdmissionRequest::Deploy(request) = parsed else {
            panic!("not a deploy request");
        };
        assert_eq!(
            request.node_labels,
            vec![
                ("gpu".to_string(), "l4".to_string()),
                ("zone".to_string(), "a".to_string())
            ]
        );
        assert_eq!(request.gpus.len(), 1);
        assert_eq!(request.gpus[0].memory_free_bytes, 70);
    }
}
