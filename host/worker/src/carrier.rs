//! The worker's side of the cluster's carrier set, following what the
//! heartbeat answers: for `tunnel`, a websocket per lane dialled to the
//! frontend (inference first; bulk on the replica that took it); for
//! `nats`, control verbs on NATS and streams served on the worker's own
//! address. Either way the same services answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest;
use switchyard_carrier::control::serve_control_on_carrier;
use switchyard_carrier::streams::Acceptor;
use switchyard_carrier::tunnel::{Lane, Side, TunnelSession, TunnelSpec, websocket};
use switchyard_carrier::{Carrier, CarrierSpec};
use switchyard_runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::identity::Identity;
use crate::node::Node;

/// Longest wait between two dials.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The subject roots the worker's NATS carrier carries.
const ROOTS: [&str; 4] = ["jobs", "cache", "node", "work"];

/// What runs for the carrier set the cluster uses now.
pub struct CarrierLink {
    runtime: Arc<Runtime>,
    plugins: Option<PathBuf>,
    address: Option<String>,
    nats_url: Option<String>,
    node: Arc<Node>,
    running: Option<(String, Vec<JoinHandle<()>>)>,
}

impl std::fmt::Debug for CarrierLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarrierLink")
            .field("running", &self.running.as_ref().map(|(name, _)| name))
            .finish_non_exhaustive()
    }
}

impl CarrierLink {
    /// Nothing runs until [`CarrierLink::follow`].
    pub fn new(
        runtime: Arc<Runtime>,
        plugins: Option<PathBuf>,
        address: Option<String>,
        nats_url: Option<String>,
        node: Arc<Node>,
    ) -> Self {
        Self {
            runtime,
            plugins,
            address,
            nats_url,
            node,
            running: None,
        }
    }

    /// Stops what runs (the node's identity changed).
    pub fn stop(&mut self) {
        if let Some((_, tasks)) = self.running.take() {
            tasks.iter().for_each(JoinHandle::abort);
        }
    }

    /// Runs the set named `carrier` (once; a change stops the old one).
    pub fn follow(&mut self, carrier: &str, identity: &Identity) {
        if self
            .running
            .as_ref()
            .is_some_and(|(name, _)| name == carrier)
        {
            return;
        }
        if let Some((old, tasks)) = self.running.take() {
            tracing::info!(from = %old, to = carrier, "the cluster's carrier changed");
            tasks.iter().for_each(JoinHandle::abort);
        }
        let Some(plugins) = self.plugins.clone() else {
            tracing::warn!(
                "no carrier components (--carrier-plugins): this worker serves no streams"
            );
            self.running = Some((carrier.to_string(), Vec::new()));
            return;
        };
        let acceptor = self.node.acceptor();
        let tasks = match carrier {
            "tunnel" => match spec(&plugins, "tunnel") {
                Ok(spec) => vec![tokio::spawn(hold_lanes(
                    self.runtime.clone(),
                    spec,
                    identity.clone(),
                    acceptor,
                ))],
                Err(e) => {
                    tracing::error!(error = %e, "the tunnel carrier cannot run");
                    Vec::new()
                }
            },
            "nats" => self.start_nats(&plugins, identity, acceptor),
            other => {
                tracing::error!(carrier = other, "this worker does not run that carrier set");
                Vec::new()
            }
        };
        self.running = Some((carrier.to_string(), tasks));
    }

    fn start_nats(
        &self,
        plugins: &Path,
        identity: &Identity,
        acceptor: Acceptor,
    ) -> Vec<JoinHandle<()>> {
        let mut tasks = Vec::new();
        let Some(url) = self.nats_url.clone() else {
            tracing::error!(
                "the cluster's carrier is nats: give this worker the NATS URL (--nats-url)"
            );
            return tasks;
        };
        match spec(plugins, "nats").and_then(|spec| {
            Carrier::start(
                CarrierSpec {
                    name: spec.name,
                    version: spec.version,
                    bytes: spec.bytes,
                    sha256: spec.sha256,
                    config: serde_json::json!({"servers": [url], "roots": ROOTS}).to_string(),
                    database_url: None,
                    // The operator's --nats-url is the only place the plugin may dial.
                    allowed_endpoints: vec![switchyard_carrier::Endpoint::Tcp(url.clone())],
                },
                self.runtime.clone(),
            )
            .map_err(|e| e.to_string())
        }) {
            Ok(carrier) => {
                let node = identity.node_id.clone();
                let control = self.node.control();
                tasks.push(tokio::spawn(async move {
                    if let Err(e) = serve_control_on_carrier(carrier, &node, control).await {
                        tracing::error!(error = %e, "control verbs are not served on NATS");
                    }
                }));
            }
            Err(e) => tracing::error!(error = %e, "the nats carrier did not start"),
        }
        match &self.address {
            Some(address) => {
                let address = address.clone();
                let key = switchyard_carrier::direct::stream_key(&sha2::Sha256::digest(
                    identity.credential.as_bytes(),
                ));
                tasks.push(tokio::spawn(async move {
                    match tokio::net::TcpListener::bind(&address).await {
                        Ok(listener) => {
                            tracing::info!(%address, "serving streams");
                            switchyard_carrier::direct::serve(listener, key, acceptor).await;
                        }
                        Err(e) => tracing::error!(%address, error = %e, "cannot serve streams"),
                    }
                }));
            }
            None => tracing::warn!(
                "the nats set dials streams to the worker's address: without --address this worker serves none"
            ),
        }
        tasks
    }
}

