//! Managed services: under an `inference:manage` grant, the grantee
//! creates a service on the owner from its runtime offers, with a model and
//! machines inside the grant, configures it while stopped, starts, drains,
//! stops and removes it, each time naming the revision it saw.
//!
//! Every mutation carries an operation id the caller chose (and showed)
//! before sending. The owner records `(peer, id, request digest, outcome)`:
//! an exact retry gets the recorded answer, the same id with another
//! request is refused, and an outcome left uncertain is inspected on the
//! owner, never carried out twice.

use sha2::{Digest, Sha256};
use switchyard_protocol::federation::ServiceState;
use switchyard_protocol::federation::{
    LinkAnswer, LinkCall, ManageAction, ManageCall, ManagedService, ManagedServiceSpec, Operation,
    OperationRecord, Resource,
};
use switchyard_runtime::grant::FederatedCall;
use switchyard_store::deployments::Deployment;
use switchyard_store::federation::Begun;

use crate::calls::LinkAnswerExt;
use crate::join::valid_name;
use crate::{FedResult, Federation, FederationError, receipt};

impl Federation {
    /// The grantee sends one manage call to `peer`; answers the owner's
    /// answer as it came (the recorded one for a retry).
    pub async fn manage(&self, peer: &str, call: ManageCall) -> FedResult<LinkAnswer> {
        valid_name("operation_id", &call.operation_id)?;
        let peer = self.peer(peer).await?;
        self.call_raw(&peer.id, &LinkCall::Manage(call)).await
    }

    /// The owner's receipt of operation `id`, asked over the link.
    pub async fn inspect(&self, peer: &str, id: &str) -> FedResult<OperationRecord> {
        valid_name("operation id", id)?;
        let peer = self.peer(peer).await?;
        let body = self
            .call(&peer.id, &LinkCall::InspectOperation { id: id.to_string() })
            .await?;
        serde_json::from_value(body)
            .map_err(|e| FederationError::new(502, "peer_error", format!("the receipt: {e}")))
    }

    /// The managed services a grant from `peer` made, as the owner says.
    pub async fn peer_services(&self, peer: &str, grant: &str) -> FedResult<Vec<ManagedService>> {
        let peer = self.peer(peer).await?;
        let body = self
            .call(
                &peer.id,
                &LinkCall::ListServices {
                    grant: grant.to_string(),
                },
            )
            .await?;
        serde_json::from_value(body)
            .map_err(|e| FederationError::new(502, "peer_error", format!("the services: {e}")))
    }

    /// The owner lists the managed services a grant of `peer_id` made.
    pub(crate) async fn owned_services(&self, peer_id: &str, grant: &str) -> FedResult<LinkAnswer> {
        self.owned_grant(peer_id, grant).await?;
        let services = self.store.managed_services(grant).await?;
        Ok(LinkAnswer::ok(200, services))
    }

    /// The owner answers a manage call: the receipt first, then the action
    /// (recorded with its answer).
    pub(crate) async fn manage_answer(&self, peer_id: &str, call: ManageCall) -> LinkAnswer {
        if let Err(e) = valid_name("operation_id", &call.operation_id) {
            return LinkAnswer::error(&e);
        }
        if let Err(e) = self.owned_grant(peer_id, &call.grant).await {
            return LinkAnswer::error(&e);
        }
        let digest = hex::encode(Sha256::digest(receipt::canonical_json(&call)));
        let begun = self
            .store
            .begin_operation(peer_id, &call.operation_id, &call.grant, &digest)
            .await;
        let begun = match begun {
            Ok(begun) => begun,
            Err(e) => return LinkAnswer::error(&e.into()),
        };
        match begun {
            Begun::New => {}
            Begun::Done(record) => {
                return LinkAnswer {
                    status: record.status.unwrap_or(200),
                    body: record.outcome.unwrap_or_default(),
                };
            }
            Begun::Running(_) => {
                return LinkAnswer::error(&FederationError::new(
                    409,
                    "operation_in_progress",
                    "this operation has not finished (or its outcome is uncertain); inspect it before acting again",
                ));
            }
            Begun::Conflict => {
                return LinkAnswer::error(&FederationError::new(
                    409,
                    "operation_conflict",
                    format!(
                        "operation '{}' was used for another request; choose a new operation id",
                        call.operation_id
                    ),
                ));
            }
            Begun::Full => {
                return LinkAnswer::error(&FederationError::limit(
                    switchyard_store::federation::Bounded::Operations,
                ));
            }
        }
        let answer = match self.run_manage(peer_id, &call).await {
            Ok(answer) => answer,
            Err(e) => LinkAnswer::error(&e),
        };
        if let Err(e) = self
            .store
            .finish_operation(peer_id, &call.operation_id, answer.status, &answer.body)
            .await
        {
            tracing::warn!(error = %e, "an operation's outcome was not recorded");
        }
        answer
    }

