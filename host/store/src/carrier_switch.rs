//! The moves of a carrier change on the one `cluster_carrier` row, each a
//! compare-and-set on its epoch (a move that lost the race returns `None`);
//! what every replica reports of it in `instances`; what workers report of
//! their carriers in `nodes`; and the cluster's settings.

use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_protocol::carrier::{
    CanBuild, ChangeRecord, ClusterSettings, ReplicaReport, SetKey, WorkerReport,
};
use tokio_postgres::types::Json;

use crate::cluster::{ClusterCarrier, ROW_COLUMNS, cluster_carrier};
use crate::{Store, StoreError};

/// The channel every replica listens on for a hint that the row moved
/// (payload: the epoch) or that a dry run wants fresh reports (`report`).
pub const CARRIER_CHANNEL: &str = "switchyard_carrier";
/// The hint payload that asks every replica to refresh its report.
pub const REFRESH_REPORT: &str = "report";
/// The advisory lock the replica leading a change holds ("swyd-car").
pub const LEADER_LOCK: i64 = 0x0073_7779_6463_6172;

/// A change to start.
#[derive(Debug, Clone)]
pub struct NewChange<'a> {
    /// The set to move to, with its components.
    pub target: &'a SetKey,
    /// Workers that cannot follow were overridden.
    pub forced: bool,
    /// Who asked (an API key's id).
    pub requested_by: &'a str,
    /// How long the prepare may take.
    pub prepare_timeout: Duration,
}

