//! The owner's side of a copy: the manifest of a granted revision (a link
//! call) and one range of one of its files per bulk-lane stream. Every
//! range is judged by the grant evaluator and charged to the grant's model
//! bytes (a repeated range is charged again, by design), checked against
//! the revision's manifest (`content_changed` otherwise), and cut off when
//! the grant is revoked.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::{Stream, StreamWriter};
use switchyard_protocol::copies::{MAX_RANGE, ModelManifest, RangeHead, RangeRequest};
use switchyard_protocol::federation::{GrantRecord, Operation, Resource};
use switchyard_protocol::limits::MAX_HEAD;
use switchyard_runtime::grant::FederatedCall;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::links::LinkPeer;
use crate::{Denied, FedResult, Federation, FederationError};

/// How much of a blob is read and sent at once.
const CHUNK: usize = 256 * 1024;
/// How long the grantee may take to send a range's head line.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The code a grant that is not usable now is refused with.
fn unusable(grant: &GrantRecord) -> Option<FederationError> {
    let code = match grant.status.as_str() {
        "active" => return None,
        "revoked" => "grant_revoked",
        "expired" => "grant_expired",
        _ => "grant_inactive",
    };
    Some(FederationError::new(
        403,
        code,
        format!("grant {} is {}", grant.id, grant.status),
    ))
}

impl Federation {
    /// The manifest of `model@revision` for `peer_id` under `grant`:
    /// refused unless the grant is active, allows `models:transfer` and
    /// lists the revision, and an offer publishes it.
    pub(crate) async fn granted_manifest(
        &self,
        peer_id: &str,
        grant: &str,
        model: &str,
        revision: &str,
    ) -> FedResult<ModelManifest> {
        let record = self.owned_grant(peer_id, grant).await?;
        if let Some(refused) = unusable(&record) {
            return Err(refused);
        }
        if !record.terms.operations.contains(&Operation::ModelsTransfer) {
            return Err(FederationError::new(
                403,
                "operation_not_granted",
                format!("grant {grant} does not allow models:transfer"),
            ));
        }
        let named = format!("{model}@{revision}");
        if !record.terms.models.contains(&named) {
            return Err(FederationError::new(
                403,
                "model_not_granted",
                format!("grant {grant} does not list {named}"),
            ));
        }
        let offered = self.store.offers().await?.into_iter().any(|offer| {
            matches!(&offer.resource, Resource::Model { model: m, revision: r }
                if m == model && r == revision)
        });
        let not_offered = || {
            FederationError::new(
                404,
                "model_not_offered",
                format!("{named} is not offered by this cluster"),
            )
        };
        if !offered {
            return Err(not_offered());
        }
        let stored = self
            .store
            .model_revision(model, revision)
            .await?
            .ok_or_else(not_offered)?;
        Ok(ModelManifest {
            id: stored.id,
            revision: stored.revision,
            licence: stored.licence,
            files: stored.files,
        })
    }
}

/// Answers one range stream a peer opened on the bulk lane.
pub(crate) async fn answer_range(federation: Arc<Federation>, peer: LinkPeer, stream: Stream) {
    let Stream { mut reader, writer } = stream;
    let head = match tokio::time::timeout(HEAD_TIMEOUT, reader.read_line(MAX_HEAD)).await {
        Ok(Ok((head, _))) => head,
        _ => return,
    };
    let request: RangeRequest = match serde_json::from_slice(&head) {
        Ok(request) => request,
        Err(e) => {
            let refused = FederationError::invalid(format!("the range's head: {e}"));
            return refuse(writer, &refused).await;
        }
    };
    // Entered before it is judged: a revocation from now on cuts it off.
    let mut revocation = federation.inflight().enter(&request.grant);
    let path = match admit_range(&federation, &peer, &request).await {
        Ok(path) => path,
        Err(refused) => {
            tracing::info!(peer = %peer.label, code = %refused.code, "a model range was refused");
            return refuse(writer, &refused).await;
        }
    };
    tokio::select! {
        _ = revocation.revoked() => {
            tracing::info!(peer = %peer.label, grant = %request.grant, "a model range was cut off: the grant was revoked");
        }
        sent = send_range(writer, &path, request.offset, request.length) => {
            if let Err(e) = sent {
                tracing::debug!(peer = %peer.label, error = %e, "a model range broke");
            }
        }
    }
}

