//! The scheduler's view of each node, built from the rows the workers'
//! registrations and heartbeats wrote: GPUs and disk from the inventory,
//! labels, and whether its placement cache holds a revision's files.

use std::collections::BTreeSet;

use switchyard_protocol::state::NodeState;
use switchyard_store::deployments::Replica;
use switchyard_store::models::ModelRevision;
use switchyard_store::nodes::Node;

use super::fit::{GpuView, NodeView};

/// Every node as [`super::fit::place`] sees it for one replica of `deployment`
/// serving `revision`.
pub fn views(
    nodes: &[Node],
    stale: &BTreeSet<String>,
    replicas: &[Replica],
    deployment: &str,
    revision: &ModelRevision,
) -> Vec<NodeView> {
    nodes
        .iter()
        .map(|node| NodeView {
            id: node.id.clone(),
            schedulable: unschedulable(node, stale).is_none(),
            gpus: node
                .inventory
                .gpus
                .iter()
                .map(|g| GpuView {
                    index: g.index,
                    memory_total_bytes: g.memory_total_bytes,
                })
                .collect(),
            used: replicas
                .iter()
                .filter(|r| r.node_id == node.id)
                .flat_map(|r| r.gpus.iter().map(|g| *g as u32))
                .chain(engine_gpus(node))
                .collect(),
            disk_available_bytes: node.inventory.disk.map(|d| d.available_bytes),
            holds_files: holds_files(node, revision),
            siblings: replicas
                .iter()
                .filter(|r| r.node_id == node.id && r.deployment_id == deployment)
                .count() as u32,
            gpuless: replicas
                .iter()
                .filter(|r| r.node_id == node.id && r.gpus.is_empty())
                .count() as u32,
            labels: node.labels.clone(),
        })
        .collect()
}

/// Why no new replica goes to `node` (approval, heartbeats, draining,
/// maintenance), or `None` when it may take one.
pub fn unschedulable(node: &Node, stale: &BTreeSet<String>) -> Option<&'static str> {
    match node.state {
        NodeState::Healthy if node.maintenance => Some("in maintenance"),
        NodeState::Healthy if stale.contains(&node.id) => Some("silent beyond the grace"),
        NodeState::Healthy => None,
        NodeState::Pending => Some("pending an admin's approval"),
        NodeState::Unhealthy => Some("unhealthy: its heartbeats are late"),
        NodeState::Draining => Some("draining"),
        NodeState::Offline => Some("offline"),
    }
}

/// The GPUs of the engines the node reports running, whether or not a
/// replica names them (one being stopped, one left by a replica that was
/// forgotten): busy until the worker says the engine stopped.
fn engine_gpus(node: &Node) -> impl Iterator<Item = u32> + '_ {
    node.inventory
        .engines
        .iter()
        .flatten()
        .filter(|e| e.holds_gpus())
        .flat_map(|e| e.gpus.iter().copied())
}

/// Whether the node reported every file of the revision as complete in its cache.
fn holds_files(node: &Node, revision: &ModelRevision) -> bool {
    !revision.files.is_empty()
        && revision
            .files
            .iter()
            .all(|f| node.files_held.contains(&f.sha256))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use switchyard_store::models::ModelFile;

    use super::*;

    fn node(id: &str, files_held: &[&str]) -> Node {
        Node {
            id: id.into(),
            name: id.into(),
            state: NodeState::Healthy,
            address: None,
            inventory: serde_json::from_value(json!({
                "gpus": [{"index": 0, "name": "g", "memory_total_bytes": 1024}],
                "disk": {"total_bytes": 20, "available_bytes": 10},
            }))
            .unwrap(),
            registered_at: String::new(),
            approved_at: None,
            last_heartbeat_at: None,
            maintenance: false,
            labels: [("zone".to_string(), "a".to_string())].into(),
            files_held: files_held.iter().map(|f| f.to_string()).collect(),
        }
    }

    fn revision(digests: &[&str]) -> ModelRevision {
        ModelRevision {
            id: "m".into(),
            revision: "r".into(),
            licence: None,
            files: digests
                .iter()
                .map(|d| ModelFile {
                    path: format!("{d}.bin"),
                    size: 1,
                    sha256: d.to_string(),
                })
                .collect(),
            imported_by: String::new(),
            imported_at: String::new(),
        }
    }

    #[test]
    fn a_node_holds_the_files_only_when_it_reported_every_one() {
        let nodes = [node("all", &["aa", "bb", "cc"]), node("some", &["aa"])];
        let seen = views(&nodes, &BTreeSet::new(), &[], "d", &revision(&["aa", "bb"]));
        assert!(seen[0].holds_files);
        assert!(!seen[1].holds_files);
        // A revision without files is held nowhere (nothing to skip).
        assert!(!views(&nodes, &BTreeSet::new(), &[], "d", &revision(&[]))[0].holds_files);
        assert_eq!(seen[0].labels["zone"], "a");
        assert_eq!(seen[0].gpus[0].memory_total_bytes, 1024);
        assert_eq!(seen[0].disk_available_bytes, Some(10));
    }

    #[test]
    fn gpus_of_engines_the_node_reports_running_are_busy_without_a_replica() {
        let mut busy = node("n", &[]);
        busy.inventory = serde_json::from_value(json!({
            "gpus": [
                {"index": 0, "name": "g", "memory_total_bytes": 1024},
                {"index": 1, "name": "g", "memory_total_bytes": 1024},
                {"index": 2, "name": "g", "memory_total_bytes": 1024},
            ],
            "engines": [
                {"id": "rep_forgotten", "kind": "reference", "model": "m", "gpus": [1],
                 "state": {"state": "ready", "pid": 7}, "url": "http://127.0.0.1:1"},
                {"id": "rep_gone", "kind": "reference", "model": "m", "gpus": [2],
                 "state": {"state": "stopped", "reason": "x"}, "url": "http://127.0.0.1:2"},
            ],
        }))
        .unwrap();
        let seen = views(&[busy], &BTreeSet::new(), &[], "d", &revision(&["aa"]));
        assert_eq!(seen[0].used, BTreeSet::from([1]));
    }

    #[test]
    fn stale_draining_and_maintenance_nodes_are_not_schedulable() {
        let mut maintenance = node("m", &[]);
        maintenance.maintenance = true;
        let mut draining = node("d", &[]);
        draining.state = NodeState::Draining;
        let nodes = [node("ok", &[]), node("stale", &[]), maintenance, draining];
        let stale: BTreeSet<String> = ["stale".to_string()].into();
        let seen = views(&nodes, &stale, &[], "d", &revision(&["aa"]));
        let schedulable: Vec<bool> = seen.iter().map(|v| v.schedulable).collect();
        assert_eq!(schedulable, [true, false, false, false]);
    }
}
