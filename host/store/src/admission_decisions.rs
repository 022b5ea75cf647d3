//! The admission decision log: batches of recorded policy answers written
//! in one statement, the filtered query with its counts, and pruning by
//! count and age.

use std::time::{SystemTime, UNIX_EPOCH};

use switchyard_protocol::decisions::{
    AdmissionDecision, DecisionCounts, DecisionLog, RecordedDecision,
};
use switchyard_protocol::plugin::Mode;

use crate::{Store, StoreError};

/// One policy answer to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDecision {
    /// When the policy answered.
    pub at: SystemTime,
    /// The admission point.
    pub point: &'static str,
    /// The chain's generation.
    pub generation: i64,
    /// The policy's name.
    pub plugin: String,
    /// Its version.
    pub version: String,
    /// The binding's mode.
    pub mode: Mode,
    /// What it answered.
    pub decision: RecordedDecision,
    /// The deny code or the error kind.
    pub code: Option<String>,
    /// A monitor-mode deny or patch.
    pub monitor: bool,
    /// The caller's key id.
    pub key_id: String,
    /// Hex SHA-256 of the request record's canonical JSON.
    pub request_sha256: String,
    /// The record itself, when the binding logs requests.
    pub request: Option<serde_json::Value>,
}

/// Which records a query reads: one point, after a cursor or a time, of
/// one code or plugin. Built from the route's parsed parameters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionQuery {
    /// The point.
    pub point: String,
    /// Records with a greater id.
    pub after_id: Option<i64>,
    /// Records at or after this RFC 3339 time (checked by the caller).
    pub since_time: Option<String>,
    /// Records with this code.
    pub code: Option<String>,
    /// Records of this plugin.
    pub plugin: Option<String>,
    /// ... and this version of it.
    pub version: Option<String>,
    /// At most this many records.
    pub limit: i64,
}

const FILTER: &str = "point = $1
     AND ($2::int8 IS NULL OR id > $2::int8)
     AND ($3::text IS NULL OR at >= CAST($3::text AS timestamptz))
     AND ($4::text IS NULL OR code = $4::text)
     AND ($5::text IS NULL OR plugin = $5::text)
     AND ($6::text IS NULL OR version = $6::text)";

const COLUMNS: &str = "id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     point, generation, plugin, version, mode, decision, code, monitor, key_id, request_sha256, \
     request, replica";

fn seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn decision(row: &tokio_postgres::Row) -> Result<AdmissionDecision, StoreError> {
    let corrupt = |e: switchyard_protocol::UnknownText| {
        StoreError::Corrupt(format!("{}: {}", e.what, e.text))
    };
    let mode: String = row.get(6);
    let recorded: String = row.get(7);
    Ok(AdmissionDecision {
        id: row.get(0),
        at: row.get(1),
        point: row.get(2),
        generation: row.get(3),
        plugin: row.get(4),
        version: row.get(5),
        mode: mode.parse().map_err(corrupt)?,
        decision: recorded.parse().map_err(corrupt)?,
        code: row.get(8),
        monitor: row.get(9),
        key_id: row.get(10),
        request_sha256: row.get(11),
        request: row.get(12),
        replica: row.get(13),
    })
}

