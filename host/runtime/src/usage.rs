//! The host's usage counters as admission policies read them
//! (`switchyard:policy/usage@0.2.0`): the host counts, a policy decides.
//! The runtime only asks; what counts (the inference core's per-subject
//! windows, shared across replicas) is handed to it once at start-up.

use std::sync::{Arc, OnceLock};

use crate::bindings::policy_usage;
use crate::sandbox::SandboxState;

pub use policy_usage::Counters;

/// Where a policy's `counters(subject)` is answered.
pub trait UsageCounters: Send + Sync + 'static {
    /// The counters of `key:<id>`, `team:<name>` or `peer:<label>`; all
    /// zero for a subject never seen.
    fn counters(&self, subject: &str) -> Counters;
}

/// The runtime's counter source: empty (every subject reads zero) until
/// the host sets it.
#[derive(Default)]
pub struct UsageSlot(OnceLock<Arc<dyn UsageCounters>>);

impl std::fmt::Debug for UsageSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("UsageSlot")
            .field(&self.0.get().is_some())
            .finish()
    }
}

impl UsageSlot {
    /// Sets the source; `false` when one was set already (it stays).
    pub fn set(&self, source: Arc<dyn UsageCounters>) -> bool {
        self.0.set(source).is_ok()
    }

    fn counters(&self, subject: &str) -> Counters {
        match self.0.get() {
            Some(source) => source.counters(subject),
            None => zero(),
        }
    }
}

/// The counters of a subject never seen.
pub fn zero() -> Counters {
    Counters {
        requests_last_minute: 0,
        tokens_last_minute: 0,
        tokens_today: 0,
        tokens_this_month: 0,
        in_flight: 0,
        minute_reset_ms: 0,
        day_reset_ms: 0,
        month_reset_ms: 0,
    }
}

/// Subjects longer than this are answered zero without a lookup: a
/// policy cannot make the host hash megabytes.
const MAX_SUBJECT: usize = 512;

impl policy_usage::Host for SandboxState {
    fn read(&mut self, subject: String) -> Counters {
        if subject.len() > MAX_SUBJECT {
            return zero();
        }
        self.usage.counters(&subject)
    }
}
