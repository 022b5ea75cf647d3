//! Managed services: deployments made through an `inference:manage`
//! grant, each with a revision that every change moves on (a call naming
//! another revision is refused). They outlive their grant unless it says
//! `stop_on_revoke`.

use switchyard_protocol::federation::{ManagedService, ManagedServiceSpec};
use tokio_postgres::types::Json;

use crate::{Store, StoreError};

const COLUMNS: &str = "s.id, s.grant_id, s.revision, s.state, s.spec, \
     (SELECT count(*) FROM deployment_replicas r \
        WHERE r.deployment_id = s.deployment_id AND r.state = 'ready'), s.deployment_id";

fn service(row: &tokio_postgres::Row) -> (ManagedService, String) {
    let Json(spec): Json<ManagedServiceSpec> = row.get(4);
    (
        ManagedService {
            service: row.get(0),
            grant: row.get(1),
            revision: row.get(2),
            state: crate::state_column(row, 3),
            spec,
            ready_replicas: row.get(5),
        },
        row.get(6),
    )
}

impl Store {
    /// Records a managed service (stopped, revision 1); `false` when the id
    /// is taken.
    pub async fn insert_managed_service(
        &self,
        grant_id: &str,
        deployment_id: &str,
        spec: &ManagedServiceSpec,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "INSERT INTO federation_services (id, grant_id, deployment_id, spec) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[&spec.service, &grant_id, &deployment_id, &Json(spec)],
            )
            .await?;
        Ok(n == 1)
    }

    /// One managed service and its deployment's id.
    pub async fn managed_service(
        &self,
        id: &str,
    ) -> Result<Option<(ManagedService, String)>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM federation_services s WHERE s.id = $1"),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(service))
    }

    /// The managed services a grant made.
    pub async fn managed_services(
        &self,
        grant_id: &str,
    ) -> Result<Vec<ManagedService>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM federation_services s WHERE s.grant_id = $1 ORDER BY s.id"
                ),
                &[&grant_id],
            )
            .await?;
        Ok(rows.iter().map(|row| service(row).0).collect())
    }

    /// Moves a managed service to `state` (and `spec`, when given) if it is
    /// at `revision`; answers the new revision, `None` when it moved on.
    pub async fn update_managed_service(
        &self,
        id: &str,
        revision: i64,
        state: &str,
        spec: Option<&ManagedServiceSpec>,
    ) -> Result<Option<i64>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "UPDATE federation_services SET state = $3, revision = revision + 1, \
                   spec = coalesce($4, spec) \
                 WHERE id = $1 AND revision = $2 RETURNING revision",
                &[&id, &revision, &state, &spec.map(Json)],
            )
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    /// Forgets a managed service at `revision`; `false` when it moved on.
    pub async fn delete_managed_service(
        &self,
        id: &str,
        revision: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "DELETE FROM federation_services WHERE id = $1 AND revision = $2",
                &[&id, &revision],
            )
            .await?;
        Ok(n == 1)
    }
}
