//! Limits the frontend and the worker both hold to: one side refuses what
//! the other must never send, so each is named once, with its reason.
//!
//! (The subject roots the carriers carry are the carrier set's, in
//! `switchyard_carrier::set`: frontends and workers both build their sets
//! there.)

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
