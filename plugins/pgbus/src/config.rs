//! The carrier's configuration document (JSON), as an operator writes it for
//! pgbus, parsed once into a [`Config`] the engine trusts.
//!
//! A subject is either fanned out (under `roots`) or queued (under
//! `queue_roots`, the claim queue), never both: the two sets of roots may not
//! overlap, nor reach the reserved `_INBOX.` (replies) and `_claim.`
//! (acknowledgements).

use serde::Deserialize;

use crate::notification::PG_NOTIFY_LIMIT;
use crate::queue::CLAIM_PREFIX;
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
/// The queue roots when the document names none.
pub const DEFAULT_QUEUE_ROOTS: [&str; 1] = ["work"];
/// The queue table when the document names none.
pub const DEFAULT_QUEUE_TABLE: &str = "switchyard_carrier_queue";
/// What the wake channel's name adds to the channel's when the document
/// names none (`switchyard_bus_wake`).
pub const WAKE_SUFFIX: &str = "_wake";
/// The queue table's name leaves room for its index's name
/// (`<table>_subject_id`) within PostgreSQL's 63 bytes.
pub const MAX_QUEUE_TABLE_LEN: usize = MAX_CHANNEL_LEN - "_subject_id".len();
/// How long a claimed unit stays with its consumer when the document says
/// nothing: far above the time a handler needs to take a unit in hand.
pub const DEFAULT_LEASE_SECONDS: u64 = 30;
/// Longest lease: a consumer that died holds its units this long.
pub const MAX_LEASE_SECONDS: u64 = 86_400;
/// Subjects reserved for replies; no queue root may reach them.
const INBOX_ROOT: &str = "_INBOX";

/// Why a configuration document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON, an unknown field, or a value of the wrong type.
    #[error("invalid pgbus carrier configuration: {0}")]
    Document(String),
    /// A channel or table name PostgreSQL would fold, truncate or need quoted.
    #[error(
        "{field} must be 1 to {max} lowercase letters, digits or `_`, starting with a letter or `_`; got `{value}`"
    )]
    Identifier {
        /// The document's field.
        field: &'static str,
        /// Its longest allowed name.
        max: usize,
        /// The name refused.
        value: String,
    },
    /// Wakes on the fan-out channel would be read as messages.
    #[error("wake_channel must differ from channel; both are `{0}`")]
    SameChannel(String),
    /// A spill threshold PostgreSQL could not honour.
    #[error("spill_threshold must be between 1 and {PG_NOTIFY_LIMIT} bytes, got {0}")]
    SpillThreshold(usize),
    /// No readers, or more than a frontend should hold.
    #[error("spill_readers must be between 1 and {MAX_SPILL_READERS}, got {0}")]
    SpillReaders(usize),
    /// A retention that keeps nothing, or keeps rows for too long.
    #[error("retention_seconds must be between 1 and {MAX_RETENTION_SECONDS}, got {0}")]
    Retention(u64),
    /// A lease that ends at once, or holds a dead consumer's units too long.
    #[error("lease_seconds must be between 1 and {MAX_LEASE_SECONDS}, got {0}")]
    Lease(u64),
    /// A root that is not a literal subject.
    #[error("invalid root: {0}")]
    Root(#[from] SubjectError),
    /// A subject would be both fanned out and queued.
    #[error("queue root `{queue}` overlaps `{other}`: a subject is either fanned out or queued")]
    Overlap {
        /// The queue root.
        queue: String,
        /// The fan-out or reserved root it reaches.
        other: String,
    },
}

/// `{"channel": "switchyard_bus", "roots": ["jobs", "cache"],
/// "spill_threshold": 8000, "spill_readers": 8, "retention_seconds": 60,
/// "queue_roots": ["work"], "wake_channel": "switchyard_bus_wake",
/// "queue_table": "switchyard_carrier_queue", "lease_seconds": 30}`, every
/// field optional, unknown fields refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Document {
    channel: String,
    roots: Vec<String>,
    spill_threshold: usize,
    spill_readers: usize,
    retention_seconds: u64,
    queue_roots: Vec<String>,
    /// `None`: the channel's name and [`WAKE_SUFFIX`].
    wake_channel: Option<String>,
    queue_table: String,
    lease_seconds: u64,
}

