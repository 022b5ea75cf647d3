//! Usage as it is metered and reported (`/api/usage`): one event per `/v1`
//! answer that reached an engine, with the tokens the engine reported, and
//! the sums the API answers, grouped by team, key, model, peer or node
//! over minutes, hours or days.

use serde::{Deserialize, Serialize};

/// One answer's usage, as the inference core records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageEvent {
    /// When the answer ended (milliseconds since the Unix epoch).
    pub at_unix_ms: u64,
    /// The caller: a key id, or `peer:<label>` for a peer's call here.
    pub caller: String,
    /// The model as the client named it.
    pub model: String,
    /// What served it: a replica id, or `<peer>/<service>` for a call sent to a peer.
    pub served_by: String,
    /// The node of that replica (empty for a call sent to a peer).
    pub node: String,
    /// Prompt tokens, as the engine reported them.
    pub prompt_tokens: u64,
    /// Completion tokens, as the engine reported them.
    pub completion_tokens: u64,
    /// Prompt tokens the engine served from its cache.
    pub cached_tokens: u64,
    /// Whether the engine reported usage at all (an answer cut off early
    /// may not have).
    pub reported: bool,
    /// The engine's status; 499 when the client went away first.
    pub status: u16,
    /// Whether the answer streamed.
    pub stream: bool,
    /// Milliseconds to the first byte of the answer's body.
    pub first_byte_ms: u64,
    /// Milliseconds from the request to the answer's end.
    pub duration_ms: u64,
}

/// One group's sums over one time bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct UsageRow {
    /// The bucket's start (RFC 3339, UTC).
    pub bucket: String,
    /// The team, when grouped by team (`null`: callers in no team).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The key id, when grouped by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The model as clients named it, when grouped by model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The peer that called here, when grouped by peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The node, when grouped by node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Answers.
    pub requests: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
}

/// `GET /api/usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct UsageReport {
    /// `minute`, `hour` or `day`.
    pub granularity: String,
    /// The dimensions grouped by, in order.
    pub group_by: Vec<String>,
    /// The sums, by bucket then group.
    pub rows: Vec<UsageRow>,
    /// Events this replica could not queue for writing since it started
    /// (the queue was full): usage the report lacks.
    pub dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_the_api_writes_it() {
        let text = r#"{"granularity":"hour","group_by":["team"],"dropped":0,"rows":[
            {"bucket":"2026-12-04T10:00:00Z","team":"research","requests":3,
             "prompt_tokens":30,"completion_tokens":12,"cached_tokens":0}]}"#;
        let report: UsageReport = serde_json::from_str(text).unwrap();
        assert_eq!(report.rows[0].team.as_deref(), Some("research"));
        assert_eq!(report.rows[0].key, None);
        let again: UsageReport =
            serde_json::from_value(serde_json::to_value(&report).unwrap()).unwrap();
        assert_eq!(again, report);
    }
}

/// What one frontend replica tells the others of its usage counters
/// (`pg_notify` on [`COUNTS_CHANNEL`], as soon as they change, at most one
/// message per [`COUNTS_SYNC_MS`]): the changes since its last message,
/// so that rate limits and budgets hold across replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountsMessage {
    /// The sending replica (its instance id).
    pub replica: String,
    /// One entry per subject that changed or has requests in flight.
    pub counts: Vec<CountsDelta>,
}

/// One subject's change on one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountsDelta {
    /// `key:<id>`, `team:<name>` or `peer:<label>`.
    pub subject: String,
    /// Requests admitted since the last message.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: i64,
    /// Tokens charged since the last message (a correction may be negative).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens: i64,
    /// Requests in flight on the sender now.
    #[serde(default)]
    pub in_flight: u32,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The channel replicas share their usage counters on.
pub const COUNTS_CHANNEL: &str = "switchyard_usage_counts";

/// The least time between two messages of one replica: with a
/// notification's delivery (about a millisecond), the bound on how late
/// another replica sees a change.
pub const COUNTS_SYNC_MS: u64 = 10;
