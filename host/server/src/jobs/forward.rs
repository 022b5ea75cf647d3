//! This side of a job another cluster owns: choosing the owner at
//! creation, forwarding every request for the job to it, and answering
//! from the projection (the summary the owner last answered, marked
//! stale) while the owner cannot be asked.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use bytes::Bytes;
use switchyard_federation::{Federation, FederationError};
use switchyard_protocol::answer::{Answer, ReadError};
use switchyard_protocol::batch::{Batch, BatchList, CreateBatch, FileObject};
use switchyard_protocol::federation::{LinkState, Peer};
use switchyard_protocol::jobs::{JobAction, OWNER_KEY, PROJECTION_SUMMARY};
use switchyard_store::batches::Visible;
use switchyard_store::federation::Projection;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::error::{FedError, FedResult, federation};
use crate::state::AppState;
use switchyard_batches::{self as batches, BatchesError, Content, access};

/// The largest JSON answer read from an owner.
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Where a new job goes.
enum Owner {
    /// This cluster.
    Here,
    /// A peer, under the grant its service is called by.
    Peer { peer: Box<Peer>, grant: String },
}

/// Creates a job on its one owner: this cluster, or the peer its metadata
/// names, or the first cluster serving its lines' model that takes it.
pub async fn create_batch(
    state: &AppState,
    request: CreateBatch,
    caller: &Caller,
) -> FedResult<Batch> {
    let Some(federation) = &state.federation else {
        return Ok(batches::create_batch(&state.batches, request, caller, None).await?);
    };
    batches::check(&request)?;
    let visible = access::visible(caller);
    // Only an upload the caller may see (another key's is not found).
    let input = batches::upload_bytes(&state.batches, visible, &request.input_file_id).await?;
    let candidates = choose_owners(state, federation, &request, &input).await?;
    let last = candidates.len() - 1;
    for (n, owner) in candidates.into_iter().enumerate() {
        let (peer, grant) = match owner {
            Owner::Here => {
                return Ok(batches::create_batch(&state.batches, request, caller, None).await?);
            }
            Owner::Peer { peer, grant } => (peer, grant),
        };
        let made = create_on(
            state,
            federation,
            &peer,
            grant,
            request.clone(),
            &input,
            caller,
        );
        match made.await {
            Ok(batch) => {
                tracing::info!(batch = %batch.id, owner = %peer.label, key = %caller.key_id, "job created on its owner");
                return Ok(batch);
            }
            // The selector's choice could not take it: the next one may.
            Err(FedError::Fed(e))
                if n < last && (e.status == 503 || e.code == "owner_not_eligible") =>
            {
                tracing::info!(owner = %peer.label, code = %e.code, "a candidate owner did not take the job");
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the last candidate answers")
}

/// Creates the job on `peer`, its lines naming the peer's service ids;
/// keeps the projection, owned by `caller`'s key.
async fn create_on(
    state: &AppState,
    federation: &Federation,
    peer: &Peer,
    grant: String,
    request: CreateBatch,
    input: &[u8],
    caller: &Caller,
) -> FedResult<Batch> {
    let filename = batches::file(
        &state.batches,
        access::visible(caller),
        &request.input_file_id,
    )
    .await
    .map(|f| f.filename)
    .unwrap_or_else(|_| "input.jsonl".into());
    let input = as_services(input, &peer.label)?;
    let action = JobAction::Create {
        grant,
        request,
        filename,
    };
    let answer = federation.job_call(&peer.id, action, input).await?;
    let batch: Batch = read_json(answer).await?;
    let owner = Some(access::owner(caller));
    synced(state, &peer.id, &peer.label, batch, owner).await
}

/// The owner, or the candidates in the order they are tried:
/// `metadata.owner` when given (this cluster's label or a peer's); else
/// this cluster when it serves the first line's model, else the peers
/// serving it (`<peer>/<service>`, or a service of that name), skipping
/// one that cannot take it.
async fn choose_owners(
    state: &AppState,
    federation: &Federation,
    request: &CreateBatch,
    input: &[u8],
) -> FedResult<Vec<Owner>> {
    let model = first_model(input).unwrap_or_default();
    let named = request
        .metadata
        .as_ref()
        .and_then(|m| m.get(OWNER_KEY))
        .filter(|owner| !owner.is_empty());
    let peers = match named {
        Some(owner) if *owner == federation.identity().label => return Ok(vec![Owner::Here]),
        Some(owner) => vec![federation.peer(owner).await.map_err(|_| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "owner_not_found",
                format!("no cluster labelled '{owner:.64}' is paired with this one"),
            )
        })?],
        None if state.inference.routing.models().contains_key(&model) => {
            return Ok(vec![Owner::Here]);
        }
        None => {
            let mut serving = Vec::new();
            for remote in federation.remote_services().await? {
                if (remote.model == model || remote.service == model)
                    && !serving.iter().any(|p: &Peer| p.label == remote.peer)
                {
                    serving.push(federation.peer(&remote.peer).await?);
                }
            }
            serving
        }
    };
    if peers.is_empty() {
        // Nobody serves it: the job is this cluster's (its lines say why they fail).
        return Ok(vec![Owner::Here]);
    }
    let mut owners = Vec::new();
    for peer in peers {
        // The grant the lines' service is called under; the owner judges it.
        let service = model
            .strip_prefix(&format!("{}/", peer.label))
            .unwrap_or(&model);
        let target = federation
            .resolve(&format!("{}/{service}", peer.label))
            .await?
            .ok_or_else(|| {
                FederationError::new(403, "no_grant", "the owner granted this cluster nothing")
            })?;
        owners.push(Owner::Peer {
            peer: Box::new(peer),
            grant: target.grant,
        });
    }
    Ok(owners)
}

/// The first line's `body.model`.
fn first_model(input: &[u8]) -> Option<String> {
    let line = input
        .split(|b| *b == b'\n')
        .find(|line| !line.iter().all(u8::is_ascii_whitespace))?;
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    value["body"]["model"].as_str().map(String::from)
}

/// The input with each line's `<owner label>/<service>` as the owner names
/// it: `<service>`.
fn as_services(input: &[u8], owner: &str) -> Result<Bytes, ApiError> {
    let prefix = format!("{owner}/");
    let mut out = Vec::with_capacity(input.len());
    for line in input.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut value: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| ApiError::invalid_request(e.to_string()))?;
        if let Some(service) = value["body"]["model"]
            .as_str()
            .and_then(|m| m.strip_prefix(&prefix))
        {
            value["body"]["model"] = serde_json::Value::String(service.to_string());
        }
        serde_json::to_writer(&mut out, &value).map_err(ApiError::internal)?;
        out.push(b'\n');
    }
    Ok(Bytes::from(out))
}

