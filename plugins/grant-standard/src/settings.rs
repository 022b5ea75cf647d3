//! The settings of a `grant-standard` binding.

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

/// What an operator may add to the rules; `{}` is the shipped binding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Peers outside every grant, whatever their grants say (a quick stop
    /// that needs no revocation).
    #[serde(default)]
    pub deny_peers: Vec<String>,
    /// The most tokens one call may ask for (its `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_call: Option<u64>,
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        if let Some(index) = self.deny_peers.iter().position(|p| p.trim().is_empty()) {
            return Err(format!(
                "deny_peers[{index}] is empty; name a peer by its label or id"
            ));
        }
        if self.max_tokens_per_call == Some(0) {
            return Err("max_tokens_per_call must be at least 1, got 0".into());
        }
        Ok(())
    }
}
