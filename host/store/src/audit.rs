//! The admin audit trail: records appended one at a time under a lock, each
//! hashed over the digest of the one before and its own fields; the chain
//! walked and checked; the filtered query; pruning by age.
//!
//! Pruning removes the oldest records, so a walk trusts the `prev_sha256`
//! of the oldest record kept: what the chain proves is that nothing kept
//! was edited, reordered or removed from between.

use sha2::{Digest, Sha256};
use switchyard_protocol::audit::{AuditLog, AuditRecord, AuditVerification, BrokenRecord};

use crate::{Store, StoreError};

/// The `prev_sha256` of the first record ever written.
const GENESIS: [u8; 32] = [0; 32];

/// Records read per round trip while the chain is walked.
const WALK_PAGE: i64 = 1000;

/// One admin change to append (the store adds its time, position and digests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditRecord {
    /// The acting key's id.
    pub actor: String,
    /// The client's address.
    pub remote: Option<String>,
    /// The HTTP method.
    pub method: String,
    /// The route's template.
    pub route: String,
    /// The object changed.
    pub object: Option<String>,
    /// The change, secrets removed.
    pub summary: String,
    /// The answer's status.
    pub status: u16,
}

/// Which records a query reads: after a position, from a time, of one
/// actor or object, at most `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Records with a greater `seq`.
    pub after: Option<i64>,
    /// Records at or after this RFC 3339 time (checked by the caller).
    pub since: Option<String>,
    /// Records of this key id.
    pub actor: Option<String>,
    /// Records of this object.
    pub object: Option<String>,
    /// At most this many.
    pub limit: i64,
}

/// The digest a record carries: SHA-256 over the one before's digest and
/// each field, every field length-prefixed so no two records hash alike
/// by moving bytes from one field to the next.
pub fn record_digest(prev: &[u8], record: &AuditRecord) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(prev);
    let status = record.status.to_string();
    let seq = record.seq.to_string();
    let fields: [&str; 10] = [
        &seq,
        &record.at,
        &record.actor,
        &record.actor_name,
        record.remote.as_deref().unwrap_or("\u{0}none"),
        &record.method,
        &record.route,
        record.object.as_deref().unwrap_or("\u{0}none"),
        &record.summary,
        &status,
    ];
    for field in fields {
        hash.update((field.len() as u64).to_be_bytes());
        hash.update(field.as_bytes());
    }
    hash.finalize().into()
}

const COLUMNS: &str = "seq, at, actor, actor_name, remote, method, route, object, summary, status, prev_sha256, sha256";

fn record(row: &tokio_postgres::Row) -> AuditRecord {
    AuditRecord {
        seq: row.get(0),
        at: row.get(1),
        actor: row.get(2),
        actor_name: row.get(3),
        remote: row.get(4),
        method: row.get(5),
        route: row.get(6),
        object: row.get(7),
        summary: row.get(8),
        status: u16::try_from(row.get::<_, i32>(9)).unwrap_or(0),
        prev_sha256: hex::encode(row.get::<_, Vec<u8>>(10)),
        sha256: hex::encode(row.get::<_, Vec<u8>>(11)),
    }
}

/// Where a record stops holding, given the digest and position of the one
/// before it (`None` for the oldest kept record).
fn check(before: Option<(i64, &str)>, record: &AuditRecord) -> Option<&'static str> {
    let prev = hex::decode(&record.prev_sha256).unwrap_or_default();
    if hex::encode(record_digest(&prev, record)) != record.sha256 {
        return Some("altered");
    }
    match before {
        Some((seq, _)) if record.seq != seq + 1 => Some("gap"),
        Some((_, digest)) if digest != record.prev_sha256 => Some("relinked"),
        _ => None,
    }
}