fn spec(plugins: &Path, name: &str) -> Result<TunnelSpec, String> {
    let path = plugins.join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(TunnelSpec {
        name: name.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        bytes: bytes.into(),
    })
}

/// Keeps both lanes dialled, with backoff, for as long as the task runs.
async fn hold_lanes(
    runtime: Arc<Runtime>,
    spec: TunnelSpec,
    identity: Identity,
    acceptor: Acceptor,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match dial(&runtime, &spec, &identity, Lane::Inference, &acceptor).await {
            Ok(inference) => {
                backoff = FIRST_BACKOFF;
                tracing::info!(node = %identity.node_id, "inference lane connected");
                // The bulk lane follows the inference lane's replica; it is
                // redialled while the inference lane lives.
                loop {
                    let bulk = dial(&runtime, &spec, &identity, Lane::Bulk, &acceptor).await;
                    let lost = match bulk {
                        Ok(bulk) => {
                            tracing::info!(node = %identity.node_id, "bulk lane connected");
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = bulk.lost() => { bulk.close(); None }
                            }
                        }
                        Err(e) if e.is_expected_on_bulk() => {
                            tracing::debug!(error = %e, "bulk lane not yet where the inference lane is; redialling");
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = tokio::time::sleep(FIRST_BACKOFF) => None,
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "bulk lane dial failed");
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = tokio::time::sleep(FIRST_BACKOFF) => None,
                            }
                        }
                    };
                    if let Some(reason) = lost {
                        tracing::warn!(reason, "inference lane lost; redialling");
                        break;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "inference lane dial failed"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Why a lane was not dialled.
#[derive(Debug, thiserror::Error)]
enum DialError {
    /// The frontend answered the upgrade with this status.
    #[error("the frontend answered {0}")]
    Answered(tokio_tungstenite::tungstenite::http::StatusCode),
    /// Anything else (no connection, a bad credential header, the session).
    #[error("{0}")]
    Other(String),
}

impl From<String> for DialError {
    fn from(e: String) -> Self {
        Self::Other(e)
    }
}

impl DialError {
    /// A 409 to the bulk lane: the frontend that took the inference lane
    /// registers it once the session's HELLO is through, and a bulk dial
    /// right after can arrive first. The next dial finds it; a first start
    /// always sees this once, so it is no warning.
    fn is_expected_on_bulk(&self) -> bool {
        matches!(self, Self::Answered(status) if status.as_u16() == 409)
    }
}

/// Dials one lane and starts its session.
async fn dial(
    runtime: &Arc<Runtime>,
    spec: &TunnelSpec,
    identity: &Identity,
    lane: Lane,
    acceptor: &Acceptor,
) -> Result<TunnelSession, DialError> {
    let lane_name = match lane {
        Lane::Inference => "inference",
        Lane::Bulk => "bulk",
    };
    let url = format!(
        "{}/api/cluster/connect?lane={lane_name}",
        identity.frontend.replacen("http", "ws", 1)
    );
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let headers = request.headers_mut();
    headers.insert(
        "authorization",
        format!("Bearer {}", identity.credential)
            .parse()
            .map_err(|_| "the credential is not a header value".to_string())?,
    );
    headers.insert(
        "x-switchyard-node",
        identity
            .node_id
            .parse()
            .map_err(|_| "the node id is not a header value".to_string())?,
    );
    let (socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(websocket::config()), true)
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(response) => {
                    DialError::Answered(response.status())
                }
                other => DialError::Other(other.to_string()),
            })?;
    let (session, transport) = TunnelSession::start(
        runtime.clone(),
        spec.clone(),
        Side::Worker,
        lane,
        acceptor.clone(),
    )
    .await?;
    tokio::spawn(websocket::pump(socket, transport));
    Ok(session)
}

#[cfg(test)]
mod tests {
    use tokio_tungstenite::tungstenite::http::StatusCode;

    use super::DialError;

    #[test]
    fn only_a_409_to_the_bulk_lane_is_an_expected_race() {
        assert!(DialError::Answered(StatusCode::CONFLICT).is_expected_on_bulk());
        for other in [StatusCode::UNAUTHORIZED, StatusCode::SERVICE_UNAVAILABLE] {
            assert!(!DialError::Answered(other).is_expected_on_bulk());
        }
        assert!(!DialError::Other("connection refused".into()).is_expected_on_bulk());
    }
}
