//! The calls clusters make to each other over a link (pairing, grants,
//! managed services, operation receipts): one [`LinkCall`] as JSON on a
//! fresh stream, one [`LinkAnswer`] back. The answering side knows the
//! caller only as the peer whose key opened the link.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::Stream;
use switchyard_carrier::stream_seam::Lane;
use switchyard_protocol::federation::{CALL_SERVICE, LinkAnswer, LinkCall};

use crate::{FedResult, Federation, FederationError};

/// The largest call or answer.
const MAX_CALL: usize = 1024 * 1024;
/// How long a call may take before the caller gives up on it (its outcome
/// is then uncertain: an operation is inspected, never repeated).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl LinkAnswerExt for LinkAnswer {
    fn ok(status: u16, body: impl serde::Serialize) -> Self {
        LinkAnswer {
            status,
            body: serde_json::to_value(body).unwrap_or(serde_json::Value::Null),
        }
    }

    fn error(e: &FederationError) -> Self {
        LinkAnswer {
            status: e.status,
            body: serde_json::json!({"error": {"code": e.code, "message": e.message}}),
        }
    }
}

/// Building answers.
pub(crate) trait LinkAnswerExt {
    /// A successful answer.
    fn ok(status: u16, body: impl serde::Serialize) -> Self;
    /// An error answer.
    fn error(e: &FederationError) -> Self;
}

/// The error an answer carries, as this side reports it.
fn answer_error(answer: &LinkAnswer) -> FederationError {
    let error = &answer.body["error"];
    FederationError::new(
        answer.status,
        error["code"].as_str().unwrap_or("peer_error"),
        format!(
            "the peer answered: {}",
            error["message"].as_str().unwrap_or("no message")
        ),
    )
}

impl Federation {
    /// Makes `call` to `peer_id` and answers the peer's body, or the
    /// peer's error as this side's.
    pub(crate) async fn call(
        &self,
        peer_id: &str,
        call: &LinkCall,
    ) -> FedResult<serde_json::Value> {
        let answer = self.call_raw(peer_id, call).await?;
        match answer.status {
            200..=299 => Ok(answer.body),
            _ => Err(answer_error(&answer)),
        }
    }

    /// [`Federation::call`] with the answer as it came.
    pub(crate) async fn call_raw(&self, peer_id: &str, call: &LinkCall) -> FedResult<LinkAnswer> {
        self.cluster.key()?;
        let request = serde_json::to_vec(call).map_err(FederationError::internal)?;
        let exchange = async {
            let mut reader = self
                .open_call(peer_id, Lane::Inference, CALL_SERVICE, Bytes::from(request))
                .await?;
            let body = reader.read_to_end(MAX_CALL).await.map_err(|e| {
                FederationError::unavailable(format!(
                    "the link broke before the peer answered; the outcome is uncertain: {e}"
                ))
            })?;
            serde_json::from_slice::<LinkAnswer>(&body).map_err(|e| {
                FederationError::new(502, "peer_error", format!("the peer's answer: {e}"))
            })
        };
        tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                FederationError::unavailable(
                    "the peer did not answer in time; the outcome is uncertain",
                )
            })?
    }
}

/// Answers one call a peer opened a stream for.
pub(crate) async fn answer(federation: Arc<Federation>, peer_id: String, stream: Stream) {
    let Stream { mut reader, writer } = stream;
    let answer = match reader.read_to_end(MAX_CALL).await {
        Ok(body) => match serde_json::from_slice::<LinkCall>(&body) {
            Ok(call) => dispatch(&federation, &peer_id, call).await,
            Err(e) => LinkAnswer::error(&FederationError::invalid(format!("the call: {e}"))),
        },
        Err(_) => return,
    };
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    let mut writer = writer;
    if writer.write(Bytes::from(body)).await.is_ok() {
        writer.finish();
    }
}

async fn dispatch(federation: &Arc<Federation>, peer_id: &str, call: LinkCall) -> LinkAnswer {
    let answered = match call {
        LinkCall::RequestAccess {
            id,
            operations,
            note,
        } => {
            federation
                .receive_request(peer_id, &id, &operations, &note)
                .await
        }
        LinkCall::OfferGrant {
            terms,
            owner_signature,
        } => federation
            .receive_offer(peer_id, terms, owner_signature)
            .await
            .map(|()| LinkAnswer::ok(201, serde_json::json!({}))),
        LinkCall::CompleteGrant {
            id,
            grantee_signature,
        } => federation
            .receive_completion(peer_id, &id, &grantee_signature)
            .await
            .map(|()| LinkAnswer::ok(200, serde_json::json!({}))),
        LinkCall::RevokeGrant { id } => federation
            .receive_revocation(peer_id, &id)
            .await
            .map(|()| LinkAnswer::ok(200, serde_json::json!({}))),
        LinkCall::RefreshGrant { id } => federation
            .owned_grant(peer_id, &id)
            .await
            .map(|grant| LinkAnswer::ok(200, grant)),
        LinkCall::Manage(call) => Ok(federation.manage_answer(peer_id, call).await),
        LinkCall::ListServices { grant } => federation.owned_services(peer_id, &grant).await,
        LinkCall::InspectModel {
            grant,
            model,
            revision,
        } => federation
            .granted_manifest(peer_id, &grant, &model, &revision)
            .await
            .map(|manifest| LinkAnswer::ok(200, manifest)),
        LinkCall::InspectOperation { id } => match federation.store.operation(peer_id, &id).await {
            Ok(Some(record)) => Ok(LinkAnswer::ok(200, record)),
            Ok(None) => Err(FederationError::new(
                404,
                "operation_not_found",
                format!("no operation '{id}' from this peer"),
            )),
            Err(e) => Err(e.into()),
        },
    };
    answered.unwrap_or_else(|e| LinkAnswer::error(&e))
}