/// Checks a range against the grant and the manifest and charges it;
/// answers the blob to read it from.
async fn admit_range(
    federation: &Federation,
    peer: &LinkPeer,
    request: &RangeRequest,
) -> FedResult<std::path::PathBuf> {
    if request.length == 0 || request.length > MAX_RANGE {
        return Err(FederationError::invalid(format!(
            "a range is 1 to {MAX_RANGE} bytes, not {}",
            request.length
        )));
    }
    let manifest = federation
        .granted_manifest(&peer.id, &request.grant, &request.model, &request.revision)
        .await?;
    let changed = || {
        FederationError::new(
            409,
            "content_changed",
            format!(
                "{} of {}@{} is not the file the copy started with",
                request.path, request.model, request.revision
            ),
        )
    };
    let file = manifest
        .files
        .iter()
        .find(|f| f.path == request.path)
        .ok_or_else(changed)?;
    if file.sha256 != request.sha256 || file.size.max(0) as u64 != request.size {
        return Err(changed());
    }
    if request.offset.saturating_add(request.length) > request.size {
        return Err(FederationError::invalid(format!(
            "the range {}+{} passes the end of {} ({} bytes)",
            request.offset, request.length, request.path, request.size
        )));
    }
    let judged = FederatedCall {
        peer: peer.label.clone(),
        operation: Operation::ModelsTransfer.as_str().into(),
        service: None,
        model: Some(format!("{}@{}", request.model, request.revision)),
        machines: Vec::new(),
        model_bytes: request.length,
        tokens: 0,
    };
    // The slot holds no concurrency (a range charges bytes only).
    let (_, _slot) = federation
        .admit_call(&peer.id, &request.grant, judged)
        .await
        .map_err(
            |Denied {
                 status,
                 code,
                 message,
             }| FederationError::new(status, code, message),
        )?;
    federation
        .ports.blobs
        .blob_for_range(request.sha256.clone(), request.size)
        .await
        .map_err(|e| {
            tracing::warn!(sha256 = %request.sha256, error = %e, "a granted blob could not be read");
            FederationError::new(503, "blob_unavailable", "the file cannot be read on this cluster now")
        })
}

async fn refuse(mut writer: StreamWriter, refused: &FederationError) {
    let head = RangeHead {
        status: refused.status,
        code: Some(refused.code.clone()),
        message: Some(refused.message.clone()),
    };
    let mut line = serde_json::to_vec(&head).unwrap_or_default();
    line.push(b'\n');
    if writer.write(Bytes::from(line)).await.is_ok() {
        writer.finish();
    }
}

/// Sends the head and exactly `length` bytes from `offset`; a read fault
/// resets the stream (the grantee counts it as a broken range).
async fn send_range(
    mut writer: StreamWriter,
    path: &std::path::Path,
    offset: u64,
    length: u64,
) -> std::io::Result<()> {
    let mut file = match tokio::fs::File::open(path).await {
        Ok(file) => file,
        Err(e) => {
            writer.reset();
            return Err(e);
        }
    };
    let mut head = serde_json::to_vec(&RangeHead {
        status: 200,
        code: None,
        message: None,
    })
    .unwrap_or_default();
    head.push(b'\n');
    let broken = |e: switchyard_carrier::StreamError| std::io::Error::other(e.to_string());
    writer.write(Bytes::from(head)).await.map_err(broken)?;
    if let Err(e) = file.seek(std::io::SeekFrom::Start(offset)).await {
        writer.reset();
        return Err(e);
    }
    let mut left = length;
    while left > 0 {
        let mut buffer = vec![0u8; CHUNK.min(left as usize)];
        let read = match file.read(&mut buffer).await {
            Ok(0) => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the blob is shorter than its manifest says",
            )),
            Ok(n) => Ok(n),
            Err(e) => Err(e),
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                writer.reset();
                return Err(e);
            }
        };
        buffer.truncate(n);
        left -= n as u64;
        writer.write(Bytes::from(buffer)).await.map_err(broken)?;
    }
    writer.finish();
    Ok(())
}