impl Store {
    /// Starts a change: `stable` → `prepare` at `epoch`.
    pub async fn begin_change(
        &self,
        epoch: i64,
        change: NewChange<'_>,
    ) -> Result<Option<ClusterCarrier>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "WITH change AS (
                        INSERT INTO carrier_changes (from_set, from_plugins, to_set, to_plugins, forced, requested_by)
                        SELECT carrier, plugins, $2, $3, $4, $5 FROM cluster_carrier
                         WHERE epoch = $1 AND state = 'stable'
                        RETURNING id)
                     UPDATE cluster_carrier SET state = 'prepare', epoch = epoch + 1,
                        target = $2, target_plugins = $3, forced = $4,
                        change_id = (SELECT id FROM change), changed_at = now(),
                        deadline = now() + make_interval(secs => $6)
                     WHERE epoch = $1 AND state = 'stable' RETURNING {ROW_COLUMNS}"
                ),
                &[
                    &epoch,
                    &change.target.carrier,
                    &Json(&change.target.pins),
                    &change.forced,
                    &change.requested_by,
                    &change.prepare_timeout.as_secs_f64(),
                ],
            )
            .await?;
        if row.is_some() {
            hint(&tx, epoch + 1).await?;
        }
        tx.commit().await?;
        Ok(row.as_ref().map(cluster_carrier))
    }

    /// Aborts a prepare at `epoch` (the target is dropped everywhere).
    pub async fn abort_change(
        &self,
        epoch: i64,
        reason: &str,
    ) -> Result<Option<ClusterCarrier>, StoreError> {
        self.move_row(
            epoch,
            "prepare",
            "state = 'stable', target = NULL, target_plugins = NULL, deadline = NULL, \
             forced = false, change_id = NULL",
            "outcome = 'aborted'",
            Some(reason),
        )
        .await
    }

    /// Commits a prepare at `epoch`: the target becomes active and the old
    /// set drains for at most `window`.
    pub async fn commit_change(
        &self,
        epoch: i64,
        window: Duration,
    ) -> Result<Option<ClusterCarrier>, StoreError> {
        let set = format!(
            "state = 'commit', draining = carrier, draining_plugins = plugins, \
             carrier = target, plugins = target_plugins, target = NULL, target_plugins = NULL, \
             deadline = now() + make_interval(secs => {})",
            window.as_secs_f64()
        );
        self.move_row(epoch, "prepare", &set, "committed_at = now()", None)
            .await
    }

    /// Settles a commit at `epoch`: the old set is released.
    pub async fn settle_change(&self, epoch: i64) -> Result<Option<ClusterCarrier>, StoreError> {
        self.move_row(
            epoch,
            "commit",
            "state = 'stable', draining = NULL, draining_plugins = NULL, deadline = NULL, \
             forced = false, change_id = NULL",
            "settled_at = now(), outcome = 'settled'",
            None,
        )
        .await
    }

    /// One move: the row from `from` at `epoch` to what `set` says, the
    /// epoch grown, and the change's record updated with `record` (and
    /// `reason`, when given).
    async fn move_row(
        &self,
        epoch: i64,
        from: &str,
        set: &str,
        record: &str,
        reason: Option<&str>,
    ) -> Result<Option<ClusterCarrier>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let change: Option<Option<i64>> = tx
            .query_opt(
                "SELECT change_id FROM cluster_carrier WHERE epoch = $1 AND state = $2 FOR UPDATE",
                &[&epoch, &from],
            )
            .await?
            .map(|row| row.get(0));
        let Some(change) = change else {
            return Ok(None);
        };
        let row = tx
            .query_one(
                &format!(
                    "UPDATE cluster_carrier SET {set}, epoch = epoch + 1, changed_at = now() \
                     RETURNING {ROW_COLUMNS}"
                ),
                &[],
            )
            .await?;
        if let Some(id) = change {
            let statement = format!(
                "UPDATE carrier_changes SET {record}, reason = coalesce($2, reason) WHERE id = $1"
            );
            tx.execute(&statement, &[&id, &reason]).await?;
        }
        hint(&tx, epoch + 1).await?;
        tx.commit().await?;
        Ok(Some(cluster_carrier(&row)))
    }

    /// The last changes, newest first.
    pub async fn carrier_changes(&self, limit: i64) -> Result<Vec<ChangeRecord>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id, from_set, to_set, outcome, reason,
                    extract(epoch FROM committed_at - requested_at)::float8 * 1000,
                    extract(epoch FROM settled_at - committed_at)::float8 * 1000
                 FROM carrier_changes ORDER BY id DESC LIMIT $1",
                &[&limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| ChangeRecord {
                id: row.get(0),
                from: row.get(1),
                to: row.get(2),
                outcome: row.get(3),
                reason: row.get(4),
                prepare_ms: row.get(5),
                drain_ms: row.get(6),
            })
            .collect())
    }

    /// Changes by outcome (`settled`, `aborted`) since the database began.
    pub async fn carrier_change_counts(&self) -> Result<BTreeMap<String, i64>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT outcome, count(*) FROM carrier_changes WHERE outcome IS NOT NULL GROUP BY outcome",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Asks every replica to refresh its report (a dry run).
    pub async fn ask_for_reports(&self) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&CARRIER_CHANNEL, &REFRESH_REPORT],
            )
            .await?;
        Ok(())
    }

    /// Records what this replica built of the row and what it can build
    /// (`refreshed`: checked now, which a dry run waits for), and that it lives.
    pub async fn report_instance(
        &self,
        id: &str,
        version: &str,
        epoch: i64,
        built: &[String],
        can_build: &BTreeMap<String, CanBuild>,
        refreshed: bool,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE instances SET version = $2, carrier_epoch = $3, built = $4,
                    can_build = $5, heartbeat_at = now(),
                    report_at = CASE WHEN $6 THEN now() ELSE report_at END WHERE id = $1",
                &[
                    &id,
                    &version,
                    &epoch,
                    &Json(built),
                    &Json(can_build),
                    &refreshed,
                ],
            )
            .await?;
        Ok(())
    }

    /// The replicas whose heartbeat is younger than `fresh`, with what they
    /// built, and whether each refreshed its report within the last
    /// `reported_within` (`None`: not asked).
    pub async fn live_replicas(
        &self,
        fresh: Duration,
        reported_within: Option<Duration>,
    ) -> Result<Vec<LiveReplica>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id, version, carrier_epoch, built, can_build,
                    coalesce(report_at > now() - make_interval(secs => $2), false)
                 FROM instances WHERE heartbeat_at > now() - make_interval(secs => $1)
                 ORDER BY started_at",
                &[
                    &fresh.as_secs_f64(),
                    &reported_within.unwrap_or_default().as_secs_f64(),
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| LiveReplica {
                report: ReplicaReport {
                    id: row.get(0),
                    version: row.get(1),
                    epoch: row.get(2),
                    ready: false,
                    can_build: row.get::<_, Json<BTreeMap<String, CanBuild>>>(4).0,
                },
                built: row.get::<_, Json<Vec<String>>>(3).0,
                reported: row.get(5),
            })
            .collect())
    }

    /// What every approved, not offline, worker reported of its carriers.
    pub async fn carrier_workers(&self) -> Result<Vec<CarrierWorker>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id, attached, epoch_seen, cannot_follow, demoted_reason, state
                 FROM nodes WHERE state NOT IN ('pending', 'offline') ORDER BY id",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let attached: Option<Vec<String>> = row.get(1);
                CarrierWorker {
                    report: WorkerReport {
                        node: row.get(0),
                        reported: attached.is_some(),
                        attached: attached.unwrap_or_default(),
                        epoch_seen: row.get(2),
                        cannot_follow: row.get::<_, Json<BTreeMap<String, String>>>(3).0,
                        demoted_reason: row.get(4),
                    },
                    state: crate::state_column(row, 5),
                }
            })
            .collect())
    }

    /// Demotes (to `unhealthy`, with the reason) the healthy workers that
    /// acted on the row at `epoch` and are not attached to `active` (a
    /// worker that has not seen the row yet, a fresh start among them, is
    /// left alone); promotes the demoted ones that are. Returns (demoted,
    /// promoted).
    pub async fn demote_unattached(
        &self,
        active: &str,
        epoch: i64,
    ) -> Result<(u64, u64), StoreError> {
        let conn = self.conn().await?;
        let demoted = conn
            .execute(
                "UPDATE nodes SET state = 'unhealthy',
                    demoted_reason = 'not attached to the active carrier set `' || $1 || '`'
                        || coalesce(': ' || (cannot_follow ->> $1), '')
                 WHERE state = 'healthy' AND attached IS NOT NULL AND NOT ($1 = ANY (attached))
                    AND coalesce(epoch_seen, 0) >= $2",
                &[&active, &epoch],
            )
            .await?;
        let promoted = conn
            .execute(
                "UPDATE nodes SET state = 'healthy', demoted_reason = NULL
                 WHERE demoted_reason IS NOT NULL AND $1 = ANY (attached) AND state = 'unhealthy'",
                &[&active],
            )
            .await?;
        Ok((demoted, promoted))
    }

    /// The cluster's settings (absent keys take their defaults).
    pub async fn cluster_settings(&self) -> Result<ClusterSettings, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt("SELECT settings FROM cluster_settings", &[])
            .await?;
        Ok(row
            .map(|row| row.get::<_, Json<ClusterSettings>>(0).0)
            .unwrap_or_default())
    }

    /// Saves the settings.
    pub async fn put_cluster_settings(&self, settings: &ClusterSettings) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO cluster_settings (settings) VALUES ($1)
                 ON CONFLICT (singleton) DO UPDATE SET settings = $1, updated_at = now()",
                &[&Json(settings)],
            )
            .await?;
        Ok(())
    }

    /// A connection of its own, outside the pool (a session advisory lock
    /// lives as long as it), with its driver spawned.
    pub(crate) async fn dedicated(&self) -> Result<tokio_postgres::Client, StoreError> {
        self.url.connect_spawned().await
    }

    /// A seat from which this replica may lead carrier changes: a
    /// connection of its own that tries [`LEADER_LOCK`].
    pub async fn leader_seat(&self) -> Result<LeaderSeat, StoreError> {
        Ok(LeaderSeat {
            client: self.dedicated().await?,
        })
    }
}