/// Where a job (or a job's file) is.
enum Found<T> {
    /// Here: the local answer.
    Here(T),
    /// On a peer: this cluster's projection of it.
    Owner(Box<Projection>),
}

/// Finds what `local` did not: a projection `visible` may see of the job
/// `id` (or of the job whose output or error file is `id`, with `file`).
/// Neither: 503 while a peer cannot be asked, else the local answer.
async fn locate<T>(
    state: &AppState,
    visible: Visible<'_>,
    local: Result<T, BatchesError>,
    id: &str,
    file: bool,
) -> FedResult<Found<T>> {
    let (federation, missing) = match (&state.federation, local) {
        (_, Ok(found)) => return Ok(Found::Here(found)),
        (Some(federation), Err(e)) if e.is_not_found() => (federation, e),
        (_, Err(e)) => return Err(e.into()),
    };
    let projection = match file {
        true => state.store.projection_by_file(id, visible).await,
        false => state.store.projection(id, visible).await,
    }
    .map_err(ApiError::from)?;
    match projection {
        Some(projection) => Ok(Found::Owner(Box::new(projection))),
        None => Err(unknown(federation, missing).await),
    }
}

/// Keeps what the owner answered about a job and shows it as fresh; a new
/// projection belongs to `key` (the local key that made the job).
async fn synced(
    state: &AppState,
    peer_id: &str,
    owner: &str,
    batch: Batch,
    key: Option<&str>,
) -> FedResult<Batch> {
    state
        .store
        .put_projection(peer_id, &batch, key)
        .await
        .map_err(ApiError::from)?;
    Ok(projected(batch, owner, now(), true))
}

