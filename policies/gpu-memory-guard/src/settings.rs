//! The settings of a `gpu-memory-guard` binding.

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

/// The fraction used when the settings leave it out: 10% headroom.
pub const DEFAULT_MAX_FRACTION_OF_FREE: f64 = 0.9;

/// `{ "max_fraction_of_free": 0.9 }`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The share of each GPU's free memory a replica may claim, in (0, 1].
    #[serde(default = "default_fraction")]
    pub max_fraction_of_free: f64,
}

fn default_fraction() -> f64 {
    DEFAULT_MAX_FRACTION_OF_FREE
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_fraction_of_free: DEFAULT_MAX_FRACTION_OF_FREE,
        }
    }
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        let fraction = self.max_fraction_of_free;
        // Written so that NaN fails too.
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(format!(
                "max_fraction_of_free must be greater than 0 and at most 1, got {fraction}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_is_refused() {
        let settings = Settings {
            max_fraction_of_free: f64::NAN,
        };
        assert!(settings.validate().is_err());
    }

    #[test]
    fn default_is_valid() {
        assert_eq!(Settings::default().validate(), Ok(()));
    }
}
