//! The frontend's node API.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::WorkerError;
use crate::identity::Identity;

/// The node API of one frontend.
#[derive(Debug, Clone)]
pub struct FrontendClient {
    http: reqwest::Client,
    base: String,
}

/// What a heartbeat answered.
#[derive(Debug, Clone, PartialEq)]
pub enum HeartbeatAnswer {
    /// The node's state and the cluster's carrier news.
    Ok {
        /// pending, healthy, ...
        state: String,
        /// The active carrier and its epoch (null until carriers run).
        carrier: Value,
    },
    /// The credential is no longer valid (the node re-registered elsewhere or was removed).
    CredentialRefused,
}

impl FrontendClient {
    /// A client of `base` (`http://host:port`).
    pub fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// Registers with the registration token; returns the node's own identity.
    pub async fn register(
        &self,
        token: &str,
        name: &str,
        address: Option<&str>,
        inventory: &Value,
    ) -> Result<(Identity, String), WorkerError> {
        let response = self
            .http
            .post(format!("{}/api/nodes/register", self.base))
            .bearer_auth(token)
            .json(&json!({"name": name, "address": address, "inventory": inventory}))
            .send()
            .await
            .map_err(|e| WorkerError::Frontend(format!("{}: {e}", self.base)))?;
        match response.status() {
            StatusCode::CREATED => {}
            StatusCode::UNAUTHORIZED => return Err(WorkerError::RegistrationRefused),
            status => {
                return Err(WorkerError::Frontend(format!(
                    "answered {status} to the registration"
                )));
            }
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| WorkerError::Frontend(e.to_string()))?;
        let field = |v: &Value| v.as_str().map(str::to_string);
        let (Some(node_id), Some(credential), Some(state)) = (
            field(&body["node"]["id"]),
            field(&body["credential"]),
            field(&body["node"]["state"]),
        ) else {
            return Err(WorkerError::Frontend(
                "registration answer lacks the node id or credential".into(),
            ));
        };
        Ok((
            Identity {
                node_id,
                credential,
                frontend: self.base.clone(),
            },
            state,
        ))
    }

    /// One heartbeat with the node's own credential.
    pub async fn heartbeat(
        &self,
        identity: &Identity,
        inventory: &Value,
    ) -> Result<HeartbeatAnswer, WorkerError> {
        let response = self
            .http
            .post(format!(
                "{}/api/nodes/{}/heartbeat",
                self.base, identity.node_id
            ))
            .bearer_auth(&identity.credential)
            .header("x-switchyard-node", &identity.node_id)
            .json(&json!({"inventory": inventory}))
            .send()
            .await
            .map_err(|e| WorkerError::Frontend(format!("{}: {e}", self.base)))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::UNAUTHORIZED => return Ok(HeartbeatAnswer::CredentialRefused),
            status => {
                return Err(WorkerError::Frontend(format!(
                    "answered {status} to a heartbeat"
                )));
            }
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| WorkerError::Frontend(e.to_string()))?;
        Ok(HeartbeatAnswer::Ok {
            state: body["state"].as_str().unwrap_or_default().to_string(),
            carrier: body["carrier"].clone(),
        })
    }
}
