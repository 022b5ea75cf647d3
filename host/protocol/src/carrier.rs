//! The cluster's carrier set as frontends tell their workers (the heartbeat
//! answer's news), and what a worker says it is attached to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::CarrierRowState;

mod switch;
pub use switch::{Phase, SetKey};

/// The header carrying the relay secret between the replicas of one
/// cluster (a relayed stream, a library blob fetched from a peer replica).
pub const RELAY_HEADER: &str = "x-switchyard-relay";

/// The cluster's carrier set, as the frontend tells its workers. During a
/// change it also names the target (prepare and commit) and the set that
/// drains (commit): a worker attaches to the target beside the active set
/// and closes the old one only once the news no longer names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarrierNews {
    /// The active carrier set's name (`nats`, `tunnel`).
    pub carrier: String,
    /// Grows with every move of a change (prepare, commit, abort, settle).
    pub epoch: i64,
    /// Where a change is.
    pub state: CarrierRowState,
    /// The components the active set is made of, where the frontend names
    /// them (from its plugin registry); empty: the worker uses its own.
    #[serde(default)]
    pub components: Vec<ComponentRef>,
    /// The set a change moves to (prepare and commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<SetRef>,
    /// The set that drains after a commit, until the change settles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draining: Option<SetRef>,
    /// The NATS server workers are told to use for the `nats` set (the
    /// cluster's setting; a worker's own `--nats-url` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats_url: Option<String>,
    /// The longest random wait before attaching to a target
    /// ([`ClusterSettings::attach_jitter_ms`]; absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_jitter_ms: Option<u64>,
    /// The longest a worker keeps a released set for work still running on
    /// it ([`ClusterSettings::max_drain_ms`]; absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drain_ms: Option<u64>,
}

/// A carrier set with the components it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SetRef {
    /// The set's name (`nats`, `tunnel`).
    pub carrier: String,
    /// Its components, by name, version and digest.
    #[serde(default)]
    pub components: Vec<ComponentRef>,
}

/// One component of a carrier set, by name, version and digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ComponentRef {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 (lowercase hex) of the component's bytes.
    pub sha256: String,
}

/// A component version and digest pinned by the cluster row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Pin {
    /// The plugin's version.
    pub version: String,
    /// SHA-256 (lowercase hex) of its bytes.
    pub sha256: String,
}

/// The components of a set as the cluster row keeps them: name → pin.
pub type Pins = BTreeMap<String, Pin>;

/// Pins from component references.
pub fn pins(components: &[ComponentRef]) -> Pins {
    components
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                Pin {
                    version: c.version.clone(),
                    sha256: c.sha256.clone(),
                },
            )
        })
        .collect()
}

/// Component references from pins.
pub fn refs(pins: &Pins) -> Vec<ComponentRef> {
    pins.iter()
        .map(|(name, pin)| ComponentRef {
            name: name.clone(),
            version: pin.version.clone(),
            sha256: pin.sha256.clone(),
        })
        .collect()
}

/// `POST /api/cluster/carrier`: start a change, try one (dry run), or abort.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CarrierChange {
    /// The set to move to (`nats`, `tunnel`); absent with `abort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Component versions to run instead of the newest registered
    /// (`{"nats": "0.2.0"}`): a version upgrade when the set stays.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugins: BTreeMap<String, String>,
    /// Check and report; change nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Go ahead although workers cannot follow (they are demoted until they can).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Abort the change in prepare.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
}

/// Why a change cannot start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Blocker {
    /// `already_active`, `change_under_way`, `replica_cannot_build`,
    /// `replica_silent`, `worker_cannot_follow`.
    pub code: String,
    /// What and who, in words.
    pub message: String,
}

