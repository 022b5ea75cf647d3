//! The carrier's configuration document (JSON), as an operator writes it for
//! pgbus, parsed once into a [`Config`] the engine trusts.

use serde::Deserialize;

use crate::notification::PG_NOTIFY_LIMIT;
use crate::subject::{SubjectError, SubjectPolicy};

/// The channel when the document names none.
pub const DEFAULT_CHANNEL: &str = "switchyard_bus";
/// The subject roots when the document names none.
pub const DEFAULT_ROOTS: [&str; 2] = ["jobs", "cache"];
/// Notifications of this many bytes or more are spilled: PostgreSQL refuses
/// a notification of 8000 bytes or more.
pub const DEFAULT_SPILL_THRESHOLD: usize = PG_NOTIFY_LIMIT;
/// Spill readers when the document names none: one reader keeps up but lags
/// (p50 0.2-0.3 s in the baselines), several keep p50 near 5 ms.
pub const DEFAULT_SPILL_READERS: usize = 8;
/// Most spill readers: each is a PostgreSQL backend of every frontend.
pub const MAX_SPILL_READERS: usize = 64;
/// How long a spill row lives when the document says nothing: far above the
/// time a loaded reader needs to fetch it.
pub const DEFAULT_RETENTION_SECONDS: u64 = 60;
/// Longest retention: spill rows are a delivery buffer, not a history.
pub const MAX_RETENTION_SECONDS: u64 = 86_400;
/// PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1).
pub const MAX_CHANNEL_LEN: usize = 63;

/// Why a configuration document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON, an unknown field, or a value of the wrong type.
    #[error("invalid pgbus carrier configuration: {0}")]
    Document(String),
    /// A channel PostgreSQL would fold, truncate or need quoted.
    #[error(
        "channel must be 1 to {MAX_CHANNEL_LEN} lowercase letters, digits or `_`, starting with a letter or `_`; got `{0}`"
    )]
    Channel(String),
    /// A spill threshold PostgreSQL could not honour.
    #[error("spill_threshold must be between 1 and {PG_NOTIFY_LIMIT} bytes, got {0}")]
    SpillThreshold(usize),
    /// No readers, or more than a frontend should hold.
    #[error("spill_readers must be between 1 and {MAX_SPILL_READERS}, got {0}")]
    SpillReaders(usize),
    /// A retention that keeps nothing, or keeps rows for too long.
    #[error("retention_seconds must be between 1 and {MAX_RETENTION_SECONDS}, got {0}")]
    Retention(u64),
    /// A root that is not a literal subject.
    #[error("invalid root: {0}")]
    Root(#[from] SubjectError),
}

/// `{"channel": "switchyard_bus", "roots": ["jobs", "cache"],
/// "spill_threshold": 8000, "spill_readers": 8, "retention_seconds": 60}`,
/// every field optional, unknown fields refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Document {
    channel: String,
    roots: Vec<String>,
    spill_threshold: usize,
    spill_readers: usize,
    retention_seconds: u64,
}

impl Default for Document {
    fn default() -> Self {
        Self {
            channel: DEFAULT_CHANNEL.into(),
            roots: DEFAULT_ROOTS.map(String::from).to_vec(),
            spill_threshold: DEFAULT_SPILL_THRESHOLD,
            spill_readers: DEFAULT_SPILL_READERS,
            retention_seconds: DEFAULT_RETENTION_SECONDS,
        }
    }
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The channel every frontend notifies and listens on.
    pub channel: String,
    /// Where subjects may lie: the configured roots and `_INBOX.` (replies);
    /// an empty `roots` list admits every subject.
    pub policy: SubjectPolicy,
    /// Notification size (bytes) from which a message is spilled.
    pub spill_threshold: usize,
    /// Reader connections that fetch spilled rows.
    pub spill_readers: usize,
    /// Age (database clock) after which spill rows are deleted.
    pub retention_seconds: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self::parse("{}").expect("the defaults are valid")
    }
}

