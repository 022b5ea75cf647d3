//! The links this replica holds: one websocket per peer and lane, opened
//! by the key handshake and then carrying the tunnel plugin's multiplexed
//! streams, which either side opens. The side that knows the peer's URL
//! dials (and redials with backoff, in `keeper`); the other accepts at
//! `GET /api/federation/link`.

use std::collections::HashMap;
use std::fmt::Display;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use futures::{Sink, SinkExt, StreamExt};
use switchyard_carrier::stream_seam::{Acceptor, Lane};
use switchyard_carrier::tunnel::websocket::{self, Codec, Received};
use switchyard_carrier::tunnel::{Side, TunnelSession};
use switchyard_carrier::{Refusal as StreamRefusal, Stream, StreamReader};
use switchyard_protocol::federation::{
    CALL_SERVICE, INFERENCE_SERVICE, LinkState, Peer, RANGE_SERVICE,
};
use switchyard_protocol::jobs::JOBS_SERVICE;
use switchyard_protocol::link::LinkPurpose;

use crate::handshake::{self, Incoming, Local, PeerIdentity, Refusal};
use crate::{Federation, FederationError};

mod keeper;

pub(crate) use keeper::keep;

/// The lanes a link has: calls and inference, and (for model copies) bulk.
const LANES: [Lane; 2] = [Lane::Inference, Lane::Bulk];

/// The sessions this replica holds, by peer id and lane.
#[derive(Default)]
pub struct Links {
    held: Mutex<HashMap<(String, Lane), (u64, TunnelSession)>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links").finish_non_exhaustive()
    }
}

impl Links {
    /// The live session to `peer` on `lane`.
    pub fn session(&self, peer: &str, lane: Lane) -> Option<TunnelSession> {
        let held = self.held.lock().expect("links lock");
        held.get(&(peer.to_string(), lane))
            .filter(|(_, s)| !s.is_lost())
            .map(|(_, s)| s.clone())
    }

    /// Whether this replica holds the peer's inference lane.
    pub fn is_up(&self, peer: &str) -> bool {
        self.session(peer, Lane::Inference).is_some()
    }

    fn insert(&self, peer: &str, lane: Lane, session: TunnelSession) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let old = self
            .held
            .lock()
            .expect("links lock")
            .insert((peer.to_string(), lane), (id, session));
        if let Some((_, old)) = old {
            old.close();
        }
        id
    }

    /// Forgets session `id` if it is still the one held; answers whether
    /// it was (a session a newer one replaced says nothing of the link).
    fn remove(&self, peer: &str, lane: Lane, id: u64) -> bool {
        let mut held = self.held.lock().expect("links lock");
        let key = (peer.to_string(), lane);
        let current = held.get(&key).is_some_and(|(held_id, _)| *held_id == id);
        if current {
            held.remove(&key);
        }
        current
    }

    /// Closes every lane to `peer` (it was forgotten).
    pub fn close_peer(&self, peer: &str) {
        let mut held = self.held.lock().expect("links lock");
        held.retain(|(p, _), (_, session)| {
            let keep = p != peer;
            if !keep {
                session.close();
            }
            keep
        });
    }

    /// Closes every link (federation is suspended); answers the peers
    /// whose inference lane was held, for the caller to record them down
    /// (the sessions' own ends find them gone and record nothing).
    pub fn close_all(&self) -> Vec<String> {
        let mut closed = Vec::new();
        for ((peer, lane), (_, session)) in self.held.lock().expect("links lock").drain() {
            session.close();
            if lane == Lane::Inference {
                closed.push(peer);
            }
        }
        closed
    }
}

/// Why a dial did not give a link.
#[derive(Debug)]
pub enum DialError {
    /// The peer could not be reached (connect, TLS, HTTP upgrade).
    Unreachable(String),
    /// A side refused in the handshake.
    Refused(Refusal),
    /// This side cannot federate now.
    Local(FederationError),
}

