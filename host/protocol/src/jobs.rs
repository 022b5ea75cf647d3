//! Batch jobs across clusters: every job has one owner cluster, which
//! stores it and runs all of it. A cluster that receives a request for a
//! peer's job forwards it over the link as a [`JobCall`] on a fresh stream
//! of [`JOBS_SERVICE`]: the call's head line, then (for a creation) the
//! input file's bytes; the owner answers an [`crate::stream::AnswerHead`]
//! line, then the body its own `/v1` route would have answered.
//!
//! A call carries the clusters it crossed (`hops`): the owner never
//! forwards a job call again, and refuses one that crossed more than one
//! link (`loop_detected`).

use serde::{Deserialize, Serialize};

use crate::batch::CreateBatch;

/// The link's stream service for job calls.
pub const JOBS_SERVICE: &str = "federation.jobs";

/// The metadata key naming a batch's owner cluster (a peer's label, or
/// this cluster's own).
pub const OWNER_KEY: &str = "owner";

/// The level of a projection: only the summary the owner answered.
pub const PROJECTION_SUMMARY: &str = "summary";

/// The most jobs one projection refresh asks the owner about.
pub const MAX_REFRESH: usize = 100;

/// A call about a job, made to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCall {
    /// Cluster ids the call crossed (the caller's first).
    pub hops: Vec<String>,
    /// What it asks.
    #[serde(flatten)]
    pub action: JobAction,
}

/// What a job call asks of the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum JobAction {
    /// Create a job from the input file that follows the head line; its
    /// lines name the owner's service ids as models.
    Create {
        /// The grant whose services the lines call.
        grant: String,
        /// The creation request (its `input_file_id` is the caller's).
        request: CreateBatch,
        /// The input file's name.
        filename: String,
    },
    /// One job, as the owner has it.
    Get {
        /// The job.
        id: String,
    },
    /// Several jobs' summaries (a projection refresh): a `BatchList` back,
    /// holding those of them the caller owns a view of.
    Refresh {
        /// The jobs, at most [`MAX_REFRESH`].
        ids: Vec<String>,
    },
    /// Cancel a job.
    Cancel {
        /// The job.
        id: String,
    },
    /// One of a job's files' record (its output or error file).
    File {
        /// The file.
        file: String,
    },
    /// One of a job's files' content (its output or error file).
    Content {
        /// The file.
        file: String,
    },
}

text_enum! {
    /// Whether peers may choose this cluster as the owner of new jobs.
    pub enum Eligibility {
        /// Peers may.
        Eligible => "eligible",
        /// Peers may not (maintenance); running jobs go on.
        Maintenance => "maintenance",
        /// Peers may not, until the cluster's running jobs end and an
        /// operator undrains it; running jobs go on.
        Draining => "draining",
    }
}

/// `GET /api/federation/eligibility`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct OwnerEligibility {
    /// `eligible`, `maintenance` or `draining`.
    pub state: Eligibility,
    /// Why, as the operator said.
    pub reason: String,
    /// When it last changed (RFC 3339).
    pub changed_at: String,
    /// Jobs this cluster owns that have not ended.
    pub active_jobs: i64,
}

/// `PUT /api/federation/eligibility`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SetEligibility {
    /// `eligible`, `maintenance` or `draining`.
    pub state: Eligibility,
    /// Why (at most 256 characters).
    #[serde(default)]
    pub reason: String,
}

/// A peer's jobs as this cluster projects them (`GET /api/federation/status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct JobProjections {
    /// Jobs projected.
    pub jobs: i64,
    /// Of them, not ended as last synced.
    pub active: i64,
    /// When the oldest projection of an active job was last synced (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_sync: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn a_job_call_is_flat_json_tagged_by_action() {
        let call = JobCall {
            hops: vec!["cl_a".into()],
            action: JobAction::Cancel {
                id: "batch_1".into(),
            },
        };
        let json = round_trip(&call);
        assert_eq!(json["action"], "cancel");
        assert_eq!(json["id"], "batch_1");
        assert_eq!(json["hops"][0], "cl_a");
    }

    #[test]
    fn eligibility_reads_its_names() {
        let set: SetEligibility = serde_json::from_str(r#"{"state":"draining"}"#).unwrap();
        assert_eq!(set.state, Eligibility::Draining);
        assert!(serde_json::from_str::<SetEligibility>(r#"{"state":"gone"}"#).is_err());
    }
}
