//! Pairing: the grantee asks for operations, the owner approves exact
//! resources (or shares unprompted), and the grantee completes. Both keys
//! sign the grant's exact terms (the acceptance receipt) and both sides
//! keep the terms and both signatures. Sharing is directional: the other
//! way round is a grant of its own.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use switchyard_protocol::federation::RequestState;

use switchyard_protocol::federation::{
    AccessRequest, Direction, GrantRecord, GrantSpec, GrantState, GrantTerms, LinkAnswer, LinkCall,
    MAX_GRANT_LIFETIME_S, NewAccessRequest, Operation, Party, Resource, Revoked,
};
use switchyard_store::federation::Insert;

use crate::calls::LinkAnswerExt;
use crate::join::valid_name;
use crate::{FedResult, Federation, FederationError, receipt};

/// The longest note on a request.
const MAX_NOTE: usize = 1024;
/// The most operations a request names (each of the three at most once
/// or twice is plenty; more is a client's mistake, not data to keep).
const MAX_OPERATIONS_NAMED: usize = 8;
/// The most resources of each kind one grant names.
const MAX_RESOURCES: usize = 64;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// The scope a delegated operation needs besides `federation:manage`.
pub fn scope_for(operation: Operation) -> &'static str {
    match operation {
        Operation::Inference => "inference",
        Operation::InferenceManage => "nodes:manage",
        Operation::ModelsTransfer => "models:manage",
    }
}

fn bad_signature(what: &str) -> FederationError {
    FederationError::new(
        403,
        "bad_signature",
        format!("{what} does not verify against the peer's key"),
    )
}

impl Federation {
    /// This cluster as a party to a grant.
    fn party(&self) -> FedResult<Party> {
        let key = self.cluster.key()?;
        let identity = self.cluster.identity();
        Ok(Party {
            cluster_id: identity.cluster_id,
            label: identity.label,
            public_key: key.public_key(),
        })
    }

    /// The grantee asks `peer` for `request.operations`.
    pub async fn request_access(
        &self,
        peer: &str,
        request: NewAccessRequest,
    ) -> FedResult<AccessRequest> {
        if request.operations.is_empty() || request.operations.len() > MAX_OPERATIONS_NAMED {
            return Err(FederationError::invalid(
                "operations must name 1 to 8 operations",
            ));
        }
        if request.note.len() > MAX_NOTE {
            return Err(FederationError::invalid(format!(
                "note must be at most {MAX_NOTE} bytes"
            )));
        }
        let peer = self.peer(peer).await?;
        let id = switchyard_store::keys::random_id("req");
        self.call(
            &peer.id,
            &LinkCall::RequestAccess {
                id: id.clone(),
                operations: request.operations.clone(),
                note: request.note.clone(),
            },
        )
        .await?;
        self.store
            .insert_request(
                &id,
                &peer.id,
                Direction::Outgoing,
                &request.operations,
                &request.note,
            )
            .await?;
        self.request(&id).await
    }

    /// One request for access.
    pub async fn request(&self, id: &str) -> FedResult<AccessRequest> {
        self.store
            .request(id)
            .await?
            .map(|(r, _)| r)
            .ok_or_else(|| FederationError::not_found(format!("no request '{id}'")))
    }

    /// The owner keeps a request a peer made.
    pub(crate) async fn receive_request(
        &self,
        peer_id: &str,
        id: &str,
        operations: &[Operation],
        note: &str,
    ) -> FedResult<LinkAnswer> {
        valid_name("request id", id)?;
        if operations.is_empty() || operations.len() > MAX_OPERATIONS_NAMED || note.len() > MAX_NOTE
        {
            return Err(FederationError::invalid(
                "a request names operations and a short note",
            ));
        }
        self.store
            .insert_request(id, peer_id, Direction::Incoming, operations, note)
            .await?;
        Ok(LinkAnswer::ok(201, serde_json::json!({"id": id})))
    }

    /// Discards a request no grant answered.
    pub async fn discard_request(&self, id: &str) -> FedResult<()> {
        match self.store.discard_request(id).await? {
            true => Ok(()),
            false => Err(FederationError::not_found(format!(
                "no pending request '{id}'"
            ))),
        }
    }

