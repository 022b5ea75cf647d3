//! Batch jobs across clusters. Every job has exactly one owner cluster,
//! which stores it and runs all of it ([`switchyard_batches`]); a job is never
//! split. A job is created on a peer when its `metadata.owner` names that
//! peer, or, with no owner named, when its lines name a peer's service
//! (`<peer label>/<service>`): the selector picks the cluster serving the
//! model before creation. Requests for a job arriving here are forwarded to
//! its owner over the link (never twice: the owner forwards nothing), and
//! this cluster keeps only the summary the owner last answered, marked
//! stale while the owner cannot be asked. Mutations, content and unknown
//! jobs answer 503 `NODE_UNAVAILABLE` then; nothing is queued.
//!
//! # Layout
//! - `owner`: the owner's side of a peer's job calls ([`serve_peer`]).
//! - `forward`: this side: choosing the owner, forwarding, projections.
//! - `sync`: projections of jobs not ended, refreshed while the link is up.

mod forward;
mod owner;
mod sync;

pub use forward::{batch, cancel, create_batch, file, file_content, list};
pub use owner::{end_grant_jobs, serve_peer};
pub use sync::run as sync_projections;
