//! What every carrier component shares: the subject rules of the carrier
//! contract, the reconnect backoff schedule, and the small deterministic
//! generator that feeds inbox tokens and jitter from the host's seed.
//! Plain Rust, no I/O: it builds natively and for wasm32-wasip2.

pub mod backoff;
pub mod rng;
pub mod subject;

pub use backoff::{BACKOFF_MAX_MS, BACKOFF_START_MS, Backoff};
pub use subject::{SubjectError, SubjectPolicy, subject_matches, validate_subject};
