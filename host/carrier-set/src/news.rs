//! The carrier news a heartbeat answer carries: the row's sets with the
//! components a worker runs for each, and the settings workers follow.

use switchyard_carrier::SetName;
use switchyard_carrier::set::SideKind;
use switchyard_protocol::carrier::{CarrierNews, ClusterSettings, ComponentRef, SetKey, SetRef};
use switchyard_store::cluster::ClusterCarrier;

/// Workers that attach to a target at once, with no wait: a handful of
/// connections is nothing to a frontend or a NATS server.
pub const ATTACH_AT_ONCE: usize = 16;
/// The wait each worker adds to the spread beyond [`ATTACH_AT_ONCE`]: the
/// fleet then attaches at about 200 workers a second.
pub const ATTACH_SPREAD_PER_WORKER_MS: u64 = 5;

/// The longest random wait before a worker attaches to a target, when
/// `workers` must attach: none for [`ATTACH_AT_ONCE`] or fewer, else
/// [`ATTACH_SPREAD_PER_WORKER_MS`] a worker, at most the setting
/// (`attach_jitter_ms`, the cap). A switch then waits for the random delay
/// only where a fleet would otherwise connect at once: two workers used to
/// wait up to 10 s each, and a change took 11 s instead of 4.
pub fn attach_spread_ms(workers: usize, cap_ms: u64) -> u64 {
    if workers <= ATTACH_AT_ONCE {
        return 0;
    }
    (workers as u64)
        .saturating_mul(ATTACH_SPREAD_PER_WORKER_MS)
        .min(cap_ms)
}

/// The news for `row`, when `workers` follow the carrier.
pub fn news(row: &ClusterCarrier, settings: &ClusterSettings, workers: usize) -> CarrierNews {
    let set = |key: &SetKey| SetRef {
        carrier: key.carrier.clone(),
        components: worker_components(key),
    };
    CarrierNews {
        carrier: row.active.carrier.clone(),
        epoch: row.epoch,
        state: row.state(),
        components: worker_components(&row.active),
        target: row.phase.target().map(set),
        draining: row.phase.draining().map(set),
        nats_url: settings
            .worker_nats_url
            .clone()
            .or_else(|| settings.nats_url.clone()),
        attach_jitter_ms: Some(attach_spread_ms(workers, settings.attach_jitter_ms)),
        max_drain_ms: Some(settings.max_drain_ms),
    }
}

/// Of a set's pinned components, those a worker runs.
fn worker_components(key: &SetKey) -> Vec<ComponentRef> {
    let Some(set) = SetName::parse(&key.carrier) else {
        return Vec::new();
    };
    let needed = set.entry().components(SideKind::Worker);
    key.components()
        .into_iter()
        .filter(|c| needed.iter().any(|n| n.name == c.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handful_attaches_at_once_and_a_fleet_spreads_up_to_the_setting() {
        assert_eq!(attach_spread_ms(0, 10_000), 0);
        assert_eq!(attach_spread_ms(2, 10_000), 0);
        assert_eq!(attach_spread_ms(ATTACH_AT_ONCE, 10_000), 0);
        assert_eq!(attach_spread_ms(ATTACH_AT_ONCE + 1, 10_000), 85);
        assert_eq!(attach_spread_ms(1000, 10_000), 5_000);
        assert_eq!(attach_spread_ms(5000, 10_000), 10_000);
        assert_eq!(attach_spread_ms(5000, 0), 0);
    }
}
