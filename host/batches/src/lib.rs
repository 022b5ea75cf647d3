//! OpenAI batches on this cluster: a batch's input is uploaded as a file,
//! a batch created from it runs every line once through the `/v1` path,
//! and its output and error files are read back, in OpenAI's shapes.
//!
//! The routes (`routes/batches.rs`) are a thin shell over the functions
//! here, which federation calls as well: [`Upload`], [`create_file`],
//! [`file`], [`file_content`], [`delete_file`], [`create_batch`],
//! [`batch`], [`list`], [`cancel`].
//!
//! Files and batches belong to the key that created them and are answered
//! about to that key only (and to `admin` keys), see [`access`]. A line
//! runs only while its batch's key is live and holds `inference`: a batch
//! whose key was revoked ends `cancelled`, its `errors` saying why.
//!
//! A batch is a job whose lines are units on the cluster's work queue
//! (kind `batch`). The database is the truth: a line is a row, dispatched
//! by the batch's driver and claimed, run and recorded by whichever replica
//! consumes its unit; whatever the queue loses or repeats, the rows bring
//! back or ignore.
//!
//! # Layout
//! - `error`: [`BatchesError`], each refusal with its stable code.
//! - `access`: whose files and batches a caller sees.
//! - `valid`: an input file checked line by line, and the limits.
//! - `files`: `/v1/files`: upload (streamed to the database in chunks,
//!   under a per-key quota), record, content, delete.
//! - `create`: `/v1/batches`: create, read, list, cancel.
//! - `driver`: one driver per batch at a time (a leased row) dispatches
//!   the lines and ends the batch; every replica sweeps expired files.
//! - `consumer`: every replica runs the lines its units name.
//! - `output`: the output and error files, written from the lines.

pub mod access;
mod consumer;
mod create;
mod driver;
mod error;
mod files;
mod output;
mod valid;

use std::sync::Arc;

use switchyard_carrier_set::Carriers;
use switchyard_inference::Inference;
use switchyard_store::Store;
use tokio::sync::{Notify, watch};

pub use error::BatchesError;

pub use create::{DEFAULT_LIMIT, batch, cancel, check, create_batch, list};
pub use files::{
    Content, DEFAULT_QUOTA, Upload, check_purpose, create_file, delete_file, file, file_content,
    too_large, upload_bytes,
};
pub use valid::MAX_FILE_BYTES;

/// What batches work with: the handles they need, not the whole state of
/// the replica.
#[derive(Debug)]
pub struct Batches {
    /// The database: files, batches and lines are rows.
    pub store: Store,
    /// The `/v1` path every line runs through, and its routing table
    /// (which models a batch may dispatch to now).
    pub inference: Arc<Inference>,
    /// The work queue lines travel on; `None` without a carrier set.
    pub carriers: Option<Arc<Carriers>>,
    /// This replica's id: a driver's lease names it.
    pub instance_id: String,
    /// The bytes of batch files one key may keep.
    pub storage_quota: u64,
}

/// Starts this replica's driver and, with a carrier set, its consumer;
/// they end on `stop` (the driver lets go of its batches then).
pub fn start(batches: Arc<Batches>, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let wake = Arc::new(Notify::new());
    let consuming = batches.carriers.clone().map(|carriers| {
        tokio::spawn(consumer::run(
            batches.clone(),
            carriers,
            wake.clone(),
            stop.clone(),
        ))
    });
    tokio::spawn(async move {
        driver::run(batches, wake, stop).await;
        if let Some(consuming) = consuming {
            let _ = consuming.await;
        }
    })
}
