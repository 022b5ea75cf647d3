//! A batch's lines: dispatched by the driver, claimed and answered by the
//! replica that runs them, read back as the output.
//!
//! Every move of a line is a conditional UPDATE on its state (and, for a
//! claim, its dispatch), so two replicas never both move it: a unit of an
//! older dispatch finds it superseded, an outcome recorded twice
//! finds the line done (the first writer wins), and the batch's counters
//! move in the same statement as the line.

use std::time::Duration;

use crate::{Store, StoreError};

/// A line a replica claimed to run.
#[derive(Debug, Clone)]
pub struct ClaimedLine {
    /// The batch's endpoint.
    pub endpoint: String,
    /// The request body.
    pub body: Vec<u8>,
    /// The batch's caller: its key id.
    pub key_id: String,
    /// And its scopes as they are now (a peer's job: as at creation).
    pub scopes: Vec<String>,
    /// And its key's team, if any.
    pub team: Option<String>,
}

/// How a run of a line ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Answered: `completed` with a 2xx, else `failed`; the body is JSON.
    Answered {
        /// The HTTP status.
        status: i32,
        /// `req_…`.
        request_id: String,
        /// The answer's body, JSON.
        body: Vec<u8>,
    },
    /// Not answered; run it again after `pause`. `counted`: whether the
    /// attempt counts towards the limit (a request lost mid-way does; one
    /// that found no free replica was never sent and does not).
    Retry {
        /// `{"code", "message"}` of why.
        error: serde_json::Value,
        /// Wait this long before the next dispatch.
        pause: Duration,
        /// Whether it spends an attempt.
        counted: bool,
    },
}

/// A finished line as the output files show it.
#[derive(Debug, Clone)]
pub struct DoneLine {
    /// Its index.
    pub line: i32,
    /// The caller's id.
    pub custom_id: String,
    /// The answer's status, if it got one.
    pub status_code: Option<i32>,
    /// `req_…`, if it got an answer.
    pub request_id: Option<String>,
    /// The answer's body (JSON), if it got one.
    pub response: Option<Vec<u8>>,
    /// Why it got none.
    pub error: Option<serde_json::Value>,
}

/// Moves a line to a final state and the batch's counters with it, once:
/// `$1` batch, `$2` line; `SET` names the line's new columns.
fn finish(set: &str, guard: &str) -> String {
    format!(
        "WITH done AS (
             UPDATE batch_lines SET {set}, lease_until = NULL, finished_at = now()
              WHERE batch_id = $1 AND line = $2 AND {guard}
              RETURNING state)
         UPDATE batches SET
             completed = completed + (SELECT count(*) FROM done WHERE state = 'completed'),
             failed = failed + (SELECT count(*) FROM done WHERE state IN ('failed', 'expired'))
          WHERE id = $1 AND EXISTS (SELECT 1 FROM done)"
    )
}

/// The states of a line not done yet.
const OPEN: &str = "state IN ('pending', 'dispatched', 'running')";