impl Store {
    /// Appends one record at the end of the chain. Writers on every
    /// replica take one lock, so the chain has a single order.
    pub async fn append_audit(&self, new: &NewAuditRecord) -> Result<AuditRecord, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('switchyard:audit-log'))",
            &[],
        )
        .await?;
        let last = tx
            .query_opt(
                "SELECT seq, sha256 FROM audit_log ORDER BY seq DESC LIMIT 1",
                &[],
            )
            .await?;
        let (seq, prev) = match last {
            Some(row) => (row.get::<_, i64>(0) + 1, row.get::<_, Vec<u8>>(1)),
            None => (1, GENESIS.to_vec()),
        };
        let head = tx
            .query_one(
                "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
                        coalesce((SELECT name FROM api_keys WHERE id = $1), '')",
                &[&new.actor],
            )
            .await?;
        let mut record = AuditRecord {
            seq,
            at: head.get(0),
            actor: new.actor.clone(),
            actor_name: head.get(1),
            remote: new.remote.clone(),
            method: new.method.clone(),
            route: new.route.clone(),
            object: new.object.clone(),
            summary: new.summary.clone(),
            status: new.status,
            prev_sha256: hex::encode(&prev),
            sha256: String::new(),
        };
        let digest = record_digest(&prev, &record);
        record.sha256 = hex::encode(digest);
        tx.execute(
            &format!("INSERT INTO audit_log ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"),
            &[
                &record.seq,
                &record.at,
                &record.actor,
                &record.actor_name,
                &record.remote,
                &record.method,
                &record.route,
                &record.object,
                &record.summary,
                &i32::from(record.status),
                &prev,
                &digest.as_slice(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(record)
    }

    /// The records a query asks for, oldest first: the first `limit` after
    /// a position or time, else the newest `limit`.
    pub async fn audit(&self, query: &AuditQuery) -> Result<AuditLog, StoreError> {
        let forward = query.after.is_some() || query.since.is_some();
        let order = if forward { "ASC" } else { "DESC" };
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM audit_log
                     WHERE ($1::bigint IS NULL OR seq > $1)
                       AND ($2::text IS NULL OR at::timestamptz >= $2::timestamptz)
                       AND ($3::text IS NULL OR actor = $3)
                       AND ($4::text IS NULL OR object = $4)
                     ORDER BY seq {order} LIMIT $5"
                ),
                &[
                    &query.after,
                    &query.since,
                    &query.actor,
                    &query.object,
                    &query.limit,
                ],
            )
            .await?;
        let mut records: Vec<AuditRecord> = rows.iter().map(record).collect();
        if !forward {
            records.reverse();
        }
        let next_after = records.last().map(|r| r.seq).or(query.after);
        Ok(AuditLog {
            records,
            next_after,
        })
    }

    /// Walks the whole chain from its oldest kept record and names the
    /// first record that does not hold.
    pub async fn verify_audit(&self) -> Result<AuditVerification, StoreError> {
        let conn = self.conn().await?;
        let mut verified = AuditVerification {
            records: 0,
            first_seq: None,
            last_seq: None,
            broken: None,
        };
        let mut before: Option<(i64, String)> = None;
        loop {
            let after = before.as_ref().map(|(seq, _)| *seq);
            let rows = conn
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM audit_log WHERE ($1::bigint IS NULL OR seq > $1)
                         ORDER BY seq LIMIT $2"
                    ),
                    &[&after, &WALK_PAGE],
                )
                .await?;
            if rows.is_empty() {
                return Ok(verified);
            }
            for row in &rows {
                let record = record(row);
                verified.records += 1;
                verified.first_seq.get_or_insert(record.seq);
                verified.last_seq = Some(record.seq);
                let reason = check(before.as_ref().map(|(s, d)| (*s, d.as_str())), &record);
                if let (Some(reason), None) = (reason, &verified.broken) {
                    verified.broken = Some(BrokenRecord {
                        seq: record.seq,
                        reason: reason.into(),
                    });
                }
                before = Some((record.seq, record.sha256));
            }
        }
    }

    /// Removes records older than `max_age_secs`; returns how many went.
    pub async fn prune_audit(&self, max_age_secs: f64) -> Result<u64, StoreError> {
        Ok(self
            .conn()
            .await?
            .execute(
                "DELETE FROM audit_log WHERE at::timestamptz < now() - make_interval(secs => $1)",
                &[&max_age_secs],
            )
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seq: i64, prev: &str) -> AuditRecord {
        let mut record = AuditRecord {
            seq,
            at: "2026-12-04T10:00:00.000001Z".into(),
            actor: "key_1".into(),
            actor_name: "admin".into(),
            remote: Some("127.0.0.1:5000".into()),
            method: "POST".into(),
            route: "/api/keys".into(),
            object: Some("key_2".into()),
            summary: r#"{"name":"app"}"#.into(),
            status: 201,
            prev_sha256: prev.into(),
            sha256: String::new(),
        };
        record.sha256 = hex::encode(record_digest(&hex::decode(prev).unwrap(), &record));
        record
    }

    #[test]
    fn a_chain_holds_until_one_field_changes() {
        let first = sample(1, &hex::encode(GENESIS));
        let second = sample(2, &first.sha256);
        assert_eq!(check(None, &first), None);
        assert_eq!(check(Some((1, &first.sha256)), &second), None);
        let mut edited = second.clone();
        edited.summary = r#"{"name":"other"}"#.into();
        assert_eq!(check(Some((1, &first.sha256)), &edited), Some("altered"));
        let mut moved = second.clone();
        moved.status = 200;
        assert_eq!(check(Some((1, &first.sha256)), &moved), Some("altered"));
    }

    #[test]
    fn a_removed_or_relinked_record_is_named() {
        let first = sample(1, &hex::encode(GENESIS));
        let third = sample(3, &first.sha256);
        assert_eq!(check(Some((1, &first.sha256)), &third), Some("gap"));
        let other = sample(2, &hex::encode([7u8; 32]));
        assert_eq!(check(Some((1, &first.sha256)), &other), Some("relinked"));
    }

    #[test]
    fn bytes_moved_between_fields_change_the_digest() {
        let mut a = sample(1, &hex::encode(GENESIS));
        let mut b = a.clone();
        a.route = "/api/ab".into();
        a.object = Some("c".into());
        b.route = "/api/a".into();
        b.object = Some("bc".into());
        assert_ne!(record_digest(&GENESIS, &a), record_digest(&GENESIS, &b));
    }
}
