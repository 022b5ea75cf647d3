//! The carrier news a heartbeat answer carries: the row's sets with the
//! components a worker runs for each, and the settings workers follow.

use switchyard_carrier::SetName;
use switchyard_carrier::set::SideKind;
use switchyard_protocol::carrier::{
    CarrierNews, ClusterSettings, ComponentRef, Pins, SetRef, refs,
};
use switchyard_store::cluster::ClusterCarrier;

/// The news for `row`.
pub fn news(row: &ClusterCarrier, settings: &ClusterSettings) -> CarrierNews {
    let set = |carrier: &str, pins: Option<&Pins>| SetRef {
        carrier: carrier.to_string(),
        components: pins
            .map(|p| worker_components(carrier, p))
            .unwrap_or_default(),
    };
    CarrierNews {
        carrier: row.carrier.clone(),
        epoch: row.epoch,
        state: row.state,
        components: worker_components(&row.carrier, &row.plugins),
        target: row
            .target
            .as_deref()
            .map(|t| set(t, row.target_plugins.as_ref())),
        draining: row
            .draining
            .as_deref()
            .map(|d| set(d, row.draining_plugins.as_ref())),
        nats_url: settings
            .worker_nats_url
            .clone()
            .or_else(|| settings.nats_url.clone()),
        attach_jitter_ms: Some(settings.attach_jitter_ms),
        max_drain_ms: Some(settings.max_drain_ms),
    }
}

/// Of a set's pinned components, those a worker runs.
fn worker_components(carrier: &str, pins: &Pins) -> Vec<ComponentRef> {
    let Some(set) = SetName::parse(carrier) else {
        return Vec::new();
    };
    let needed = set.entry().components(SideKind::Worker);
    refs(pins)
        .into_iter()
        .filter(|c| needed.iter().any(|n| n.name == c.name))
        .collect()
}