    /// The owner approves an incoming request with exact resources; the
    /// caller holds `scopes`.
    pub async fn approve(
        self: &Arc<Self>,
        request_id: &str,
        spec: GrantSpec,
        scopes: &[String],
    ) -> FedResult<GrantRecord> {
        let (request, peer_id) = self
            .store
            .request(request_id)
            .await?
            .ok_or_else(|| FederationError::not_found(format!("no request '{request_id}'")))?;
        if request.direction != Direction::Incoming || request.state != RequestState::Pending {
            return Err(FederationError::new(
                409,
                "request_not_pending",
                "only a pending request from a peer can be approved",
            ));
        }
        let grant = self
            .offer_grant(&peer_id, Some(request_id), spec, scopes)
            .await?;
        self.store.approve_request(request_id, &grant.id).await?;
        Ok(grant)
    }

    /// The owner shares resources with `spec.peer` unprompted.
    pub async fn share(
        self: &Arc<Self>,
        spec: GrantSpec,
        scopes: &[String],
    ) -> FedResult<GrantRecord> {
        let peer = spec
            .peer
            .clone()
            .ok_or_else(|| FederationError::invalid("peer is required to share"))?;
        let peer = self.peer(&peer).await?;
        self.offer_grant(&peer.id, None, spec, scopes).await
    }

    /// Checks a grant's resources against what this cluster offers and
    /// the caller's scopes; answers the model revisions and nodes the
    /// grant's offers name.
    async fn check_spec(
        &self,
        spec: &GrantSpec,
        scopes: &[String],
    ) -> FedResult<(Vec<String>, Vec<String>)> {
        if spec.operations.is_empty() || spec.operations.len() > MAX_OPERATIONS_NAMED {
            return Err(FederationError::invalid(
                "operations must name 1 to 8 operations",
            ));
        }
        if !(1..=MAX_GRANT_LIFETIME_S).contains(&spec.lifetime_s) {
            return Err(FederationError::invalid(format!(
                "lifetime_s must be 1 to {MAX_GRANT_LIFETIME_S}"
            )));
        }
        if [&spec.services, &spec.models, &spec.machines]
            .iter()
            .any(|list| list.len() > MAX_RESOURCES)
        {
            return Err(FederationError::invalid(format!(
                "a grant names at most {MAX_RESOURCES} services, models and machines each"
            )));
        }
        let admin = scopes.iter().any(|s| s == "admin");
        for operation in &spec.operations {
            let needed = scope_for(*operation);
            if !admin && !scopes.iter().any(|s| s == needed) {
                return Err(FederationError::new(
                    403,
                    "forbidden",
                    format!("delegating {operation} needs the `{needed}` scope as well"),
                ));
            }
        }
        let offers = self.store.offers().await?;
        let offered = |id: &str, kind: fn(&Resource) -> bool| {
            offers.iter().any(|o| o.id == id && kind(&o.resource))
        };
        for service in &spec.services {
            if !offered(service, |r| matches!(r, Resource::Service { .. })) {
                return Err(FederationError::invalid(format!(
                    "'{service}' is no service offer"
                )));
            }
        }
        // The terms name the resources themselves (`model@revision`, a
        // node), whatever id their offer was published under: that is what
        // copies, ranges and managed services look them up by.
        let mut models = Vec::with_capacity(spec.models.len());
        for model in &spec.models {
            let named = offers.iter().find_map(|o| match &o.resource {
                Resource::Model { .. } if o.id == *model => Some(o.resource.default_id()),
                Resource::Model { .. } if o.resource.default_id() == *model => Some(model.clone()),
                _ => None,
            });
            models.push(
                named.ok_or_else(|| {
                    FederationError::invalid(format!("'{model}' is no model offer"))
                })?,
            );
        }
        let mut machines = Vec::with_capacity(spec.machines.len());
        for machine in &spec.machines {
            let node = offers.iter().find_map(|o| match &o.resource {
                Resource::Machine { node } if o.id == *machine || node == machine => {
                    Some(node.clone())
                }
                _ => None,
            });
            machines.push(node.ok_or_else(|| {
                FederationError::invalid(format!("'{machine}' is no machine offer"))
            })?);
        }
        models.dedup();
        machines.dedup();
        Ok((models, machines))
    }

