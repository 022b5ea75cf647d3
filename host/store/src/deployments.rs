//! Deployments and their replicas.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_postgres::types::Json;

use switchyard_protocol::state::ReplicaState;

use crate::{Store, StoreError, state_column};

/// The scheduler's advisory lock key ("sy-sched" in spirit; any fixed key).
const SCHEDULER_LOCK: i64 = 7377796463686564;

/// How long a replica may stay in `staging` without progress before the
/// scheduler brings it up again: longer than the slowest step that writes
/// none (a control call's 30 s deadline, one 64 MiB range on a slow link).
pub const STAGING_LEASE: Duration = Duration::from_secs(120);
/// How long one stop of a replica may take before the scheduler stops it
/// again (and then forgets it): a drain's 30 s deadline, the call's margin.
pub const STOPPING_LEASE: Duration = Duration::from_secs(60);
/// The wait before a failed replica is tried again, doubled with each
/// failure in a row up to [`FAILED_BACKOFF_MAX`]: a broken model file or
/// engine does not make a worker restart an engine every second.
pub const FAILED_BACKOFF_BASE: Duration = Duration::from_secs(5);
/// The longest wait between tries of a failed replica.
pub const FAILED_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// A stopping replica the scheduler claimed ([`Store::claim_stops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopClaim {
    /// The replica (and its engine's id).
    pub id: String,
    /// Its node.
    pub node_id: String,
    /// Its previous stop's lease ran out: stop once more, then forget it.
    pub again: bool,
}

pub use switchyard_protocol::deployments::{Deployment, Replica};

const DEPLOYMENT_COLUMNS: &str = "id, model_id, revision, engine, served_model_name, replicas, \
    gpus_per_replica, gpu_memory_bytes, max_concurrency, token_delay_ms, strategy, node_selector, nodes";
const REPLICA_COLUMNS: &str =
    "id, deployment_id, node_id, gpus, state, detail, staged_bytes, staging_total_bytes";

fn deployment(row: &tokio_postgres::Row) -> Deployment {
    Deployment {
        id: row.get(0),
        model_id: row.get(1),
        revision: row.get(2),
        engine: row.get(3),
        served_model_name: row.get(4),
        replicas: row.get(5),
        gpus_per_replica: row.get(6),
        gpu_memory_bytes: row.get(7),
        max_concurrency: row.get(8),
        token_delay_ms: row.get(9),
        strategy: row.get(10),
        node_selector: row.get::<_, Json<BTreeMap<String, String>>>(11).0,
        nodes: row.get(12),
        pending_reason: row.get(13),
    }
}

fn replica(row: &tokio_postgres::Row) -> Replica {
    Replica {
        id: row.get(0),
        deployment_id: row.get(1),
        node_id: row.get(2),
        gpus: row.get(3),
        state: state_column(row, 4),
        detail: row.get(5),
        staged_bytes: row.get(6),
        staging_total_bytes: row.get(7),
    }
}

impl Store {
    /// Creates a deployment; `false` when its served name is taken.
    pub async fn insert_deployment(&self, d: &Deployment, by: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                &format!(
                    "INSERT INTO deployments ({DEPLOYMENT_COLUMNS}, created_by)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                     ON CONFLICT (served_model_name) DO NOTHING"
                ),
                &[
                    &d.id,
                    &d.model_id,
                    &d.revision,
                    &d.engine,
                    &d.served_model_name,
                    &d.replicas,
                    &d.gpus_per_replica,
                    &d.gpu_memory_bytes,
                    &d.max_concurrency,
                    &d.token_delay_ms,
                    &d.strategy,
                    &Json(&d.node_selector),
                    &d.nodes,
                    &by,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Changes what a stopped deployment (no replicas wanted) runs: its
    /// model, engine, GPUs and nodes; `false` when it is not stopped.
    pub async fn reconfigure_deployment(&self, d: &Deployment) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE deployments SET model_id = $2, revision = $3, engine = $4, \
                   gpus_per_replica = $5, gpu_memory_bytes = $6, nodes = $7 \
                 WHERE id = $1 AND replicas = 0",
                &[
                    &d.id,
                    &d.model_id,
                    &d.revision,
                    &d.engine,
                    &d.gpus_per_replica,
                    &d.gpu_memory_bytes,
                    &d.nodes,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Every deployment.
    pub async fn deployments(&self) -> Result<Vec<Deployment>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {DEPLOYMENT_COLUMNS}, pending_reason FROM deployments ORDER BY id"
                ),
                &[],
            )
            .await?;
        Ok(rows.iter().map(deployment).collect())
    }

