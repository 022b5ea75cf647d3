//! Work units left on a released pgbus queue move to the new set: after a
//! settle from `tunnel`, the leader takes the rows no consumer holds
//! (unclaimed, or whose claim lapsed) out of pgbus's table and submits each
//! to the active queue under its own unit id. A row and its submit share a
//! transaction: a submit that fails leaves the row where it was, for the
//! next settle or leader.

use switchyard_carrier::SetName;

use super::Carriers;

/// pgbus's queue table (its default; the host configures no other).
const QUEUE_TABLE: &str = "switchyard_carrier_queue";
/// Rows moved per transaction.
const BATCH: i64 = 256;

/// Moves what `old` left on its pgbus queue to the active set `new`;
/// returns how many units moved. Nothing moves unless `old` queues on
/// pgbus and `new` does not (a pgbus upgrade keeps the same table).
pub async fn move_pending(carriers: &Carriers, old: &str, new: &str) -> anyhow::Result<u64> {
    let on_pgbus = |set: &str| SetName::parse(set).is_some_and(|s| s.entry().messages_on_database);
    if !on_pgbus(old) || on_pgbus(new) {
        return Ok(0);
    }
    let mut conn = carriers.builder.bus.conn().await?;
    let mut moved = 0;
    loop {
        let tx = conn.transaction().await?;
        let rows = match tx
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
            .await
        {
            Ok(rows) => rows,
            // pgbus never queued anything here: no table.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                return Ok(moved);
            }
            Err(e) => return Err(e.into()),
        };
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

/// Moves units stranded on pgbus's queue while the active set `active`
/// does not queue there; returns how many moved. A submit in flight on the
/// old set when a change settles (it read the queue holder's carrier
/// before the commit swapped it, and its INSERT ran after the settle's
/// [`move_pending`]) lands where no consumer listens: the leader sweeps
/// while stable, so such a unit runs (once: the row and its submit share a
/// transaction) a leader's poll later instead of never. Cheap: one catalog
/// lookup (`to_regclass`, no error where pgbus never queued) and a DELETE
/// on an empty table.
pub async fn sweep(carriers: &Carriers, active: &str) -> anyhow::Result<u64> {
    let on_pgbus = |set: SetName| set.entry().messages_on_database;
    if SetName::parse(active).is_none_or(on_pgbus) {
        return Ok(0);
    }
    let exists: bool = carriers
        .builder
        .bus
        .conn()
        .await?
        .query_one(
            &format!("SELECT to_regclass('{QUEUE_TABLE}') IS NOT NULL"),
            &[],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let mut moved = 0;
    for set in SetName::ALL.into_iter().filter(|s| on_pgbus(*s)) {
        moved += move_pending(carriers, set.as_str(), active).await?;
    }
    Ok(moved)
}

/// Units waiting on pgbus's queue (claimed or not); 0 where it never queued.
pub async fn pending(carriers: &Carriers) -> anyhow::Result<i64> {
    let conn = carriers.builder.bus.conn().await?;
    match conn
        .query_one(&format!("SELECT count(*) FROM {QUEUE_TABLE}"), &[])
        .await
    {
        Ok(row) => Ok(row.get(0)),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Ok(0),
        Err(e) => Err(e.into()),
    }
}
