//! The carrier rules a worker follows, without a socket or a component:
//! which sets the news names and in which role, how long to wait before
//! attaching, when a released set may close, and why a set cannot be
//! followed here.

use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_carrier::SetName;
use switchyard_protocol::carrier::{CarrierNews, SetKey, SetRef};

use super::{FIRST_ATTACH_BACKOFF, MAX_ATTACH_BACKOFF, NO_ADDRESS, NO_NATS_URL};

/// What the news says of a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The cluster's set now.
    Active,
    /// The set a change moves to: attached after a random wait.
    Target,
    /// The set a committed change leaves: kept, never newly attached.
    Draining,
}

/// Every set the news names, each once, with its role: active first.
pub fn desired(news: &CarrierNews) -> Vec<(SetKey, SetRef, Role)> {
    let active = SetRef {
        carrier: news.carrier.clone(),
        components: news.components.clone(),
    };
    let mut sets: Vec<(SetKey, SetRef, Role)> = Vec::new();
    let named = std::iter::once((active, Role::Active))
        .chain(news.target.clone().map(|t| (t, Role::Target)))
        .chain(news.draining.clone().map(|d| (d, Role::Draining)));
    for (set, role) in named {
        let key = SetKey::of(&set);
        if !sets.iter().any(|(k, _, _)| *k == key) {
            sets.push((key, set, role));
        }
    }
    sets
}

/// The wait after `failures` failed attaches in a row (at least one):
/// 1 s, 2 s, 4 s … up to 30 s.
pub fn attach_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_ATTACH_BACKOFF * 2u32.pow(doublings)).min(MAX_ATTACH_BACKOFF)
}

/// A random wait of up to `max` before attaching to a target, so that a
/// fleet of workers told of a change at once does not connect at once.
pub fn jitter(max: Duration) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..=max_ms))
}

/// Whether a set the cluster released may close now: once the active set
/// is connected and nothing runs on it, or once `max_drain` has passed
/// since it was released whatever still runs (frontends dropped their side
/// of it by then, so nothing new reaches it).
pub fn may_close(
    released_for: Duration,
    active_connected: bool,
    in_flight: usize,
    max_drain: Duration,
) -> bool {
    released_for >= max_drain || (active_connected && in_flight == 0)
}

/// Why this worker cannot follow the cluster to each set of the catalog
/// (every set, not only those in the news, so that a change's preflight
/// can tell before it starts): `nats` needs an address the frontends dial
/// and a NATS URL; a set whose components could not be fetched or
/// verified says why (`component_errors`, by set name).
pub fn cannot_follow(
    address: Option<&str>,
    nats_url: Option<&str>,
    component_errors: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    SetName::ALL
        .into_iter()
        .filter_map(|set| {
            let reason = match set {
                SetName::Nats if address.is_none_or(|a| a.trim().is_empty()) => {
                    Some(NO_ADDRESS.to_string())
                }
                SetName::Nats if nats_url.is_none_or(|u| u.trim().is_empty()) => {
                    Some(NO_NATS_URL.to_string())
                }
                _ => component_errors.get(set.as_str()).cloned(),
            };
            reason.map(|r| (set.as_str().to_string(), r))
        })
        .collect()
}