impl Store {
    /// Writes a batch of records from `replica` in one statement.
    pub async fn insert_decisions(
        &self,
        replica: &str,
        batch: &[NewDecision],
    ) -> Result<u64, StoreError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let column = |f: fn(&NewDecision) -> String| batch.iter().map(f).collect::<Vec<_>>();
        let at: Vec<f64> = batch.iter().map(|d| seconds(d.at)).collect();
        let point = column(|d| d.point.to_string());
        let generation: Vec<i64> = batch.iter().map(|d| d.generation).collect();
        let plugin = column(|d| d.plugin.clone());
        let version = column(|d| d.version.clone());
        let mode = column(|d| d.mode.as_str().to_string());
        let recorded = column(|d| d.decision.as_str().to_string());
        let code: Vec<Option<String>> = batch.iter().map(|d| d.code.clone()).collect();
        let monitor: Vec<bool> = batch.iter().map(|d| d.monitor).collect();
        let key_id = column(|d| d.key_id.clone());
        let sha = column(|d| d.request_sha256.clone());
        let request: Vec<Option<serde_json::Value>> =
            batch.iter().map(|d| d.request.clone()).collect();
        let written = self
            .conn()
            .await?
            .execute(
                "INSERT INTO admission_decisions (at, point, generation, plugin, version, mode,
                     decision, code, monitor, key_id, request_sha256, request, replica)
                 SELECT to_timestamp(a), p, g, pl, v, m, d, c, mo, k, s, r, $13
                 FROM unnest($1::float8[], $2::text[], $3::int8[], $4::text[], $5::text[],
                             $6::text[], $7::text[], $8::text[], $9::bool[], $10::text[],
                             $11::text[], $12::jsonb[])
                      AS t(a, p, g, pl, v, m, d, c, mo, k, s, r)",
                &[
                    &at,
                    &point,
                    &generation,
                    &plugin,
                    &version,
                    &mode,
                    &recorded,
                    &code,
                    &monitor,
                    &key_id,
                    &sha,
                    &request,
                    &replica,
                ],
            )
            .await?;
        Ok(written)
    }

    /// The records a query asks for, oldest first, and the counts over all
    /// it matches: the first `limit` after a cursor or time, else the newest `limit`.
    pub async fn decisions(&self, query: &DecisionQuery) -> Result<DecisionLog, StoreError> {
        let mut conn = self.conn().await?;
        // One snapshot for the records and their counts: the writer may
        // commit a batch between the two statements.
        let tx = conn
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
            &query.point,
            &query.after_id,
            &query.since_time,
            &query.code,
            &query.plugin,
            &query.version,
            &query.limit,
        ];
        let forward = query.after_id.is_some() || query.since_time.is_some();
        let order = if forward { "ASC" } else { "DESC" };
        let rows = tx
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM admission_decisions WHERE {FILTER} ORDER BY id {order} LIMIT $7"
                ),
                &params,
            )
            .await?;
        let mut decisions = rows.iter().map(decision).collect::<Result<Vec<_>, _>>()?;
        if !forward {
            decisions.reverse();
        }
        let rows = tx
            .query(
                &format!(
                    "SELECT decision, monitor, count(*) FROM admission_decisions
                     WHERE {FILTER} GROUP BY decision, monitor"
                ),
                &params[..6],
            )
            .await?;
        let mut counts = DecisionCounts::default();
        for row in rows {
            let recorded: String = row.get(0);
            let monitor: bool = row.get(1);
            let n = u64::try_from(row.get::<_, i64>(2)).unwrap_or(0);
            let slot = match (monitor, recorded.as_str()) {
                (true, _) => &mut counts.monitor,
                (false, "allow") => &mut counts.allow,
                (false, "deny") => &mut counts.deny,
                (false, "patch") => &mut counts.patch,
                (false, "throttle") => &mut counts.throttle,
                (false, "flag") => &mut counts.flag,
                _ => &mut counts.error,
            };
            *slot += n;
        }
        tx.commit().await?;
        let next_since = decisions.last().map(|d| d.id).or(query.after_id);
        Ok(DecisionLog {
            decisions,
            counts,
            next_since,
        })
    }

    /// Keeps the newest `keep` records and none older than `max_age_secs`.
    /// One replica prunes at a time (the others skip); returns how many went.
    pub async fn prune_decisions(&self, keep: i64, max_age_secs: f64) -> Result<u64, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let locked: bool = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock(hashtext('switchyard:admission-decisions:prune'))",
                &[],
            )
            .await?
            .get(0);
        if !locked {
            return Ok(0);
        }
        let by_count = tx
            .execute(
                "DELETE FROM admission_decisions WHERE id <=
                     (SELECT id FROM admission_decisions ORDER BY id DESC OFFSET $1 LIMIT 1)",
                &[&keep],
            )
            .await?;
        let by_age = tx
            .execute(
                "DELETE FROM admission_decisions WHERE at < now() - make_interval(secs => $1)",
                &[&max_age_secs],
            )
            .await?;
        tx.commit().await?;
        Ok(by_count + by_age)
    }
}
