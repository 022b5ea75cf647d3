//! The worker's side of the cluster's carrier set, following what the
//! heartbeat answers: the set's catalog says what a worker runs
//! ([`switchyard_carrier::set`]); the components come from the frontend's
//! plugin registry, verified by digest ([`crate::components`]). For
//! `tunnel`, a websocket per lane dialled to the frontend (inference first;
//! bulk on the replica that took it); for `nats`, control verbs on NATS and
//! streams served on the worker's own address. Either way the same
//! services answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest;
use switchyard_carrier::control::serve_control_on_carrier;
use switchyard_carrier::set::{self, SetEnv, Side, SideKind, StreamsVia};
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::tunnel::{Lane, Side as TunnelSide, TunnelSession, websocket};
use switchyard_carrier::{ComponentSpec, SetName};
use switchyard_protocol::carrier::ComponentRef;
use switchyard_runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::components::ComponentCache;
use crate::identity::Identity;
use crate::node::Node;

/// Longest wait between two dials.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// What runs: the set and the digests of its components (a new version of
/// a component restarts the set).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Following {
    set: String,
    digests: Vec<String>,
}

/// What runs for the carrier set the cluster uses now.
pub struct CarrierLink {
    runtime: Arc<Runtime>,
    cache: ComponentCache,
    plugins: Option<PathBuf>,
    address: Option<String>,
    nats_url: Option<String>,
    node: Arc<Node>,
    running: Option<(Following, Vec<JoinHandle<()>>)>,
}

impl std::fmt::Debug for CarrierLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarrierLink")
            .field("running", &self.running.as_ref().map(|(set, _)| set))
            .finish_non_exhaustive()
    }
}

impl CarrierLink {
    /// Nothing runs until [`CarrierLink::follow`]. `plugins` is the
    /// worker's own folder of components, for a frontend whose news names
    /// none.
    pub fn new(
        runtime: Arc<Runtime>,
        cache: ComponentCache,
        plugins: Option<PathBuf>,
        address: Option<String>,
        nats_url: Option<String>,
        node: Arc<Node>,
    ) -> Self {
        Self {
            runtime,
            cache,
            plugins,
            address,
            nats_url,
            node,
            running: None,
        }
    }

    /// The carrier sets running now, by name (a heartbeat reports them).
    pub fn attached(&self) -> Vec<String> {
        self.running
            .iter()
            .map(|(following, _)| following.set.clone())
            .collect()
    }

    /// Stops what runs (the node's identity changed).
    pub fn stop(&mut self) {
        if let Some((_, tasks)) = self.running.take() {
            tasks.iter().for_each(JoinHandle::abort);
        }
    }

    /// Runs the set named `carrier` with `components` (once; a change of
    /// set or of a component stops the old one). A component that cannot
    /// be fetched or verified leaves the old set running; the next
    /// heartbeat tries again.
    pub async fn follow(
        &mut self,
        carrier: &str,
        components: &[ComponentRef],
        identity: &Identity,
    ) {
        let mut digests: Vec<String> = components.iter().map(|c| c.sha256.clone()).collect();
        digests.sort();
        let following = Following {
            set: carrier.to_string(),
            digests,
        };
        if self
            .running
            .as_ref()
            .is_some_and(|(running, _)| *running == following)
        {
            return;
        }
        let Some(set) = SetName::parse(carrier) else {
            tracing::error!(
                carrier,
                "this worker does not run that carrier set; it runs {}",
                SetName::names()
            );
            self.replace(following, Vec::new());
            return;
        };
        let resolved = match (components, &self.plugins) {
            ([], None) => {
                // Said once: nothing changes until the news does.
                tracing::warn!(
                    %set,
                    "the frontend names no carrier components and this worker has no \
                     --carrier-plugins: it serves no streams"
                );
                self.replace(following, Vec::new());
                return;
            }
            ([], Some(plugins)) => own_components(plugins, set),
            (named, _) => self.fetch(named, identity).await,
        };
        let components = match resolved {
            Ok(components) => components,
            Err(e) => {
                // Tried again at the next heartbeat; the old set runs meanwhile.
                tracing::warn!(%set, error = %e, "the carrier set's components are not here yet");
                return;
            }
        };
        if let Some((old, _)) = &self.running {
            tracing::info!(from = %old.set, to = carrier, "the cluster's carrier set changed");
        }
        let tasks = self.start(set, components, identity);
        self.replace(following, tasks);
    }