/// The carrier leader's connection. The lock is a session lock: it is held
/// while this connection lives, and let go when it ends (the replica died
/// or its connection broke), so another replica takes it and carries on.
pub struct LeaderSeat {
    client: tokio_postgres::Client,
}

impl LeaderSeat {
    /// Tries the lock once; whether this seat holds it now.
    pub async fn try_lead(&self) -> Result<bool, StoreError> {
        let row = self
            .client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])
            .await?;
        Ok(row.get(0))
    }

    /// Whether the connection (and with it the lock) is gone.
    pub fn is_lost(&self) -> bool {
        self.client.is_closed()
    }
}

/// A live replica and what it built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveReplica {
    /// Its report (`ready` is for the caller to judge against the row).
    pub report: ReplicaReport,
    /// The sets it runs now, active first, as their labels (`nats
    /// nats@0.1.0+sha256.…`).
    pub built: Vec<String>,
    /// It refreshed its report when asked.
    pub reported: bool,
}

/// A worker and what it reported of its carriers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarrierWorker {
    /// Its report (with whether it ever reported and why it is demoted).
    pub report: WorkerReport,
    /// Its state.
    pub state: switchyard_protocol::state::NodeState,
}

async fn hint(tx: &tokio_postgres::Transaction<'_>, epoch: i64) -> Result<(), StoreError> {
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&CARRIER_CHANNEL, &epoch.to_string()],
    )
    .await?;
    Ok(())
}
