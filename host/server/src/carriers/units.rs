//! Work units left on a released pgbus queue move to the active set: at a
//! settle away from `tunnel`, and at each of the leader's polls while the
//! active set does not queue on pgbus (a submit in flight at the commit may
//! still land there after the settle: it read the queue holder's carrier
//! before the swap), the leader takes the rows no consumer holds
//! (unclaimed, or whose claim lapsed) out of pgbus's table and submits each
//! to the active queue under its own unit id. A row and its submit share a
//! transaction: a submit that fails leaves the row where it was, for the
//! next poll or leader; a unit moves once. Where pgbus never queued there
//! is no table, and nothing to do.

use switchyard_carrier::SetName;

use super::Carriers;

/// pgbus's queue table (its default; the host configures no other).
const QUEUE_TABLE: &str = "switchyard_carrier_queue";
/// Rows moved per transaction.
const BATCH: i64 = 256;

/// Moves what pgbus's queue holds to the active set `active`; returns how
/// many units moved. Nothing moves while `active` queues on pgbus itself.
pub async fn move_to_active(carriers: &Carriers, active: &str) -> anyhow::Result<u64> {
    if SetName::parse(active).is_none_or(|s| s.entry().messages_on_database) {
        return Ok(0);
    }
    let mut conn = carriers.builder.bus.conn().await?;
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
                carriers.queue.submit(kind, &unit_id, payload.into()).await
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
pub async fn pending(carriers: &Carriers) -> anyhow::Result<i64> {
    let conn = carriers.builder.bus.conn().await?;
    if !queue_exists(&conn).await? {
        return Ok(0);
    }
    let row = conn
        .query_one(&format!("SELECT count(*) FROM {QUEUE_TABLE}"), &[])
        .await?;
    Ok(row.get(0))
}

/// Whether pgbus ever queued here (it makes its table on first use). Asked
/// of the catalog, so that a cluster that never ran `tunnel` does not put a
/// failed statement in PostgreSQL's log at every leader poll.
async fn queue_exists(conn: &tokio_postgres::Client) -> anyhow::Result<bool> {
    let row = conn
        .query_one(
            &format!("SELECT to_regclass('{QUEUE_TABLE}') IS NOT NULL"),
            &[],
        )
        .await?;
    Ok(row.get(0))
}
