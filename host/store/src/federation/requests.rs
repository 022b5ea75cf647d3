//! Requests for access, kept on both sides until approved or discarded.

use switchyard_protocol::federation::{AccessRequest, Direction, Operation};

use super::time;
use crate::{Store, StoreError, state_column};

fn columns() -> String {
    format!(
        "r.id, p.label, r.direction, r.operations, r.note, r.state, r.grant_id, {}",
        time("r.created_at")
    )
}

fn request(row: &tokio_postgres::Row) -> AccessRequest {
    let operations: Vec<String> = row.get(3);
    AccessRequest {
        id: row.get(0),
        peer: row.get(1),
        direction: state_column::<Direction>(row, 2),
        // Written from the enum's own text.
        operations: operations.iter().filter_map(|o| o.parse().ok()).collect(),
        note: row.get(4),
        state: crate::state_column(row, 5),
        grant: row.get(6),
        created_at: row.get(7),
    }
}

impl Store {
    /// Keeps a request (its id is the same on both sides); `false` when
    /// the id is known.
    pub async fn insert_request(
        &self,
        id: &str,
        peer_id: &str,
        direction: Direction,
        operations: &[Operation],
        note: &str,
    ) -> Result<bool, StoreError> {
        let operations: Vec<&str> = operations.iter().map(|o| o.as_str()).collect();
        let n = self
            .conn()
            .await?
            .execute(
                "INSERT INTO federation_requests (id, peer_id, direction, operations, note) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &[&id, &peer_id, &direction.as_str(), &operations, &note],
            )
            .await?;
        Ok(n == 1)
    }

    /// Every request, newest first.
    pub async fn requests(&self) -> Result<Vec<AccessRequest>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {} FROM federation_requests r JOIN federation_peers p ON p.id = r.peer_id \
                     ORDER BY r.created_at DESC, r.id",
                    columns()
                ),
                &[],
            )
            .await?;
        Ok(rows.iter().map(request).collect())
    }

    /// One request, with its peer's id.
    pub async fn request(&self, id: &str) -> Result<Option<(AccessRequest, String)>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {}, r.peer_id FROM federation_requests r \
                     JOIN federation_peers p ON p.id = r.peer_id WHERE r.id = $1",
                    columns()
                ),
                &[&id],
            )
            .await?;
        Ok(row.map(|row| (request(&row), row.get(8))))
    }

    /// Marks a request answered by `grant`.
    pub async fn approve_request(&self, id: &str, grant: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE federation_requests SET state = 'approved', grant_id = $2 WHERE id = $1",
                &[&id, &grant],
            )
            .await?;
        Ok(())
    }

    /// Discards a request that no grant answered; `false` when there is
    /// none such.
    pub async fn discard_request(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "DELETE FROM federation_requests WHERE id = $1 AND state = 'pending'",
                &[&id],
            )
            .await?;
        Ok(n == 1)
    }
}