    /// Signs and keeps a grant, and offers it to the peer; nothing is kept
    /// when the peer does not take it.
    async fn offer_grant(
        self: &Arc<Self>,
        peer_id: &str,
        request: Option<&str>,
        spec: GrantSpec,
        scopes: &[String],
    ) -> FedResult<GrantRecord> {
        let (models, machines) = self.check_spec(&spec, scopes).await?;
        let peer = self.peer(peer_id).await?;
        let key = self.cluster.key()?;
        let issued = now_ms();
        let mut operations = spec.operations.clone();
        operations.sort_by_key(|o| o.as_str());
        operations.dedup();
        let terms = GrantTerms {
            id: switchyard_store::keys::random_id("grant"),
            request: request.map(str::to_string),
            owner: self.party()?,
            grantee: Party {
                cluster_id: peer.cluster_id.clone(),
                label: peer.label.clone(),
                public_key: peer.public_key.clone(),
            },
            operations,
            services: spec.services,
            models,
            machines,
            issued_at_unix_ms: issued,
            expires_at_unix_ms: issued.saturating_add(spec.lifetime_s as u64 * 1000),
            max_concurrent: spec.max_concurrent,
            max_requests: spec.max_requests,
            max_model_bytes: spec.max_model_bytes,
            stop_on_revoke: spec.stop_on_revoke,
        };
        let owner_signature = receipt::sign(&key, &terms);
        match self
            .store
            .insert_grant(&peer.id, Direction::Outgoing, &terms, &owner_signature)
            .await?
        {
            Insert::Done(_) => {}
            Insert::Full(bound) => return Err(FederationError::limit(bound)),
            Insert::Exists => return Err(FederationError::internal("a new grant id was taken")),
        }
        let offered = self
            .call(
                &peer.id,
                &LinkCall::OfferGrant {
                    terms: terms.clone(),
                    owner_signature,
                },
            )
            .await;
        if let Err(e) = offered {
            // Not offered: not kept (it never was active, so this frees its room).
            let _ = self.store.retire_grant(&terms.id).await;
            return Err(e);
        }
        self.grant(&terms.id).await
    }

    /// The grantee keeps a grant its owner offered, once the owner's
    /// signature verifies and the terms name both sides as they are.
    pub(crate) async fn receive_offer(
        &self,
        peer_id: &str,
        terms: GrantTerms,
        owner_signature: String,
    ) -> FedResult<()> {
        let peer = self.peer(peer_id).await?;
        let me = self.party()?;
        if terms.owner.public_key != peer.public_key
            || terms.owner.cluster_id != peer.cluster_id
            || terms.grantee.public_key != me.public_key
            || terms.grantee.cluster_id != me.cluster_id
        {
            return Err(FederationError::new(
                403,
                "bad_terms",
                "the grant's parties are not these two clusters",
            ));
        }
        receipt::verify(&peer.public_key, &terms, &owner_signature)
            .map_err(|_| bad_signature("the owner's signature"))?;
        match self
            .store
            .insert_grant(&peer.id, Direction::Incoming, &terms, &owner_signature)
            .await?
        {
            Insert::Done(_) => {}
            Insert::Full(bound) => return Err(FederationError::limit(bound)),
            Insert::Exists => {
                return Err(FederationError::new(
                    409,
                    "grant_exists",
                    "this grant is known",
                ));
            }
        }
        if let Some(request) = &terms.request {
            self.store.approve_request(request, &terms.id).await?;
        }
        self.changed();
        Ok(())
    }

    /// The grantee completes an offered grant: checks the owner's
    /// signature again, signs the same terms, and both sides keep both
    /// signatures.
    pub async fn complete(&self, id: &str) -> FedResult<GrantRecord> {
        let (grant, peer_id) = self.grant_with_peer(id).await?;
        if grant.direction != Direction::Incoming || grant.state != GrantState::Offered {
            return Err(FederationError::new(
                409,
                "grant_not_offered",
                "only a grant a peer offered this cluster, not yet completed, can be completed",
            ));
        }
        let peer = self.peer(&peer_id).await?;
        receipt::verify(&peer.public_key, &grant.terms, &grant.owner_signature)
            .map_err(|_| bad_signature("the owner's signature"))?;
        let key = self.cluster.key()?;
        let grantee_signature = receipt::sign(&key, &grant.terms);
        self.call(
            &peer.id,
            &LinkCall::CompleteGrant {
                id: id.to_string(),
                grantee_signature: grantee_signature.clone(),
            },
        )
        .await?;
        self.store.complete_grant(id, &grantee_signature).await?;
        self.changed();
        self.grant(id).await
    }

