//! What an operator reads: this cluster's identity, its peers with their
//! links and grants (active, inactive, expired or revoked, and what is
//! left), the bounded metadata, and the offers this cluster publishes.

use switchyard_protocol::federation::{
    FederationStatus, GrantRecord, GrantStatus, Identity, LinkState, NewOffer, Offer, Peer,
    PeerStatus, Resource,
};
use switchyard_store::federation::Insert;

use crate::identity::IdentityState;
use crate::join::valid_name;
use crate::{FedResult, Federation, FederationError};

/// What is left of a grant, and which limits are reached.
fn grant_status(grant: &GrantRecord) -> GrantStatus {
    let terms = &grant.terms;
    let usage = &grant.usage;
    let requests_left = terms.max_requests.saturating_sub(usage.requests);
    let concurrent_left = terms.max_concurrent.saturating_sub(usage.in_flight);
    let model_bytes_left = terms.max_model_bytes.saturating_sub(usage.model_bytes);
    let mut exhausted = Vec::new();
    if requests_left == 0 {
        exhausted.push("requests".to_string());
    }
    if concurrent_left == 0 {
        exhausted.push("concurrent".to_string());
    }
    if model_bytes_left == 0 && terms.max_model_bytes > 0 {
        exhausted.push("model_bytes".to_string());
    }
    GrantStatus {
        id: grant.id.clone(),
        direction: grant.direction,
        status: grant.status,
        requests_left,
        concurrent_left,
        model_bytes_left,
        exhausted,
        last_verified_at: grant.last_verified_at.clone(),
    }
}

impl Federation {
    /// `GET /api/federation/status`.
    pub async fn status(&self) -> FedResult<FederationStatus> {
        let state = self.cluster.state();
        let peers = self.store.peers().await?;
        let grants = self.store.grants().await?;
        let mut jobs = self.store.projection_counts().await?;
        let peers = peers
            .into_iter()
            .map(|peer| PeerStatus {
                jobs: jobs.remove(&peer.id).unwrap_or_default(),
                identity_verified: state == IdentityState::Verified
                    && peer.link.state == LinkState::Up,
                grants: grants
                    .iter()
                    .filter(|g| g.peer == peer.label)
                    .map(grant_status)
                    .collect(),
                id: peer.id,
                label: peer.label,
                link: peer.link,
                last_verified_at: peer.last_verified_at,
            })
            .collect();
        Ok(FederationStatus {
            identity: state.as_str().to_string(),
            cluster: self.identity(),
            suspended: self.cluster.key().err().map(|e| e.message),
            peers,
            bounds: self.store.federation_bounds().await?,
            copies: self.unfinished_copies().await?,
        })
    }

    /// This cluster's identity; the public key is this replica's key's
    /// when it is the cluster's.
    pub fn identity(&self) -> Identity {
        self.cluster.identity()
    }

    /// Every peer.
    pub async fn peers(&self) -> FedResult<Vec<Peer>> {
        Ok(self.store.peers().await?)
    }

    /// One peer, by id or label.
    pub async fn peer(&self, peer: &str) -> FedResult<Peer> {
        self.store
            .peer(peer)
            .await?
            .ok_or_else(|| FederationError::not_found(format!("no peer '{peer}'")))
    }

    /// Every grant, both directions.
    pub async fn grants(&self) -> FedResult<Vec<GrantRecord>> {
        Ok(self.store.grants().await?)
    }

    /// Every request for access, both directions.
    pub async fn requests(&self) -> FedResult<Vec<switchyard_protocol::federation::AccessRequest>> {
        Ok(self.store.requests().await?)
    }

    /// Publishes an offer after checking that its resource exists here.
    pub async fn publish(&self, offer: NewOffer) -> FedResult<Offer> {
        let id = offer
            .id
            .clone()
            .unwrap_or_else(|| offer.resource.default_id());
        if id.len() > switchyard_protocol::federation::MAX_NAME * 3 || id.contains('/') {
            return Err(FederationError::invalid(
                "an offer id has no '/' and is short",
            ));
        }
        let missing =
            |what: String| FederationError::invalid(format!("{what} does not exist here"));
        match &offer.resource {
            Resource::Service { deployment } => {
                valid_name("service id", &id)?;
                if self.store.deployment(deployment).await?.is_none() {
                    return Err(missing(format!("deployment '{deployment}'")));
                }
            }
            Resource::Model { model, revision } => {
                if self.store.model_revision(model, revision).await?.is_none() {
                    return Err(missing(format!("model revision '{model}@{revision}'")));
                }
            }
            Resource::Machine { node } => {
                if self.store.node(node).await?.is_none() {
                    return Err(missing(format!("node '{node}'")));
                }
            }
            Resource::Runtime {
                engine,
                gpus_per_replica,
            } => {
                if !matches!(engine.as_str(), "reference" | "llama-cpp" | "vllm")
                    || !(0..=64).contains(gpus_per_replica)
                {
                    return Err(FederationError::invalid(
                        "a runtime offer names reference, llama-cpp or vllm and 0 to 64 GPUs",
                    ));
                }
            }
        }
        match self.store.insert_offer(&id, &offer.resource).await? {
            Insert::Done(offer) => Ok(offer),
            Insert::Full(bound) => Err(FederationError::limit(bound)),
            Insert::Exists => Err(FederationError::new(
                409,
                "offer_exists",
                format!("an offer '{id}' exists"),
            )),
        }
    }

    /// Every offer.
    pub async fn offers(&self) -> FedResult<Vec<Offer>> {
        Ok(self.store.offers().await?)
    }

    /// Withdraws an offer.
    pub async fn withdraw(&self, id: &str) -> FedResult<()> {
        self.served.clear();
        match self.store.delete_offer(id).await? {
            true => Ok(()),
            false => Err(FederationError::not_found(format!("no offer '{id}'"))),
        }
    }

    /// Adopts this replica's key as the cluster's (after a restore or a
    /// lost key); links close, and every peer must be joined again.
    pub async fn adopt_key(&self) -> FedResult<Identity> {
        self.cluster.adopt(&self.store).await?;
        self.suspend_links("a new key was adopted").await;
        Ok(self.identity())
    }

    /// Makes a new join token; the previous one stops working.
    pub async fn rotate_join_token(
        &self,
        spec: &switchyard_protocol::federation::NewJoinToken,
    ) -> FedResult<switchyard_protocol::federation::JoinToken> {
        self.cluster.key()?;
        crate::cluster::rotate_join_token(&self.store, spec).await
    }
}
