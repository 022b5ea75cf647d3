//! Remote inference. On the grantee, a `/v1` request naming
//! `<peer label>/<service>` crosses the link on the inference lane as an
//! [`InferenceCall`] line and the body; the caller's key stays here. On the
//! owner, the call is judged (the grant's evaluator, the counters charged
//! in one statement, then the server's `federation` and `inference`
//! chains) and answered by the service's deployment, the answer streaming
//! back as a worker's does (an [`AnswerHead`] line, then the body). The
//! concurrency slot the call holds is released when the answer ends,
//! however it ends.

use std::sync::Arc;
use switchyard_protocol::federation::{GrantStanding, ServiceState};

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{Stream, StreamReader, StreamWriter};
use switchyard_protocol::federation::{
    Direction, GrantRecord, INFERENCE_SERVICE, InferenceCall, Operation, RemoteService, Resource,
};
use switchyard_protocol::stream::AnswerHead;
use switchyard_runtime::grant::{FederatedCall, Grant, Usage};
use switchyard_store::Store;
use switchyard_store::federation::Cost;

use crate::incoming::{Unread, read_call};
use crate::inflight::Revocation;
use crate::links::LinkPeer;
use crate::{Denied, FedResult, Federation, FederationError, LocalCall};

/// The largest request body a remote call carries (as `/v1` takes).
const MAX_BODY: usize = 2 * 1024 * 1024;

/// Where a remote model's calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTarget {
    /// The peer's id.
    pub peer_id: String,
    /// `<peer label>/<service>`.
    pub model: String,
    /// The grant the call claims.
    pub grant: String,
    /// The service id on the peer.
    pub service: String,
}

/// The grant a call to `service` claims (see [`Federation::resolve`]);
/// `Err(Some(id))` when only revoked grants name the service, `Err(None)`
/// when there is none to claim.
fn pick_grant<'g>(
    grants: &[&'g GrantRecord],
    service: &str,
) -> Result<&'g GrantRecord, Option<String>> {
    let names = |g: &&GrantRecord| g.terms.services.iter().any(|s| s == service);
    let all = || grants.iter().copied();
    if let Some(grant) = all().find(|g| usable(g, service)) {
        return Ok(grant);
    }
    if let Some(grant) = all()
        .filter(names)
        .find(|g| g.status != GrantStanding::Revoked)
    {
        return Ok(grant);
    }
    if let Some(revoked) = all().find(names) {
        return Err(Some(revoked.id.clone()));
    }
    all()
        .find(|g| {
            g.status == GrantStanding::Active
                && g.terms.operations.contains(&Operation::InferenceManage)
        })
        .or_else(|| all().find(|g| g.status != GrantStanding::Revoked))
        .ok_or(None)
}

/// Whether an incoming grant lets this cluster call `service` now (as far
/// as this side knows; the owner decides).
fn usable(grant: &GrantRecord, service: &str) -> bool {
    grant.direction == Direction::Incoming
        && grant.status == GrantStanding::Active
        && grant.terms.operations.contains(&Operation::Inference)
        && grant.terms.services.iter().any(|s| s == service)
}

impl Federation {
    /// The remote services this cluster's grants allow calling, as `/v1`
    /// names them.
    pub async fn remote_services(&self) -> FedResult<Vec<RemoteService>> {
        let seen = self.seen().await?;
        let mut services: Vec<RemoteService> = seen
            .grants
            .iter()
            .filter(|g| {
                g.direction == Direction::Incoming
                    && g.status == GrantStanding::Active
                    && g.terms.operations.contains(&Operation::Inference)
            })
            .flat_map(|g| {
                g.terms.services.iter().map(|service| RemoteService {
                    model: format!("{}/{service}", g.peer),
                    peer: g.peer.clone(),
                    service: service.clone(),
                    grant: g.id.clone(),
                })
            })
            .collect();
        services.sort_by(|a, b| a.model.cmp(&b.model));
        services.dedup_by(|a, b| a.model == b.model);
        Ok(services)
    }

