//! The states the store keeps as text (PostgreSQL `text` columns, some with
//! a `CHECK` listing the same words) and the code matches as enums.

text_enum! {
    /// Where a node is (`nodes.state`).
    pub enum NodeState {
        /// Registered, waiting for an admin's approval.
        Pending => "pending",
        /// Approved and heartbeating.
        Healthy => "healthy",
        /// Approved, but its heartbeats stopped.
        Unhealthy => "unhealthy",
        /// No new placements; its replicas move elsewhere.
        Draining => "draining",
        /// Gone for good.
        Offline => "offline",
    }
}

text_enum! {
    /// Where a replica is (`deployment_replicas.state`).
    pub enum ReplicaState {
        /// Given a node and GPUs; not brought up yet.
        Placed => "placed",
        /// Its model files are on their way to the node.
        Staging => "staging",
        /// Its engine was started and is not healthy yet.
        Starting => "starting",
        /// Serving.
        Ready => "ready",
        /// Its bring-up failed; retried later.
        Failed => "failed",
        /// Its engine is being stopped; the row goes once the worker confirms.
        Stopping => "stopping",
    }
}

text_enum! {
    /// The cluster carrier row's state (`cluster_carrier.state`).
    pub enum CarrierRowState {
        /// The set named is the one in use; a set may still drain.
        Stable => "stable",
        /// Every replica builds the target beside the active set; workers attach to it.
        Prepare => "prepare",
        /// The target is active; the old set drains until the change settles.
        Commit => "commit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn each_state_round_trips_as_its_stored_text() {
        for state in NodeState::ALL {
            assert_eq!(round_trip(state), state.as_str());
            assert_eq!(state.as_str().parse::<NodeState>(), Ok(*state));
        }
        for state in ReplicaState::ALL {
            assert_eq!(round_trip(state), state.as_str());
            assert_eq!(state.as_str().parse::<ReplicaState>(), Ok(*state));
        }
        for state in CarrierRowState::ALL {
            assert_eq!(round_trip(state), state.as_str());
            assert_eq!(state.as_str().parse::<CarrierRowState>(), Ok(*state));
        }
    }

    #[cfg(feature = "utoipa")]
    #[test]
    fn the_openapi_schema_lists_the_texts_not_the_rust_names() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(CarrierRowState::schema()).unwrap();
        assert_eq!(
            schema["enum"],
            serde_json::json!(["stable", "prepare", "commit"])
        );
        assert_eq!(schema["type"], "string");
    }

    #[test]
    fn text_that_names_no_state_is_refused() {
        let refused = "Healthy".parse::<NodeState>().unwrap_err();
        assert_eq!(refused.to_string(), "`Healthy` is not a NodeState");
        assert!(serde_json::from_str::<ReplicaState>("\"gone\"").is_err());
    }
}
