//! The host's usage counters of a key, team or peer, read while judging:
//! the host counts (requests and tokens over the last minute, tokens of
//! the day and the month, requests in flight), a policy decides.
//!
//! In a component [`counters`] calls the `switchyard:policy/usage` import.
//! Natively (tests, tools) it reads what the test set with [`set`] on the
//! same thread, zero for anything else.

pub use crate::bindings::switchyard::policy0_2_0::usage::Counters;

/// The subject of an API key's own counters.
pub fn key(key_id: &str) -> String {
    format!("key:{key_id}")
}

/// The subject of a team's counters (all its keys together).
pub fn team(team: &str) -> String {
    format!("team:{team}")
}

/// The subject of a federated peer's counters.
pub fn peer(label: &str) -> String {
    format!("peer:{label}")
}

/// The counters of `subject` (`key:<id>`, `team:<name>`, `peer:<label>`).
pub fn counters(subject: &str) -> Counters {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::switchyard::policy0_2_0::usage::read(subject);
    #[cfg(not(target_arch = "wasm32"))]
    return native::get(subject);
}

/// Counters of a subject never seen.
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

/// Natively: what [`counters`] answers for `subject` on this thread.
#[cfg(not(target_arch = "wasm32"))]
pub fn set(subject: &str, counters: Counters) {
    native::COUNTERS.with(|map| map.borrow_mut().insert(subject.to_string(), counters));
}

/// Natively: forgets every subject set on this thread.
#[cfg(not(target_arch = "wasm32"))]
pub fn clear() {
    native::COUNTERS.with(|map| map.borrow_mut().clear());
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::Counters;

    thread_local! {
        pub(super) static COUNTERS: RefCell<HashMap<String, Counters>> = RefCell::default();
    }

    pub(super) fn get(subject: &str) -> Counters {
        COUNTERS
            .with(|map| map.borrow().get(subject).copied())
            .unwrap_or_else(super::zero)
    }
}
