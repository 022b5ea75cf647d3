//! Work units a released pgbus queue still holds, handed over to the work
//! queue's active carrier: at a settle away from a set that queued on
//! pgbus, and at each of the carrier leader's polls while the active set
//! does not (a submit in flight at the commit may still land on pgbus after
//! the settle: it read the queue holder's carrier before the swap).
//!
//! The rows no consumer holds (unclaimed, or whose claim lapsed) leave
//! pgbus's table and are submitted to the active queue under their own
//! unit ids. A batch of rows and their submits share a transaction: a
//! submit that fails leaves the rows where they were, for the next poll or
//! leader; a unit moves once. Where pgbus never queued there is no table,
//! and nothing to do. The table is the pgbus plugin's; this module is the
//! one place on the host that knows its columns.

use switchyard_store::{Store, StoreError};

use crate::message::SendError;
use crate::queue::WorkQueue;

/// pgbus's queue table (its default; the host configures no other).
const QUEUE_TABLE: &str = "switchyard_carrier_queue";
/// Rows moved per transaction.
const BATCH: i64 = 256;

/// Why handing units over failed; nothing was lost (the rows stay).
#[derive(Debug, thiserror::Error)]
pub enum LeftoverError {
    /// Reading or deleting the rows.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Submitting a unit to the active queue.
    #[error("resubmitting a unit left on pgbus's queue: {0}")]
    Submit(#[from] SendError),
}

impl From<tokio_postgres::Error> for LeftoverError {
    fn from(e: tokio_postgres::Error) -> Self {
        LeftoverError::Store(StoreError::Db(e))
    }
}

/// Moves what pgbus's queue holds to `queue`'s active carrier through
/// `bus` (a pool on the login pgbus uses); returns how many units moved.
pub async fn hand_over(bus: &Store, queue: &WorkQueue) -> Result<u64, LeftoverError> {
    let mut conn = bus.conn().await?;
    if !queue_exists(&conn).await? {
        return Ok(0);
    }
    let mut moved = 0;
    loop {
        let tx = conn.transaction().await?;
        let rows = tx
            .query(
                &format!(
                    "DELETE FROM {QUEUE_TABLE} WHERE id IN (
                        SELECT id FROM {QUEUE_TABLE}
                         WHERE claimed_until IS NULL OR claimed_until < now()
                         ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
                     RETURNING unit_id, subject, payload"
                ),
                &[&BATCH],
            )
            .await?;
        if rows.is_empty() {
            return Ok(moved);
        }
        let submits = rows.iter().map(|row| {
            let unit_id: String = row.get(0);
            let subject: String = row.get(1);
            let payload: Vec<u8> = row.get(2);
            async move {
                let kind = subject.strip_prefix("work.").unwrap_or(&subject);
                queue.submit(kind, &unit_id, payload.into()).await
            }
        });
        for result in futures::future::join_all(submits).await {
            result?;
        }
        moved += rows.len() as u64;
        tx.commit().await?;
    }
}

/// Units waiting on pgbus's queue (claimed or not); 0 where it never queued.
pub async fn pending(bus: &Store) -> Result<i64, LeftoverError> {
    let conn = bus.conn().await?;
    if !queue_exists(&conn).await? {
        return Ok(0);
    }
    let row = conn
        .query_one(&format!("SELECT count(*) FROM {QUEUE_TABLE}"), &[])
        .await?;
    Ok(row.get(0))
}

/// Whether pgbus ever queued here (it makes its table on first use). Asked
/// of the catalog, so that a cluster that never ran pgbus does not put a
/// failed statement in PostgreSQL's log at every leader poll.
async fn queue_exists(conn: &tokio_postgres::Client) -> Result<bool, tokio_postgres::Error> {
    let row = conn
        .query_one(
            &format!("SELECT to_regclass('{QUEUE_TABLE}') IS NOT NULL"),
            &[],
        )
        .await?;
    Ok(row.get(0))
}
