//! The settings of a `model-allowlist` binding.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use switchyard_sdk::Validate;

use crate::pattern;

/// The rules and the default list; see the crate docs for how they apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Per key, project or peer allowlists.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Patterns for everyone without a rule; empty allows nothing.
    #[serde(default)]
    pub default: Vec<String>,
}

/// The models one key, project or peer may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// An API key id (inference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// A project (inference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// A peer cluster (federation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Patterns of the models it may call; empty allows nothing.
    pub models: Vec<String>,
}

/// What a rule is about, to find it and to name it in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Subject<'a> {
    Key(&'a str),
    Project(&'a str),
    Peer(&'a str),
}

impl Rule {
    /// The one subject a valid rule names.
    pub(crate) fn subject(&self) -> Option<Subject<'_>> {
        match (&self.key_id, &self.project, &self.peer) {
            (Some(key), None, None) => Some(Subject::Key(key)),
            (None, Some(project), None) => Some(Subject::Project(project)),
            (None, None, Some(peer)) => Some(Subject::Peer(peer)),
            _ => None,
        }
    }
}

impl std::fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Key(key) => write!(f, "key {key}"),
            Subject::Project(project) => write!(f, "project {project}"),
            Subject::Peer(peer) => write!(f, "peer {peer}"),
        }
    }
}

impl Settings {
    /// The patterns of the rule about `subject`, if there is one.
    pub(crate) fn rule_for(&self, subject: Subject<'_>) -> Option<&[String]> {
        self.rules
            .iter()
            .find(|rule| rule.subject() == Some(subject))
            .map(|rule| rule.models.as_slice())
    }
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        for (index, rule) in self.rules.iter().enumerate() {
            // Numbered from 1, as an operator counts them in the file.
            let number = index + 1;
            let subject = rule.subject().ok_or_else(|| {
                format!("rule {number} must name exactly one of key_id, project, peer")
            })?;
            if !seen.insert(subject) {
                return Err(format!(
                    "rule {number}: {subject} already has a rule; merge their models"
                ));
            }
            for model in &rule.models {
                pattern::check(model).map_err(|e| format!("rule {number} ({subject}): {e}"))?;
            }
        }
        for model in &self.default {
            pattern::check(model).map_err(|e| format!("default: {e}"))?;
        }
        Ok(())
    }
}