/// Blocker codes ([`Blocker::code`]).
pub mod blockers {
    /// The target set and versions are what runs.
    pub const ALREADY_ACTIVE: &str = "already_active";
    /// A change is under way.
    pub const CHANGE_UNDER_WAY: &str = "change_under_way";
    /// A live replica cannot build the target.
    pub const REPLICA_CANNOT_BUILD: &str = "replica_cannot_build";
    /// A live replica did not refresh its report in time.
    pub const REPLICA_SILENT: &str = "replica_silent";
    /// A worker cannot follow to the target (`force` overrides).
    pub const WORKER_CANNOT_FOLLOW: &str = "worker_cannot_follow";
}

/// A dry run's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Preflight {
    /// Nothing blocks the change.
    pub ok: bool,
    /// What blocks it.
    pub blockers: Vec<Blocker>,
    /// The status the preflight read (`GET /api/cluster/carrier`'s body).
    pub report: CarrierStatus,
}

/// A change started (202) or aborted (200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ChangeMoved {
    /// The row's epoch after the move.
    pub epoch: i64,
    /// The row's state after the move.
    pub state: CarrierRowState,
}

/// Whether a replica can build a set, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CanBuild {
    /// It can.
    pub ok: bool,
    /// Why not (absent when it can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One live replica, as the carrier status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReplicaReport {
    /// The replica's id.
    pub id: String,
    /// Its build (`switchyard` version).
    pub version: String,
    /// The row epoch it acted on last.
    pub epoch: i64,
    /// It runs the row's active set (and the target in prepare).
    pub ready: bool,
    /// Per set, whether it can build it.
    pub can_build: BTreeMap<String, CanBuild>,
}

/// One worker, as the carrier status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WorkerReport {
    /// The node's id.
    pub node: String,
    /// The sets it reported attached.
    pub attached: Vec<String>,
    /// The row epoch it last saw.
    pub epoch_seen: Option<i64>,
    /// The sets it cannot follow to, with why.
    pub cannot_follow: BTreeMap<String, String>,
    /// It ever reported its carriers (older workers do not).
    #[serde(default)]
    pub reported: bool,
    /// Why it is demoted (not attached to the active set after a change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demoted_reason: Option<String>,
}

/// `GET /api/cluster/carrier`: the cluster's carrier, every live replica
/// and every worker, and what this replica runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct CarrierStatus {
    /// The active set (absent before the row is seeded).
    pub carrier: Option<String>,
    /// Its components.
    pub plugins: Pins,
    /// The row's epoch.
    pub epoch: Option<i64>,
    /// Where a change is.
    pub state: Option<CarrierRowState>,
    /// The set a prepare moves to.
    pub target: Option<String>,
    /// Its components.
    pub target_plugins: Option<Pins>,
    /// The set that drains after a commit.
    pub draining: Option<String>,
    /// How long the drain may still take (commit only).
    pub drain_left_ms: Option<i64>,
    /// How long the prepare may still take (prepare only).
    pub prepare_left_ms: Option<i64>,
    /// The change overrides workers that cannot follow.
    pub forced: bool,
    /// Every live replica.
    pub replicas: Vec<ReplicaReport>,
    /// Every approved worker that is not offline.
    pub workers: Vec<WorkerReport>,
    /// Work in flight.
    pub in_flight: InFlight,
    /// The cluster's settings, passwords masked.
    pub settings: ClusterSettings,
    /// The newest change.
    pub last_change: Option<ChangeRecord>,
    /// The set this replica runs.
    pub running: Option<String>,
    /// This replica's fan-out carrier is connected.
    pub connected: bool,
    /// This replica's fan-out carrier plugin.
    pub plugin: Option<PluginHealth>,
    /// The worker sessions this replica holds.
    pub sessions: Vec<SessionRef>,
    /// A line for each active component signed by a key no longer (or
    /// never) trusted: it keeps running, but a change that pins it is
    /// refused while carriers require signatures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trust_warnings: Vec<String>,
}

