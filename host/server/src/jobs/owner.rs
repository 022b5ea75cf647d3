//! The owner's side: a peer's job calls, acted on as this cluster's own
//! `/v1` routes would, about the jobs that peer made only: each call checks
//! the peer against the job's (or file's) recorded peer, then reads it
//! whoever owns it here.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use switchyard_federation::{Denied, LocalJob};
use switchyard_protocol::answer::{Answer, AnswerBody};
use switchyard_protocol::batch::BatchList;
use switchyard_protocol::jobs::{JobAction, MAX_REFRESH};

use switchyard_store::batches::Visible;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use switchyard_batches::{self as batches, access};

/// Answers a peer's job call; every outcome, a refusal too, is an answer.
pub async fn serve_peer(state: &AppState, job: LocalJob) -> Result<Answer, Denied> {
    let answered = act(state, job).await;
    Ok(local_answer(
        answered.unwrap_or_else(IntoResponse::into_response),
    ))
}

fn to_json(value: &impl serde::Serialize) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

async fn act(state: &AppState, job: LocalJob) -> Result<Response, ApiError> {
    let json = |value: serde_json::Value| (StatusCode::OK, axum::Json(value)).into_response();
    match job.action {
        JobAction::Create {
            grant,
            mut request,
            filename,
        } => {
            let input = with_models(&job.input, &job.models)?;
            // The lines pass this cluster's `inference` chain as the peer;
            // the file and the job are the peer's (it is their owner here).
            let caller = Caller {
                key_id: format!("peer:{}", job.peer),
                scopes: vec!["inference".into()],
                team: None,
            };
            let file =
                batches::create_file(&state.batches, access::owner(&caller), &filename, &input)
                    .await?;
            request.input_file_id = file.id;
            let origin = Some((job.peer_id.clone(), grant.clone()));
            let batch = batches::create_batch(&state.batches, request, &caller, origin).await?;
            tracing::info!(batch = %batch.id, peer = %job.peer, grant, "a peer's job created");
            Ok(json(to_json(&batch)?))
        }
        JobAction::Get { id } => {
            owned(state, &id, &job.peer_id).await?;
            Ok(json(to_json(
                &batches::batch(&state.batches, Visible::All, &id).await?,
            )?))
        }
        JobAction::Refresh { ids } => {
            let mut data = Vec::new();
            for id in ids.iter().take(MAX_REFRESH) {
                if owned(state, id, &job.peer_id).await.is_ok() {
                    data.push(batches::batch(&state.batches, Visible::All, id).await?);
                }
            }
            let list = BatchList {
                object: "list".into(),
                first_id: data.first().map(|b| b.id.clone()),
                last_id: data.last().map(|b| b.id.clone()),
                has_more: false,
                data,
            };
            Ok(json(to_json(&list)?))
        }
        JobAction::Cancel { id } => {
            owned(state, &id, &job.peer_id).await?;
            Ok(json(to_json(
                &batches::cancel(&state.batches, Visible::All, &id).await?,
            )?))
        }
        JobAction::File { file } => {
            if state.store.batch_file_peer(&file).await?.as_deref() != Some(&job.peer_id) {
                return Err(file_not_found(&file));
            }
            Ok(json(to_json(
                &batches::file(&state.batches, Visible::All, &file).await?,
            )?))
        }
        JobAction::Content { file } => {
            if state.store.batch_file_peer(&file).await?.as_deref() != Some(&job.peer_id) {
                return Err(file_not_found(&file));
            }
            let content = batches::file_content(&state.batches, Visible::All, &file).await?;
            Ok((
                [(axum::http::header::CONTENT_TYPE, "application/jsonl")],
                Body::from_stream(content),
            )
                .into_response())
        }
    }
}

/// The owner checks ownership before acting: a peer sees only the jobs
/// it made here.
async fn owned(state: &AppState, id: &str, peer_id: &str) -> Result<(), ApiError> {
    match state.store.batch_peer(id).await? {
        Some(peer) if peer == peer_id => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "batch_not_found",
            format!("no batch {id:.64} made by this peer"),
        )),
    }
}

fn file_not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "file_not_found",
        format!("no file {id:.64} of a job this peer made"),
    )
}

/// The input file with each line's service id replaced by the model its
/// deployment serves here.
fn with_models(
    input: &[u8],
    models: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(input.len());
    for (n, line) in input.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut value: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| ApiError::invalid_request(format!("line {}: {e}", n + 1)))?;
        let service = value["body"]["model"].as_str().unwrap_or_default();
        let model = models.get(service).ok_or_else(|| {
            ApiError::invalid_request(format!("line {}: no service '{service:.64}'", n + 1))
        })?;
        value["body"]["model"] = serde_json::Value::String(model.clone());
        serde_json::to_writer(&mut out, &value).map_err(ApiError::internal)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// A response as a link answer: the status, the content type, the body.
fn local_answer(response: Response) -> Answer {
    let (parts, body) = response.into_parts();
    let headers = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| vec![("content-type".to_string(), v.to_string())])
        .unwrap_or_default();
    Answer {
        status: parts.status.as_u16(),
        headers,
        body: AnswerBody::Streaming(
            body.into_data_stream()
                .map(|chunk| chunk.map_err(std::io::Error::other))
                .boxed(),
        ),
    }
}

/// Cancels the jobs a revoked grant made (their lines not yet running
/// never run).
pub async fn end_grant_jobs(state: &AppState, grant: &str) {
    let jobs = match state.store.grant_batches(grant).await {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(grant, error = %e, "a revoked grant's jobs were not read");
            return;
        }
    };
    for id in jobs {
        match batches::cancel(&state.batches, Visible::All, &id).await {
            Ok(_) => tracing::info!(grant, batch = %id, "a revoked grant's job cancelled"),
            Err(e) => tracing::debug!(grant, batch = %id, error = %e, "not cancelled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_s_services_become_the_models_served_here() {
        let models = [("chat".to_string(), "federation.chat".to_string())].into();
        let input = b"{\"custom_id\":\"a\",\"body\":{\"model\":\"chat\",\"x\":1}}\n\n";
        let out = with_models(input, &models).unwrap();
        let line: serde_json::Value = serde_json::from_slice(out.trim_ascii_end()).unwrap();
        assert_eq!(line["body"]["model"], "federation.chat");
        assert_eq!(line["body"]["x"], 1);
        let unknown = with_models(b"{\"body\":{\"model\":\"other\"}}\n", &models).unwrap_err();
        assert_eq!(unknown.code, "invalid_request");
    }

    use bytes::Bytes;

    #[test]
    fn an_answer_keeps_its_status_and_content_type() {
        let answer = local_answer(
            (
                StatusCode::CONFLICT,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                Bytes::from_static(b"{}"),
            )
                .into_response(),
        );
        assert_eq!(answer.status, 409);
        assert_eq!(answer.headers[0].1, "application/json");
    }
}
