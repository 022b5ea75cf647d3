//! The settings of a `max-tokens` binding.

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

/// `{ "max_tokens": 4096, "mode": "deny" }`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The most tokens a request may ask for; at least 1.
    pub max_tokens: u32,
    /// What to do with a request above the cap.
    #[serde(default)]
    pub mode: Mode,
}

/// What happens to a request that asks for more than the cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Refuse it with `max_tokens_exceeded`.
    #[default]
    Deny,
    /// Allow it with `max_tokens` lowered to the cap.
    Clamp,
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        if self.max_tokens == 0 {
            return Err("max_tokens must be at least 1, got 0".into());
        }
        Ok(())
    }
}