    /// The target of a `/v1` model name `<peer label>/<service>`: `None`
    /// when it names no peer (a local model, or none). The grant is the one
    /// that names the service: an active one first, else one the owner
    /// will say is expired or inactive; when every grant naming it is
    /// revoked the call is refused here with `grant_revoked` (another
    /// grant from the same owner would only hide the revocation behind
    /// `service_not_granted`). A service no grant names goes with a
    /// managed service's grant, else the newest grant from that peer: the
    /// owner judges and says why a call is outside.
    pub async fn resolve(&self, model: &str) -> FedResult<Option<RemoteTarget>> {
        let Some((label, service)) = model.split_once('/') else {
            return Ok(None);
        };
        let seen = self.seen().await?;
        let Some(peer) = seen.peers.iter().find(|p| p.label == label) else {
            return Ok(None);
        };
        self.cluster.key()?;
        let grants: Vec<&GrantRecord> = seen
            .grants
            .iter()
            .filter(|g| g.direction == Direction::Incoming && g.peer == peer.label)
            .collect();
        let grant = pick_grant(&grants, service).map_err(|revoked| match revoked {
            Some(revoked) => FederationError::new(
                403,
                "grant_revoked",
                format!("grant {revoked} from peer '{label}' was revoked"),
            ),
            None => FederationError::new(
                403,
                "no_grant",
                format!("peer '{label}' has granted this cluster nothing to call"),
            ),
        })?;
        Ok(Some(RemoteTarget {
            peer_id: peer.id.clone(),
            model: model.to_string(),
            grant: grant.id.clone(),
            service: service.to_string(),
        }))
    }

    /// Sends a remote inference call; answers the stream the owner's
    /// answer comes on (an [`AnswerHead`] line, then the body).
    pub async fn send_inference(
        &self,
        target: &RemoteTarget,
        path: &str,
        tokens: u64,
        body: &[u8],
        traceparent: Option<&str>,
    ) -> FedResult<StreamReader> {
        let head = InferenceCall {
            grant: target.grant.clone(),
            service: target.service.clone(),
            path: path.to_string(),
            tokens,
            hops: vec![self.cluster.identity().cluster_id],
            traceparent: traceparent.map(str::to_string),
        };
        let mut message = BytesMut::with_capacity(256 + body.len()).writer();
        serde_json::to_writer(&mut message, &head).map_err(FederationError::internal)?;
        let mut message = message.into_inner();
        message.put_u8(b'\n');
        message.extend_from_slice(body);
        self.open_call(
            &target.peer_id,
            Lane::Inference,
            INFERENCE_SERVICE,
            message.freeze(),
        )
        .await
    }
}

/// The status of a call outside its grant: 429 while every concurrent
/// slot is taken (trying again later helps), else 403.
fn refusal_status(code: &str) -> u16 {
    match code {
        "concurrency_exhausted" => 429,
        _ => 403,
    }
}

/// A concurrency slot held until dropped, however the call ends.
pub(crate) struct Slot {
    store: Store,
    grant: String,
    instance: String,
    held: u32,
    /// What the call was charged, for a refund when the owner's own
    /// chains refuse it after the counters admitted it.
    cost: Cost,
}

impl Slot {
    /// Gives back the call's requests and tokens: the owner refused it,
    /// and a refused call is not charged against `max_requests`.
    pub(crate) async fn refund(&self) {
        if let Err(e) = self.store.refund_grant(&self.grant, self.cost).await {
            tracing::warn!(grant = %self.grant, error = %e, "a refused call's charge was not refunded");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held == 0 {
            return;
        }
        let (store, grant, instance, held) = (
            self.store.clone(),
            std::mem::take(&mut self.grant),
            std::mem::take(&mut self.instance),
            self.held,
        );
        tokio::spawn(async move {
            if let Err(e) = store.release_grant(&grant, held, &instance).await {
                tracing::warn!(grant, error = %e, "a concurrency slot was not released");
            }
        });
    }
}

/// The evaluator's view of a stored grant.
pub(crate) fn wit_grant(grant: &GrantRecord) -> (Grant, Usage) {
    let terms = &grant.terms;
    (
        Grant {
            id: terms.id.clone(),
            peer: grant.peer.clone(),
            operations: terms
                .operations
                .iter()
                .map(|o| o.as_str().to_string())
                .collect(),
            services: terms.services.clone(),
            models: terms.models.clone(),
            machines: terms.machines.clone(),
            expires_at_unix_ms: terms.expires_at_unix_ms,
            max_concurrent: terms.max_concurrent,
            max_requests: terms.max_requests,
            max_model_bytes: terms.max_model_bytes,
        },
        Usage {
            concurrent: grant.usage.in_flight,
            requests: grant.usage.requests,
            model_bytes: grant.usage.model_bytes,
        },
    )
}

impl Federation {
    /// Judges `call` against the owner's grant and charges it: the
    /// evaluator, then the counters. Answers the slot to hold.
    pub(crate) async fn admit_call(
        &self,
        peer_id: &str,
        grant_id: &str,
        call: FederatedCall,
    ) -> Result<(GrantRecord, Slot), Denied> {
        let admitted = self.judge_and_charge(peer_id, grant_id, call).await;
        let outcome = match &admitted {
            Ok(_) => "admitted",
            Err(denied) => denied.code.as_str(),
        };
        self.calls.count(grant_id, outcome);
        admitted
    }

