//! The consumer: every replica takes batch units from the work queue and
//! runs each line through the `/v1` path (scope, parse, the `inference`
//! chain as the batch's caller, routing), then records the outcome and
//! acknowledges the unit.
//!
//! A unit is only a hint: the line's row says whether to run it. A line
//! already claimed by another replica, done, superseded by a later attempt,
//! or of a batch no longer in progress is acknowledged without running.
//! While a line runs its lease is renewed, so that a replica that dies
//! mid-run loses its lines to the driver after at most [`RUN_LEASE`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::queue::Unit;
use switchyard_protocol::batch::{BATCH_UNIT_KIND, LineUnit};
use switchyard_store::batches::lines::{ClaimedLine, Outcome};
use tokio::sync::{Notify, Semaphore, watch};

use super::output::json_body;
use crate::Batches;
use switchyard_carrier_set::Carriers;
use switchyard_inference::{Answer, Endpoint, InferenceError, ReadError, answer};
use switchyard_protocol::keys::Caller;
use switchyard_scheduler::routing::NoRoute;

/// How long a run holds its line without renewing.
pub const RUN_LEASE: Duration = Duration::from_secs(10);
/// How often a run renews its lease.
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// Lines one replica runs at once; more units wait in the queue.
const MAX_RUNNING: usize = 512;
/// The largest answer body kept (an embedding of a long input is a few MB).
const MAX_ANSWER: usize = 16 << 20;
/// Pause before a line that found no free or reachable replica is tried again.
const NOT_SENT_PAUSE: Duration = Duration::from_millis(500);
/// Pause before a line lost mid-request is tried again.
const LOST_PAUSE: Duration = Duration::from_millis(200);
/// How long a line waits here for a slot of a busy replica before it goes
/// back to the driver.
const BUSY_PATIENCE: Duration = Duration::from_secs(2);
/// How often a line waiting for a busy replica's slot looks again when no
/// slot freed here (another replica's requests fill the engine too).
const BUSY_POLL: Duration = Duration::from_millis(50);
/// Attempts to record an outcome when the database blinks.
const RECORD_TRIES: u32 = 5;

/// Consumes batch units until `stop`; each line finished wakes the driver.
pub async fn run(
    batches: Arc<Batches>,
    carriers: Arc<Carriers>,
    wake: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut units = match carriers.queue.consume(BATCH_UNIT_KIND).await {
        Ok(units) => units,
        Err(e) => {
            tracing::error!(error = %e, "this replica runs no batch lines: the queue refused it");
            return;
        }
    };
    let running = Arc::new(Semaphore::new(MAX_RUNNING));
    loop {
        let permit = tokio::select! {
            _ = stop.changed() => return,
            permit = running.clone().acquire_owned() => permit.expect("never closed"),
        };
        let unit = tokio::select! {
            _ = stop.changed() => return,
            unit = units.next() => match unit {
                Some(unit) => unit,
                None => return,
            },
        };
        let (batches, wake) = (batches.clone(), wake.clone());
        tokio::spawn(async move {
            handle(&batches, unit).await;
            wake.notify_one();
            drop(permit);
        });
    }
}

