//! What a heartbeat answer says of the cluster's carrier set, and what a
//! worker says it is attached to.

use serde::{Deserialize, Serialize};

use crate::state::CarrierRowState;

/// The cluster's carrier set, as the frontend tells its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarrierNews {
    /// The carrier set's name (`nats`, `tunnel`).
    pub carrier: String,
    /// Bumped by every switch.
    pub epoch: i64,
    /// Active, or switching during a change.
    pub state: CarrierRowState,
    /// The components the set is made of, where the frontend names them
    /// (from its plugin registry); empty: the worker uses its own.
    #[serde(default)]
    pub components: Vec<ComponentRef>,
}

/// One component of a carrier set, by name, version and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentRef {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 (lowercase hex) of the component's bytes.
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn carrier_news_round_trips_with_and_without_components() {
        let mut news = CarrierNews {
            carrier: "tunnel".into(),
            epoch: 3,
            state: CarrierRowState::Switching,
            components: Vec::new(),
        };
        round_trip(&news);
        news.components.push(ComponentRef {
            name: "tunnel".into(),
            version: "0.1.0".into(),
            sha256: "ab".repeat(32),
        });
        round_trip(&news);
        // What frontends that name no components send.
        let older: CarrierNews =
            serde_json::from_value(json!({"carrier": "nats", "epoch": 1, "state": "active"}))
                .unwrap();
        assert!(older.components.is_empty());
    }
}