    async fn run_manage(&self, peer_id: &str, call: &ManageCall) -> FedResult<LinkAnswer> {
        let peer = self.peer(peer_id).await?;
        let (service, spec) = match &call.action {
            ManageAction::Create { spec } | ManageAction::Configure { spec, .. } => {
                (spec.service.clone(), Some(spec))
            }
            ManageAction::Start { service, .. }
            | ManageAction::Drain { service, .. }
            | ManageAction::Stop { service, .. }
            | ManageAction::Remove { service, .. } => (service.clone(), None),
        };
        valid_name("service", &service)?;
        // The current configuration decides what a lifecycle call touches.
        let current = self.store.managed_service(&service).await?;
        let judged_spec = spec.or(current.as_ref().map(|(s, _)| &s.spec));
        let judged = FederatedCall {
            peer: peer.label.clone(),
            operation: Operation::InferenceManage.as_str().into(),
            service: None,
            model: judged_spec.map(|s| s.model.clone()),
            machines: judged_spec.map(|s| s.machines.clone()).unwrap_or_default(),
            model_bytes: 0,
            tokens: 0,
        };
        let model = judged.model.clone();
        let (_, _slot) = self
            .admit_call(peer_id, &call.grant, judged)
            .await
            .map_err(|d| FederationError::new(d.status, d.code, d.message))?;
        // The `federation` chain judges every incoming federated call.
        self.ports
            .local
            .admit(
                peer.label.clone(),
                call.grant.clone(),
                service.clone(),
                model,
            )
            .await
            .map_err(|d| FederationError::new(d.status, d.code, d.message))?;
        if let Some((managed, _)) = &current
            && managed.grant != call.grant
        {
            return Err(FederationError::new(
                403,
                "service_not_granted",
                format!("service '{service}' was not made through this grant"),
            ));
        }
        match &call.action {
            ManageAction::Create { spec } => {
                self.create_service(&call.grant, spec, &peer.label).await
            }
            ManageAction::Configure { revision, spec, .. } => {
                self.configure(&service, *revision, spec, current).await
            }
            ManageAction::Start { revision, .. } => {
                let (managed, deployment_id) = current.ok_or_else(|| missing(&service))?;
                self.check_revision(&managed, *revision)?;
                self.store
                    .scale_deployment(&deployment_id, managed.spec.replicas)
                    .await?;
                self.move_service(&service, *revision, "running", None)
                    .await
            }
            ManageAction::Drain { revision, .. } => {
                let (managed, _) = current.ok_or_else(|| missing(&service))?;
                self.check_revision(&managed, *revision)?;
                self.move_service(&service, *revision, "draining", None)
                    .await
            }
            ManageAction::Stop { revision, .. } => {
                let (managed, deployment_id) = current.ok_or_else(|| missing(&service))?;
                self.check_revision(&managed, *revision)?;
                self.store.scale_deployment(&deployment_id, 0).await?;
                self.move_service(&service, *revision, "stopped", None)
                    .await
            }
            ManageAction::Remove { revision, .. } => {
                let (managed, deployment_id) = current.ok_or_else(|| missing(&service))?;
                self.check_revision(&managed, *revision)?;
                if !self
                    .store
                    .delete_managed_service(&service, *revision)
                    .await?
                {
                    return Err(revision_changed(&service));
                }
                self.store.delete_deployment(&deployment_id).await?;
                Ok(LinkAnswer::ok(
                    200,
                    serde_json::json!({"service": service, "removed": true}),
                ))
            }
        }
    }

    /// Configures a stopped managed service: its deployment takes the new
    /// spec, then the service's revision moves on.
    async fn configure(
        &self,
        service: &str,
        revision: i64,
        spec: &ManagedServiceSpec,
        current: Option<(ManagedService, String)>,
    ) -> FedResult<LinkAnswer> {
        let (managed, deployment_id) = current.ok_or_else(|| missing(service))?;
        if managed.state != ServiceState::Stopped {
            return Err(FederationError::new(
                409,
                "service_not_stopped",
                "a managed service is configured while stopped",
            ));
        }
        let deployment = self.deployment_for(&deployment_id, spec).await?;
        if !self.store.reconfigure_deployment(&deployment).await? {
            return Err(FederationError::new(
                409,
                "service_not_stopped",
                "its replicas are still wanted",
            ));
        }
        self.move_service(service, revision, "stopped", Some(spec))
            .await
    }