    /// One deployment.
    pub async fn deployment(&self, id: &str) -> Result<Option<Deployment>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {DEPLOYMENT_COLUMNS}, pending_reason FROM deployments WHERE id = $1"
                ),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(deployment))
    }

    /// Records why a wanted replica is not placed (`None`: all are).
    pub async fn set_deployment_pending(
        &self,
        id: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployments SET pending_reason = $2 WHERE id = $1",
                &[&id, &reason],
            )
            .await?;
        Ok(())
    }

    /// Changes the replica count; `false` for an unknown deployment.
    pub async fn scale_deployment(&self, id: &str, replicas: i32) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE deployments SET replicas = $2 WHERE id = $1",
                &[&id, &replicas],
            )
            .await?;
        Ok(n == 1)
    }

    /// Deletes a deployment; `false` for an unknown one. Its replicas stay,
    /// `stopping`: their engines are drained and their GPUs counted until
    /// the workers confirm ([`Store::claim_stops`]).
    pub async fn delete_deployment(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "UPDATE deployment_replicas SET state = 'stopping', updated_at = now(),
                detail = 'its deployment was deleted',
                staged_bytes = NULL, staging_total_bytes = NULL,
                state_until = NULL, retry_at = NULL
             WHERE deployment_id = $1 AND state <> 'stopping'",
            &[&id],
        )
        .await?;
        let n = tx
            .execute("DELETE FROM deployments WHERE id = $1", &[&id])
            .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Every replica (of every deployment).
    pub async fn replicas(&self) -> Result<Vec<Replica>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {REPLICA_COLUMNS} FROM deployment_replicas ORDER BY id"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(replica).collect())
    }

    /// The ids of the replicas placed on `node` (in any state): the engines
    /// the cluster knows there. A worker stops the others.
    pub async fn replica_ids_on(&self, node: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id FROM deployment_replicas WHERE node_id = $1 ORDER BY id",
                &[&node],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Places a replica.
    pub async fn insert_replica(&self, r: &Replica) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO deployment_replicas (id, deployment_id, node_id, gpus, state, detail)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &r.id,
                    &r.deployment_id,
                    &r.node_id,
                    &r.gpus,
                    &r.state.as_str(),
                    &r.detail,
                ],
            )
            .await?;
        Ok(())
    }

    /// Records a replica's state (staging progress is cleared). Entering
    /// `staging` takes its lease from the database clock; a replica that is
    /// `stopping` stays so (a bring-up that finishes after a delete or a
    /// drain does not bring it back); `ready` clears the failure count.
    pub async fn set_replica_state(
        &self,
        id: &str,
        state: ReplicaState,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        let lease = (state == ReplicaState::Staging).then_some(STAGING_LEASE.as_secs_f64());
        let state = state.as_str();
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = $2, detail = $3, updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL,
                    state_until = now() + make_interval(secs => $4),
                    retry_at = NULL,
                    failures = CASE WHEN $2 = 'ready' THEN 0 ELSE failures END
                 WHERE id = $1 AND (state <> 'stopping' OR $2 = 'stopping')",
                &[&id, &state, &detail, &lease],
            )
            .await?;
        Ok(())
    }

    /// Takes a `placed` replica into `staging` for the caller, with a fresh
    /// lease; `false` when it is not `placed` (another frontend took it).
    pub async fn claim_staging(&self, id: &str, detail: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = 'staging', detail = $2, updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL,
                    state_until = now() + make_interval(secs => $3)
                 WHERE id = $1 AND state = 'placed'",
                &[&id, &detail, &STAGING_LEASE.as_secs_f64()],
            )
            .await?;
        Ok(n == 1)
    }

    /// Renews a staging replica's lease: the frontend bringing it up is
    /// alive and working on it.
    pub async fn renew_staging(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state_until = now() + make_interval(secs => $2)
                 WHERE id = $1 AND state = 'staging'",
                &[&id, &STAGING_LEASE.as_secs_f64()],
            )
            .await?;
        Ok(())
    }

    /// Records that a replica failed: it is tried again after a backoff that
    /// doubles with each failure in a row ([`FAILED_BACKOFF_BASE`] up to
    /// [`FAILED_BACKOFF_MAX`]); the failure count and the time are on the row.
    pub async fn fail_replica(&self, id: &str, detail: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = 'failed', detail = $2, updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL, state_until = NULL,
                    failures = failures + 1,
                    retry_at = now() + make_interval(secs =>
                        least($4::float8, $3::float8 * power(2, least(failures, 30))))
                 WHERE id = $1 AND state <> 'stopping'",
                &[
                    &id,
                    &detail,
                    &FAILED_BACKOFF_BASE.as_secs_f64(),
                    &FAILED_BACKOFF_MAX.as_secs_f64(),
                ],
            )
            .await?;
        Ok(())
    }

    /// Records a staging replica's progress: `staged` of `total` bytes held
    /// by its node. Progress renews the staging lease.
    pub async fn set_replica_staging(
        &self,
        id: &str,
        staged: i64,
        total: i64,
        detail: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = 'staging', detail = $4, updated_at = now(),
                    staged_bytes = $2, staging_total_bytes = $3,
                    state_until = now() + make_interval(secs => $5)
                 WHERE id = $1 AND state <> 'stopping'",
                &[&id, &staged, &total, &detail, &STAGING_LEASE.as_secs_f64()],
            )
            .await?;
        Ok(())
    }

    /// Marks a replica to be stopped. Its GPUs stay counted (the row stays)
    /// until the stop is confirmed; [`Store::claim_stops`] hands it to the
    /// scheduler.
    pub async fn begin_stop(&self, id: &str, detail: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = 'stopping', detail = $2, updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL,
                    state_until = NULL, retry_at = NULL
                 WHERE id = $1 AND state <> 'stopping'",
                &[&id, &detail],
            )
            .await?;
        Ok(())
    }

    /// Claims every stopping replica nobody works on: those not claimed yet
    /// and those whose stop lease ran out (the frontend stopping it died, or
    /// the worker never confirmed). Each claim holds for [`STOPPING_LEASE`].
    pub async fn claim_stops(&self) -> Result<Vec<StopClaim>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "WITH due AS (
                    SELECT id, state_until IS NOT NULL AS again FROM deployment_replicas
                    WHERE state = 'stopping' AND (state_until IS NULL OR state_until < now())
                    FOR UPDATE
                 )
                 UPDATE deployment_replicas r
                    SET state_until = now() + make_interval(secs => $1), updated_at = now()
                 FROM due WHERE r.id = due.id
                 RETURNING r.id, r.node_id, due.again",
                &[&STOPPING_LEASE.as_secs_f64()],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| StopClaim {
                id: r.get(0),
                node_id: r.get(1),
                again: r.get(2),
            })
            .collect())
    }

    /// Puts back in `placed` (to be brought up again) the replicas whose
    /// staging lease ran out, except those in `working` (a task of the
    /// caller's still runs them), and the failed replicas whose backoff has
    /// passed. Returns their ids.
    pub async fn recover_replicas(&self, working: &[String]) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "UPDATE deployment_replicas SET state = 'placed', updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL,
                    state_until = NULL, retry_at = NULL,
                    detail = CASE WHEN state = 'staging'
                        THEN 'staging stopped making progress; staging again'
                        ELSE 'trying again after ' || failures || ' failure(s): ' || coalesce(detail, '')
                    END
                 WHERE (state = 'staging' AND state_until < now() AND NOT (id = ANY($1)))
                    OR (state = 'failed' AND retry_at <= now())
                 RETURNING id",
                &[&working],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Removes a replica row.
    pub async fn delete_replica(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute("DELETE FROM deployment_replicas WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    /// Runs `pass` only if no other replica runs one now; `None` when
    /// another does. The scheduler acts from one frontend at a time.
    ///
    /// The lock is transaction-level (`pg_try_advisory_xact_lock`) in a
    /// transaction held open on one connection for the pass: it ends with
    /// the transaction, whatever happens (a rollback when this future is
    /// dropped, the server's cleanup when the connection dies). A
    /// session-level lock on a pooled connection would outlive a failed
    /// unlock and go back into the pool with the connection, where the next
    /// user holds it unknowingly (and takes it again re-entrantly).
    /// PostgreSQL's docs recommend transaction-level locks for this reason.
    pub async fn scheduler_pass<F, T>(&self, pass: F) -> Result<Option<T>, StoreError>
    where
        F: std::future::Future<Output = T>,
    {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&SCHEDULER_LOCK])
            .await?;
        if !row.get::<_, bool>(0) {
            tx.rollback().await?;
            return Ok(None);
        }
        let outcome = pass.await;
        // Nothing was written in this transaction: ending it only unlocks.
        tx.rollback().await?;
        Ok(Some(outcome))
    }

    /// Whether some replica holds the scheduler lock now (for tests and
    /// diagnostics).
    pub async fn scheduler_lock_held(&self) -> Result<bool, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory'
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND ((classid::bigint << 32) | objid::bigint) = $1",
                &[&SCHEDULER_LOCK],
            )
            .await?;
        Ok(row.get(0))
    }
}

impl Store {
    /// Nodes whose last heartbeat is older than `grace` (or never came).
    pub async fn stale_nodes(&self, grace: std::time::Duration) -> Result<Vec<String>, StoreError> {
        let seconds = grace.as_secs_f64();
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id FROM nodes WHERE last_heartbeat_at IS NULL
                    OR last_heartbeat_at < now() - make_interval(secs => $1)",
                &[&seconds],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
