//! The OpenAI Batch API's bodies, in OpenAI's shapes: files (`/v1/files`),
//! batches (`/v1/batches`), a batch's input and output lines, and the work
//! unit one frontend replica hands another to run a line.
//!
//! The official clients parse these, so the field names, the `object`
//! tags and the nulls are OpenAI's. Federation adds the optional fields at
//! the end of [`Batch`]; they are left out of the JSON when `None`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The one `purpose` a file uploaded here may have.
pub const BATCH_PURPOSE: &str = "batch";
/// The one completion window OpenAI offers.
pub const COMPLETION_WINDOW: &str = "24h";
/// The endpoints a batch may run, as OpenAI's batches do.
pub const BATCH_ENDPOINTS: &[&str] = &["/v1/chat/completions", "/v1/completions", "/v1/embeddings"];
/// The work-queue kind of batch lines.
pub const BATCH_UNIT_KIND: &str = "batch";

/// A file, as `/v1/files` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FileObject {
    /// `file-…`.
    #[cfg_attr(feature = "utoipa", schema(example = "file-3f9a0c2e71d4b5a8"))]
    pub id: String,
    /// Always `file`.
    pub object: String,
    /// Its size.
    pub bytes: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// The name it was uploaded with (`batch_output.jsonl` for an output).
    pub filename: String,
    /// `batch` for an upload, `batch_output` for a batch's output and error files.
    pub purpose: String,
    /// Unix seconds when an upload expires (its `expires_after`, 30 days
    /// by default, as OpenAI's batch files); `null` for an output file.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

/// What `DELETE /v1/files/{id}` answers, as OpenAI does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FileDeleted {
    /// `file-…`.
    pub id: String,
    /// Always `file`.
    pub object: String,
    /// Always `true`.
    pub deleted: bool,
}

/// Why a batch failed or ended early, as OpenAI lists a batch's `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchErrors {
    /// Always `list`.
    pub object: String,
    /// The errors.
    pub data: Vec<BatchError>,
}

/// One entry of [`BatchErrors`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchError {
    /// A stable code (`key_revoked`).
    pub code: String,
    /// For a person.
    pub message: String,
    /// The parameter at fault, if one is.
    pub param: Option<String>,
    /// The input line at fault, if one is.
    pub line: Option<i64>,
}

/// The only `expires_after[anchor]` OpenAI takes.
pub const EXPIRES_ANCHOR: &str = "created_at";
/// The shortest `expires_after[seconds]`, as OpenAI allows (an hour).
pub const MIN_EXPIRES_SECONDS: i64 = 3600;
/// The longest `expires_after[seconds]`, as OpenAI allows (30 days), and
/// the expiry of an upload that names none (OpenAI's default for batch files).
pub const MAX_EXPIRES_SECONDS: i64 = 2_592_000;

text_enum! {
    /// Where a batch is (`batches.status`).
    pub enum BatchStatus {
        /// Accepted; its lines are being checked.
        Validating => "validating",
        /// Refused after it was accepted.
        Failed => "failed",
        /// Its lines run.
        InProgress => "in_progress",
        /// Every line ran; the output files are being made.
        Finalizing => "finalizing",
        /// Done; the output (and error) file can be read.
        Completed => "completed",
        /// The completion window passed before every line ran.
        Expired => "expired",
        /// Cancelled; lines already running finish.
        Cancelling => "cancelling",
        /// Cancelled; the output holds the lines that ran.
        Cancelled => "cancelled",
    }
}

impl BatchStatus {
    /// Whether the batch will not change any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Failed | Self::Completed | Self::Expired | Self::Cancelled
        )
    }
}

/// How many of a batch's lines there are and how they ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RequestCounts {
    /// Lines in the input file.
    pub total: i64,
    /// Lines answered with a 2xx.
    pub completed: i64,
    /// Lines answered otherwise, or never answered.
    pub failed: i64,
}

/// A batch, as `/v1/batches` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Batch {
    /// `batch_…`.
    #[cfg_attr(feature = "utoipa", schema(example = "batch_9c1e4f2a03b7d6e5"))]
    pub id: String,
    /// Always `batch`.
    pub object: String,
    /// The endpoint every line calls.
    #[cfg_attr(feature = "utoipa", schema(example = "/v1/chat/completions"))]
    pub endpoint: String,
    /// Why the batch failed validation (always `null` here: a file is
    /// checked when it is uploaded and when the batch is created).
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub errors: Option<serde_json::Value>,
    /// The uploaded lines.
    pub input_file_id: String,
    /// `24h`.
    pub completion_window: String,
    /// Where it is.
    pub status: BatchStatus,
    /// The answered lines, once the batch ended.
    pub output_file_id: Option<String>,
    /// The failed lines, once the batch ended and only if some failed.
    pub error_file_id: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub in_progress_at: Option<i64>,
    /// Unix seconds.
    pub finalizing_at: Option<i64>,
    /// Unix seconds.
    pub completed_at: Option<i64>,
    /// Unix seconds.
    pub failed_at: Option<i64>,
    /// Unix seconds.
    pub expired_at: Option<i64>,
    /// Unix seconds: `created_at` plus the completion window.
    pub expires_at: Option<i64>,
    /// Unix seconds.
    pub cancelling_at: Option<i64>,
    /// Unix seconds.
    pub cancelled_at: Option<i64>,
    /// How many lines, and how they ended so far.
    pub request_counts: RequestCounts,
    /// The caller's labels, kept as given (at most 16).
    #[cfg_attr(feature = "utoipa", schema(example = json!({"owner": "eu-1"})))]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Federation: the cluster that owns the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Federation: whether the owner answered lately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_available: Option<bool>,
    /// Federation: how much of the owner's batch this copy shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_level: Option<String>,
    /// Federation: the copy may be behind the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_stale: Option<bool>,
    /// Federation: unix seconds of the copy's last sync with the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_at: Option<i64>,
}

