//! The settings of a `rate-limit` binding.

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

/// `{ "limits": [...], "assumed_max_tokens": 256 }`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The limits, each on one subject or every subject of a kind.
    pub limits: Vec<Limit>,
    /// Completion tokens assumed for a request without `max_tokens`.
    #[serde(default = "default_assumed_max_tokens")]
    pub assumed_max_tokens: u32,
}

fn default_assumed_max_tokens() -> u32 {
    256
}

/// The limits of one subject (`team:research`) or of each subject of a
/// kind (`key:*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// `key:<id>`, `team:<name>`, `peer:<label>`, or `key:*`, `team:*`, `peer:*`.
    pub subject: String,
    /// Requests in the last minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// Tokens in the last minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// Requests in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// Tokens in the UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_day: Option<u64>,
    /// Tokens in the UTC month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_month: Option<u64>,
    /// The share of a budget past which a request is flagged (0 < r <= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_ratio: Option<f64>,
}

/// The kinds of subject the host counts.
const KINDS: [&str; 3] = ["key:", "team:", "peer:"];

impl Limit {
    /// Whether this limit applies to `subject`.
    pub fn applies_to(&self, subject: &str) -> bool {
        match self.subject.strip_suffix('*') {
            Some(kind) => subject.starts_with(kind),
            None => self.subject == subject,
        }
    }

    fn validate(&self, at: usize) -> Result<(), String> {
        let named = KINDS
            .iter()
            .find_map(|k| self.subject.strip_prefix(k))
            .ok_or_else(|| {
                format!(
                    "limits[{at}].subject must start with key:, team: or peer:, got {:?}",
                    self.subject
                )
            })?;
        if named.is_empty() || (named.contains('*') && named != "*") {
            return Err(format!(
                "limits[{at}].subject must name one subject or end in `*` alone, got {:?}",
                self.subject
            ));
        }
        let numbers = [
            ("rpm", self.rpm),
            ("tpm", self.tpm),
            ("max_parallel", self.max_parallel.map(u64::from)),
            ("tokens_per_day", self.tokens_per_day),
            ("tokens_per_month", self.tokens_per_month),
        ];
        if let Some((name, _)) = numbers.iter().find(|(_, n)| *n == Some(0)) {
            return Err(format!("limits[{at}].{name} must be at least 1"));
        }
        if numbers.iter().all(|(_, n)| n.is_none()) {
            return Err(format!(
                "limits[{at}] ({}) sets no limit: give rpm, tpm, max_parallel, tokens_per_day or tokens_per_month",
                self.subject
            ));
        }
        match self.soft_ratio {
            Some(r) if !(r > 0.0 && r <= 1.0) => Err(format!(
                "limits[{at}].soft_ratio must be above 0 and at most 1, got {r}"
            )),
            Some(_) if self.tokens_per_day.is_none() && self.tokens_per_month.is_none() => Err(
                format!("limits[{at}].soft_ratio needs tokens_per_day or tokens_per_month"),
            ),
            _ => Ok(()),
        }
    }
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        if self.limits.is_empty() {
            return Err("limits must name at least one limit".into());
        }
        self.limits
            .iter()
            .enumerate()
            .try_for_each(|(at, limit)| limit.validate(at))
    }
}
