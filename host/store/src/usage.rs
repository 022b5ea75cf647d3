//! Usage events: written in batches (one statement each, which also adds
//! the batch's sums to the hourly roll-up), summed by time bucket and by the
//! dimensions a report asks for (by minute from the events, by hour and
//! day from the roll-up), and pruned by age (the events sooner than the
//! roll-up).

use switchyard_protocol::usage::{UsageEvent, UsageRow};

use crate::{Store, StoreError};

/// A dimension a report may group by, and the SQL that yields it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageDimension {
    /// The caller's key's team (callers in no team: `NULL`).
    Team,
    /// The caller's key id (a peer's call here: `NULL`).
    Key,
    /// The model as clients named it.
    Model,
    /// The peer that called here (a key's call: `NULL`).
    Peer,
    /// The node that served it.
    Node,
}

impl UsageDimension {
    /// The dimension's name in a query string.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "team" => Self::Team,
            "key" => Self::Key,
            "model" => Self::Model,
            "peer" => Self::Peer,
            "node" => Self::Node,
            _ => return None,
        })
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Key => "key",
            Self::Model => "model",
            Self::Peer => "peer",
            Self::Node => "node",
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Self::Team => "k.team",
            Self::Key => "CASE WHEN u.caller LIKE 'peer:%' THEN NULL ELSE u.caller END",
            Self::Model => "u.model",
            Self::Peer => "CASE WHEN u.caller LIKE 'peer:%' THEN substr(u.caller, 6) END",
            Self::Node => "u.node",
        }
    }
}

/// What a report sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// `minute`, `hour` or `day` (checked by the caller).
    pub granularity: &'static str,
    /// The dimensions, in order, each at most once.
    pub group_by: Vec<UsageDimension>,
    /// Events at or after this RFC 3339 time.
    pub from: Option<String>,
    /// Events before this RFC 3339 time.
    pub to: Option<String>,
    /// Only callers whose key is in this team.
    pub team: Option<String>,
}

