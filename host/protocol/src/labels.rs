//! Node labels and node selectors: `key=value` pairs a worker declares
//! (`--label`) and a deployment asks for (`--node-selector`). A node matches
//! a selector when its labels hold every pair of it. Raw maps become
//! [`Labels`] here, in one place, for the API, the worker's flags and the CLI.

use std::collections::BTreeMap;

/// Longest key or value: enough for `topology.example.com/zone`, short
/// enough that a node's labels stay a small part of its heartbeat.
pub const MAX_PART: usize = 63;
/// Most labels on one node (and pairs in one selector).
pub const MAX_LABELS: usize = 64;

/// Valid labels, by key.
pub type Labels = BTreeMap<String, String>;

/// Why labels were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// Not `key=value`.
    #[error("label `{0}` is not key=value")]
    NotAPair(String),
    /// A bad key.
    #[error(
        "label key `{0}` must be 1-63 letters, digits, '-', '_', '.' or '/', starting with a letter or digit"
    )]
    Key(String),
    /// A bad value.
    #[error("label value `{0}` must be at most 63 letters, digits, '-', '_' or '.'")]
    Value(String),
    /// Too many.
    #[error("at most {MAX_LABELS} labels, got {0}")]
    TooMany(usize),
}

fn valid_key(key: &str) -> bool {
    key.len() <= MAX_PART
        && key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(value: &str) -> bool {
    value.len() <= MAX_PART
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// One `key=value` pair, as given on a command line.
pub fn parse_pair(pair: &str) -> Result<(String, String), LabelError> {
    let (key, value) = pair
        .split_once('=')
        .ok_or_else(|| LabelError::NotAPair(pair.to_string()))?;
    let (key, value) = (key.trim(), value.trim());
    if !valid_key(key) {
        return Err(LabelError::Key(key.to_string()));
    }
    if !valid_value(value) {
        return Err(LabelError::Value(value.to_string()));
    }
    Ok((key.to_string(), value.to_string()))
}

/// Checks every pair of a map (an API body, a heartbeat).
pub fn validate(raw: BTreeMap<String, String>) -> Result<Labels, LabelError> {
    if raw.len() > MAX_LABELS {
        return Err(LabelError::TooMany(raw.len()));
    }
    for (key, value) in &raw {
        if !valid_key(key) {
            return Err(LabelError::Key(key.clone()));
        }
        if !valid_value(value) {
            return Err(LabelError::Value(value.clone()));
        }
    }
    Ok(raw)
}

/// The selector's pairs that `labels` lack (empty: the node matches).
pub fn missing<'a>(selector: &'a Labels, labels: &Labels) -> Vec<(&'a str, &'a str)> {
    selector
        .iter()
        .filter(|(key, value)| labels.get(*key) != Some(*value))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pairs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_pair("zone=eu-west-1a"),
            Ok(("zone".into(), "eu-west-1a".into()))
        );
        assert_eq!(
            parse_pair("example.com/gpu="),
            Ok(("example.com/gpu".into(), String::new()))
        );
        assert!(matches!(parse_pair("zone"), Err(LabelError::NotAPair(_))));
        assert!(matches!(parse_pair("=a"), Err(LabelError::Key(_))));
        assert!(matches!(parse_pair("-zone=a"), Err(LabelError::Key(_))));
        assert!(matches!(parse_pair("zone=a b"), Err(LabelError::Value(_))));
        assert!(matches!(
            parse_pair(&format!("k={}", "v".repeat(64))),
            Err(LabelError::Value(_))
        ));
        let many: BTreeMap<String, String> =
            (0..65).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(validate(many), Err(LabelError::TooMany(65)));
        assert!(matches!(
            validate(labels(&[("zone", "eu/west")])),
            Err(LabelError::Value(_))
        ));
    }

    #[test]
    fn a_node_matches_when_it_holds_every_pair() {
        let node = labels(&[("zone", "a"), ("gpu", "h100")]);
        assert!(missing(&labels(&[]), &node).is_empty());
        assert!(missing(&labels(&[("gpu", "h100")]), &node).is_empty());
        assert_eq!(
            missing(&labels(&[("gpu", "h100"), ("zone", "b")]), &node),
            vec![("zone", "b")]
        );
        assert_eq!(
            missing(&labels(&[("rack", "7")]), &node),
            vec![("rack", "7")]
        );
    }
}