    async fn judge_and_charge(
        &self,
        peer_id: &str,
        grant_id: &str,
        call: FederatedCall,
    ) -> Result<(GrantRecord, Slot), Denied> {
        let denied = |e: FederationError| Denied {
            status: e.status,
            code: e.code,
            message: e.message,
        };
        let grant = self
            .recent_owned_grant(peer_id, grant_id)
            .await
            .map_err(denied)?;
        let (wit, usage) = wit_grant(&grant);
        let charge = self
            .ports
            .judge
            .judge(call, wit, usage)
            .await
            .map_err(|denied| Denied {
                status: refusal_status(&denied.code),
                ..denied
            })?;
        let cost = Cost {
            requests: charge.requests,
            concurrent: charge.concurrent,
            model_bytes: charge.model_bytes,
            tokens: charge.tokens,
        };
        let charged = self
            .store
            .charge_grant(grant_id, peer_id, cost, &self.config.instance_id)
            .await
            .map_err(|e| denied(e.into()))?;
        match charged {
            Ok(_) => Ok((
                grant,
                Slot {
                    store: self.store.clone(),
                    grant: grant_id.to_string(),
                    instance: self.config.instance_id.clone(),
                    held: charge.concurrent,
                    cost,
                },
            )),
            Err(refused) => Err(Denied {
                status: refusal_status(refused.code()),
                code: refused.code().to_string(),
                message: format!("the call is outside grant {grant_id}: {}", refused.code()),
            }),
        }
    }

    /// A grant this cluster owns for `peer_id`, as read in the last second:
    /// what the evaluator judges by. Its state and counters decide in the
    /// charge that follows, read there, so a revocation still refuses the
    /// next call at once.
    async fn recent_owned_grant(&self, peer_id: &str, id: &str) -> FedResult<GrantRecord> {
        let seen = self.seen().await?;
        let label = seen
            .peers
            .iter()
            .find(|p| p.id == peer_id)
            .map(|p| &p.label);
        match seen.grants.iter().find(|g| g.id == id) {
            Some(grant) if Some(&grant.peer) == label && grant.direction == Direction::Outgoing => {
                Ok(grant.clone())
            }
            // Made since it was read, or not this peer's: ask the database.
            _ => self.owned_grant(peer_id, id).await,
        }
    }

