//! `GET /healthz` and `GET /readyz`, as a load balancer reads them.

use serde::{Deserialize, Serialize};

/// `GET /healthz`: the process serves HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Liveness {
    /// Always `ok`.
    pub status: String,
}

/// `GET /readyz`: whether the replica takes requests, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Readiness {
    /// Ready to serve.
    pub ready: bool,
    /// What is not ready (`database`, `admission`); absent when ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_has_no_list_and_not_ready_names_what() {
        let ready = Readiness {
            ready: true,
            not_ready: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&ready).unwrap(),
            serde_json::json!({"ready": true})
        );
        let not: Readiness =
            serde_json::from_str(r#"{"ready":false,"not_ready":["database"]}"#).unwrap();
        assert_eq!(not.not_ready, ["database"]);
    }
}