impl Config {
    /// Parses and checks the document; an empty document means the defaults.
    pub fn parse(json: &str) -> Result<Self, ConfigError> {
        let doc: Document = if json.trim().is_empty() {
            Document::default()
        } else {
            serde_json::from_str(json).map_err(|e| ConfigError::Document(e.to_string()))?
        };
        let valid_channel = matches!(doc.channel.as_bytes().first(), Some(b'a'..=b'z' | b'_'))
            && doc.channel.len() <= MAX_CHANNEL_LEN
            && doc
                .channel
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'));
        if !valid_channel {
            return Err(ConfigError::Channel(doc.channel));
        }
        if !(1..=PG_NOTIFY_LIMIT).contains(&doc.spill_threshold) {
            return Err(ConfigError::SpillThreshold(doc.spill_threshold));
        }
        if !(1..=MAX_SPILL_READERS).contains(&doc.spill_readers) {
            return Err(ConfigError::SpillReaders(doc.spill_readers));
        }
        if !(1..=MAX_RETENTION_SECONDS).contains(&doc.retention_seconds) {
            return Err(ConfigError::Retention(doc.retention_seconds));
        }
        let policy = if doc.roots.is_empty() {
            SubjectPolicy::allow_all()
        } else {
            let mut roots = doc.roots;
            // Replies to requests come back on inboxes.
            roots.push("_INBOX".into());
            SubjectPolicy::with_roots(roots)?
        };
        Ok(Self {
            channel: doc.channel,
            policy,
            spill_threshold: doc.spill_threshold,
            spill_readers: doc.spill_readers,
            retention_seconds: doc.retention_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        for empty in ["", " ", "{}"] {
            let c = Config::parse(empty).unwrap();
            assert_eq!(c.channel, "switchyard_bus");
            assert_eq!(c.policy.roots(), ["jobs.", "cache.", "_INBOX."]);
            assert_eq!(c.spill_threshold, 8000);
            assert_eq!(c.spill_readers, 8);
            assert_eq!(c.retention_seconds, 60);
        }
    }

    #[test]
    fn fields() {
        let c = Config::parse(
            r#"{"channel": "bus_2", "roots": ["a"], "spill_threshold": 100,
                "spill_readers": 2, "retention_seconds": 5}"#,
        )
        .unwrap();
        assert_eq!(c.channel, "bus_2");
        assert_eq!(c.policy.roots(), ["a.", "_INBOX."]);
        assert_eq!(
            (c.spill_threshold, c.spill_readers, c.retention_seconds),
            (100, 2, 5)
        );
        let any = Config::parse(r#"{"roots": []}"#).unwrap();
        assert!(any.policy.roots().is_empty());
    }

    #[test]
    fn refusals() {
        let err = |json: &str| Config::parse(json).unwrap_err();
        assert!(
            matches!(err(r#"{"servers": []}"#), ConfigError::Document(m) if m.contains("unknown field"))
        );
        assert!(matches!(err("not json"), ConfigError::Document(_)));
        assert!(matches!(
            err(r#"{"spill_readers": "8"}"#),
            ConfigError::Document(_)
        ));
        for bad in ["", "Bus", "1bus", "bus-1", "bus 1", "\"bus\""] {
            let json = serde_json::json!({ "channel": bad }).to_string();
            assert!(matches!(err(&json), ConfigError::Channel(_)), "{bad}");
        }
        let long = serde_json::json!({ "channel": "a".repeat(64) }).to_string();
        assert!(matches!(err(&long), ConfigError::Channel(_)));
        assert_eq!(
            err(r#"{"spill_threshold": 8001}"#),
            ConfigError::SpillThreshold(8001)
        );
        assert_eq!(
            err(r#"{"spill_threshold": 0}"#),
            ConfigError::SpillThreshold(0)
        );
        assert_eq!(err(r#"{"spill_readers": 0}"#), ConfigError::SpillReaders(0));
        assert_eq!(
            err(r#"{"spill_readers": 65}"#),
            ConfigError::SpillReaders(65)
        );
        assert_eq!(
            err(r#"{"retention_seconds": 0}"#),
            ConfigError::Retention(0)
        );
        assert!(matches!(
            err(r#"{"roots": ["jobs.*"]}"#),
            ConfigError::Root(_)
        ));
        assert_eq!(
            err(r#"{"spill_readers": 0}"#).to_string(),
            "spill_readers must be between 1 and 64, got 0"
        );
    }
}
