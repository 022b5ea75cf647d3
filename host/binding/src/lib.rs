//! Components bound with generations: what a replica runs for a slot that
//! an operator binds, swaps and rolls back while the cluster serves.
//!
//! # Layout
//! - [`bound`]: the one mechanism: a generation built before it is stored,
//!   swapped in atomically, followed by every replica. Each plugin kind
//!   that binds this way is a [`bound::Kind`].
//! - [`admission`]: the chains of the four admission points (a kind per
//!   point), the decision log's recorder and the dry run's trace.
//! - [`grant_evaluator`]: the grant evaluator federation asks to judge
//!   (`grant-standard` until one is bound).
//! - [`signing`]: whether a component's signature lets it in, at upload
//!   and again at binding.
//!
//! Nothing here knows HTTP: each module's error is an enum the server maps
//! to a status and a code once, at its edge.

pub mod admission;
pub mod bound;
pub mod grant_evaluator;
pub mod signing;