/// `POST /v1/batches`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CreateBatch {
    /// A file uploaded with purpose `batch`.
    pub input_file_id: String,
    /// The endpoint every line calls: `/v1/chat/completions`, `/v1/completions` or `/v1/embeddings`.
    #[cfg_attr(feature = "utoipa", schema(example = "/v1/chat/completions"))]
    pub endpoint: String,
    /// `24h`.
    #[cfg_attr(feature = "utoipa", schema(example = "24h"))]
    pub completion_window: String,
    /// Labels kept with the batch: at most 16, keys up to 64 and values up to 512 characters.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `GET /v1/batches`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BatchList {
    /// Always `list`.
    pub object: String,
    /// The newest first.
    pub data: Vec<Batch>,
    /// The first batch's id.
    pub first_id: Option<String>,
    /// The last batch's id: the next page's `after`.
    pub last_id: Option<String>,
    /// Whether older batches follow.
    pub has_more: bool,
}

/// One line of a batch's input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    /// The caller's id for the line, unique in the file.
    pub custom_id: String,
    /// `POST`.
    pub method: String,
    /// The endpoint, the batch's own.
    pub url: String,
    /// The request body, with its `model`.
    pub body: serde_json::Map<String, serde_json::Value>,
}

/// One line of a batch's output or error file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputLine {
    /// `batch_req_…`.
    pub id: String,
    /// The input line's `custom_id`.
    pub custom_id: String,
    /// The answer, when the line got one.
    pub response: Option<LineResponse>,
    /// Why the line got no answer.
    pub error: Option<LineError>,
}

/// The answer a line got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineResponse {
    /// The HTTP status.
    pub status_code: u16,
    /// `req_…`.
    pub request_id: String,
    /// The answer's JSON body.
    pub body: serde_json::Value,
}

/// Why a line got no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineError {
    /// `batch_expired`, `batch_cancelled`, or the last attempt's failure.
    pub code: String,
    /// For a person.
    pub message: String,
}

/// A work unit: run line `line` of `batch`, as its dispatch `dispatch`
/// (the unit id is `<batch>:<line>:<dispatch>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineUnit {
    /// The batch's id.
    pub batch: String,
    /// The line's index in the input file, from 0.
    pub line: i32,
    /// Which dispatch of the line this is, from 1.
    pub dispatch: i32,
}

impl LineUnit {
    /// The unit id the queue deduplicates by: each dispatch is a new unit
    /// (a consumer that handled dispatch 1 would drop a second unit of the
    /// same id as a redelivery, and the line would wait for its lease).
    pub fn unit_id(&self) -> String {
        format!("{}:{}:{}", self.batch, self.line, self.dispatch)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn a_batch_has_openais_shape_and_leaves_federation_fields_out_when_none() {
        let batch = Batch {
            id: "batch_1".into(),
            object: "batch".into(),
            endpoint: "/v1/chat/completions".into(),
            errors: None,
            input_file_id: "file-1".into(),
            completion_window: COMPLETION_WINDOW.into(),
            status: BatchStatus::InProgress,
            output_file_id: None,
            error_file_id: None,
            created_at: 1,
            in_progress_at: Some(2),
            finalizing_at: None,
            completed_at: None,
            failed_at: None,
            expired_at: None,
            expires_at: Some(86401),
            cancelling_at: None,
            cancelled_at: None,
            request_counts: RequestCounts {
                total: 3,
                completed: 1,
                failed: 0,
            },
            metadata: Some(BTreeMap::from([("owner".into(), "eu".into())])),
            owner: None,
            owner_available: None,
            projection_level: None,
            projection_stale: None,
            last_synced_at: None,
        };
        let json = round_trip(&batch);
        assert_eq!(json["status"], "in_progress");
        assert_eq!(json["errors"], serde_json::Value::Null);
        assert_eq!(
            json["request_counts"],
            json!({"total": 3, "completed": 1, "failed": 0})
        );
        assert!(json.get("owner").is_none());
        assert!(json.get("projection_stale").is_none());
    }

    #[test]
    fn lines_and_units_round_trip() {
        let line: RequestLine = serde_json::from_value(json!({
            "custom_id": "a", "method": "POST", "url": "/v1/embeddings",
            "body": {"model": "m", "input": "x"}}))
        .unwrap();
        round_trip(&line);
        round_trip(&OutputLine {
            id: "batch_req_1".into(),
            custom_id: "a".into(),
            response: None,
            error: Some(LineError {
                code: "batch_expired".into(),
                message: "too late".into(),
            }),
        });
        let unit = LineUnit {
            batch: "batch_1".into(),
            line: 4,
            dispatch: 2,
        };
        round_trip(&unit);
        assert_eq!(unit.unit_id(), "batch_1:4:2");
        for status in BatchStatus::ALL {
            assert_eq!(status.as_str().parse::<BatchStatus>(), Ok(*status));
        }
    }
}