    /// Stops every managed service `grant` created (its `stop_on_revoke`):
    /// their deployments scale to nothing; other deployments are not
    /// touched. Expired or not, the grant's own services are its own.
    pub(crate) async fn stop_grant_services(&self, grant: &str) -> FedResult<()> {
        for managed in self.store.managed_services(grant).await? {
            let Some((current, deployment)) = self.store.managed_service(&managed.service).await?
            else {
                continue;
            };
            self.store.scale_deployment(&deployment, 0).await?;
            if current.state != ServiceState::Stopped {
                self.store
                    .update_managed_service(&current.service, current.revision, "stopped", None)
                    .await?;
            }
            tracing::info!(grant, service = %current.service, "stopped on revocation");
        }
        Ok(())
    }

    fn check_revision(&self, managed: &ManagedService, revision: i64) -> FedResult<()> {
        match managed.revision == revision {
            true => Ok(()),
            false => Err(FederationError::new(
                409,
                "revision_changed",
                format!(
                    "service '{}' is at revision {}, not {revision}; read it again",
                    managed.service, managed.revision
                ),
            )),
        }
    }

    async fn move_service(
        &self,
        service: &str,
        revision: i64,
        state: &str,
        spec: Option<&ManagedServiceSpec>,
    ) -> FedResult<LinkAnswer> {
        if self
            .store
            .update_managed_service(service, revision, state, spec)
            .await?
            .is_none()
        {
            return Err(revision_changed(service));
        }
        let (managed, _) = self
            .store
            .managed_service(service)
            .await?
            .ok_or_else(|| missing(service))?;
        Ok(LinkAnswer::ok(200, managed))
    }

    /// The deployment a managed service runs as: the model revision and the
    /// runtime offer's engine and GPUs, kept to the spec's machines, no
    /// replicas until started.
    async fn deployment_for(&self, id: &str, spec: &ManagedServiceSpec) -> FedResult<Deployment> {
        let (model, revision) = spec
            .model
            .split_once('@')
            .ok_or_else(|| FederationError::invalid("model is model@revision"))?;
        let stored = self
            .store
            .model_revision(model, revision)
            .await?
            .ok_or_else(|| {
                FederationError::invalid(format!("no model revision '{}'", spec.model))
            })?;
        let runtime = self.store.offer(&spec.runtime).await?;
        let Some(Resource::Runtime {
            engine,
            gpus_per_replica,
        }) = runtime.map(|o| o.resource)
        else {
            return Err(FederationError::invalid(format!(
                "'{}' is no runtime offer",
                spec.runtime
            )));
        };
        if spec.machines.is_empty() || spec.machines.len() > 64 {
            return Err(FederationError::invalid(
                "a managed service names 1 to 64 machines",
            ));
        }
        if !(1..=16).contains(&spec.replicas) {
            return Err(FederationError::invalid("replicas must be 1 to 16"));
        }
        let gpus = gpus_per_replica.max(0);
        Ok(Deployment {
            id: id.to_string(),
            model_id: model.to_string(),
            revision: revision.to_string(),
            engine,
            served_model_name: format!("federation.{}", spec.service),
            replicas: 0,
            gpus_per_replica: gpus,
            gpu_memory_bytes: match gpus {
                0 => 0,
                n => stored.size() / i64::from(n) * 6 / 5,
            },
            max_concurrency: 8,
            token_delay_ms: 0,
            strategy: "spread".into(),
            node_selector: Default::default(),
            pending_reason: None,
            nodes: spec.machines.clone(),
        })
    }

    async fn create_service(
        &self,
        grant: &str,
        spec: &ManagedServiceSpec,
        peer: &str,
    ) -> FedResult<LinkAnswer> {
        if self.store.managed_service(&spec.service).await?.is_some()
            || self.store.offer(&spec.service).await?.is_some()
        {
            return Err(FederationError::new(
                409,
                "service_exists",
                format!("a service '{}' exists on this cluster", spec.service),
            ));
        }
        let deployment = self
            .deployment_for(&switchyard_store::keys::random_id("dep"), spec)
            .await?;
        if !self
            .store
            .insert_deployment(&deployment, &format!("federation:{peer}"))
            .await?
        {
            return Err(FederationError::new(
                409,
                "service_exists",
                format!(
                    "a deployment serves '{}' already",
                    deployment.served_model_name
                ),
            ));
        }
        if !self
            .store
            .insert_managed_service(grant, &deployment.id, spec)
            .await?
        {
            self.store.delete_deployment(&deployment.id).await?;
            return Err(FederationError::new(
                409,
                "service_exists",
                "the service id is taken",
            ));
        }
        let (managed, _) = self
            .store
            .managed_service(&spec.service)
            .await?
            .ok_or_else(|| missing(&spec.service))?;
        Ok(LinkAnswer::ok(201, managed))
    }
}

fn missing(service: &str) -> FederationError {
    FederationError::new(
        404,
        "service_not_found",
        format!("no managed service '{service}'"),
    )
}

fn revision_changed(service: &str) -> FederationError {
    FederationError::new(
        409,
        "revision_changed",
        format!("service '{service}' changed meanwhile; read it again"),
    )
}