impl Store {
    /// Lines of `batch` dispatched or running under a lease not lapsed.
    pub async fn lines_in_flight(&self, batch: &str) -> Result<i64, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "SELECT count(*) FROM batch_lines
                  WHERE batch_id = $1 AND state IN ('dispatched', 'running')
                    AND lease_until >= now()",
                &[&batch],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Lines of `batch` not done yet, and of those the ones dispatched or
    /// running under a lease not lapsed (one pass over the open lines).
    pub async fn line_counts(&self, batch: &str) -> Result<(i64, i64), StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                &format!(
                    "SELECT count(*), count(*) FILTER (
                         WHERE state IN ('dispatched', 'running') AND lease_until >= now())
                       FROM batch_lines WHERE batch_id = $1 AND {OPEN}"
                ),
                &[&batch],
            )
            .await?;
        Ok((row.get(0), row.get(1)))
    }

    /// Fails the open lines of `batch` whose lease lapsed after
    /// `max_attempts` tries; returns how many.
    pub async fn fail_exhausted_lines(
        &self,
        batch: &str,
        max_attempts: i32,
    ) -> Result<u64, StoreError> {
        let conn = self.conn().await?;
        let lines: Vec<i32> = conn
            .query(
                &format!(
                    "SELECT line FROM batch_lines
                      WHERE batch_id = $1 AND {OPEN} AND attempts >= $2
                        AND (lease_until IS NULL OR lease_until < now())"
                ),
                &[&batch, &max_attempts],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let fail = finish(
            "state = 'failed', error = coalesce(error, $3)",
            &format!("{OPEN} AND (lease_until IS NULL OR lease_until < now())"),
        );
        let exhausted = serde_json::json!({
            "code": "attempts_exhausted",
            "message": format!("the line got no answer in {max_attempts} attempts"),
        });
        for line in &lines {
            conn.execute(&fail, &[&batch, line, &exhausted]).await?;
        }
        Ok(lines.len() as u64)
    }

    /// Dispatches up to `limit` lines of `batch` that are pending (their
    /// pause over) or whose lease lapsed, and have attempts left: each gets
    /// a dispatch more and a lease of `lease`. Returns `(line, dispatch)`
    /// of each.
    pub async fn dispatch_lines(
        &self,
        batch: &str,
        limit: i64,
        lease: Duration,
        max_attempts: i32,
    ) -> Result<Vec<(i32, i32)>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "UPDATE batch_lines l
                        SET state = 'dispatched', dispatches = l.dispatches + 1,
                            lease_until = now() + make_interval(secs => $3)
                       FROM (SELECT line FROM batch_lines
                              WHERE batch_id = $1 AND {OPEN} AND attempts < $4
                                AND (lease_until IS NULL OR lease_until < now())
                              ORDER BY line LIMIT $2 FOR UPDATE SKIP LOCKED) picked
                      WHERE l.batch_id = $1 AND l.line = picked.line
                      RETURNING l.line, l.dispatches"
                ),
                &[&batch, &limit, &lease.as_secs_f64(), &max_attempts],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Ends the lines of `batch` that are not running (or whose run's lease
    /// lapsed) as `state` (`cancelled` or `expired`); an expired line is
    /// failed with `error`. Returns how many.
    pub async fn close_open_lines(
        &self,
        batch: &str,
        state: &str,
        error: Option<serde_json::Value>,
    ) -> Result<u64, StoreError> {
        let conn = self.conn().await?;
        let lines: Vec<i32> = conn
            .query(
                &format!(
                    "SELECT line FROM batch_lines WHERE batch_id = $1 AND {OPEN}
                        AND NOT (state = 'running' AND lease_until >= now())"
                ),
                &[&batch],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let close = finish(
            "state = $3, error = $4",
            &format!("{OPEN} AND NOT (state = 'running' AND lease_until >= now())"),
        );
        for line in &lines {
            conn.execute(&close, &[&batch, line, &state, &error])
                .await?;
        }
        Ok(lines.len() as u64)
    }

    /// Claims line `line` of `batch` to run it for dispatch `dispatch`, for
    /// `lease`, spending an attempt: only while the batch is in progress,
    /// its key live and holding `inference` (or `admin`; a peer's job
    /// answers to its grant instead), and the line dispatched as that
    /// dispatch (or its run's lease lapsed). `None`: another replica runs
    /// it, a later dispatch superseded this one, it is done, or its key
    /// may no longer run it (the driver then cancels the batch).
    pub async fn claim_line(
        &self,
        batch: &str,
        line: i32,
        dispatch: i32,
        lease: Duration,
    ) -> Result<Option<ClaimedLine>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "UPDATE batch_lines l SET state = 'running', attempts = l.attempts + 1,
                        lease_until = now() + make_interval(secs => $4)
                   FROM batches b LEFT JOIN api_keys k ON k.id = b.key_id AND k.revoked_at IS NULL
                  WHERE l.batch_id = $1 AND l.line = $2 AND l.dispatches = $3
                    AND (l.state = 'dispatched'
                         OR (l.state = 'running' AND l.lease_until < now()))
                    AND b.id = l.batch_id AND b.status = 'in_progress'
                    AND (b.peer_id IS NOT NULL
                         OR k.scopes && ARRAY['inference', 'admin'])
                  RETURNING b.endpoint, l.body, b.key_id, coalesce(k.scopes, b.scopes), k.team",
                &[&batch, &line, &dispatch, &lease.as_secs_f64()],
            )
            .await?;
        Ok(row.map(|row| ClaimedLine {
            endpoint: row.get(0),
            body: row.get(1),
            key_id: row.get(2),
            scopes: row.get(3),
            team: row.get(4),
        }))
    }

    /// Extends the lease of a line this replica runs; `false` if it no
    /// longer does.
    pub async fn renew_line(
        &self,
        batch: &str,
        line: i32,
        dispatch: i32,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let renewed = self
            .conn()
            .await?
            .execute(
                "UPDATE batch_lines SET lease_until = now() + make_interval(secs => $4)
                  WHERE batch_id = $1 AND line = $2 AND dispatches = $3 AND state = 'running'",
                &[&batch, &line, &dispatch, &lease.as_secs_f64()],
            )
            .await?;
        Ok(renewed == 1)
    }

    /// Records how the run of dispatch `dispatch` of a line ended. An
    /// answer is kept if the line is not done yet (the first writer wins);
    /// a retry only if this run still holds the line. Returns whether it
    /// was kept.
    pub async fn record_line(
        &self,
        batch: &str,
        line: i32,
        dispatch: i32,
        outcome: &Outcome,
    ) -> Result<bool, StoreError> {
        let conn = self.conn().await?;
        let changed = match outcome {
            Outcome::Answered {
                status,
                request_id,
                body,
            } => {
                let state = if (200..300).contains(status) {
                    "completed"
                } else {
                    "failed"
                };
                let statement = finish(
                    "state = $3, status_code = $4, request_id = $5, response = $6, error = NULL",
                    OPEN,
                );
                conn.execute(
                    &statement,
                    &[&batch, &line, &state, status, request_id, body],
                )
                .await?
            }
            Outcome::Retry {
                error,
                pause,
                counted,
            } => {
                let refund = i32::from(!counted);
                conn.execute(
                    "UPDATE batch_lines SET state = 'pending', error = $4,
                            attempts = attempts - $5,
                            lease_until = now() + make_interval(secs => $6)
                      WHERE batch_id = $1 AND line = $2 AND dispatches = $3 AND state = 'running'",
                    &[
                        &batch,
                        &line,
                        &dispatch,
                        error,
                        &refund,
                        &pause.as_secs_f64(),
                    ],
                )
                .await?
            }
        };
        Ok(changed > 0)
    }

    /// Up to `limit` finished lines of `batch` after line `after`, in line
    /// order: `errors` false, the completed ones; true, the failed and
    /// expired ones.
    pub async fn done_lines(
        &self,
        batch: &str,
        errors: bool,
        after: i32,
        limit: i64,
    ) -> Result<Vec<DoneLine>, StoreError> {
        let states: &[&str] = if errors {
            &["failed", "expired"]
        } else {
            &["completed"]
        };
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT line, custom_id, status_code, request_id, response, error
                   FROM batch_lines
                  WHERE batch_id = $1 AND state = ANY($2) AND line > $3
                  ORDER BY line LIMIT $4",
                &[&batch, &states, &after, &limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DoneLine {
                line: r.get(0),
                custom_id: r.get(1),
                status_code: r.get(2),
                request_id: r.get(3),
                response: r.get(4),
                error: r.get(5),
            })
            .collect())
    }
}
