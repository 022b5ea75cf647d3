//! Which replica serves a request: the routing table (refreshed from the
//! database every second by every frontend) and this frontend's count of
//! requests in flight per replica. The least-loaded ready replica wins
//! (equal loads take turns); a
//! replica at its concurrency limit takes nothing more (429, never a queue).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use switchyard_store::deployments::{Deployment, Replica};

/// A served model: its deployment and the replicas ready to serve.
#[derive(Debug, Clone)]
pub struct Served {
    /// The deployment.
    pub deployment: Deployment,
    /// `(replica id, node id)` of the ready ones.
    pub ready: Vec<(String, String)>,
}

/// Why no replica was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRoute {
    /// No deployment serves this model.
    UnknownModel,
    /// It is deployed but no replica is ready (loading, or none placed).
    Cold,
    /// Every ready replica is at its limit.
    Busy,
}

/// The table and the loads.
#[derive(Debug, Default)]
pub struct Routing {
    table: ArcSwap<HashMap<String, Served>>,
    load: Arc<Mutex<HashMap<String, usize>>>,
    /// Rotates the start of the search, so equal loads take turns.
    turn: std::sync::atomic::AtomicUsize,
    /// Woken whenever a lease frees its slot (a batch line waits on it).
    freed: Arc<tokio::sync::Notify>,
}

/// A request's hold on a replica; dropping it frees the slot.
#[derive(Debug)]
pub struct Lease {
    /// The replica.
    pub replica: String,
    /// Its node.
    pub node: String,
    load: Arc<Mutex<HashMap<String, usize>>>,
    freed: Arc<tokio::sync::Notify>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut load = self.load.lock().expect("load lock");
        if let Some(n) = load.get_mut(&self.replica) {
            *n = n.saturating_sub(1);
        }
        self.freed.notify_waiters();
    }
}

impl Routing {
    /// Rebuilds the table from the rows: the ready replicas on `routable` nodes.
    pub fn refresh(
        &self,
        deployments: Vec<Deployment>,
        replicas: Vec<Replica>,
        routable: &HashSet<String>,
    ) {
        let mut table = HashMap::new();
        for deployment in deployments {
            let ready = replicas
                .iter()
                .filter(|r| {
                    r.deployment_id == deployment.id
                        && r.state == switchyard_protocol::state::ReplicaState::Ready
                        && routable.contains(&r.node_id)
                })
                .map(|r| (r.id.clone(), r.node_id.clone()))
                .collect();
            table.insert(
                deployment.served_model_name.clone(),
                Served { ready, deployment },
            );
        }
        self.table.store(Arc::new(table));
    }

    /// Notified whenever a request's lease frees a slot: what waits for a
    /// busy model's slot waits on it instead of polling.
    pub fn freed(&self) -> &tokio::sync::Notify {
        &self.freed
    }

    /// Requests in flight on this frontend, by replica.
    pub fn in_flight(&self) -> Vec<(String, usize)> {
        let load = self.load.lock().expect("load lock");
        let mut all: Vec<(String, usize)> = load.iter().map(|(r, n)| (r.clone(), *n)).collect();
        all.sort();
        all
    }

    /// The served models, by name.
    pub fn models(&self) -> Arc<HashMap<String, Served>> {
        self.table.load_full()
    }

    /// The least-loaded ready replica of `model` with room for one more request.
    pub fn route(&self, model: &str) -> Result<Lease, NoRoute> {
        let table = self.table.load();
        let served = table.get(model).ok_or(NoRoute::UnknownModel)?;
        if served.ready.is_empty() {
            return Err(NoRoute::Cold);
        }
        let limit = served.deployment.max_concurrency.max(1) as usize;
        let mut load = self.load.lock().expect("load lock");
        let start = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = served.ready.len();
        let (replica, node) = (0..n)
            .map(|i| &served.ready[(start + i) % n])
            .min_by_key(|(id, _)| load.get(id).copied().unwrap_or(0))
            .expect("not empty");
        let count = load.entry(replica.clone()).or_insert(0);
        if *count >= limit {
            return Err(NoRoute::Busy);
        }
        *count += 1;
        Ok(Lease {
            replica: replica.clone(),
            node: node.clone(),
            load: self.load.clone(),
            freed: self.freed.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(limit: i32) -> Deployment {
        serde_json::from_value(json!({
            "id": "d1", "model_id": "demo", "revision": "r1", "engine": "reference",
            "served_model_name": "demo", "replicas": 2, "gpus_per_replica": 1,
            "gpu_memory_bytes": 1, "max_concurrency": limit, "token_delay_ms": 0,
            "strategy": "binpack",
        }))
        .unwrap()
    }

    fn replica(id: &str, node: &str, state: &str) -> Replica {
        serde_json::from_value(json!({
            "id": id, "deployment_id": "d1", "node_id": node, "gpus": [0],
            "state": state, "detail": null,
        }))
        .unwrap()
    }

    fn routable(nodes: &[&str]) -> HashSet<String> {
        nodes.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn only_ready_replicas_on_routable_nodes_serve() {
        let routing = Routing::default();
        let replicas = vec![
            replica("a", "n1", "ready"),
            replica("b", "n2", "ready"),
            replica("c", "n1", "starting"),
        ];
        routing.refresh(vec![deployment(8)], replicas.clone(), &routable(&["n1"]));
        for _ in 0..4 {
            assert_eq!(routing.route("demo").unwrap().replica, "a");
        }
        // The node of the only ready replica is unhealthy: cold, not routed.
        routing.refresh(vec![deployment(8)], replicas, &routable(&["n3"]));
        assert_eq!(routing.route("demo").unwrap_err(), NoRoute::Cold);
        assert_eq!(routing.route("other").unwrap_err(), NoRoute::UnknownModel);
    }

    #[test]
    fn the_least_loaded_wins_and_a_full_replica_takes_nothing() {
        let routing = Routing::default();
        let replicas = vec![replica("a", "n1", "ready"), replica("b", "n2", "ready")];
        routing.refresh(vec![deployment(1)], replicas, &routable(&["n1", "n2"]));
        let first = routing.route("demo").unwrap();
        let second = routing.route("demo").unwrap();
        assert_ne!(first.replica, second.replica, "the idle one wins");
        assert_eq!(routing.route("demo").unwrap_err(), NoRoute::Busy);
        drop(first);
        assert!(
            routing.route("demo").is_ok(),
            "a finished request frees its slot"
        );
    }
}
