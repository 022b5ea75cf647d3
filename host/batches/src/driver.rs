//! The driver: every replica runs one; each batch is driven by one replica
//! at a time, the one holding its lease in the `batches` row (renewed at
//! every pass; another replica takes over once it lapses). A pass moves
//! each held batch along from its rows, never from what the queue said:
//!
//! - `validating` → `in_progress`;
//! - `in_progress`: lines that spent their attempts fail; lines pending
//!   (or whose dispatch or run lease lapsed: a unit lost, a replica gone)
//!   are dispatched as units on the work queue, as many as keep the
//!   batch's window full (the ready replicas' slots of its models); once
//!   no line is open the batch completes; past `expires_at` the lines not
//!   running expire;
//! - `cancelling`: lines not running are cancelled; once none runs, the
//!   batch is `cancelled`;
//! - a batch whose key was revoked (or no longer holds `inference`) is
//!   moved to `cancelling` with `errors` saying so; its lines stopped
//!   running already (a claim checks the key).
//!
//! Every replica also sweeps expired and abandoned uploads, about once a
//! minute.
//!
//! Ending a batch writes its output and error files' records (their bytes
//! are the lines, [`super::output`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_protocol::batch::{BATCH_UNIT_KIND, BatchError, BatchErrors, BatchStatus, LineUnit};
use switchyard_store::batches::{DrivenBatch, Visible};
use tokio::sync::{Notify, watch};

use super::files::random_hex;
use super::output::{self, Part};
use crate::Batches;

/// Time between passes when nothing wakes the driver sooner.
const PASS: Duration = Duration::from_millis(100);
/// The shortest time between passes: lines finishing wake the driver, and
/// one pass serves all that finished meanwhile.
const MIN_GAP: Duration = Duration::from_millis(10);
/// How long a driver holds a batch without renewing (a pass renews it).
const DRIVER_LEASE: Duration = Duration::from_secs(5);
/// How long a dispatched unit may wait for a consumer before its line is
/// dispatched again (its consumer died, or the unit was lost).
pub const DISPATCH_LEASE: Duration = Duration::from_secs(10);
/// Dispatches of a line before it fails (a worker killed under it each time).
pub const MAX_ATTEMPTS: i32 = 5;
/// How often lines that spent their attempts are looked for.
const EXHAUSTED_EVERY: Duration = Duration::from_secs(1);
/// Batches one replica drives at once.
const MAX_DRIVEN: i64 = 32;
/// Lines in flight per batch when none of its models has a ready replica
/// (they find out, and pause, without spending attempts).
const MIN_WINDOW: i64 = 4;
/// Lines in flight per slot of a ready replica: one running, the others
/// waiting on the replica that consumed them for the slot to free.
const WINDOW_PER_SLOT: i64 = 4;
/// Lines in flight per batch at most, whatever the capacity.
const MAX_WINDOW: i64 = 1024;
/// How often expired uploads are swept; they answer 404 from the moment
/// they expire, so the sweep only frees their space.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// Uploads deleted per statement of a sweep (the next sweep takes the rest).
const SWEEP_LIMIT: i64 = 1000;
/// An upload still incomplete this long after it began was abandoned (its
/// replica died mid-way): far longer than a 64 MiB body takes at the
/// slowest rate the edge lets through.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// Drives batches until `stop`; `wake` brings the next pass forward (a
/// line finished here).
pub async fn run(batches: Arc<Batches>, wake: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let mut last_check = tokio::time::Instant::now();
    let mut last_pass = last_check;
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = wake.notified() => {
                tokio::time::sleep_until(last_pass + MIN_GAP).await;
            }
            _ = tokio::time::sleep(PASS) => {}
            _ = sweep.tick() => {
                sweep_files(&batches).await;
                continue;
            }
        }
        last_pass = tokio::time::Instant::now();
        // Exhausted lines are looked for about once a second: the query
        // reads every open line, and a line's lease lapses in seconds.
        let check_exhausted = last_check.elapsed() >= EXHAUSTED_EVERY;
        if check_exhausted {
            last_check = tokio::time::Instant::now();
        }
        if let Err(e) = pass(&batches, check_exhausted).await {
            tracing::warn!(error = %e, "a batch driver pass failed");
        }
    }
    // Let another replica take over at once.
    if let Err(e) = batches.store.release_batches(&batches.instance_id).await {
        tracing::warn!(error = %e, "batches not released");
    }
}

