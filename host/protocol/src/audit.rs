//! The admin audit trail as the API answers it (`/api/audit`): one record
//! per admin change, each carrying the SHA-256 of the one before, so an
//! edited or removed record breaks the chain where it stands.

use serde::{Deserialize, Serialize};

/// One admin change: who, from where, what, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditRecord {
    /// Position in the chain (grows by one per record).
    pub seq: i64,
    /// When the change was answered (RFC 3339, microseconds, UTC).
    pub at: String,
    /// The acting key's id (a console session acts as its key).
    pub actor: String,
    /// That key's name when the record was written.
    pub actor_name: String,
    /// The client's address, when the request came over the network.
    pub remote: Option<String>,
    /// The HTTP method.
    pub method: String,
    /// The route as the API documents it (`/api/keys/{id}`).
    pub route: String,
    /// The object changed: the route's path parameters, or the id the
    /// answer named for a create.
    pub object: Option<String>,
    /// The request's body with secrets removed, or its size and type.
    pub summary: String,
    /// The answer's status code.
    pub status: u16,
    /// Hex SHA-256 of the record before (64 zeros for the first).
    pub prev_sha256: String,
    /// Hex SHA-256 of this record (over `prev_sha256` and every field above).
    pub sha256: String,
}

/// `GET /api/audit`: the records a query matched, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditLog {
    /// The records.
    pub records: Vec<AuditRecord>,
    /// Pass as `after` for the next page; absent when nothing matched.
    pub next_after: Option<i64>,
}

/// `GET /api/audit/verify`: the chain walked from its oldest kept record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditVerification {
    /// Records checked.
    pub records: u64,
    /// The oldest kept record (older ones were pruned by retention).
    pub first_seq: Option<i64>,
    /// The newest record.
    pub last_seq: Option<i64>,
    /// The first record that does not hold; absent when the chain is whole.
    pub broken: Option<BrokenRecord>,
}

/// Where the chain breaks, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BrokenRecord {
    /// The record's position.
    pub seq: i64,
    /// `altered` (its fields no longer hash to its digest), `relinked` (it
    /// does not name the digest of the record before) or `gap` (records
    /// between it and the one before are missing).
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verification_reads_back_as_the_api_writes_it() {
        let text = r#"{"records":3,"first_seq":1,"last_seq":3,
            "broken":{"seq":2,"reason":"altered"}}"#;
        let verified: AuditVerification = serde_json::from_str(text).unwrap();
        assert_eq!(verified.broken.as_ref().unwrap().seq, 2);
        let again: AuditVerification =
            serde_json::from_value(serde_json::to_value(&verified).unwrap()).unwrap();
        assert_eq!(again, verified);
    }
}