impl Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::Unreachable(why) => write!(f, "unreachable: {why}"),
            DialError::Refused(refusal) => write!(f, "refused: {refusal}"),
            DialError::Local(e) => write!(f, "{e}"),
        }
    }
}

/// A text-only view of a websocket's incoming half, for the handshake:
/// text messages are the handshake's, a close or an error ends it.
fn text_stream<'a, St, M, E>(
    stream: &'a mut St,
    read: fn(M) -> Received,
) -> impl futures::Stream<Item = String> + Unpin + 'a
where
    St: futures::Stream<Item = Result<M, E>> + Unpin + 'a,
    M: 'a,
{
    Box::pin(futures::stream::unfold(stream, move |s| async move {
        loop {
            match s.next().await.map(|m| m.map(read)) {
                Some(Ok(Received::Text(text))) => return Some((text, s)),
                Some(Ok(Received::Binary(_) | Received::Other)) => continue,
                _ => return None,
            }
        }
    }))
}

/// A text-only view of a websocket's outgoing half.
fn text_sink<'a, Si, M>(sink: &'a mut Si, text: fn(String) -> M) -> impl Sink<String> + Unpin + 'a
where
    Si: Sink<M> + Unpin + 'a,
    Si::Error: 'a,
    M: 'a,
{
    sink.with(move |s: String| futures::future::ready(Ok::<M, Si::Error>(text(s))))
}

/// The peer a link is bound to (its key proved by the handshake): every
/// stream on the link is this peer's.
#[derive(Debug, Clone)]
pub(crate) struct LinkPeer {
    /// Its id here.
    pub id: String,
    /// Its label here.
    pub label: String,
}

impl From<&Peer> for LinkPeer {
    fn from(peer: &Peer) -> Self {
        Self {
            id: peer.id.clone(),
            label: peer.label.clone(),
        }
    }
}

/// Streams the peer opens on a link: remote inference and calls, always
/// as the peer whose key the handshake proved.
fn acceptor(federation: Weak<Federation>, peer: LinkPeer) -> Acceptor {
    Arc::new(move |service: &str, stream: Stream| {
        let Some(federation) = federation.upgrade() else {
            return Err(StreamRefusal::ServiceRefused("shutting down".into()));
        };
        if federation.cluster.key().is_err() {
            return Err(StreamRefusal::ServiceRefused(
                "federation is suspended on this cluster".into(),
            ));
        }
        let peer = peer.clone();
        match service {
            INFERENCE_SERVICE => {
                tokio::spawn(crate::remote::answer(federation, peer, stream));
                Ok(())
            }
            CALL_SERVICE => {
                tokio::spawn(crate::calls::answer(federation, peer.id, stream));
                Ok(())
            }
            JOBS_SERVICE => {
                tokio::spawn(crate::jobs::answer(federation, peer, stream));
                Ok(())
            }
            RANGE_SERVICE => {
                tokio::spawn(crate::copies::serve::answer_range(federation, peer, stream));
                Ok(())
            }
            _ => Err(StreamRefusal::UnknownService),
        }
    })
}

/// Starts the tunnel session on a websocket whose handshake is done.
async fn start_session(
    federation: &Arc<Federation>,
    side: Side,
    lane: Lane,
    peer: &LinkPeer,
) -> Result<(TunnelSession, switchyard_carrier::tunnel::Transport), String> {
    let (runtime, spec) = federation
        .ports
        .links
        .tunnel()
        .ok_or("this replica runs no tunnel component; links need one")?;
    let acceptor = acceptor(Arc::downgrade(federation), peer.clone());
    TunnelSession::start(runtime, spec, side, lane, acceptor).await
}