/// A job of `caller`'s: this cluster's own, or the owner's answer (its
/// projection, marked stale, when the owner cannot be asked).
pub async fn batch(state: &AppState, caller: &Caller, id: &str) -> FedResult<Batch> {
    let visible = access::visible(caller);
    let local = batches::batch(&state.batches, visible, id).await;
    let projection = match locate(state, visible, local, id, false).await? {
        Found::Here(batch) => return Ok(batch),
        Found::Owner(projection) => projection,
    };
    let action = JobAction::Get { id: id.to_string() };
    match federation(state)?
        .job_call(&projection.peer_id, action, Bytes::new())
        .await
    {
        Ok(answer) => {
            let batch: Batch = read_json(answer).await?;
            synced(state, &projection.peer_id, &projection.peer, batch, None).await
        }
        Err(e) if e.status == 503 => Ok(stale(*projection)),
        Err(e) => Err(e.into()),
    }
}

/// Cancels a job of `caller`'s on its owner; 503 `NODE_UNAVAILABLE` while
/// the owner cannot be asked (nothing is queued).
pub async fn cancel(state: &AppState, caller: &Caller, id: &str) -> FedResult<Batch> {
    let visible = access::visible(caller);
    let local = batches::cancel(&state.batches, visible, id).await;
    let projection = match locate(state, visible, local, id, false).await? {
        Found::Here(batch) => return Ok(batch),
        Found::Owner(projection) => projection,
    };
    let action = JobAction::Cancel { id: id.to_string() };
    let answer = federation(state)?
        .job_call(&projection.peer_id, action, Bytes::new())
        .await?;
    let batch: Batch = read_json(answer).await?;
    synced(state, &projection.peer_id, &projection.peer, batch, None).await
}

/// A file of `caller`'s: this cluster's, or a peer's job's output as the
/// owner has it.
pub async fn file(state: &AppState, caller: &Caller, id: &str) -> FedResult<FileObject> {
    let visible = access::visible(caller);
    let local = batches::file(&state.batches, visible, id).await;
    let projection = match locate(state, visible, local, id, true).await? {
        Found::Here(file) => return Ok(file),
        Found::Owner(projection) => projection,
    };
    let action = JobAction::File {
        file: id.to_string(),
    };
    let answer = federation(state)?
        .job_call(&projection.peer_id, action, Bytes::new())
        .await?;
    read_json(answer).await
}

/// A file's content, of `caller`'s: this cluster's, or a peer's job's
/// output read from the owner as it streams.
pub async fn file_content(state: &AppState, caller: &Caller, id: &str) -> FedResult<Content> {
    let visible = access::visible(caller);
    let local = batches::file_content(&state.batches, visible, id).await;
    let projection = match locate(state, visible, local, id, true).await? {
        Found::Here(content) => return Ok(content),
        Found::Owner(projection) => projection,
    };
    let action = JobAction::Content {
        file: id.to_string(),
    };
    let answer = federation(state)?
        .job_call(&projection.peer_id, action, Bytes::new())
        .await?;
    if !(200..300).contains(&answer.status) {
        return Err(owner_error(answer).await);
    }
    Ok(answer.body.into_stream())
}

/// `caller`'s jobs on this cluster and the projections of those it made
/// on peers, the newest first.
pub async fn list(
    state: &AppState,
    caller: &Caller,
    after: Option<&str>,
    limit: Option<i64>,
) -> FedResult<BatchList> {
    let visible = access::visible(caller);
    let Some(federation) = &state.federation else {
        return Ok(batches::list(&state.batches, visible, after, limit).await?);
    };
    // A page after a projected job starts below its creation time.
    let after_projection = match after {
        Some(id) => state
            .store
            .projection(id, visible)
            .await
            .map_err(ApiError::from)?,
        None => None,
    };
    let mut page = match &after_projection {
        Some(_) => BatchList {
            object: "list".into(),
            data: Vec::new(),
            first_id: None,
            last_id: None,
            has_more: false,
        },
        None => batches::list(&state.batches, visible, after, limit).await?,
    };
    let limit = limit.unwrap_or(batches::DEFAULT_LIMIT);
    let before = match (&after_projection, after) {
        (Some(p), _) => Some(p.summary.created_at),
        (None, Some(_)) => page.data.first().map(|b| b.created_at + 1),
        (None, None) => None,
    };
    let projections = state
        .store
        .projections(visible, before, limit + 1)
        .await
        .map_err(ApiError::from)?;
    let peers = federation.peers().await.unwrap_or_default();
    let more_projections = projections.len() as i64 > limit;
    page.data.extend(projections.into_iter().map(|p| {
        let up = link_up(&peers, &p.peer_id);
        match up {
            true => {
                let synced = p.synced_at;
                projected(p.summary, &p.peer, synced, true)
            }
            false => stale(p),
        }
    }));
    page.data
        .sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    let over = page.data.len() as i64 > limit;
    page.data.truncate(limit as usize);
    page.has_more = page.has_more || more_projections || over;
    page.first_id = page.data.first().map(|b| b.id.clone());
    page.last_id = page.data.last().map(|b| b.id.clone());
    Ok(page)
}

