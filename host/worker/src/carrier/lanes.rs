//! A `tunnel` set's lanes: the websockets a worker dials to the frontend
//! (inference first, bulk to the replica that took it), kept dialled with
//! backoff, and how a running set is told connected.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_carrier::client::Carrier;
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::tunnel::websocket::{frame, handshake, wire};
use switchyard_carrier::tunnel::{Lane, Side as TunnelSide, TunnelSession};
use switchyard_carrier::{ComponentSpec, Refusal};
use switchyard_runtime::Runtime;

use super::{FIRST_BACKOFF, MAX_BACKOFF};
use crate::identity::Identity;

/// The worker's tunnel sessions of one set, one per lane while dialled.
#[derive(Default)]
pub(super) struct Lanes {
    pub(super) held: Mutex<[Option<TunnelSession>; 2]>,
}

impl Lanes {
    pub(super) fn slot(lane: Lane) -> usize {
        match lane {
            Lane::Inference => 0,
            Lane::Bulk => 1,
        }
    }

    pub(super) fn hold(&self, lane: Lane, session: Option<TunnelSession>) {
        self.held.lock().expect("lanes lock")[Self::slot(lane)] = session;
    }

    /// Connected: the inference lane's session lives.
    pub(super) fn connected(&self) -> bool {
        self.held.lock().expect("lanes lock")[0]
            .as_ref()
            .is_some_and(|s| !s.is_lost())
    }

    pub(super) fn close(&self) {
        for session in self.held.lock().expect("lanes lock").iter_mut() {
            if let Some(session) = session.take() {
                session.close();
            }
        }
    }
}

/// How to tell whether a running set is connected.
#[derive(Clone)]
pub(super) enum Probe {
    Messages(Arc<Carrier>),
    Lanes(Arc<Lanes>),
    /// A test's say-so.
    #[cfg(test)]
    Flag(Arc<std::sync::atomic::AtomicBool>),
}

impl Probe {
    pub(super) fn connected(&self) -> bool {
        match self {
            Probe::Messages(carrier) => carrier.is_ready(),
            Probe::Lanes(lanes) => lanes.connected(),
            #[cfg(test)]
            Probe::Flag(flag) => flag.load(std::sync::atomic::Ordering::SeqCst),
        }
    }
}

/// Keeps both lanes dialled, with backoff, for as long as the task runs;
/// the sessions are kept in `lanes` (their set closes them).
pub(super) async fn hold_lanes(
    runtime: Arc<Runtime>,
    spec: ComponentSpec,
    identity: Identity,
    acceptor: Acceptor,
    lanes: Arc<Lanes>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match dial(&runtime, &spec, &identity, Lane::Inference, &acceptor).await {
            Ok(inference) => {
                backoff = FIRST_BACKOFF;
                tracing::info!(node = %identity.node_id, "inference lane connected");
                lanes.hold(Lane::Inference, Some(inference.clone()));
                // The bulk lane follows the inference lane's replica; it is
                // redialled while the inference lane lives.
                loop {
                    let bulk = dial(&runtime, &spec, &identity, Lane::Bulk, &acceptor).await;
                    let lost = match bulk {
                        Ok(bulk) => {
                            tracing::info!(node = %identity.node_id, "bulk lane connected");
                            lanes.hold(Lane::Bulk, Some(bulk.clone()));
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
pub(super) enum DialError {
    /// The frontend answered the upgrade with this status.
    #[error("the frontend answered {0}")]
    Answered(u16),
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
    pub(super) fn is_expected_on_bulk(&self) -> bool {
        matches!(self, Self::Answered(409))
    }
}

/// Dials one lane and starts its session.
pub(super) async fn dial(
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
    let bearer = format!("Bearer {}", identity.credential);
    let headers = [
        ("authorization", bearer.as_str()),
        ("x-switchyard-node", identity.node_id.as_str()),
    ];
    let (socket, read_ahead) = handshake::dial(&url, &headers).await.map_err(|e| match e {
        handshake::DialError::Answered(status) => DialError::Answered(status),
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
    tokio::spawn(wire::pump(
        socket,
        frame::Role::Client,
        read_ahead,
        transport,
    ));
    // The lane counts once the frontend answers on it: it starts its side
    // only after recording the session (its connection claim), so a round
    // trip here means other replicas can relay to this lane. Counted any
    // earlier, a change could commit to `tunnel` while the replicas still
    // find no session for this node. The frontend serves no streams: its
    // refusal is the answer.
    match tokio::time::timeout(LANE_ANSWER, session.open(LANE_CHECK)).await {
        Ok(Err(Refusal::UnknownService) | Ok(_)) => Ok(session),
        Ok(Err(refusal)) => {
            session.close();
            Err(DialError::Other(format!(
                "the frontend did not answer on the {lane_name} lane: {refusal}"
            )))
        }
        Err(_) => {
            session.close();
            Err(DialError::Other(format!(
                "the frontend did not answer on the {lane_name} lane within {}s",
                LANE_ANSWER.as_secs()
            )))
        }
    }
}

/// A service no frontend serves: opening it is the lane's first round trip.
pub(super) const LANE_CHECK: &str = "switchyard.lane-check";
/// How long a new lane's first round trip may take.
pub(super) const LANE_ANSWER: Duration = Duration::from_secs(10);
