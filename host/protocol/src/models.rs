//! A model revision's manifest: the body of `POST /api/models` (the CLI's
//! `model import`), what the library answers for a revision, and what the
//! scheduler stages on a node.

use serde::{Deserialize, Serialize};

/// One file of a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ModelFile {
    /// Its name inside the model (`model.gguf`, `tokenizer/config.json`).
    pub path: String,
    /// Bytes.
    pub size: i64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// A revision's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ModelRevision {
    /// The model's id (`llama-3-8b-instruct`).
    pub id: String,
    /// The revision (`q4_k_m-2024-05`).
    pub revision: String,
    /// Its licence, as the importer said.
    pub licence: Option<String>,
    /// Its files.
    pub files: Vec<ModelFile>,
    /// Who imported it (key id).
    #[serde(default)]
    pub imported_by: String,
    /// When.
    #[serde(default)]
    pub imported_at: String,
}

impl ModelRevision {
    /// Bytes of all its files.
    pub fn size(&self) -> i64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// A blob of the library: `PUT` and `GET /api/library/blobs/{sha256}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Blob {
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Bytes.
    pub size: u64,
}

/// A revision as listed, without its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ModelSummary {
    /// The model's id.
    pub id: String,
    /// The revision.
    pub revision: String,
    /// Its licence, as the importer said.
    pub licence: Option<String>,
    /// How many files it has.
    pub files: i64,
    /// Bytes of all its files.
    pub size: i64,
    /// When it was imported.
    pub imported_at: String,
}

/// `GET /api/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Models {
    /// Every revision.
    pub models: Vec<ModelSummary>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn a_manifest_round_trips_and_an_import_needs_no_importer() {
        let revision = ModelRevision {
            id: "m".into(),
            revision: "r".into(),
            licence: Some("apache-2.0".into()),
            files: vec![ModelFile {
                path: "m.gguf".into(),
                size: 4,
                sha256: "ab".repeat(32),
            }],
            imported_by: "key_1".into(),
            imported_at: "2026-01-01T00:00:00Z".into(),
        };
        round_trip(&revision);
        assert_eq!(revision.size(), 4);
        let import: ModelRevision = serde_json::from_value(json!({
            "id": "m", "revision": "r", "licence": null, "files": [],
        }))
        .unwrap();
        assert!(import.imported_by.is_empty());
    }
}
