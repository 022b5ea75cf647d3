//! `POST /api/models/fetch`: a model revision of one file, fetched by URL
//! by the server and kept only if it hashes to the declared SHA-256. With
//! `Accept: application/x-ndjson` the answer streams progress lines while
//! the file downloads, then one line with the outcome.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use switchyard_library::fetch::Url;
use switchyard_protocol::admin::{ErrorDetail, FetchLine, FetchModel};
use switchyard_store::models::{ModelFile, ModelRevision};

use super::models::{insert_revision, revision_exists, valid_name, valid_path};
use crate::auth::{Authorized, ModelsManage};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use switchyard_library::fetch::{self, Limits, Source};
use switchyard_library::valid_digest;

/// The media type of a streamed answer.
pub const NDJSON: &str = "application/x-ndjson";
/// How often a streamed answer reports progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// A fetch whose every field was checked.
struct ValidFetch {
    url: Url,
    sha256: String,
    manifest: ModelRevision,
}

impl ValidFetch {
    fn parse(body: FetchModel) -> ApiResult<Self> {
        let url = fetch::parse_url(&body.url)?;
        let sha256 = body.sha256.trim().to_ascii_lowercase();
        if !valid_digest(&sha256) {
            return Err(ApiError::invalid_request(
                "sha256 must be a SHA-256 in hex (64 characters)",
            ));
        }
        if !valid_name(&body.id) || !valid_name(&body.revision) {
            return Err(ApiError::invalid_request(
                "id and revision are 1 to 256 letters, digits, '-', '_', '.' or ':'",
            ));
        }
        let path = match body.name {
            Some(name) => name,
            None => fetch::file_name(&url).ok_or_else(|| {
                ApiError::invalid_request("the URL's path ends in no file name; give a name")
            })?,
        };
        if !valid_path(&path) {
            return Err(ApiError::invalid_request(format!(
                "`{path}` is not a file name for the revision (letters, digits, '-', '_', '.', \
                 '/'-separated); give a name"
            )));
        }
        let manifest = ModelRevision {
            id: body.id,
            revision: body.revision,
            licence: body.licence,
            files: vec![ModelFile {
                path,
                size: 0,
                sha256: sha256.clone(),
            }],
            imported_by: String::new(),
            imported_at: String::new(),
        };
        Ok(Self {
            url,
            sha256,
            manifest,
        })
    }

    /// The manifest, once the file's size is known.
    fn manifest(&self, size: u64) -> ModelRevision {
        let mut manifest = self.manifest.clone();
        manifest.files[0].size = i64::try_from(size).unwrap_or(i64::MAX);
        manifest
    }
}

/// Downloads a file by URL into the library and registers it as a revision.
///
/// The file is hashed as it streams and kept only with the declared
/// SHA-256. Nothing is downloaded when the library holds the bytes already,
/// or when the revision exists (the same: 200; other files: 409).
#[utoipa::path(post, path = "/api/models/fetch", tag = "models", request_body = FetchModel,
    responses(
        (status = 201, description = "fetched, verified and registered; the manifest"),
        (status = 200, description = "the same revision was registered already (the manifest); or, \
            with `Accept: application/x-ndjson`, the streamed answer: lines `{received, total}` \
            while the file downloads, then `{status, model}` or `{status, error: {code, message}}`",
            content_type = "application/x-ndjson"),
        (status = 400, description = "`invalid_request`, `invalid_url`: not an http or https URL; \
            `address_not_allowed`: the host, or a redirect's, is or resolves to a loopback, private, \
            link-local or otherwise non-public address that no `--fetch-allow-host` names"),
        (status = 409, description = "`revision_exists`: the revision names other files"),
        (status = 422, description = "`digest_mismatch`: the bytes hash to something else, nothing kept; \
            `too_large`: more than 256 GiB"),
        (status = 502, description = "`source_unreachable`, `source_status` (the source answered other \
            than 2xx), `source_interrupted`"),
        (status = 504, description = "`source_timeout`: no answer within 60 s, or 60 s without a byte"),
    ))]
pub async fn fetch(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<FetchModel>,
) -> ApiResult<Response> {
    let request = ValidFetch::parse(body)?;
    let wanted = &request.manifest;
    if let Some(existing) = state
        .store
        .model_revision(&wanted.id, &wanted.revision)
        .await?
    {
        let same = existing.licence == wanted.licence
            && matches!(existing.files.as_slice(), [file]
                if file.path == wanted.files[0].path && file.sha256 == request.sha256);
        if !same {
            return Err(revision_exists(wanted));
        }
    }
    if let Some(size) = state.library.size(&request.sha256) {
        let (status, manifest) =
            insert_revision(&state, &request.manifest(size), &caller.key_id).await?;
        return Ok((status, Json(manifest)).into_response());
    }
    let source = fetch::open(&request.url, &state.fetch_allow, Limits::default()).await?;
    tracing::info!(url = %fetch::shown(&request.url), model = %wanted.id, revision = %wanted.revision,
        by = %caller.key_id, "fetching a model file");
    let streamed = headers
        .get(ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains(NDJSON));
    if streamed {
        return Ok(stream(state, caller.0.key_id, request, source));
    }
    let (_, size) = source
        .into_library(&state.library, &request.sha256, |_| {})
        .await?;
    let (status, manifest) =
        insert_revision(&state, &request.manifest(size), &caller.key_id).await?;
    Ok((status, Json(manifest)).into_response())
}

/// Aborts the download when the answer's body is dropped (the client went
/// away): the library then removes the partial file.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn line(line: &FetchLine) -> Bytes {
    let mut bytes = serde_json::to_vec(line).expect("a fetch line serializes");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// The download on a task of its own, its progress and outcome as lines.
fn stream(state: Arc<AppState>, by: String, request: ValidFetch, source: Source) -> Response {
    let (lines, received) = tokio::sync::mpsc::channel::<Bytes>(16);
    let total = source.total();
    let task = tokio::spawn(async move {
        let progress = lines.clone();
        let mut last: Option<Instant> = None;
        let fetched = source
            .into_library(&state.library, &request.sha256, |n| {
                if last.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) {
                    last = Some(Instant::now());
                    // A slow reader misses a report; the next one says more.
                    let _ = progress.try_send(line(&FetchLine::Progress { received: n, total }));
                }
            })
            .await;
        let outcome = match fetched {
            Ok((_, size)) => insert_revision(&state, &request.manifest(size), &by).await,
            Err(e) => Err(e.into()),
        };
        let end = match outcome {
            Ok((status, manifest)) => FetchLine::Outcome {
                status: status.as_u16(),
                model: Some(manifest),
                error: None,
            },
            Err(e) => FetchLine::Outcome {
                status: e.status.as_u16(),
                model: None,
                error: Some(ErrorDetail {
                    code: e.code.to_string(),
                    message: e.message,
                }),
            },
        };
        let _ = lines.send(line(&end)).await;
    });
    let guard = AbortOnDrop(task);
    let body = futures::stream::unfold((received, guard), |(mut received, guard)| async move {
        let next = received.recv().await?;
        Some((Ok::<_, Infallible>(next), (received, guard)))
    });
    ([(CONTENT_TYPE, NDJSON)], Body::from_stream(body)).into_response()
}
