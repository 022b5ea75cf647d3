//! Joining: dial the peer with its join token, prove both keys, register
//! each other. Repeating a join with the same identity and URL changes
//! nothing; a label or URL that now shows another key is refused, and the
//! peer on record is left as it was. Joining grants nothing.

use std::sync::Arc;

use switchyard_carrier::stream_seam::Lane;
use switchyard_protocol::federation::{JoinPeer, MAX_NAME, Peer};
use switchyard_protocol::link::LinkPurpose;
use switchyard_store::Store;
use switchyard_store::federation::{Insert, NewPeer};

use crate::handshake::{PeerIdentity, Refusal};
use crate::links::DialError;
use crate::{FedResult, Federation, FederationError};

/// What a join did.
#[derive(Debug, Clone)]
pub enum Joined {
    /// A new peer, linked.
    Created(Peer),
    /// The same peer at the same URL was already registered.
    Existing(Peer),
}

/// A label, service id or operation id: 1 to [`MAX_NAME`] letters,
/// digits, `-`, `_` or `.`, not starting with `.` (a label is the first
/// part of a remote model name, `<label>/<service>`).
pub fn valid_name(field: &str, value: &str) -> FedResult<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    match ok {
        true => Ok(()),
        false => Err(FederationError::invalid(format!(
            "{field} must be 1 to {MAX_NAME} letters, digits, '-', '_' or '.', not starting with '.'"
        ))),
    }
}

/// An `http://` or `https://` URL without credentials, query or fragment.
fn valid_url(url: &str) -> FedResult<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| FederationError::invalid("url must start with http:// or https://"))?;
    let bad = rest.is_empty()
        || url.len() > 2048
        || rest.contains(['@', '?', '#', ' '])
        || rest.starts_with('/');
    match bad {
        true => Err(FederationError::invalid(
            "url must be http(s)://host[:port][/path], without credentials, query or fragment",
        )),
        false => Ok(()),
    }
}

fn conflict(message: impl Into<String>) -> FederationError {
    FederationError::new(409, "identity_conflict", message)
}

/// Whether a known peer contradicts the identity `listener` proved for
/// `label` at `url`.
fn contradiction(
    known: &[Peer],
    label: &str,
    url: &str,
    listener: &PeerIdentity,
) -> Option<String> {
    known.iter().find_map(|peer| {
        let same_key = peer.public_key == listener.public_key;
        if peer.label == label && !same_key {
            Some(format!(
                "peer '{label}' is known with another key; forget it first to pair again"
            ))
        } else if peer.url.as_deref() == Some(url) && !same_key {
            Some(format!(
                "{url} is known as peer '{}' with another key",
                peer.label
            ))
        } else if same_key && (peer.label != label || peer.url.as_deref() != Some(url)) {
            Some(format!(
                "this cluster is already peer '{}' at {}",
                peer.label,
                peer.url.as_deref().unwrap_or("(it dials this cluster)")
            ))
        } else {
            None
        }
    })
}

impl Federation {
    /// Joins the cluster at `request.url` with its join token.
    pub async fn join(self: &Arc<Self>, request: JoinPeer) -> FedResult<Joined> {
        valid_name("label", &request.label)?;
        valid_url(&request.url)?;
        if request.join_token.is_empty() || request.join_token.len() > 256 {
            return Err(FederationError::new(
                401,
                "invalid_join_token",
                "the join token is malformed",
            ));
        }
        self.cluster.key()?;
        let known = self.store.peers().await?;
        let url = request.url.trim_end_matches('/').to_string();
        let _joining = Joining::new(self, &url);
        // This side's half is written before this side's proof, so the
        // listener registers this cluster only once it is registered here;
        // a refusal afterwards undoes this half, and a refusal here leaves
        // nothing on either side.
        let mut registered: Option<Joined> = None;
        let dialled = self
            .dial(
                &url,
                Lane::Inference,
                LinkPurpose::Join,
                Some(&request.join_token),
                |listener| {
                    self.register_listener(&known, &request.label, &url, listener, &mut registered)
                },
            )
            .await;
        let (_, dialled) = match dialled {
            Ok(dialled) => dialled,
            Err(e) => {
                if let Some(Joined::Created(peer)) = &registered {
                    self.store.delete_peer(&peer.id).await?;
                }
                return Err(join_refusal(e, &url));
            }
        };
        let (joined, peer) = match registered {
            Some(Joined::Created(peer)) => (Joined::Created(peer.clone()), peer),
            Some(Joined::Existing(peer)) => (Joined::Existing(peer.clone()), peer),
            None => return Err(FederationError::internal("the join registered no peer")),
        };
        self.hold(&crate::links::LinkPeer::from(&peer), dialled)
            .await
            .map_err(FederationError::unavailable)?;
        self.changed();
        let peer = self.store.peer(&peer.id).await?.unwrap_or(peer);
        Ok(match joined {
            Joined::Created(_) => Joined::Created(peer),
            Joined::Existing(_) => Joined::Existing(peer),
        })
    }