fn link_up(peers: &[Peer], peer_id: &str) -> bool {
    peers
        .iter()
        .any(|p| p.id == peer_id && p.link.state == LinkState::Up)
}

/// A job not here nor projected: 503 while some peer cannot be asked (it
/// may be the owner's), else the local answer.
async fn unknown(federation: &Federation, local: BatchesError) -> FedError {
    let peers = federation.peers().await.unwrap_or_default();
    let down: Vec<&str> = peers
        .iter()
        .filter(|p| p.link.state != LinkState::Up)
        .map(|p| p.label.as_str())
        .collect();
    match down.is_empty() {
        true => local.into(),
        false => FederationError::unavailable(format!(
            "not on this cluster, and its owner may be a peer that cannot be asked now ({}); \
             nothing was queued",
            down.join(", ")
        ))
        .into(),
    }
}

/// The owner's summary, as this cluster shows it.
fn projected(mut batch: Batch, owner: &str, synced_at: i64, available: bool) -> Batch {
    batch.owner = Some(owner.to_string());
    batch.owner_available = Some(available);
    batch.projection_level = Some(PROJECTION_SUMMARY.to_string());
    batch.projection_stale = Some(!available);
    batch.last_synced_at = Some(synced_at);
    batch
}

/// A projection shown while its owner cannot be asked.
fn stale(projection: Projection) -> Batch {
    projected(
        projection.summary,
        &projection.peer,
        projection.synced_at,
        false,
    )
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The owner's JSON answer, or its error as this side's.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(answer: Answer) -> FedResult<T> {
    if !(200..300).contains(&answer.status) {
        return Err(owner_error(answer).await);
    }
    let body = read_body(answer).await?;
    serde_json::from_slice(&body).map_err(|e| {
        FederationError::new(502, "peer_error", format!("the owner's answer: {e}")).into()
    })
}

async fn read_body(answer: Answer) -> FedResult<Bytes> {
    answer.read(MAX_ANSWER).await.map_err(|e| {
        match e {
            ReadError::Broken(e) => FederationError::unavailable(format!(
                "the link broke while the owner answered: {e}"
            )),
            ReadError::TooLarge(_) => {
                FederationError::new(502, "peer_error", "the owner's answer is too large")
            }
        }
        .into()
    })
}

/// The owner's refusal, with its status and code.
async fn owner_error(answer: Answer) -> FedError {
    let status = answer.status;
    let body = match read_body(answer).await {
        Ok(body) => body,
        Err(e) => return e,
    };
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let error = &value["error"];
    FederationError::new(
        status,
        error["code"].as_str().unwrap_or("peer_error"),
        format!(
            "the owner answered: {}",
            error["message"].as_str().unwrap_or("no message")
        ),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_s_label_comes_off_the_lines_models() {
        let input = b"{\"custom_id\":\"a\",\"body\":{\"model\":\"beta/chat\"}}\n{\"custom_id\":\"b\",\"body\":{\"model\":\"chat\"}}\n";
        let out = as_services(input, "beta").unwrap();
        let models: Vec<String> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                serde_json::from_slice::<serde_json::Value>(l).unwrap()["body"]["model"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(models, ["chat", "chat"]);
        assert_eq!(
            first_model(b"\n{\"body\":{\"model\":\"beta/chat\"}}\n").as_deref(),
            Some("beta/chat")
        );
    }
}