    /// The owner records the grantee's signature and the grant is active.
    pub(crate) async fn receive_completion(
        &self,
        peer_id: &str,
        id: &str,
        grantee_signature: &str,
    ) -> FedResult<()> {
        let grant = self.owned_grant(peer_id, id).await?;
        let peer = self.peer(peer_id).await?;
        receipt::verify(&peer.public_key, &grant.terms, grantee_signature)
            .map_err(|_| bad_signature("the grantee's signature"))?;
        if grant.state != GrantState::Offered
            || !self.store.complete_grant(id, grantee_signature).await?
        {
            return Err(FederationError::new(
                409,
                "grant_not_offered",
                "the grant is not waiting to be completed",
            ));
        }
        self.changed();
        Ok(())
    }

    /// The owner revokes a grant: new calls are refused at once and the
    /// operations in flight end on every replica; with `stop_on_revoke`
    /// the services it created stop; the peer is told when its link is up.
    pub async fn revoke(&self, id: &str) -> FedResult<Revoked> {
        let (grant, peer_id) = self.grant_with_peer(id).await?;
        if grant.direction != Direction::Outgoing {
            return Err(FederationError::new(
                409,
                "not_owner",
                "only the cluster that owns a grant's resources revokes it",
            ));
        }
        self.store.revoke_grant(id).await?;
        // Every replica hears of it from the store; this one needs no wait.
        self.inflight.end_grant(id);
        self.changed();
        self.ports.local.end_grant_jobs(id.to_string()).await;
        if grant.terms.stop_on_revoke {
            self.stop_grant_services(id).await?;
        }
        let peer_notified = self
            .call(&peer_id, &LinkCall::RevokeGrant { id: id.to_string() })
            .await
            .is_ok();
        Ok(Revoked {
            id: id.to_string(),
            peer_notified,
        })
    }

    /// The grantee hears its grant was revoked.
    pub(crate) async fn receive_revocation(&self, peer_id: &str, id: &str) -> FedResult<()> {
        let (grant, owner) = self.grant_with_peer(id).await?;
        if owner != peer_id || grant.direction != Direction::Incoming {
            return Err(FederationError::not_found(format!(
                "no grant '{id}' from this peer"
            )));
        }
        self.store.revoke_grant(id).await?;
        self.inflight.end_grant(id);
        self.changed();
        Ok(())
    }

    /// Retires a grant that is revoked, expired or never completed, with
    /// its operation receipts. An active grant stays (409 `grant_active`).
    pub async fn retire(&self, id: &str) -> FedResult<()> {
        self.changed();
        match self.store.retire_grant(id).await? {
            Some(true) => Ok(()),
            Some(false) => Err(FederationError::new(
                409,
                "grant_active",
                "an active grant and its replay protection cannot be pruned; revoke it first",
            )),
            None => Err(FederationError::not_found(format!("no grant '{id}'"))),
        }
    }

    /// One grant.
    pub async fn grant(&self, id: &str) -> FedResult<GrantRecord> {
        self.grant_with_peer(id).await.map(|(g, _)| g)
    }

    async fn grant_with_peer(&self, id: &str) -> FedResult<(GrantRecord, String)> {
        self.store
            .grant(id)
            .await?
            .ok_or_else(|| FederationError::not_found(format!("no grant '{id}'")))
    }

    /// A grant this cluster owns for `peer_id`.
    pub(crate) async fn owned_grant(&self, peer_id: &str, id: &str) -> FedResult<GrantRecord> {
        match self.store.grant(id).await? {
            Some((grant, owner)) if owner == peer_id && grant.direction == Direction::Outgoing => {
                Ok(grant)
            }
            _ => Err(FederationError::new(
                404,
                "grant_not_found",
                format!("no grant '{id}' for this peer"),
            )),
        }
    }

    /// The grantee asks the owner for a grant's state and usage, and keeps
    /// what it says (with the time it was verified).
    pub async fn refresh(&self, id: &str) -> FedResult<GrantRecord> {
        let (grant, peer_id) = self.grant_with_peer(id).await?;
        if grant.direction != Direction::Incoming {
            return Ok(grant);
        }
        let body = self
            .call(&peer_id, &LinkCall::RefreshGrant { id: id.to_string() })
            .await?;
        let owner: GrantRecord = serde_json::from_value(body)
            .map_err(|e| FederationError::new(502, "peer_error", format!("the grant: {e}")))?;
        self.store
            .note_grant_usage(id, owner.state, &owner.usage)
            .await?;
        self.changed();
        self.grant(id).await
    }
}
