//! Grants, both directions: the signed terms, the state, and on the owner
//! the counters every call is charged against in one conditional UPDATE,
//! so concurrent calls never pass a limit. The concurrency slots a call
//! holds are also kept per replica, so a replica that dies mid-call has its
//! slots released by another.

use std::time::Duration;

use switchyard_protocol::federation::{Direction, GrantRecord, GrantState, GrantTerms, GrantUsage};
use tokio_postgres::types::Json;

use super::{Bounded, Insert, has_room, time};
use crate::{Store, StoreError, state_column};

fn columns() -> String {
    format!(
        "g.id, p.label, g.direction, g.state, g.terms, g.owner_signature, g.grantee_signature, \
         g.in_flight, g.requests_used, g.model_bytes_used, g.tokens_used, {}, \
         CASE WHEN g.state = 'revoked' THEN 'revoked' WHEN g.state = 'offered' THEN 'inactive' \
              WHEN g.expires_at <= now() THEN 'expired' ELSE 'active' END, g.peer_id",
        time("g.verified_at")
    )
}

const FROM: &str = "federation_grants g JOIN federation_peers p ON p.id = g.peer_id";

fn record(row: &tokio_postgres::Row) -> GrantRecord {
    let Json(terms): Json<GrantTerms> = row.get(4);
    GrantRecord {
        id: row.get(0),
        peer: row.get(1),
        direction: state_column::<Direction>(row, 2),
        state: state_column::<GrantState>(row, 3),
        status: crate::state_column(row, 12),
        terms,
        owner_signature: row.get(5),
        grantee_signature: row.get(6),
        usage: GrantUsage {
            in_flight: row.get::<_, i32>(7).max(0) as u32,
            requests: row.get::<_, i64>(8).max(0) as u64,
            model_bytes: row.get::<_, i64>(9).max(0) as u64,
            tokens: row.get::<_, i64>(10).max(0) as u64,
        },
        last_verified_at: row.get(11),
    }
}

/// A grant's limits as stored: bigint columns, so anything above
/// `i64::MAX` is `i64::MAX` (no call reaches it).
fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// What a call costs, as the evaluator said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Calls.
    pub requests: u64,
    /// Slots held until the call ends.
    pub concurrent: u32,
    /// Model bytes.
    pub model_bytes: u64,
    /// Tokens.
    pub tokens: u64,
}

/// A charge that went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charged {
    /// What it has used now, this call included.
    pub usage: GrantUsage,
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No such outgoing grant for this peer.
    Unknown,
    /// Revoked.
    Revoked,
    /// Offered, not completed.
    Inactive,
    /// Past its lifetime.
    Expired,
    /// As many calls in flight as it allows.
    Concurrency,
    /// Its request count is used up.
    Requests,
    /// Its model bytes are used up.
    ModelBytes,
}

impl Refused {
    /// The API's code.
    pub fn code(self) -> &'static str {
        match self {
            Refused::Unknown => "grant_not_found",
            Refused::Revoked => "grant_revoked",
            Refused::Inactive => "grant_inactive",
            Refused::Expired => "grant_expired",
            Refused::Concurrency => "concurrency_exhausted",
            Refused::Requests => "requests_exhausted",
            Refused::ModelBytes => "model_bytes_exhausted",
        }
    }
}

/// Charges a call to a grant, all or nothing: the grant's row (locked
/// first, as every release takes it first too), then this replica's slots.
const CHARGE: &str = "WITH charged AS ( \
    UPDATE federation_grants SET in_flight = in_flight + $3, \
    requests_used = requests_used + $4, \
    model_bytes_used = model_bytes_used + $5, tokens_used = tokens_used + $6 \
    WHERE id = $1 AND peer_id = $2 AND direction = 'outgoing' \
    AND state = 'active' AND expires_at > now() \
    AND in_flight + $3 <= max_concurrent \
    AND requests_used + $4 <= max_requests \
    AND model_bytes_used + $5 <= max_model_bytes \
    RETURNING id, in_flight, requests_used, model_bytes_used, tokens_used), \
    slot AS ( \
    INSERT INTO federation_slots (instance_id, grant_id, held) \
    SELECT $7, id, $3 FROM charged WHERE $3 > 0 \
    ON CONFLICT (instance_id, grant_id) \
    DO UPDATE SET held = federation_slots.held + EXCLUDED.held) \
    SELECT in_flight, requests_used, model_bytes_used, tokens_used FROM charged";

