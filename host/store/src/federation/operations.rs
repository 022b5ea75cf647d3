//! Operation receipts: `(peer, operation id, request digest, outcome)` on
//! the owner, so an exact retry gets the recorded answer, a changed one
//! with the same id is refused, and an uncertain one can be inspected.

use switchyard_protocol::federation::{OperationRecord, OperationState};
use tokio_postgres::types::Json;

use super::{Bounded, has_room, time};
use crate::{Store, StoreError};

/// What a new operation found.
#[derive(Debug, Clone, PartialEq)]
pub enum Begun {
    /// Recorded as running: carry it out, then [`Store::finish_operation`].
    New,
    /// The same request, already answered: give the recorded answer.
    Done(OperationRecord),
    /// The same request, still running (or its replica died with it): its
    /// outcome is uncertain; inspect it, never run it again.
    Running(OperationRecord),
    /// The same id with another request.
    Conflict,
    /// No room for another receipt.
    Full,
}

fn columns() -> String {
    format!(
        "id, grant_id, request_sha256, state, status, outcome, {}",
        time("created_at")
    )
}

fn record(row: &tokio_postgres::Row) -> OperationRecord {
    let outcome: Option<Json<serde_json::Value>> = row.get(5);
    OperationRecord {
        id: row.get(0),
        grant: row.get(1),
        request_sha256: row.get(2),
        state: crate::state_column(row, 3),
        status: row
            .get::<_, Option<i32>>(4)
            .and_then(|s| u16::try_from(s).ok()),
        outcome: outcome.map(|Json(v)| v),
        created_at: row.get(6),
    }
}

impl Store {
    /// Records operation `id` of `peer_id` as running, or says what an
    /// earlier one with the same id found.
    pub async fn begin_operation(
        &self,
        peer_id: &str,
        id: &str,
        grant_id: &str,
        request_sha256: &str,
    ) -> Result<Begun, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let known = tx
            .query_opt(
                &format!(
                    "SELECT {} FROM federation_operations WHERE peer_id = $1 AND id = $2",
                    columns()
                ),
                &[&peer_id, &id],
            )
            .await?;
        if let Some(row) = known {
            let known = record(&row);
            return Ok(if known.request_sha256 != request_sha256 {
                Begun::Conflict
            } else if known.state == OperationState::Done {
                Begun::Done(known)
            } else {
                Begun::Running(known)
            });
        }
        if !has_room(&tx, Bounded::Operations).await? {
            return Ok(Begun::Full);
        }
        let n = tx
            .execute(
                "INSERT INTO federation_operations (peer_id, id, grant_id, request_sha256, state) \
                 VALUES ($1, $2, $3, $4, 'running') ON CONFLICT DO NOTHING",
                &[&peer_id, &id, &grant_id, &request_sha256],
            )
            .await?;
        tx.commit().await?;
        if n == 1 {
            return Ok(Begun::New);
        }
        // Another replica recorded the same id between the read and the insert.
        match self.operation(peer_id, id).await? {
            Some(known) if known.request_sha256 == request_sha256 => Ok(Begun::Running(known)),
            _ => Ok(Begun::Conflict),
        }
    }

    /// Records an operation's answer.
    pub async fn finish_operation(
        &self,
        peer_id: &str,
        id: &str,
        status: u16,
        outcome: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE federation_operations SET state = 'done', status = $3, outcome = $4 \
                 WHERE peer_id = $1 AND id = $2",
                &[&peer_id, &id, &i32::from(status), &Json(outcome)],
            )
            .await?;
        Ok(())
    }

    /// One receipt.
    pub async fn operation(
        &self,
        peer_id: &str,
        id: &str,
    ) -> Result<Option<OperationRecord>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {} FROM federation_operations WHERE peer_id = $1 AND id = $2",
                    columns()
                ),
                &[&peer_id, &id],
            )
            .await?;
        Ok(row.as_ref().map(record))
    }
}