/// Runs a unit's line if its row says so, records the outcome, acknowledges.
async fn handle(batches: &Batches, unit: Unit) {
    let Ok(work) = serde_json::from_slice::<LineUnit>(&unit.payload) else {
        tracing::warn!(unit = %unit.id, "a batch unit that names no line was dropped");
        return ack(unit).await;
    };
    let claimed = batches
        .store
        .claim_line(&work.batch, work.line, work.dispatch, RUN_LEASE)
        .await;
    let claimed = match claimed {
        Ok(Some(claimed)) => claimed,
        // Someone else runs it, or it needs no run: the row says so.
        Ok(None) => return ack(unit).await,
        // Not acknowledged: the queue or the driver brings it back.
        Err(e) => {
            tracing::warn!(unit = %unit.id, error = %e, "a batch line was not claimed");
            return;
        }
    };
    let outcome = run_renewing(batches, &work, claimed).await;
    for attempt in 1..=RECORD_TRIES {
        match batches
            .store
            .record_line(&work.batch, work.line, work.dispatch, &outcome)
            .await
        {
            Ok(_) => break,
            Err(e) if attempt == RECORD_TRIES => {
                // The lease lapses and the line runs again.
                tracing::warn!(unit = %unit.id, error = %e, "a batch line's outcome was not recorded");
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await,
        }
    }
    ack(unit).await;
}

async fn ack(unit: Unit) {
    let id = unit.id.clone();
    if let Err(e) = unit.done().await {
        tracing::debug!(unit = %id, error = %e, "a batch unit's acknowledgement failed");
    }
}

/// Runs the line, renewing its lease meanwhile.
async fn run_renewing(batches: &Batches, work: &LineUnit, claimed: ClaimedLine) -> Outcome {
    let run = run_line(batches, claimed);
    tokio::pin!(run);
    let mut renew = tokio::time::interval(RENEW_EVERY);
    renew.tick().await;
    loop {
        tokio::select! {
            outcome = &mut run => return outcome,
            _ = renew.tick() => {
                let renewed = batches
                    .store
                    .renew_line(&work.batch, work.line, work.dispatch, RUN_LEASE)
                    .await;
                if let Err(e) = renewed {
                    tracing::debug!(batch = %work.batch, line = work.line, error = %e, "a line's lease was not renewed");
                }
            }
        }
    }
}

/// One run of a line: an answer, or a retry and why.
async fn run_line(batches: &Batches, claimed: ClaimedLine) -> Outcome {
    let Some(endpoint) = Endpoint::from_path(&claimed.endpoint) else {
        return answered(
            InferenceError::Invalid(format!("no endpoint {}", claimed.endpoint)).answer(),
        )
        .await;
    };
    let caller = Caller {
        key_id: claimed.key_id,
        scopes: claimed.scopes,
        team: claimed.team,
    };
    let body = Bytes::from(claimed.body);
    let started = tokio::time::Instant::now();
    let answer = loop {
        match answer(&caller, &batches.inference, endpoint, body.clone()).await {
            Err(InferenceError::NoRoute {
                why: NoRoute::Busy,
                model,
            }) if started.elapsed() < BUSY_PATIENCE => {
                // Wait for a slot to free (the body is parsed again only
                // once the routing table has one).
                while started.elapsed() < BUSY_PATIENCE {
                    let freed = batches.inference.routing.freed().notified();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    if batches.inference.routing.route(&model).is_ok() {
                        break;
                    }
                    let _ = tokio::time::timeout(BUSY_POLL, freed).await;
                }
            }
            other => break other,
        }
    };
    match answer {
        Ok(answer) => match answer.status {
            // The engine's own "not now": try again later, as a client would.
            429 | 503 => retry(
                &format!("engine_{}", answer.status),
                "the engine was busy or loading",
                false,
            ),
            // The worker's answer that the engine failed under the request
            // (killed mid-way): lost, as a broken stream is.
            502 | 504 => retry(
                &format!("engine_{}", answer.status),
                "the engine failed under the request",
                true,
            ),
            _ => answered(answer).await,
        },
        Err(e) => match e.code() {
            // Never sent: no attempt spent.
            "model_loading"
            | "replicas_busy"
            | "replica_unreachable"
            | "no_route"
            | "worker_overloaded"
            | "carrier_unavailable"
            | "NODE_UNAVAILABLE" => retry(e.code(), &e.to_string(), false),
            // Sent, and lost on the way: the worker or its engine died.
            "stream_reset" | "worker_refused" | "internal" => retry(e.code(), &e.to_string(), true),
            // The request's own fault, or a refusal: that is its answer.
            _ => answered(e.answer()).await,
        },
    }
}

fn retry(code: &str, message: &str, counted: bool) -> Outcome {
    Outcome::Retry {
        error: serde_json::json!({"code": code, "message": message}),
        pause: if counted { LOST_PAUSE } else { NOT_SENT_PAUSE },
        counted,
    }
}

/// An answer, its body read whole; a body that breaks off is a lost request.
async fn answered(answer: Answer) -> Outcome {
    let status = answer.status;
    match answer.read(MAX_ANSWER).await {
        Ok(body) => Outcome::Answered {
            status: i32::from(status),
            request_id: format!("req_{}", super::files::random_hex()),
            body: json_body(&body),
        },
        Err(e @ (ReadError::Broken(_) | ReadError::TooLarge(_))) => {
            retry("stream_reset", &format!("the answer broke off: {e}"), true)
        }
    }
}