    fn replace(&mut self, following: Following, tasks: Vec<JoinHandle<()>>) {
        if let Some((_, old)) = self.running.replace((following, tasks)) {
            old.iter().for_each(JoinHandle::abort);
        }
    }

    async fn fetch(
        &self,
        named: &[ComponentRef],
        identity: &Identity,
    ) -> Result<Vec<ComponentSpec>, String> {
        let mut components = Vec::new();
        for wanted in named {
            let component = self
                .cache
                .get(identity, wanted)
                .await
                .map_err(|e| format!("{}@{}: {e}", wanted.name, wanted.version))?;
            components.push(component);
        }
        Ok(components)
    }

    /// Starts the set's worker side: control on the messages carrier where
    /// it rides one, streams on the worker's address or on tunnel sessions.
    fn start(
        &self,
        set: SetName,
        components: Vec<ComponentSpec>,
        identity: &Identity,
    ) -> Vec<JoinHandle<()>> {
        let env = SetEnv {
            runtime: self.runtime.clone(),
            components,
            nats_url: self.nats_url.clone(),
        };
        let seams = match set::start(set, &env, Side::Worker) {
            Ok(seams) => seams,
            Err(e) => {
                tracing::error!(%set, error = %e, "the carrier set did not start");
                return Vec::new();
            }
        };
        let acceptor = self.node.acceptor();
        let mut tasks = Vec::new();
        if let Some(carrier) = seams.messages {
            let node = identity.node_id.clone();
            let control = self.node.control();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = serve_control_on_carrier(carrier, &node, control).await {
                    tracing::error!(error = %e, "control verbs are not served on the carrier");
                }
            }));
        }
        if let Some(tunnel) = seams.tunnel {
            tasks.push(tokio::spawn(hold_lanes(
                self.runtime.clone(),
                tunnel,
                identity.clone(),
                acceptor.clone(),
            )));
        }
        if set.entry().streams == StreamsVia::Direct {
            tasks.extend(self.serve_direct(identity, acceptor));
        }
        tasks
    }

    /// Serves streams on the worker's own address (the frontend dials it).
    fn serve_direct(&self, identity: &Identity, acceptor: Acceptor) -> Option<JoinHandle<()>> {
        let Some(address) = self.address.clone() else {
            tracing::warn!(
                "this carrier set dials streams to the worker's address: without --address this worker serves none"
            );
            return None;
        };
        let key = switchyard_carrier::direct::stream_key(&sha2::Sha256::digest(
            identity.credential.as_bytes(),
        ));
        Some(tokio::spawn(async move {
            match tokio::net::TcpListener::bind(&address).await {
                Ok(listener) => {
                    tracing::info!(%address, "serving streams");
                    switchyard_carrier::direct::serve(listener, key, acceptor).await;
                }
                Err(e) => tracing::error!(%address, error = %e, "cannot serve streams"),
            }
        }))
    }
}

/// The worker's own folder's components, for a frontend whose news names
/// none (an older frontend).
fn own_components(plugins: &Path, set: SetName) -> Result<Vec<ComponentSpec>, String> {
    set.entry()
        .components(SideKind::Worker)
        .into_iter()
        .map(|needed| {
            let path = plugins.join(format!("{}.wasm", needed.name));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(ComponentSpec::new(needed.name, "local", bytes))
        })
        .collect()
}

/// Keeps both lanes dialled, with backoff, for as long as the task runs.
async fn hold_lanes(
    runtime: Arc<Runtime>,
    spec: ComponentSpec,
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
    spec: &ComponentSpec,
    identity: &Identity,
    lane: Lane,
    acceptor: &Acceptor,
) -> Result<TunnelSession, DialError> {
    let lane_name = lane.as_str();
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
        TunnelSide::Worker,
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