impl Default for Document {
    fn default() -> Self {
        Self {
            channel: DEFAULT_CHANNEL.into(),
            roots: DEFAULT_ROOTS.map(String::from).to_vec(),
            spill_threshold: DEFAULT_SPILL_THRESHOLD,
            spill_readers: DEFAULT_SPILL_READERS,
            retention_seconds: DEFAULT_RETENTION_SECONDS,
            queue_roots: DEFAULT_QUEUE_ROOTS.map(String::from).to_vec(),
            wake_channel: None,
            queue_table: DEFAULT_QUEUE_TABLE.into(),
            lease_seconds: DEFAULT_LEASE_SECONDS,
        }
    }
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The channel every frontend notifies and listens on.
    pub channel: String,
    /// Where fanned-out subjects may lie: the configured roots and `_INBOX.`
    /// (replies); an empty `roots` list admits every subject that is not
    /// queued.
    pub policy: SubjectPolicy,
    /// Notification size (bytes) from which a message is spilled.
    pub spill_threshold: usize,
    /// Reader connections that fetch spilled rows.
    pub spill_readers: usize,
    /// Age (database clock) after which spill rows are deleted.
    pub retention_seconds: u64,
    /// Roots of the queued subjects, each with its trailing `.`; empty: no
    /// subject is queued.
    pub queue_roots: Vec<String>,
    /// The channel that wakes consumers; a wake's text is the subject.
    pub wake_channel: String,
    /// The table that holds queued units.
    pub queue_table: String,
    /// How long a claimed unit stays with its consumer (database clock).
    pub lease_seconds: u64,
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
        let wake_channel = doc
            .wake_channel
            .unwrap_or_else(|| format!("{}{WAKE_SUFFIX}", doc.channel));
        identifier("channel", MAX_CHANNEL_LEN, &doc.channel)?;
        identifier("wake_channel", MAX_CHANNEL_LEN, &wake_channel)?;
        identifier("queue_table", MAX_QUEUE_TABLE_LEN, &doc.queue_table)?;
        if wake_channel == doc.channel {
            return Err(ConfigError::SameChannel(wake_channel));
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
        if !(1..=MAX_LEASE_SECONDS).contains(&doc.lease_seconds) {
            return Err(ConfigError::Lease(doc.lease_seconds));
        }
        let policy = if doc.roots.is_empty() {
            SubjectPolicy::allow_all()
        } else {
            let mut roots = doc.roots;
            // Replies to requests come back on inboxes.
            roots.push(INBOX_ROOT.into());
            SubjectPolicy::with_roots(roots)?
        };
        let queue_roots = SubjectPolicy::with_roots(&doc.queue_roots)?
            .roots()
            .to_vec();
        let reserved = SubjectPolicy::with_roots([INBOX_ROOT, CLAIM_PREFIX])?;
        for queue in &queue_roots {
            let reaches = |other: &&String| {
                queue.starts_with(other.as_str()) || other.starts_with(queue.as_str())
            };
            if let Some(other) = policy.roots().iter().chain(reserved.roots()).find(reaches) {
                return Err(ConfigError::Overlap {
                    queue: queue.trim_end_matches('.').to_owned(),
                    other: other.trim_end_matches('.').to_owned(),
                });
            }
        }
        Ok(Self {
            channel: doc.channel,
            policy,
            spill_threshold: doc.spill_threshold,
            spill_readers: doc.spill_readers,
            retention_seconds: doc.retention_seconds,
            queue_roots,
            wake_channel,
            queue_table: doc.queue_table,
            lease_seconds: doc.lease_seconds,
        })
    }

    /// Whether `subject` (or a pattern) lies under a queue root.
    pub fn is_queued(&self, subject: &str) -> bool {
        self.queue_roots
            .iter()
            .any(|root| subject.starts_with(root.as_str()))
    }
}