/// Work in flight, as the status counts it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct InFlight {
    /// Inference requests this replica has routed and not finished.
    pub streams: u64,
    /// Units waiting on pgbus's queue.
    pub units: i64,
}

/// One change, as `carrier_changes` keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ChangeRecord {
    /// Its id.
    pub id: i64,
    /// From which set.
    pub from: String,
    /// To which set.
    pub to: String,
    /// `settled`, `aborted`, or absent while under way.
    pub outcome: Option<String>,
    /// Why it aborted.
    pub reason: Option<String>,
    /// Request to commit, in milliseconds (database clock).
    pub prepare_ms: Option<f64>,
    /// Commit to settled, in milliseconds.
    pub drain_ms: Option<f64>,
}

/// A carrier plugin's health on this replica.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PluginHealth {
    /// `running`, or `rebuilding` while a failed rebuild waits for its retry
    /// (after 1 s, doubling up to 30 s).
    pub state: String,
    /// Rebuilds that failed in a row.
    pub failed_rebuilds: u64,
    /// Why the last one failed.
    pub last_error: Option<String>,
    /// When the next try is due (ms since the Unix epoch).
    pub next_retry_unix_ms: Option<u64>,
}

/// A worker session a replica holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SessionRef {
    /// The node.
    pub node: String,
    /// `inference` or `bulk`.
    pub lane: String,
}

/// A 422 `blocked` answer to a carrier change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Blocked {
    /// `{code: "blocked", message}`.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub error: crate::admin::ErrorDetail,
    /// What blocks the change.
    pub blockers: Vec<Blocker>,
    /// The status the preflight read.
    #[serde(default)]
    pub report: CarrierStatus,
}

/// What a worker says of its carriers in a heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Attachment {
    /// The sets attached and connected now, by name.
    pub attached: Vec<String>,
    /// The row epoch of the last news it acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_seen: Option<i64>,
    /// Sets it cannot follow to, with why (`nats`: "no routable --address").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cannot_follow: BTreeMap<String, String>,
}

/// The cluster's settings for carriers and their changes
/// (`GET/PUT /api/cluster/settings`). URLs may hold credentials: what is
/// shown masks their passwords.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ClusterSettings {
    /// The NATS server frontends use for the `nats` set.
    pub nats_url: Option<String>,
    /// The NATS server workers are told to use (absent: `nats_url`).
    pub worker_nats_url: Option<String>,
    /// How long a prepare may take before it aborts itself.
    pub prepare_timeout_ms: u64,
    /// How long after a commit the old set drains at most (it settles at
    /// once when nothing is left on it).
    pub window_ms: u64,
    /// How long a worker waits for work still running on a released set
    /// before it closes it anyway.
    pub max_drain_ms: u64,
    /// The cap of the random wait before a worker attaches to a target, so
    /// that a fleet does not connect at once: the wait's bound grows with
    /// the workers that must attach (none for a handful) up to this.
    pub attach_jitter_ms: u64,
    /// Which kinds of plugin must be signed by a trusted key to be
    /// uploaded or bound (see [`crate::signing`]).
    pub require_signed: crate::signing::RequireSigned,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            nats_url: None,
            worker_nats_url: None,
            prepare_timeout_ms: 60_000,
            window_ms: 30_000,
            max_drain_ms: 120_000,
            attach_jitter_ms: 10_000,
            require_signed: crate::signing::RequireSigned::default(),
        }
    }
}

impl ClusterSettings {
    /// The settings that are URLs.
    pub const URLS: [&'static str; 2] = ["nats_url", "worker_nats_url"];
    /// Every setting's name.
    pub const NAMES: [&'static str; 7] = [
        "nats_url",
        "worker_nats_url",
        "prepare_timeout_ms",
        "window_ms",
        "max_drain_ms",
        "attach_jitter_ms",
        "require_signed",
    ];
}

/// The shortest wait a setting that is a wait may take: shorter ones would
/// abort or settle changes before a replica's poll could see them.
pub const MIN_WAIT_MS: u64 = 5_000;
/// The longest attach jitter.
pub const MAX_ATTACH_JITTER_MS: u64 = 600_000;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    fn tunnel() -> ComponentRef {
        ComponentRef {
            name: "tunnel".into(),
            version: "0.2.0".into(),
            sha256: "ab".repeat(32),
        }
    }

