//! A worker's registration and heartbeats (`POST /api/nodes/register`,
//! `POST /api/nodes/{id}/heartbeat`), what they carry, and the answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchyard_gpu::{Gpu, Source};

use crate::carrier::CarrierNews;
use crate::engines::EngineReport;
use crate::null_as_default;
use crate::state::NodeState;

/// What a worker reports of its machine: CPUs, memory, the disk under its
/// data directory, its GPUs and (in heartbeats) its engines. Every field
/// has a default: a worker reports what it can find.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    /// The machine's host name.
    #[serde(default)]
    pub hostname: String,
    /// CPUs the worker may use.
    #[serde(default)]
    pub cpus: usize,
    /// Memory in all, in bytes, when known.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Memory available, in bytes, when known.
    #[serde(default)]
    pub memory_available_bytes: Option<u64>,
    /// The disk under the data directory, when known.
    #[serde(default)]
    pub disk: Option<Disk>,
    /// Where the GPU list came from.
    #[serde(default = "no_gpu_source")]
    pub gpu_source: Source,
    /// The GPUs, in index order.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// The engines running now; heartbeats carry them, a registration does
    /// not (absent: the worker did not say, which is not "none").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<Vec<EngineReport>>,
}

fn no_gpu_source() -> Source {
    Source::None
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory {
            hostname: String::new(),
            cpus: 0,
            memory_bytes: None,
            memory_available_bytes: None,
            disk: None,
            gpu_source: no_gpu_source(),
            gpus: Vec::new(),
            engines: None,
        }
    }
}

/// A disk's size and free space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// Bytes in all.
    pub total_bytes: u64,
    /// Bytes free.
    pub available_bytes: u64,
}

/// What a worker registers with.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RegisterNode {
    /// The worker's name, unique in the cluster.
    pub name: String,
    /// An address frontends may dial, if the worker has one.
    pub address: Option<String>,
    /// Machine, GPUs, disk.
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub inventory: Inventory,
    /// The worker's labels (`--label key=value`), e.g. `{"zone": "eu-west-1a"}`.
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(example = json!({"zone": "eu-west-1a", "gpu": "h100"})))]
    pub labels: BTreeMap<String, String>,
    /// The node's current credential, when a worker registers a name it
    /// already holds (e.g. its frontend's URL changed).
    #[serde(default)]
    pub credential: Option<String>,
}

impl std::fmt::Debug for RegisterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential is a secret.
        f.debug_struct("RegisterNode")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("labels", &self.labels)
            .field("credential", &self.credential.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// The answer to a registration: the node and its own credential, shown
/// once. The frontend sends its whole node record as `N`; a worker reads
/// the [`NodeRef`] part of it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered<N = NodeRef> {
    /// The node as registered.
    pub node: N,
    /// The node's own credential for heartbeats and connects.
    pub credential: String,
}

impl<N: std::fmt::Debug> std::fmt::Debug for Registered<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential is a secret.
        f.debug_struct("Registered")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// What a worker needs of its node's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    /// Stable id (`node_...`).
    pub id: String,
    /// Its state.
    pub state: NodeState,
}

/// A heartbeat's body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Heartbeat {
    /// The worker's current inventory.
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub inventory: Inventory,
    /// The worker's labels; absent: unchanged.
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(example = json!({"zone": "eu-west-1a"})))]
    pub labels: Option<BTreeMap<String, String>>,
    /// SHA-256s (lowercase hex) of the complete, verified files in the
    /// worker's placement cache, at most 4096; absent: unchanged since the
    /// last heartbeat that carried them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_held: Option<Vec<String>>,
    /// The carrier sets the worker is attached to and those it cannot
    /// follow (absent: the frontend keeps what it knew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carriers: Option<crate::carrier::Attachment>,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    /// The node's state.
    pub state: NodeState,
    /// The cluster's carrier set; absent until carriers run.
    #[serde(default)]
    pub carrier: Option<CarrierNews>,
    /// The engine ids the cluster knows on this node (the worker stops the
    /// others after a grace); `None` from a frontend that does not say
    /// (then nothing is stopped).
    #[serde(default)]
    pub engines: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engines::EngineState;
    use crate::engines::tests::report;
    use crate::round_trip;
    use crate::state::CarrierRowState;

    fn inventory() -> Inventory {
        Inventory {
            hostname: "gpu-1".into(),
            cpus: 16,
            memory_bytes: Some(1 << 40),
            memory_available_bytes: Some(1 << 39),
            disk: Some(Disk {
                total_bytes: 1 << 41,
                available_bytes: 1 << 40,
            }),
            gpu_source: Source::Declared,
            gpus: vec![Gpu {
                index: 0,
                name: "NVIDIA H200".into(),
                uuid: None,
                memory_total_bytes: 141 << 30,
                memory_used_bytes: None,
            }],
            engines: Some(vec![report("rep_1", EngineState::Starting)]),
        }
    }

    #[test]
    fn an_inventory_round_trips_and_a_sparse_one_parses() {
        let json = round_trip(&inventory());
        assert_eq!(json["gpus"][0]["memory_total_bytes"], 141u64 << 30);
        let sparse: Inventory = serde_json::from_value(json!({"cpus": 2})).unwrap();
        assert_eq!(sparse.cpus, 2);
        assert_eq!(sparse.gpu_source, Source::None);
        assert_eq!(sparse.engines, None);
        assert!(
            !round_trip(&sparse)
                .as_object()
                .unwrap()
                .contains_key("engines")
        );
    }

    #[test]
    fn a_registration_round_trips_and_hides_its_credential() {
        let register = RegisterNode {
            name: "gpu-1".into(),
            address: Some("10.0.0.1:7000".into()),
            inventory: inventory(),
            labels: [("zone".into(), "a".into())].into(),
            credential: Some("sy_secret".into()),
        };
        round_trip(&register);
        assert!(!format!("{register:?}").contains("sy_secret"));
        let bare: RegisterNode =
            serde_json::from_value(json!({"name": "n", "inventory": null})).unwrap();
        assert_eq!(bare.inventory, Inventory::default());
        let registered = Registered {
            node: NodeRef {
                id: "node_1".into(),
                state: NodeState::Pending,
            },
            credential: "sy_secret".into(),
        };
        round_trip(&registered);
        assert!(!format!("{registered:?}").contains("sy_secret"));
    }

    #[test]
    fn a_heartbeat_and_its_answer_round_trip() {
        let beat = Heartbeat {
            inventory: inventory(),
            labels: Some([("zone".into(), "a".into())].into()),
            files_held: Some(vec!["ab".repeat(32)]),
            carriers: Some(crate::carrier::Attachment {
                attached: vec!["tunnel".into()],
                epoch_seen: Some(2),
                cannot_follow: [("nats".into(), "no routable --address".into())].into(),
            }),
        };
        round_trip(&beat);
        let unchanged = Heartbeat::default();
        assert!(
            !round_trip(&unchanged)
                .as_object()
                .unwrap()
                .contains_key("files_held")
        );
        let answer = HeartbeatAnswer {
            state: NodeState::Healthy,
            carrier: Some(CarrierNews {
                carrier: "nats".into(),
                epoch: 1,
                state: CarrierRowState::Stable,
                components: Vec::new(),
                target: None,
                draining: None,
                nats_url: None,
                attach_jitter_ms: None,
                max_drain_ms: None,
            }),
            engines: Some(vec!["rep_1".into()]),
        };
        round_trip(&answer);
        let older: HeartbeatAnswer =
            serde_json::from_value(json!({"state": "pending", "carrier": null})).unwrap();
        assert_eq!(older.engines, None);
    }
}