/// Checks a name PostgreSQL takes unquoted and unchanged.
fn identifier(field: &'static str, max: usize, value: &str) -> Result<(), ConfigError> {
    let valid = matches!(value.as_bytes().first(), Some(b'a'..=b'z' | b'_'))
        && value.len() <= max
        && value
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'));
    match valid {
        true => Ok(()),
        false => Err(ConfigError::Identifier {
            field,
            max,
            value: value.to_owned(),
        }),
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
            assert_eq!(c.queue_roots, ["work."]);
            assert_eq!(c.wake_channel, "switchyard_bus_wake");
            assert_eq!(c.queue_table, "switchyard_carrier_queue");
            assert_eq!(c.lease_seconds, 30);
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
        assert!(any.is_queued("work.render"), "queue roots come first");
    }

    #[test]
    fn queue_fields() {
        let c = Config::parse(
            r#"{"channel": "bus", "queue_roots": ["units", "tasks."], "queue_table": "q_1",
                "lease_seconds": 600}"#,
        )
        .unwrap();
        assert_eq!(c.queue_roots, ["units.", "tasks."]);
        assert_eq!(c.wake_channel, "bus_wake", "named after the channel");
        assert_eq!((c.queue_table.as_str(), c.lease_seconds), ("q_1", 600));
        assert!(c.is_queued("units.a") && c.is_queued("tasks.b"));
        assert!(!c.is_queued("units") && !c.is_queued("unitsx.a") && !c.is_queued("jobs.a"));
        let c = Config::parse(r#"{"wake_channel": "wakes", "queue_roots": []}"#).unwrap();
        assert_eq!(c.wake_channel, "wakes");
        assert!(!c.is_queued("work.a"), "no queue roots: nothing is queued");
    }

    #[test]
    fn queue_refusals() {
        let err = |json: &str| Config::parse(json).unwrap_err();
        let overlap = |queue: &str, other: &str| ConfigError::Overlap {
            queue: queue.into(),
            other: other.into(),
        };
        assert_eq!(err(r#"{"queue_roots": ["jobs"]}"#), overlap("jobs", "jobs"));
        assert_eq!(
            err(r#"{"queue_roots": ["jobs.work"]}"#),
            overlap("jobs.work", "jobs")
        );
        assert_eq!(
            err(r#"{"roots": ["work.fanout"]}"#),
            overlap("work", "work.fanout")
        );
        assert_eq!(
            err(r#"{"roots": [], "queue_roots": ["_INBOX.x"]}"#),
            overlap("_INBOX.x", "_INBOX")
        );
        assert_eq!(
            err(r#"{"queue_roots": ["_claim"]}"#),
            overlap("_claim", "_claim")
        );
        assert!(Config::parse(r#"{"roots": ["jobsx"], "queue_roots": ["jobs"]}"#).is_ok());
        assert_eq!(
            err(r#"{"queue_roots": ["work"], "roots": ["work"]}"#).to_string(),
            "queue root `work` overlaps `work`: a subject is either fanned out or queued"
        );
        assert!(matches!(
            err(r#"{"queue_roots": ["work.*"]}"#),
            ConfigError::Root(_)
        ));

        for (field, bad) in [
            ("wake_channel", "Wake"),
            ("wake_channel", "wake-1"),
            ("queue_table", "public.queue"),
            ("queue_table", "Queue"),
            ("queue_table", ""),
        ] {
            let json = serde_json::json!({ field: bad }).to_string();
            assert!(
                matches!(err(&json), ConfigError::Identifier { field: f, .. } if f == field),
                "{field} {bad}"
            );
        }
        let table = |len: usize| serde_json::json!({ "queue_table": "q".repeat(len) }).to_string();
        assert!(Config::parse(&table(MAX_QUEUE_TABLE_LEN)).is_ok());
        assert!(matches!(
            err(&table(MAX_QUEUE_TABLE_LEN + 1)),
            ConfigError::Identifier { max: 52, .. }
        ));
        assert_eq!(
            err(r#"{"channel": "bus", "wake_channel": "bus"}"#),
            ConfigError::SameChannel("bus".into())
        );
        // The default wake channel of a long channel is too long.
        let long = serde_json::json!({ "channel": "a".repeat(60) }).to_string();
        assert!(matches!(
            err(&long),
            ConfigError::Identifier {
                field: "wake_channel",
                ..
            }
        ));
        assert_eq!(err(r#"{"lease_seconds": 0}"#), ConfigError::Lease(0));
        assert_eq!(
            err(r#"{"lease_seconds": 86401}"#),
            ConfigError::Lease(86_401)
        );
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
            assert!(
                matches!(
                    err(&json),
                    ConfigError::Identifier {
                        field: "channel",
                        ..
                    }
                ),
                "{bad}"
            );
        }
        let long = serde_json::json!({ "channel": "a".repeat(64) }).to_string();
        assert!(matches!(
            err(&long),
            ConfigError::Identifier {
                field: "channel",
                ..
            }
        ));
        assert_eq!(
            err(r#"{"channel": "Bus"}"#).to_string(),
            "channel must be 1 to 63 lowercase letters, digits or `_`, starting with a letter or `_`; got `Bus`"
        );
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