/// Deletes expired uploads and abandoned ones.
async fn sweep_files(batches: &Batches) {
    match batches
        .store
        .sweep_batch_files(ABANDONED_AFTER, SWEEP_LIMIT)
        .await
    {
        Ok(swept) if swept.expired + swept.abandoned > 0 => {
            tracing::info!(
                expired = swept.expired,
                abandoned = swept.abandoned,
                "batch files swept"
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "batch files not swept"),
    }
}

async fn pass(batches: &Arc<Batches>, check_exhausted: bool) -> anyhow::Result<()> {
    let held = batches
        .store
        .claim_batches(&batches.instance_id, DRIVER_LEASE, MAX_DRIVEN)
        .await?;
    for batch in held {
        if let Err(e) = drive(batches, &batch, check_exhausted).await {
            tracing::warn!(batch = %batch.id, error = %e, "a batch was not moved along");
        }
    }
    Ok(())
}

async fn drive(
    batches: &Arc<Batches>,
    batch: &DrivenBatch,
    check_exhausted: bool,
) -> anyhow::Result<()> {
    let store = &batches.store;
    let running = matches!(
        batch.status,
        BatchStatus::Validating | BatchStatus::InProgress
    );
    if running && !batch.key_live {
        store
            .cancel_batch(&batch.id, Visible::All, Some(&key_gone()))
            .await?;
        tracing::info!(batch = %batch.id, "batch cancelling: its key was revoked or lost `inference`");
        return Ok(());
    }
    match batch.status {
        BatchStatus::Validating => {
            store.start_batch(&batch.id).await?;
            Ok(())
        }
        BatchStatus::InProgress if batch.expired => {
            let expired = serde_json::json!({
                "code": "batch_expired",
                "message": "This request could not be executed before the completion window expired.",
            });
            store
                .close_open_lines(&batch.id, "expired", Some(expired))
                .await?;
            finish_when_closed(batches, batch, BatchStatus::Expired).await
        }
        BatchStatus::InProgress => {
            if check_exhausted {
                store.fail_exhausted_lines(&batch.id, MAX_ATTEMPTS).await?;
            }
            if batch.unfinished == 0 {
                finish(batches, batch, BatchStatus::Completed).await?;
                return Ok(());
            }
            let budget = window(batches, &batch.models) - store.lines_in_flight(&batch.id).await?;
            if budget > 0 {
                let lines = store
                    .dispatch_lines(&batch.id, budget, DISPATCH_LEASE, MAX_ATTEMPTS)
                    .await?;
                for (line, dispatch) in lines {
                    submit(batches, &batch.id, line, dispatch);
                }
            }
            Ok(())
        }
        BatchStatus::Cancelling => {
            store.close_open_lines(&batch.id, "cancelled", None).await?;
            finish_when_closed(batches, batch, BatchStatus::Cancelled).await
        }
        // Ended, or finalizing inside another driver's transaction.
        _ => Ok(()),
    }
}

/// Why a batch whose key went away was cancelled, as OpenAI lists a
/// batch's `errors`.
fn key_gone() -> serde_json::Value {
    let errors = BatchErrors {
        object: "list".into(),
        data: vec![BatchError {
            code: "key_revoked".into(),
            message: "the API key that created this batch was revoked or no longer holds \
                      the `inference` scope; its lines not yet run were cancelled"
                .into(),
            param: None,
            line: None,
        }],
    };
    serde_json::to_value(errors).expect("errors serialize")
}

/// Ends the batch as `to` once no line is open, with its files.
async fn finish_when_closed(
    batches: &Batches,
    batch: &DrivenBatch,
    to: BatchStatus,
) -> anyhow::Result<()> {
    if batches.store.line_counts(&batch.id).await?.0 > 0 {
        return Ok(());
    }
    finish(batches, batch, to).await
}

/// Ends the batch as `to`, with its output and error files.
async fn finish(batches: &Batches, batch: &DrivenBatch, to: BatchStatus) -> anyhow::Result<()> {
    let (output_bytes, output_lines) =
        output::measure(&batches.store, &batch.id, Part::Output).await?;
    let (error_bytes, error_lines) =
        output::measure(&batches.store, &batch.id, Part::Errors).await?;
    let output_id = format!("file-{}", random_hex());
    let error_id = format!("file-{}", random_hex());
    // OpenAI names an output file whenever some line ran; an error file only
    // when some line failed.
    let output =
        (output_lines > 0 || error_lines == 0).then_some((output_id.as_str(), output_bytes));
    let errors = (error_lines > 0).then_some((error_id.as_str(), error_bytes));
    batches
        .store
        .finish_batch(&batch.id, to, output, errors)
        .await?;
    tracing::info!(batch = %batch.id, status = %to, output_lines, error_lines, "batch ended");
    Ok(())
}

/// Lines a batch keeps in flight: [`WINDOW_PER_SLOT`] times the slots of its models' ready
/// replicas, so that a slot that frees finds the next line already here
/// (it waits for the slot on the replica that consumed it, see
/// `consumer`), not a driver's pass and a trip through the queue away.
fn window(batches: &Batches, models: &[String]) -> i64 {
    let served = batches.inference.routing.models();
    let slots: i64 = models
        .iter()
        .filter_map(|m| served.get(m))
        .map(|s| s.ready.len() as i64 * i64::from(s.deployment.max_concurrency.max(1)))
        .sum();
    (WINDOW_PER_SLOT * slots).clamp(MIN_WINDOW, MAX_WINDOW)
}

/// Puts a line's unit on the queue. The submit runs on its own task: on
/// NATS it returns only once a consumer ran the line. A unit that never
/// arrives is dispatched again when its lease lapses.
fn submit(batches: &Arc<Batches>, batch: &str, line: i32, dispatch: i32) {
    let Some(carriers) = batches.carriers.clone() else {
        return;
    };
    let unit = LineUnit {
        batch: batch.to_string(),
        line,
        dispatch,
    };
    tokio::spawn(async move {
        let payload = Bytes::from(serde_json::to_vec(&unit).expect("a unit serializes"));
        if let Err(e) = carriers
            .queue
            .submit(BATCH_UNIT_KIND, &unit.unit_id(), payload)
            .await
        {
            tracing::debug!(unit = %unit.unit_id(), error = %e, "a batch unit was not submitted; its lease will lapse");
        }
    });
}