impl Store {
    /// Keeps a grant offered by its owner (on both sides: `outgoing` on the
    /// owner, `incoming` on the grantee), unless the bound is reached or
    /// its id is known.
    pub async fn insert_grant(
        &self,
        peer_id: &str,
        direction: Direction,
        terms: &GrantTerms,
        owner_signature: &str,
    ) -> Result<Insert<GrantRecord>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !has_room(&tx, Bounded::Grants).await? {
            return Ok(Insert::Full(Bounded::Grants));
        }
        let expires_ms = clamp(terms.expires_at_unix_ms);
        let n = tx
            .execute(
                "INSERT INTO federation_grants (id, peer_id, direction, terms, owner_signature, \
                   state, expires_at, max_concurrent, max_requests, max_model_bytes, stop_on_revoke) \
                 VALUES ($1, $2, $3, $4, $5, 'offered', to_timestamp($6::bigint / 1000.0), \
                   $7, $8, $9, $10) ON CONFLICT DO NOTHING",
                &[
                    &terms.id,
                    &peer_id,
                    &direction.as_str(),
                    &Json(terms),
                    &owner_signature,
                    &expires_ms,
                    &i32::try_from(terms.max_concurrent).unwrap_or(i32::MAX),
                    &clamp(terms.max_requests),
                    &clamp(terms.max_model_bytes),
                    &terms.stop_on_revoke,
                ],
            )
            .await?;
        tx.commit().await?;
        if n == 0 {
            return Ok(Insert::Exists);
        }
        let made = self.grant(&terms.id).await?;
        Ok(made.map_or(Insert::Exists, |(g, _)| Insert::Done(g)))
    }

    /// Every grant, both directions, newest first.
    pub async fn grants(&self) -> Result<Vec<GrantRecord>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {} FROM {FROM} ORDER BY g.created_at DESC, g.id",
                    columns()
                ),
                &[],
            )
            .await?;
        Ok(rows.iter().map(record).collect())
    }

    /// One grant, with its peer's id.
    pub async fn grant(&self, id: &str) -> Result<Option<(GrantRecord, String)>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {} FROM {FROM} WHERE g.id = $1", columns()),
                &[&id],
            )
            .await?;
        Ok(row.map(|row| (record(&row), row.get(13))))
    }

    /// Completes an offered grant with the grantee's signature; `false`
    /// when it is not offered (any more).
    pub async fn complete_grant(
        &self,
        id: &str,
        grantee_signature: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE federation_grants SET state = 'active', grantee_signature = $2, \
                   completed_at = now(), verified_at = now() \
                 WHERE id = $1 AND state = 'offered'",
                &[&id, &grantee_signature],
            )
            .await?;
        Ok(n == 1)
    }

    /// Revokes a grant: new calls are refused at once on every replica
    /// (each charge reads the state). `false` when it was revoked already.
    ///
    /// Every replica hears of it at commit ([`super::CHANGES_CHANNEL`]) and
    /// ends the grant's operations in flight.
    pub async fn revoke_grant(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "UPDATE federation_grants SET state = 'revoked', revoked_at = now() \
                 WHERE id = $1 AND state <> 'revoked'",
                &[&id],
            )
            .await?;
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[
                &super::CHANGES_CHANNEL,
                &super::Change::Grant(id.to_string()).to_payload(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Retires a grant that is revoked, expired or never completed, with
    /// its operation receipts; `None` when there is no such grant,
    /// `Some(false)` when it is active (its replay protection stays).
    pub async fn retire_grant(&self, id: &str) -> Result<Option<bool>, StoreError> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "DELETE FROM federation_grants WHERE id = $1 \
                   AND (state <> 'active' OR expires_at <= now())",
                &[&id],
            )
            .await?;
        if n == 1 {
            return Ok(Some(true));
        }
        let exists = conn
            .query_opt("SELECT 1 FROM federation_grants WHERE id = $1", &[&id])
            .await?;
        Ok(exists.map(|_| false))
    }

    /// The grantee's copy of what the owner said the grant has used.
    pub async fn note_grant_usage(
        &self,
        id: &str,
        state: GrantState,
        usage: &GrantUsage,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE federation_grants SET state = $2, in_flight = $3, requests_used = $4, \
                   model_bytes_used = $5, tokens_used = $6, verified_at = now(), \
                   revoked_at = CASE WHEN $2 = 'revoked' THEN coalesce(revoked_at, now()) END \
                 WHERE id = $1 AND direction = 'incoming'",
                &[
                    &id,
                    &state.as_str(),
                    &i32::try_from(usage.in_flight).unwrap_or(i32::MAX),
                    &clamp(usage.requests),
                    &clamp(usage.model_bytes),
                    &clamp(usage.tokens),
                ],
            )
            .await?;
        Ok(())
    }

    /// Charges one call to the owner's grant `id` for `peer_id`, held by
    /// `instance`: all of `cost` or nothing, in one statement.
    pub async fn charge_grant(
        &self,
        id: &str,
        peer_id: &str,
        cost: Cost,
        instance: &str,
    ) -> Result<Result<Charged, Refused>, StoreError> {
        let conn = self.conn().await?;
        let concurrent = i32::try_from(cost.concurrent).unwrap_or(i32::MAX);
        let (requests, bytes, tokens) = (
            clamp(cost.requests),
            clamp(cost.model_bytes),
            clamp(cost.tokens),
        );
        // A refusal is classified after the fact; a slot freed in between
        // makes the classification find nothing, and the charge is tried
        // again (twice at most: each try is one statement).
        let charge = conn.prepare_cached(CHARGE).await?;
        for _ in 0..3 {
            let row = conn
                .query_opt(
                    &charge,
                    &[
                        &id,
                        &peer_id,
                        &concurrent,
                        &requests,
                        &bytes,
                        &tokens,
                        &instance,
                    ],
                )
                .await?;
            if let Some(row) = row {
                return Ok(Ok(Charged {
                    usage: GrantUsage {
                        in_flight: row.get::<_, i32>(0).max(0) as u32,
                        requests: row.get::<_, i64>(1).max(0) as u64,
                        model_bytes: row.get::<_, i64>(2).max(0) as u64,
                        tokens: row.get::<_, i64>(3).max(0) as u64,
                    },
                }));
            }
            let why = conn
                .query_opt(
                    "SELECT state, expires_at <= now(), in_flight + $3 > max_concurrent, \
                       requests_used + $4 > max_requests, model_bytes_used + $5 > max_model_bytes \
                     FROM federation_grants WHERE id = $1 AND peer_id = $2 AND direction = 'outgoing'",
                    &[&id, &peer_id, &concurrent, &requests, &bytes],
                )
                .await?;
            let Some(why) = why else {
                return Ok(Err(Refused::Unknown));
            };
            let state: &str = why.get(0);
            let refused = match state {
                "revoked" => Some(Refused::Revoked),
                "offered" => Some(Refused::Inactive),
                _ if why.get(1) => Some(Refused::Expired),
                _ if why.get(3) => Some(Refused::Requests),
                _ if why.get(4) => Some(Refused::ModelBytes),
                _ if why.get(2) => Some(Refused::Concurrency),
                _ => None,
            };
            if let Some(refused) = refused {
                return Ok(Err(refused));
            }
        }
        Ok(Err(Refused::Concurrency))
    }

    /// Gives back `concurrent` slots a call held on `instance`.
    pub async fn release_grant(
        &self,
        id: &str,
        concurrent: u32,
        instance: &str,
    ) -> Result<(), StoreError> {
        if concurrent == 0 {
            return Ok(());
        }
        let concurrent = i32::try_from(concurrent).unwrap_or(i32::MAX);
        let mut conn = self.conn().await?;
        // PostgreSQL breaks a deadlock by aborting one side: the counters'
        // statements take their rows in one order, so a retry is a safety
        // net, not the mechanism.
        let mut tries = 0;
        loop {
            tries += 1;
            match release_once(&mut conn, id, concurrent, instance).await {
                Err(e) if tries < 3 && e.sqlstate() == Some("40P01") => continue,
                done => return done,
            }
        }
    }

    /// Gives back what a call was charged but never used: the owner's own
    /// chains refused it after the counters admitted it. One statement, so
    /// a concurrent charge sees either both or neither.
    pub async fn refund_grant(&self, id: &str, cost: Cost) -> Result<(), StoreError> {
        let (requests, tokens) = (clamp(cost.requests), clamp(cost.tokens));
        if requests == 0 && tokens == 0 {
            return Ok(());
        }
        self.conn()
            .await?
            .execute(
                "UPDATE federation_grants SET \
                 requests_used = GREATEST(requests_used - $2, 0), \
                 tokens_used = GREATEST(tokens_used - $3, 0) \
                 WHERE id = $1 AND direction = 'outgoing'",
                &[&id, &requests, &tokens],
            )
            .await?;
        Ok(())
    }

    /// Releases the slots of replicas that stopped heartbeating for
    /// `silent` (they died with calls in flight); answers how many.
    pub async fn release_dead_slots(&self, silent: Duration) -> Result<i64, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // The grants' rows first (in one order), as charges and releases
        // take them before their slots.
        tx.execute(
            "SELECT 1 FROM federation_grants WHERE id IN ( \
               SELECT grant_id FROM federation_slots s WHERE NOT EXISTS ( \
                 SELECT 1 FROM instances i WHERE i.id = s.instance_id \
                   AND i.heartbeat_at > now() - make_interval(secs => $1))) \
             ORDER BY id FOR UPDATE",
            &[&silent.as_secs_f64()],
        )
        .await?;
        let row = tx
            .query_one(
                "WITH dead AS ( \
                   DELETE FROM federation_slots s WHERE NOT EXISTS ( \
                     SELECT 1 FROM instances i WHERE i.id = s.instance_id \
                       AND i.heartbeat_at > now() - make_interval(secs => $1)) \
                   RETURNING grant_id, held), \
                 totals AS (SELECT grant_id, sum(held)::int AS held FROM dead GROUP BY grant_id), \
                 released AS ( \
                   UPDATE federation_grants g SET in_flight = greatest(g.in_flight - t.held, 0) \
                   FROM totals t WHERE g.id = t.grant_id RETURNING t.held) \
                 SELECT coalesce(sum(held), 0)::bigint FROM released",
                &[&silent.as_secs_f64()],
            )
            .await?;
        tx.commit().await?;
        Ok(row.get(0))
    }
}

/// Gives back slots in one statement: the grant's row is locked first (the
/// `g` init plan runs before the slots are scanned), then the slot's, the
/// order a charge takes them in, so a release and a charge never deadlock.
const RELEASE: &str = "WITH g AS (SELECT id FROM federation_grants WHERE id = $1 FOR UPDATE), \
    slot AS (UPDATE federation_slots SET held = held - $2 \
    WHERE grant_id = (SELECT id FROM g) AND instance_id = $3 AND held >= $2 RETURNING grant_id) \
    UPDATE federation_grants SET in_flight = greatest(in_flight - $2, 0) \
    WHERE id IN (SELECT grant_id FROM slot)";

/// One release.
async fn release_once(
    conn: &mut deadpool_postgres::Object,
    id: &str,
    concurrent: i32,
    instance: &str,
) -> Result<(), StoreError> {
    let release = conn.prepare_cached(RELEASE).await?;
    conn.execute(&release, &[&id, &concurrent, &instance])
        .await?;
    Ok(())
}
