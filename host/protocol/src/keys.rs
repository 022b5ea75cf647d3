//! API keys as the admin API answers them (`/api/keys`): never a token,
//! except once, in the answer that created it.

use serde::{Deserialize, Serialize};

/// An API key as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Key {
    /// Stable id (`key_...`), safe to log.
    pub id: String,
    /// A label chosen by whoever created it.
    pub name: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// The team it belongs to, if any.
    #[serde(default)]
    pub team: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
}

/// `POST /api/keys`: the key and its token, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CreatedKey {
    /// The key.
    pub key: Key,
    /// Its token (`sy_...`): the cluster keeps only its digest.
    pub token: String,
}

/// `GET /api/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Keys {
    /// Every key, revoked ones included.
    pub keys: Vec<Key>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_key_reads_back_as_the_api_writes_it() {
        let text = r#"{"key":{"id":"key_1","name":"app","scopes":["inference"],
            "created_at":"2026-12-03T10:00:00Z","revoked_at":null},"token":"sy_x"}"#;
        let created: CreatedKey = serde_json::from_str(text).unwrap();
        assert_eq!(created.key.scopes, ["inference"]);
        let again: CreatedKey =
            serde_json::from_value(serde_json::to_value(&created).unwrap()).unwrap();
        assert_eq!(again, created);
    }
}

/// An authenticated caller, as every part that checks a scope sees it: the
/// API key's id (safe to log), its scopes and its team. A federated peer
/// calls as `peer:<label>` with the `inference` scope and no team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's id (safe to log).
    pub key_id: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// The team the key belongs to, if any.
    pub team: Option<String>,
}

impl Caller {
    /// [`MissingScope`] unless the caller holds `scope` (or `admin`).
    pub fn require(&self, scope: &str) -> Result<(), MissingScope> {
        if self.scopes.iter().any(|s| s == scope || s == "admin") {
            Ok(())
        } else {
            Err(MissingScope(scope.into()))
        }
    }
}

/// A caller without the scope a call needs (403 `forbidden`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this key lacks the '{0}' scope")]
pub struct MissingScope(pub String);
