//! The frontend's node API.

use reqwest::StatusCode;
use switchyard_protocol::node::{Heartbeat, HeartbeatAnswer, RegisterNode, Registered};
use switchyard_protocol::state::NodeState;

use crate::WorkerError;
use crate::identity::Identity;

/// The node API of one frontend.
#[derive(Debug, Clone)]
pub struct FrontendClient {
    http: reqwest::Client,
    base: String,
}

/// How a heartbeat went.
#[derive(Debug, Clone, PartialEq)]
pub enum Beaten {
    /// The frontend answered (boxed: the carrier news is large beside the
    /// other variant).
    Answered(Box<HeartbeatAnswer>),
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

    /// Registers with the registration token; returns the node's own
    /// identity and its state. `registration.credential` is the one this
    /// worker holds, if any: a name that is taken is registered again only
    /// with it.
    pub async fn register(
        &self,
        token: &str,
        registration: &RegisterNode,
    ) -> Result<(Identity, NodeState), WorkerError> {
        let response = self
            .http
            .post(format!("{}/api/nodes/register", self.base))
            .bearer_auth(token)
            .json(registration)
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
        let registered: Registered = response
            .json()
            .await
            .map_err(|e| WorkerError::Frontend(format!("the registration answer: {e}")))?;
        Ok((
            Identity {
                node_id: registered.node.id,
                credential: registered.credential,
                frontend: self.base.clone(),
            },
            registered.node.state,
        ))
    }

    /// One heartbeat with the node's own credential.
    pub async fn heartbeat(
        &self,
        identity: &Identity,
        beat: &Heartbeat,
    ) -> Result<Beaten, WorkerError> {
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
            StatusCode::UNAUTHORIZED => return Ok(Beaten::CredentialRefused),
            status => {
                return Err(WorkerError::Frontend(format!(
                    "answered {status} to a heartbeat"
                )));
            }
        }
        let answer = response
            .json()
            .await
            .map_err(|e| WorkerError::Frontend(format!("the heartbeat answer: {e}")))?;
        Ok(Beaten::Answered(Box::new(answer)))
    }
}
