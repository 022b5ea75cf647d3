//! Deployments and their replicas.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tokio_postgres::types::Json;

use crate::{Store, StoreError};

/// A deployment as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Deployment {
    /// Its id.
    pub id: String,
    /// The model.
    pub model_id: String,
    /// The model's revision.
    pub revision: String,
    /// `reference`, `llama-cpp` or `vllm`.
    pub engine: String,
    /// The model id clients use on `/v1`.
    pub served_model_name: String,
    /// Replicas wanted.
    pub replicas: i32,
    /// GPUs per replica (on one node).
    pub gpus_per_replica: i32,
    /// Memory each of its GPUs must have free.
    pub gpu_memory_bytes: i64,
    /// Requests one replica serves at once; beyond, 429.
    pub max_concurrency: i32,
    /// The reference engine's delay per token.
    pub token_delay_ms: i32,
    /// `binpack` or `spread`.
    pub strategy: String,
    /// Labels a node must have (every pair) to hold a replica.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Why a wanted replica is not placed, while one is not (set by the scheduler).
    #[serde(default)]
    pub pending_reason: Option<String>,
}

/// A replica as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Replica {
    /// Its id (also the engine's id on the worker).
    pub id: String,
    /// Its deployment.
    pub deployment_id: String,
    /// Where it is placed.
    pub node_id: String,
    /// The GPU indices it holds there.
    pub gpus: Vec<i32>,
    /// placed, staging, starting, ready, failed, stopping.
    pub state: String,
    /// Why, when it is not ready.
    pub detail: Option<String>,
    /// While staging: bytes of the revision's files the node holds.
    #[serde(default)]
    pub staged_bytes: Option<i64>,
    /// While staging: bytes of all the revision's files.
    #[serde(default)]
    pub staging_total_bytes: Option<i64>,
}

const DEPLOYMENT_COLUMNS: &str = "id, model_id, revision, engine, served_model_name, replicas, \
    gpus_per_replica, gpu_memory_bytes, max_concurrency, token_delay_ms, strategy, node_selector";
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
        pending_reason: row.get(12),
    }
}

fn replica(row: &tokio_postgres::Row) -> Replica {
    Replica {
        id: row.get(0),
        deployment_id: row.get(1),
        node_id: row.get(2),
        gpus: row.get(3),
        state: row.get(4),
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
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
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
                    &by,
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

    /// Deletes a deployment and its replica rows; `false` for an unknown one.
    pub async fn delete_deployment(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute("DELETE FROM deployments WHERE id = $1", &[&id])
            .await?;
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
                    &r.state,
                    &r.detail,
                ],
            )
            .await?;
        Ok(())
    }

    /// Records a replica's state (staging progress is cleared).
    pub async fn set_replica_state(
        &self,
        id: &str,
        state: &str,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE deployment_replicas SET state = $2, detail = $3, updated_at = now(),
                    staged_bytes = NULL, staging_total_bytes = NULL
                 WHERE id = $1",
                &[&id, &state, &detail],
            )
            .await?;
        Ok(())
    }

    /// Records a staging replica's progress: `staged` of `total` bytes held by its node.
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
                    staged_bytes = $2, staging_total_bytes = $3
                 WHERE id = $1",
                &[&id, &staged, &total, &detail],
            )
            .await?;
        Ok(())
    }

    /// Removes a replica row.
    pub async fn delete_replica(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute("DELETE FROM deployment_replicas WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    /// Runs `pass` only if no other replica runs one now (a transaction-level
    /// advisory lock): the scheduler acts from one frontend at a time.
    pub async fn try_scheduler_lock(
        &self,
    ) -> Result<Option<deadpool_postgres::Object>, StoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_one("SELECT pg_try_advisory_lock(7377796463686564)", &[])
            .await?;
        Ok(row.get::<_, bool>(0).then_some(conn))
    }

    /// Releases the lock [`Store::try_scheduler_lock`] took on `conn`.
    pub async fn release_scheduler_lock(
        &self,
        conn: &deadpool_postgres::Object,
    ) -> Result<(), StoreError> {
        conn.execute("SELECT pg_advisory_unlock(7377796463686564)", &[])
            .await?;
        Ok(())
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