    #[test]
    fn carrier_news_round_trips_in_every_phase() {
        let mut news = CarrierNews {
            carrier: "nats".into(),
            epoch: 3,
            state: CarrierRowState::Prepare,
            components: Vec::new(),
            target: None,
            draining: None,
            nats_url: None,
            attach_jitter_ms: None,
            max_drain_ms: None,
        };
        round_trip(&news);
        news.target = Some(SetRef {
            carrier: "tunnel".into(),
            components: vec![tunnel()],
        });
        news.nats_url = Some("nats://10.0.0.1:4222".into());
        news.attach_jitter_ms = Some(0);
        round_trip(&news);
        // What frontends that name no components nor changes send.
        let older: CarrierNews =
            serde_json::from_value(json!({"carrier": "nats", "epoch": 1, "state": "stable"}))
                .unwrap();
        assert!(older.components.is_empty() && older.target.is_none());
    }

    #[test]
    fn pins_and_refs_are_inverse() {
        let refs_in = vec![tunnel()];
        assert_eq!(refs(&pins(&refs_in)), refs_in);
        round_trip(&pins(&refs_in));
    }

    #[test]
    fn switch_bodies_round_trip() {
        round_trip(&CarrierChange {
            target: Some("tunnel".into()),
            plugins: [("tunnel".into(), "0.2.0".into())].into(),
            dry_run: true,
            force: false,
            abort: false,
        });
        let abort: CarrierChange = serde_json::from_value(json!({"abort": true})).unwrap();
        assert!(abort.abort && abort.target.is_none());
        assert!(serde_json::from_value::<CarrierChange>(json!({"targett": "x"})).is_err());
        round_trip(&Preflight {
            ok: false,
            blockers: vec![Blocker {
                code: blockers::WORKER_CANNOT_FOLLOW.into(),
                message: "node n1: no routable --address".into(),
            }],
            report: CarrierStatus {
                carrier: Some("tunnel".into()),
                ..CarrierStatus::default()
            },
        });
        round_trip(&ChangeMoved {
            epoch: 4,
            state: CarrierRowState::Prepare,
        });
        round_trip(&ReplicaReport {
            id: "r1".into(),
            version: "0.1.0".into(),
            epoch: 4,
            ready: true,
            can_build: [(
                "nats".into(),
                CanBuild {
                    ok: false,
                    reason: Some("no NATS URL".into()),
                },
            )]
            .into(),
        });
        round_trip(&WorkerReport {
            node: "n1".into(),
            attached: vec!["tunnel".into()],
            epoch_seen: Some(4),
            cannot_follow: [("nats".into(), "no routable --address".into())].into(),
            reported: true,
            demoted_reason: None,
        });
        round_trip(&Attachment::default());
        round_trip(&Blocked {
            error: crate::admin::ErrorDetail {
                code: "blocked".into(),
                message: "r1 cannot build nats".into(),
            },
            blockers: Vec::new(),
            report: CarrierStatus {
                last_change: Some(ChangeRecord {
                    id: 1,
                    from: "nats".into(),
                    to: "tunnel".into(),
                    outcome: Some("settled".into()),
                    prepare_ms: Some(214.0),
                    drain_ms: Some(56.0),
                    ..ChangeRecord::default()
                }),
                plugin: Some(PluginHealth::default()),
                sessions: vec![SessionRef {
                    node: "n1".into(),
                    lane: "inference".into(),
                }],
                ..CarrierStatus::default()
            },
        });
        round_trip(&ClusterSettings::default());
    }
}
