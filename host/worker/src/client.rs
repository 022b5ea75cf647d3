//! The frontend's node API.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde::Serialize;
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
        /// The engine ids the cluster knows on this node; `None` from a
        /// frontend that does not say (then nothing is stopped).
        engines: Option<Vec<String>>,
    },
    /// The credential is no longer valid (the node re-registered elsewhere or was removed).
    CredentialRefused,
}

/// What one heartbeat reports.
#[derive(Debug, Clone, Serialize)]
pub struct Beat<'a> {
    /// The machine and its engines now.
    pub inventory: Value,
    /// The worker's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The complete files of the placement cache, sent only when they
    /// changed since the last heartbeat the frontend took (heartbeats stay small).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_held: Option<&'a [String]>,
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

    /// Registers with the registration token; returns the node's own
    /// identity. `credential` is the one this worker holds, if any: a name
    /// that is taken is registered again only with it.
    pub async fn register(
        &self,
        token: &str,
        name: &str,
        address: Option<&str>,
        inventory: &Value,
        labels: &BTreeMap<String, String>,
        credential: Option<&str>,
    ) -> Result<(Identity, String), WorkerError> {
        let response = self
            .http
            .post(format!("{}/api/nodes/register", self.base))
            .bearer_auth(token)
            .json(&json!({"name": name, "address": address, "inventory": inventory, "labels": labels, "credential": credential}))
            .send()
            .await
            .map_err(|e| WorkerError::Frontend(format!("{}: {e}", self.base)))?;
        match response.status() {
            StatusCode::CREATED => {}
            StatusCode::UNAUTHORIZED => return Err(WorkerError::RegistrationRefused),
            status => {
                // A 400 says why (a bad label, a bad name): pass it on.
                let body = response.text().await.unwrap_or_default();
                return Err(WorkerError::Frontend(format!(
                    "answered {status} to the registration: {body}"
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
        beat: &Beat<'_>,
    ) -> Result<HeartbeatAnswer, WorkerError> {
        let response = self
            .http
            .post(format!(
                "{}/api/nodes/{}/heartbeat",
                self.base, identity.node_id
            ))
            .bearer_auth(&identity.credential)
            .header("x-switchyard-node", &identity.node_id)
            .json(beat)
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
            engines: serde_json::from_value(body["engines"].clone()).ok(),
        })
    }
}
