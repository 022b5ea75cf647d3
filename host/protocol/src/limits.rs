//! Limits the frontend and the worker both hold to: one side refuses what
//! the other must never send, so each is named once, with its reason.

/// The largest range of a model file one `blob` stream carries. A range is
/// written to the placement cache's partial file as it arrives and a broken
/// stream resumes from the durable offset, so a range bounds the work lost
/// to one interruption (and the time one bulk stream holds the file's lock).
pub const MAX_RANGE: u64 = 64 * 1024 * 1024;

/// The longest first line (head) of a stream service's request or answer.
/// Heads are a few hundred bytes of JSON; the bound keeps a peer that never
/// sends a newline from growing a buffer without end.
pub const MAX_HEAD: usize = 64 * 1024;

/// The most cached files a heartbeat reports as held; the frontend refuses
/// more. Far more than the models a node caches (a model is one to a few
/// dozen files), and it keeps a heartbeat that carries them under 300 KB.
/// Past it a node only loses the scheduler's bonus for the files left out.
pub const MAX_FILES_REPORTED: usize = 4096;

/// The subject roots every carrier set carries between frontends and
/// workers: job progress, cache invalidation, node control and the work
/// queue's units. A carrier refuses any other root, so both sides must name
/// the same four.
pub const SUBJECT_ROOTS: [&str; 4] = ["jobs", "cache", "node", "work"];

/// The largest body of a `/v1` inference request (axum's default limit,
/// which the `/v1` routes keep, and what a peer's remote call carries). A
/// batch line is such a request, so an upload refuses a longer line at once
/// instead of storing a line that can never be sent.
pub const MAX_REQUEST_BODY: usize = 2 * 1024 * 1024;