    /// The joining side's half, once the listener proved its key: refuses
    /// this cluster itself and an identity that contradicts a known peer,
    /// else finds the peer known with the same identity or registers it.
    async fn register_listener(
        &self,
        known: &[Peer],
        label: &str,
        url: &str,
        listener: PeerIdentity,
        registered: &mut Option<Joined>,
    ) -> Result<(), Refusal> {
        if self.is_self(&listener) {
            return Err(crate::links::self_join());
        }
        if let Some(why) = contradiction(known, label, url, &listener) {
            return Err(Refusal::new("identity_conflict", why));
        }
        if let Some(peer) = known.iter().find(|p| p.public_key == listener.public_key) {
            *registered = Some(Joined::Existing(peer.clone()));
            return Ok(());
        }
        let inserted = self
            .store
            .insert_peer(NewPeer {
                label,
                url: Some(url),
                cluster_id: &listener.cluster_id,
                public_key: &listener.public_key,
            })
            .await
            .map_err(crate::links::unavailable)?;
        match inserted {
            Insert::Done(peer) => {
                *registered = Some(Joined::Created(peer));
                Ok(())
            }
            Insert::Full(bound) => Err(Refusal::new(
                "limit_reached",
                format!("the joining cluster's {} bound is reached", bound.name()),
            )),
            Insert::Exists => Err(Refusal::new(
                "identity_conflict",
                "a peer with this label, URL or cluster id is known",
            )),
        }
    }

    /// Forgets a peer: closes its link, deletes its requests, grants and
    /// operation receipts (managed services it created stay).
    pub async fn forget(&self, peer: &str) -> FedResult<()> {
        let record = self
            .store
            .peer(peer)
            .await?
            .ok_or_else(|| FederationError::not_found(format!("no peer '{peer}'")))?;
        self.links.close_peer(&record.id);
        self.store.delete_peer(&record.id).await?;
        self.changed();
        Ok(())
    }
}

/// A failed join's answer. Whatever kept a URL from answering as a
/// Switchyard cluster (nothing listens, an HTTP answer that is not a link,
/// a handshake that breaks off) is one answer, logged with its cause: the
/// join endpoint is no probe of what answers on internal addresses.
fn join_refusal(e: DialError, url: &str) -> FederationError {
    match e {
        DialError::Refused(r) if r.code == "invalid_join_token" => {
            FederationError::new(401, "invalid_join_token", r.message)
        }
        DialError::Refused(r) if r.code == "join_rate_limited" => {
            FederationError::new(429, "join_rate_limited", r.message)
        }
        DialError::Refused(r) if r.code == "identity_conflict" => conflict(r.message),
        DialError::Refused(r) if r.code == "self_join" => {
            FederationError::new(409, "self_join", r.message)
        }
        DialError::Refused(r) if r.code == "limit_reached" => {
            FederationError::new(409, "limit_reached", r.message)
        }
        DialError::Local(e) => e,
        other => {
            tracing::info!(url, cause = %other, "a join found no cluster to join");
            FederationError::unavailable(PEER_UNREACHABLE)
        }
    }
}

/// The one message of a join that reached no cluster.
pub const PEER_UNREACHABLE: &str =
    "no Switchyard cluster answered a join at this URL (see this cluster's log for the cause)";

/// Marks a URL as being joined until dropped (however the join ends).
struct Joining<'a> {
    federation: &'a Federation,
    url: String,
}

impl<'a> Joining<'a> {
    fn new(federation: &'a Federation, url: &str) -> Self {
        let url = url.to_string();
        federation
            .joining
            .lock()
            .expect("joining lock")
            .insert(url.clone());
        Self { federation, url }
    }
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        self.federation
            .joining
            .lock()
            .expect("joining lock")
            .remove(&self.url);
    }
}

/// On the cluster being joined: registers the joining cluster under its own
/// label (it dials; this side keeps no URL), or finds it registered with
/// the same key.
pub(crate) async fn register_joiner(store: &Store, peer: &PeerIdentity) -> Result<Peer, Refusal> {
    let unavailable = |e: switchyard_store::StoreError| Refusal::new("unavailable", e.to_string());
    if valid_name("label", &peer.label).is_err() {
        return Err(Refusal::new(
            "bad_handshake",
            "the joining cluster's label is not a valid name",
        ));
    }
    let known = store
        .peers_matching(&peer.label, None, &peer.cluster_id)
        .await
        .map_err(unavailable)?;
    if let Some(other) = known.iter().find(|p| p.public_key != peer.public_key) {
        return Err(Refusal::new(
            "identity_conflict",
            format!("peer '{}' is known here with another key", other.label),
        ));
    }
    if let Some(same) = known.into_iter().next() {
        return Ok(same);
    }
    let inserted = store
        .insert_peer(NewPeer {
            label: &peer.label,
            url: None,
            cluster_id: &peer.cluster_id,
            public_key: &peer.public_key,
        })
        .await
        .map_err(unavailable)?;
    match inserted {
        Insert::Done(peer) => Ok(peer),
        Insert::Full(bound) => Err(Refusal::new(
            "limit_reached",
            format!("the joined cluster's {} bound is reached", bound.name()),
        )),
        Insert::Exists => Err(Refusal::new(
            "identity_conflict",
            "the peer is known with another identity",
        )),
    }
}