impl Store {
    /// Writes a batch of events from `replica`, and adds their sums to
    /// `usage_hourly`, in one statement; answers the events written.
    pub async fn insert_usage(
        &self,
        replica: &str,
        batch: &[UsageEvent],
    ) -> Result<u64, StoreError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let text =
            |f: fn(&UsageEvent) -> &str| batch.iter().map(|e| f(e).to_string()).collect::<Vec<_>>();
        let int = |f: fn(&UsageEvent) -> u64| {
            batch
                .iter()
                .map(|e| i64::try_from(f(e)).unwrap_or(i64::MAX))
                .collect::<Vec<_>>()
        };
        let flag = |f: fn(&UsageEvent) -> bool| batch.iter().map(f).collect::<Vec<_>>();
        let status: Vec<i32> = batch.iter().map(|e| i32::from(e.status)).collect();
        // The roll-up's rows are upserted in key order, so that two
        // replicas' batches lock shared rows in the same order (no deadlock).
        self.conn()
            .await?
            .execute(
                "WITH t AS (
                   SELECT to_timestamp(a / 1000.0) AS at, c, m, s, n, p, co, ca, r, st, sm, f, d
                   FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[],
                               $6::int8[], $7::int8[], $8::int8[], $9::bool[], $10::int4[],
                               $11::bool[], $12::int8[], $13::int8[])
                        AS u(a, c, m, s, n, p, co, ca, r, st, sm, f, d)),
                 events AS (
                   INSERT INTO usage_events (at, caller, model, served_by, node, prompt_tokens,
                       completion_tokens, cached_tokens, reported, status, stream, first_byte_ms,
                       duration_ms, replica)
                   SELECT at, c, m, s, n, p, co, ca, r, st, sm, f, d, $14 FROM t)
                 INSERT INTO usage_hourly AS h
                 SELECT date_trunc('hour', at), c, m, s, n, count(*), sum(p), sum(co), sum(ca)
                   FROM t GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
                 ON CONFLICT (hour, caller, model, served_by, node) DO UPDATE
                   SET requests = h.requests + EXCLUDED.requests,
                       prompt_tokens = h.prompt_tokens + EXCLUDED.prompt_tokens,
                       completion_tokens = h.completion_tokens + EXCLUDED.completion_tokens,
                       cached_tokens = h.cached_tokens + EXCLUDED.cached_tokens",
                &[
                    &int(|e| e.at_unix_ms),
                    &text(|e| &e.caller),
                    &text(|e| &e.model),
                    &text(|e| &e.served_by),
                    &text(|e| &e.node),
                    &int(|e| e.prompt_tokens),
                    &int(|e| e.completion_tokens),
                    &int(|e| e.cached_tokens),
                    &flag(|e| e.reported),
                    &status,
                    &flag(|e| e.stream),
                    &int(|e| e.first_byte_ms),
                    &int(|e| e.duration_ms),
                    &replica,
                ],
            )
            .await?;
        Ok(batch.len() as u64)
    }

    /// The sums a report asks for, by bucket then group: by minute from the
    /// events, by hour and day from the hourly roll-up.
    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, StoreError> {
        let (table, at, requests) = match query.granularity {
            "minute" => ("usage_events", "u.at", "count(*)"),
            _ => ("usage_hourly", "u.hour", "sum(u.requests)::int8"),
        };
        let dims: Vec<String> = query
            .group_by
            .iter()
            .map(|d| format!("{} AS {}", d.sql(), d.as_str()))
            .collect();
        let mut select = vec![format!(
            "to_char(date_trunc('{}', {at} AT TIME ZONE 'UTC'), 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS bucket",
            query.granularity
        )];
        select.extend(dims);
        let groups: Vec<String> = (1..=select.len()).map(|i| i.to_string()).collect();
        let sql = format!(
            "SELECT {}, {requests}, sum(u.prompt_tokens)::int8, sum(u.completion_tokens)::int8,
                    sum(u.cached_tokens)::int8
             FROM {table} u LEFT JOIN api_keys k ON k.id = u.caller
             WHERE ($1::text IS NULL OR {at} >= $1::timestamptz)
               AND ($2::text IS NULL OR {at} < $2::timestamptz)
               AND ($3::text IS NULL OR k.team = $3)
             GROUP BY {groups} ORDER BY {groups}",
            select.join(", "),
            groups = groups.join(", "),
        );
        let rows = self
            .conn()
            .await?
            .query(&sql, &[&query.from, &query.to, &query.team])
            .await?;
        let n = query.group_by.len();
        let count =
            |row: &tokio_postgres::Row, i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
        Ok(rows
            .iter()
            .map(|row| {
                let mut out = UsageRow {
                    bucket: row.get(0),
                    team: None,
                    key: None,
                    model: None,
                    peer: None,
                    node: None,
                    requests: count(row, n + 1),
                    prompt_tokens: count(row, n + 2),
                    completion_tokens: count(row, n + 3),
                    cached_tokens: count(row, n + 4),
                };
                for (i, dim) in query.group_by.iter().enumerate() {
                    let value: Option<String> = row.get(i + 1);
                    let slot = match dim {
                        UsageDimension::Team => &mut out.team,
                        UsageDimension::Key => &mut out.key,
                        UsageDimension::Model => &mut out.model,
                        UsageDimension::Peer => &mut out.peer,
                        UsageDimension::Node => &mut out.node,
                    };
                    *slot = value;
                }
                out
            })
            .collect())
    }

    /// The team of a key, if it is in one.
    pub async fn key_team(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt("SELECT team FROM api_keys WHERE id = $1", &[&key_id])
            .await?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// Removes events older than `events_secs` and hours older than
    /// `hours_secs`; returns how many rows went.
    pub async fn prune_usage(&self, events_secs: f64, hours_secs: f64) -> Result<u64, StoreError> {
        let conn = self.conn().await?;
        let events = conn
            .execute(
                "DELETE FROM usage_events WHERE at < now() - make_interval(secs => $1)",
                &[&events_secs],
            )
            .await?;
        let hours = conn
            .execute(
                "DELETE FROM usage_hourly WHERE hour < now() - make_interval(secs => $1)",
                &[&hours_secs],
            )
            .await?;
        Ok(events + hours)
    }

    /// Tokens metered this UTC day and month per counter subject
    /// (`key:<id>`, `team:<name>`, `peer:<label>`): where a replica's usage
    /// counters start.
    pub async fn usage_totals(&self) -> Result<Vec<SubjectTotals>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "WITH e AS (
                   SELECT caller, prompt_tokens + completion_tokens AS tokens,
                          hour >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS today
                     FROM usage_hourly
                    WHERE hour >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
                 SELECT CASE WHEN caller LIKE 'peer:%' THEN caller ELSE 'key:' || caller END,
                        coalesce(sum(tokens) FILTER (WHERE today), 0)::bigint, sum(tokens)::bigint
                   FROM e GROUP BY 1
                 UNION ALL
                 SELECT 'team:' || k.team,
                        coalesce(sum(tokens) FILTER (WHERE today), 0)::bigint, sum(tokens)::bigint
                   FROM e JOIN api_keys k ON k.id = e.caller
                  WHERE k.team IS NOT NULL GROUP BY k.team",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| SubjectTotals {
                subject: r.get(0),
                today: r.get(1),
                this_month: r.get(2),
            })
            .collect())
    }

    /// Sends one replica's usage counts to the others.
    pub async fn notify_usage_counts(&self, payload: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&switchyard_protocol::usage::COUNTS_CHANNEL, &payload],
            )
            .await?;
        Ok(())
    }
}

/// One counter subject's metered tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTotals {
    /// `key:<id>`, `team:<name>` or `peer:<label>`.
    pub subject: String,
    /// Tokens this UTC day.
    pub today: i64,
    /// Tokens this UTC month.
    pub this_month: i64,
}