impl Federation {
    /// Opens a stream to the peer's `service` on `lane` with all of
    /// `request` sent along: over the link held here, else through the
    /// replica of this cluster that holds it (the relay the workers'
    /// sessions use). Answers the reader of the peer's answer.
    pub(crate) async fn open_call(
        &self,
        peer_id: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> Result<StreamReader, FederationError> {
        if let Some(session) = self.links.session(peer_id, lane) {
            return session.call(service, request).await.map_err(|e| {
                FederationError::unavailable(format!("the peer did not take the call: {e}"))
            });
        }
        let relay = self.ports.links.relay().ok_or_else(|| {
            FederationError::unavailable("the link to the peer is down; nothing was sent")
        })?;
        relay(
            peer_id.to_string(),
            lane,
            service.to_string(),
            Some(request),
        )
        .await
        .map(|stream| stream.reader)
        .map_err(|e| {
            FederationError::unavailable(format!(
                "the link to the peer is not up on any replica ({e}); nothing was sent"
            ))
        })
    }

    /// Dials `url` on `lane` and proves both keys; `expect` judges the
    /// listener's identity. Answers the peer and the session, held by the
    /// caller's [`Federation::hold`].
    pub(crate) async fn dial<E>(
        self: &Arc<Self>,
        url: &str,
        lane: Lane,
        purpose: LinkPurpose,
        join_token: Option<&str>,
        expect: impl FnOnce(PeerIdentity) -> E,
    ) -> Result<(PeerIdentity, Dialled), DialError>
    where
        E: std::future::Future<Output = Result<(), Refusal>>,
    {
        let key = self.cluster.key().map_err(DialError::Local)?;
        let identity = self.cluster.identity();
        let target = format!(
            "{}/api/federation/link?lane={}",
            url.trim_end_matches('/').replacen("http", "ws", 1),
            lane.as_str()
        );
        let (socket, _) =
            tokio_tungstenite::connect_async_with_config(target, Some(websocket::config()), true)
                .await
                .map_err(|e| DialError::Unreachable(e.to_string()))?;
        let codec = websocket::tungstenite();
        let (mut sink, mut stream) = socket.split();
        let local = Local {
            key: &key,
            cluster_id: &identity.cluster_id,
            label: &identity.label,
            url: Some(&self.config.url),
        };
        let peer = {
            let mut text_out = text_sink(&mut sink, codec.text);
            let mut text_in = text_stream(&mut stream, codec.read);
            handshake::dial(
                local,
                purpose,
                lane.as_str(),
                join_token,
                expect,
                &mut text_out,
                &mut text_in,
            )
            .await
            .map_err(DialError::Refused)?
        };
        let socket = sink
            .reunite(stream)
            .map_err(|e| DialError::Unreachable(e.to_string()))?;
        Ok((peer, Dialled { socket, lane }))
    }

    /// Holds a dialled link for `peer_id` until it ends: the session
    /// starts, the link is recorded up, and down again at the end.
    pub(crate) async fn hold(
        self: &Arc<Self>,
        peer: &LinkPeer,
        dialled: Dialled,
    ) -> Result<TunnelSession, String> {
        let peer_id = peer.id.as_str();
        let Dialled { socket, lane } = dialled;
        let (session, transport) = start_session(self, Side::Worker, lane, peer).await?;
        let id = self.links.insert(peer_id, lane, session.clone());
        self.link_state(peer_id, lane, LinkState::Up, None).await;
        let federation = self.clone();
        let peer = peer_id.to_string();
        tokio::spawn(async move {
            websocket::pump(socket, transport).await;
            federation.link_closed(&peer, lane, id).await;
        });
        Ok(session)
    }

    /// Answers a peer that dials this cluster: the handshake (a join
    /// registers the peer; a link needs a known key), then the session
    /// until the websocket ends.
    pub async fn accept_link<W, M, E>(
        self: Arc<Self>,
        websocket: W,
        codec: Codec<M>,
        lane: Lane,
        permit: crate::gate::HandshakePermit,
    ) where
        W: Sink<M, Error = E> + futures::Stream<Item = Result<M, E>> + Unpin + Send + 'static,
        M: Send + 'static,
        E: Display + Send + 'static,
    {
        let Ok(key) = self.cluster.key() else {
            // The dialer sees the websocket close before any challenge.
            return;
        };
        let identity = self.cluster.identity();
        let address = permit.address();
        let (mut sink, mut stream) = websocket.split();
        let local = Local {
            key: &key,
            cluster_id: &identity.cluster_id,
            label: &identity.label,
            url: None,
        };
        let accepted = {
            let mut text_out = text_sink(&mut sink, codec.text);
            let mut text_in = text_stream(&mut stream, codec.read);
            let (admitting, registering) = (self.clone(), self.clone());
            handshake::accept(
                local,
                move |incoming| async move { admitting.admit(incoming, address).await },
                move |incoming| async move { registering.register(incoming, address).await },
                &mut text_out,
                &mut text_in,
            )
            .await
        };
        drop(permit);
        let peer = match accepted {
            // The lane the dialer signed is the one it gets.
            Ok((peer, _, proved)) if proved == lane.as_str() => peer,
            Ok(_) => {
                tracing::info!("a link was refused: the signed lane is not the one dialled");
                return;
            }
            Err(refusal) => {
                tracing::info!(code = %refusal.code, "a link was refused");
                return;
            }
        };
        let record = match self.store.peer_by_key(&peer.public_key).await {
            Ok(Some(record)) if record.cluster_id == peer.cluster_id => record,
            _ => {
                tracing::info!(peer = %peer.label, "a link was refused: the key is not this peer's");
                return;
            }
        };
        let Ok(socket) = sink.reunite(stream) else {
            return;
        };
        let (session, transport) = match start_session(
            &self,
            Side::Frontend,
            lane,
            &LinkPeer::from(&record),
        )
        .await
        {
            Ok(started) => started,
            Err(e) => {
                tracing::error!(peer = %record.label, error = %e, "the link's session did not start");
                return;
            }
        };
        let id = self.links.insert(&record.id, lane, session);
        self.link_state(&record.id, lane, LinkState::Up, None).await;
        tracing::info!(peer = %record.label, lane = lane.as_str(), "link accepted");
        websocket::pump_with(socket, transport, codec).await;
        self.link_closed(&record.id, lane, id).await;
    }

    /// The listener's first check, before anything is answered: a join
    /// needs the current join token, a link a key that is a peer's.
    async fn admit(&self, incoming: Incoming, address: Option<IpAddr>) -> Result<(), Refusal> {
        if self.is_self(&incoming.peer) {
            return Err(self_join());
        }
        match incoming.purpose {
            LinkPurpose::Join => {
                // Already a peer under this key: the join is answered as
                // the first one was once the handshake proves the key, and
                // spends no use of the token (it grants nothing a link does
                // not), so running the same join again is idempotent.
                match self.store.peer_by_key(&incoming.peer.public_key).await {
                    Ok(Some(_)) => return Ok(()),
                    Ok(None) => {}
                    Err(e) => return Err(unavailable(e)),
                }
                if let Some(wait) = self.gate.join_wait(address) {
                    return Err(Refusal::new(
                        "join_rate_limited",
                        format!(
                            "too many wrong join tokens from this address; try again in {} s",
                            wait.as_secs() + 1
                        ),
                    ));
                }
                let token = incoming.join_token.as_deref().unwrap_or_default();
                match crate::cluster::join_token_matches(&self.store, token).await {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        self.gate.wrong_guess(address);
                        tracing::info!(
                            ?address,
                            "a join with a wrong, expired or used-up token was refused"
                        );
                        Err(Refusal::new(
                            "invalid_join_token",
                            "the join token is not this cluster's current one, or it expired or was used up",
                        ))
                    }
                    Err(e) => Err(unavailable(e)),
                }
            }
            LinkPurpose::Link => match self.store.peer_by_key(&incoming.peer.public_key).await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err(Refusal::new(
                    "unknown_peer",
                    "this key is no peer of this cluster; join it first",
                )),
                Err(e) => Err(unavailable(e)),
            },
        }
    }

    /// Whether `peer` is this cluster itself (its id or its key).
    pub(crate) fn is_self(&self, peer: &PeerIdentity) -> bool {
        let own = self.cluster.identity();
        peer.cluster_id == own.cluster_id || own.public_key.as_ref() == Some(&peer.public_key)
    }

    /// The listener's last step, on a proved key: a joining peer is
    /// registered (or found registered with the same identity).
    async fn register(&self, incoming: Incoming, address: Option<IpAddr>) -> Result<(), Refusal> {
        if incoming.purpose != LinkPurpose::Join {
            return Ok(());
        }
        let known = match self.store.peer_by_key(&incoming.peer.public_key).await {
            Ok(known) => known.is_some(),
            Err(e) => return Err(unavailable(e)),
        };
        let token = incoming.join_token.as_deref().unwrap_or_default();
        // A use of the token is spent once the dialer proved its key (a
        // peer joining again spends none: see `admit`).
        let spent = match known {
            true => Ok(true),
            false => crate::cluster::use_join_token(&self.store, token).await,
        };
        match spent {
            Ok(true) => self.gate.right_guess(address),
            Ok(false) => {
                return Err(Refusal::new(
                    "invalid_join_token",
                    "the join token expired or was used up during the handshake",
                ));
            }
            Err(e) => return Err(unavailable(e)),
        }
        crate::join::register_joiner(&self.store, &incoming.peer)
            .await
            .map(|_| ())
    }

    /// Session `id` to `peer` ended: the link is recorded down, unless a
    /// newer session replaced it. Two sessions' writes are not ordered: a
    /// newer one may come up while this one's `down` is written, and its
    /// `up` may land first, leaving `down` on record under a live link
    /// (seen once under load: the peer's page said down for good). So
    /// once `down` is written, a live newer session writes `up` again; a
    /// session inserted after that check writes its own `up` later still.
    async fn link_closed(&self, peer: &str, lane: Lane, id: u64) {
        if !self.links.remove(peer, lane, id) {
            return;
        }
        self.link_state(peer, lane, LinkState::Down, Some("the link closed"))
            .await;
        if self.links.session(peer, lane).is_some() {
            self.link_state(peer, lane, LinkState::Up, None).await;
        }
    }

    /// Closes every link held here and records each down with `why`
    /// (`identity_missing`, ...): status and the peer record never say
    /// `up` while federation is suspended.
    pub(crate) async fn suspend_links(&self, why: &str) {
        let message = format!("federation is suspended here: {why}");
        for peer in self.links.close_all() {
            self.link_state(&peer, Lane::Inference, LinkState::Down, Some(&message))
                .await;
        }
    }

    /// Records a lane's state; the inference lane's is the link's.
    async fn link_state(&self, peer: &str, lane: Lane, state: LinkState, error: Option<&str>) {
        if lane != Lane::Inference {
            return;
        }
        if let Err(e) = self
            .store
            .set_link_state(peer, state, error, &self.config.instance_id)
            .await
        {
            tracing::warn!(error = %e, "the link's state was not recorded");
        }
    }
}

/// The refusal of a cluster that dials itself (the same cluster id or key
/// on both ends): nothing is registered on either side.
pub(crate) fn self_join() -> Refusal {
    Refusal::new(
        "self_join",
        "a cluster cannot join or link to itself: the URL leads back to this cluster",
    )
}

/// A refusal for a fault of this side: the detail is logged, the peer
/// (whose key is not proved yet) reads a generic message.
pub(crate) fn unavailable(e: impl Display) -> Refusal {
    tracing::warn!(error = %e, "a link could not be answered");
    Refusal::new(
        "unavailable",
        "the cluster cannot answer links now; try again",
    )
}

/// A dialled websocket whose handshake is done.
pub struct Dialled {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    lane: Lane,
}