    /// The model a service id names on this cluster: a service offer's
    /// deployment, or (`true`) a managed service the grant made.
    pub(crate) async fn service_model(
        &self,
        grant: &str,
        service: &str,
    ) -> Result<(String, bool), Denied> {
        let missing = || Denied {
            status: 404,
            code: "service_not_found".into(),
            message: format!("no service '{service}' on this cluster"),
        };
        let internal = |e: switchyard_store::StoreError| {
            let e = FederationError::from(e);
            Denied {
                status: e.status,
                code: e.code,
                message: e.message,
            }
        };
        if let Some(model) = self.served.get(&service.to_string()) {
            return Ok((model, false));
        }
        let (deployment, managed) = match self.store.offer(service).await.map_err(internal)? {
            Some(offer) => match offer.resource {
                Resource::Service { deployment } => (deployment, false),
                _ => return Err(missing()),
            },
            None => match self
                .store
                .managed_service(service)
                .await
                .map_err(internal)?
            {
                Some((managed, deployment)) if managed.grant == grant => {
                    if managed.state != ServiceState::Running {
                        return Err(Denied {
                            status: 503,
                            code: format!("service_{}", managed.state),
                            message: format!("service '{service}' is {}", managed.state),
                        });
                    }
                    (deployment, true)
                }
                _ => return Err(missing()),
            },
        };
        let deployment = self
            .store
            .deployment(&deployment)
            .await
            .map_err(internal)?
            .ok_or_else(missing)?;
        if !managed {
            // A managed service's state decides each call; an offer's
            // deployment does not change under it.
            self.served
                .put(service.to_string(), deployment.served_model_name.clone());
        }
        Ok((deployment.served_model_name, managed))
    }
}

/// Writes a whole answer: a head and a JSON body.
async fn write_answer(mut writer: StreamWriter, status: u16, body: serde_json::Value) {
    let head = AnswerHead {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
    };
    let mut message = serde_json::to_vec(&head).unwrap_or_default();
    message.push(b'\n');
    message.extend_from_slice(&serde_json::to_vec(&body).unwrap_or_default());
    if writer.write(Bytes::from(message)).await.is_ok() {
        writer.finish();
    }
}

pub(crate) async fn write_denied(writer: StreamWriter, denied: Denied) {
    let body = serde_json::json!({"error": {"code": denied.code, "message": denied.message}});
    write_answer(writer, denied.status, body).await;
}

/// The owner answers one remote inference call from `peer`.
pub(crate) async fn answer(federation: Arc<Federation>, peer: LinkPeer, stream: Stream) {
    let Stream { mut reader, writer } = stream;
    let (call, body) = match read_call::<InferenceCall>(&mut reader, MAX_BODY, "remote call").await
    {
        Ok(call) => call,
        Err(Unread::Refused(denied)) => return write_denied(writer, denied).await,
        Err(Unread::Broken) => return,
    };
    // Entered before it is judged: a revocation from here on ends it.
    let mut revocation = federation.inflight.enter(&call.grant);
    let grant = call.grant.clone();
    let served = tokio::select! {
        served = serve(&federation, &peer, call, body) => served,
        () = revocation.revoked() => Err(revoked(&grant)),
    };
    match served {
        Ok((answer, slot)) => stream_answer(writer, answer, slot, revocation, &grant).await,
        Err(denied) => {
            tracing::info!(code = %denied.code, "a remote call was refused");
            write_denied(writer, denied).await
        }
    }
}

/// The refusal of a call whose grant was revoked while it ran.
pub(crate) fn revoked(grant: &str) -> Denied {
    Denied {
        status: 403,
        code: "grant_revoked".into(),
        message: format!("grant {grant} was revoked; the call was ended"),
    }
}

/// The last event of a streamed answer its grant's revocation ended, in
/// the shape of an OpenAI stream error.
pub fn revoked_event(grant: &str) -> Bytes {
    let denied = revoked(grant);
    let body = serde_json::json!({"error": {
        "message": denied.message,
        "type": "permission_error",
        "code": denied.code,
    }});
    Bytes::from(format!("data: {body}\n\n"))
}

async fn serve(
    federation: &Federation,
    peer: &LinkPeer,
    call: InferenceCall,
    body: Bytes,
) -> Result<(crate::LocalAnswer, Slot), Denied> {
    // A call names this cluster's own service: one crossing, never forwarded.
    if call.hops.len() > 1 {
        return Err(Denied {
            status: 508,
            code: "loop_detected".into(),
            message: "the call crossed more than one link".into(),
        });
    }
    let (model, managed) = federation.service_model(&call.grant, &call.service).await?;
    let judged = FederatedCall {
        peer: peer.label.clone(),
        operation: Operation::Inference.as_str().into(),
        // A managed service belongs to the grant that made it: the grant
        // need not list it.
        service: (!managed).then(|| call.service.clone()),
        model: None,
        machines: Vec::new(),
        model_bytes: 0,
        tokens: call.tokens,
    };
    let (grant, slot) = federation.admit_call(&peer.id, &call.grant, judged).await?;
    let answer = federation
        .ports
        .local
        .serve(LocalCall {
            peer: peer.label.clone(),
            grant: grant.id,
            service: call.service,
            model,
            path: call.path,
            body,
            traceparent: call.traceparent,
        })
        .await?;
    if !answer.admitted {
        // The owner's own chains refused it: only admitted calls count.
        slot.refund().await;
    }
    Ok((answer, slot))
}

/// Streams a local answer back over the link; the slot is released when
/// the body ends, fails, the peer goes away or the grant is revoked (a
/// streamed answer then ends with an error event, any other is cut).
async fn stream_answer(
    mut writer: StreamWriter,
    answer: crate::LocalAnswer,
    slot: Slot,
    mut revocation: Revocation,
    grant: &str,
) {
    let answer = answer.answer;
    let events = answer
        .header("content-type")
        .is_some_and(|value| value.starts_with("text/event-stream"));
    let mut line = serde_json::to_vec(&answer.head()).unwrap_or_default();
    line.push(b'\n');
    if writer.write(Bytes::from(line)).await.is_err() {
        return;
    }
    let mut body = answer.body.into_stream();
    loop {
        let chunk = tokio::select! {
            chunk = body.next() => chunk,
            () = revocation.revoked() => {
                // Dropping the body cancels the engine's work.
                drop(body);
                drop(slot);
                if events && writer.write(revoked_event(grant)).await.is_ok() {
                    writer.finish();
                } else {
                    writer.reset();
                }
                return;
            }
        };
        let Some(chunk) = chunk else { break };
        match chunk {
            Ok(chunk) => {
                if writer.write(chunk).await.is_err() {
                    // The grantee went away: dropping the body cancels the engine's work.
                    writer.reset();
                    drop(slot);
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "a remote call's answer broke");
                writer.reset();
                drop(slot);
                return;
            }
        }
    }
    writer.finish();
    drop(slot);
}
