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
        let label = request.label.clone();
        let check = known.clone();
        let _joining = Joining::new(self, &url);
        let dialled = self
            .dial(
                &url,
                Lane::Inference,
                LinkPurpose::Join,
                Some(&request.join_token),
                |listener| match contradiction(&check, &label, &url, listener) {
                    Some(why) => Err(Refusal::new("identity_conflict", why)),
                    None => Ok(()),
                },
            )
            .await;
        let (listener, dialled) = dialled.map_err(|e| match e {
            DialError::Unreachable(why) => {
                FederationError::unavailable(format!("the peer at {url} cannot be reached: {why}"))
            }
            DialError::Refused(r) if r.code == "invalid_join_token" => {
                FederationError::new(401, "invalid_join_token", r.message)
            }
            DialError::Refused(r) if r.code == "identity_conflict" => conflict(r.message),
            DialError::Refused(r) if r.code == "limit_reached" => FederationError::new(
                409,
                "limit_reached",
                format!("the peer refused: {}", r.message),
            ),
            DialError::Refused(r) => {
                FederationError::new(502, "link_refused", format!("the handshake failed: {r}"))
            }
            DialError::Local(e) => e,
        })?;
        let existing = known
            .iter()
            .find(|p| p.public_key == listener.public_key)
            .cloned();
        let (joined, peer) = match existing {
            Some(peer) => (Joined::Existing(peer.clone()), peer),
            None => {
                let inserted = self
                    .store
                    .insert_peer(NewPeer {
                        label: &request.label,
                        url: Some(&url),
                        cluster_id: &listener.cluster_id,
                        public_key: &listener.public_key,
                    })
                    .await?;
                match inserted {
                    Insert::Done(peer) => (Joined::Created(peer.clone()), peer),
                    Insert::Full(bound) => return Err(FederationError::limit(bound)),
                    Insert::Exists => {
                        return Err(conflict(
                            "a peer with this label, URL or cluster id is known",
                        ));
                    }
                }
            }
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
            format!("the {} bound is reached", bound.name()),
        )),
        Insert::Exists => Err(Refusal::new(
            "identity_conflict",
            "the peer is known with another identity",
        )),
    }
}
