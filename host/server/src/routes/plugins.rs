//! The component registry: upload (pinned by SHA-256), list, show, and a
//! component's bytes for the workers that run it.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchyard_protocol::plugin::{PluginVersions, Plugins};
use switchyard_runtime::verify;
use switchyard_store::plugins::{Inserted, PluginRecord};

use switchyard_runtime::PluginKind;

use crate::auth::{Admin, Authorized, NODE_HEADER, Scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, ApiQuery};
use crate::state::AppState;

/// Where an upload says what it is.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct UploadParams {
    /// Plugin name: lowercase letters, digits, `-`, `_`, `.`.
    pub name: Option<String>,
    /// Version, e.g. `1.2.0`.
    pub version: Option<String>,
    /// The SHA-256 the body must have (hex).
    pub sha256: Option<String>,
}

/// Longest plugin name or version: a chain names them in every listing.
const MAX_NAME_LEN: usize = 64;

/// A plugin name: a [`switchyard_protocol::valid::is_name`] of lowercase letters, digits,
/// `-`, `_` and `.`, at most [`MAX_NAME_LEN`].
fn valid_name(s: &str) -> bool {
    switchyard_protocol::valid::is_name(s)
        && s.len() <= MAX_NAME_LEN
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
}

/// A version (`1.2.0`, `2024-05-01`, `1.0.0-rc.1+build.5`): at most
/// [`MAX_NAME_LEN`] of what [`switchyard_protocol::valid::is_name`] allows, and `+` for
/// semver's build metadata.
fn valid_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:+".contains(&b))
}

/// Uploads a component. The digest is checked before anything else is done with the bytes.
///
/// A detached signature (`switchyard plugin sign`) travels in the
/// `x-switchyard-signature` header as the base64 of the signature file's
/// JSON. It must be over this upload's kind, name, version and sha256 and
/// verify; where the cluster's `require_signed` setting names the
/// component's kind, it must also come from a trusted key, and an upload
/// without one is refused. Elsewhere a valid signature from an unknown key
/// is kept as untrusted. The record's `signature` says who signed it.
#[utoipa::path(post, path = "/api/plugins", tag = "plugins", params(UploadParams,
        ("x-switchyard-signature" = Option<String>, Header, description = "A detached signature: base64 of the JSON `switchyard plugin sign` writes (at most 4096 bytes)")),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "The component bytes"),
    responses(
        (status = 201, body = PluginRecord, description = "Stored; the record, with `signature: {key_id, key_name, trusted, trust}` or null",
            example = json!({"name": "max-tokens", "version": "1.0.0", "kind": "policy", "world": "switchyard:policy/admission-policy@0.1.0", "sha256": "9f2c...", "size": 48213, "uploaded_by": "k_admin", "uploaded_at": "2026-05-01T10:00:00.000Z", "signature": {"key_id": "5e1d0c9a7b3f2e41", "key_name": "release-2026", "trusted": true, "trust": "trusted"}})),
        (status = 200, description = "The same upload again; the existing record (a signature given now signs a version stored unsigned)"),
        (status = 400, description = "`invalid_component` or `unsupported_world` (names the world found and those served); `invalid_signature`: the header is not base64 of a signature file"),
        (status = 409, description = "`version_exists`: same name and version, another digest"),
        (status = 422, description = "`digest_mismatch`; `signature_required`: the kind requires a signature (require_signed) and none came; `untrusted_signature`: the signature is for another component, does not verify, or (where required) its key is not trusted"),
    ))]
pub async fn upload(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<UploadParams>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<PluginRecord>)> {
    let (Some(name), Some(version), Some(sha256)) = (params.name, params.version, params.sha256)
    else {
        return Err(ApiError::invalid_request(
            "name, version and sha256 are required query parameters",
        ));
    };
    if !valid_name(&name) || !valid_version(&version) {
        return Err(ApiError::invalid_request(
            "name must be 1-64 lowercase letters, digits, '-', '_' or '.', and version 1-64 letters, digits, '-', '_', '.', ':' or '+'",
        ));
    }
    let bytes = body.clone();
    let expected = sha256.to_ascii_lowercase();
    let info = tokio::task::spawn_blocking(move || verify(&bytes, &expected))
        .await
        .map_err(ApiError::internal)??;
    let sha256 = sha256.to_ascii_lowercase();
    let signed = switchyard_binding::signing::check_upload(
        &state.store,
        headers
            .get(switchyard_protocol::signing::SIGNATURE_HEADER)
            .map(|v| v.as_bytes()),
        switchyard_binding::signing::Upload {
            kind: info.kind,
            name: &name,
            version: &version,
            sha256: &sha256,
        },
    )
    .await?;
    let record = PluginRecord {
        name,
        version,
        kind: info.kind,
        world: info.world,
        sha256,
        size: body.len() as i64,
        uploaded_by: caller.key_id.clone(),
        uploaded_at: String::new(),
        signature: None,
    };
    match state
        .store
        .insert_signed_plugin(&record, &body, signed.as_ref())
        .await?
    {
        Inserted::Created(r) => {
            let signer = r
                .signature
                .as_ref()
                .map(|s| s.key_id.as_str())
                .unwrap_or("-");
            tracing::info!(plugin = %r.name, version = %r.version, sha256 = %r.sha256, signer, by = %caller.key_id, "plugin uploaded");
            Ok((StatusCode::CREATED, Json(r)))
        }
        Inserted::Existing(r) => Ok((StatusCode::OK, Json(r))),
        Inserted::Conflict(r) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "version_exists",
            format!(
                "{}@{} already exists with sha256 {}; upload a new version",
                r.name, r.version, r.sha256
            ),
        )),
    }
}

/// Every plugin version, each with who signed it (`signature`: `{key_id,
/// key_name, trusted, trust}` where `trust` is `trusted`, `untrusted` or
/// `no_longer_trusted`; null when unsigned).
#[utoipa::path(get, path = "/api/plugins", tag = "plugins", responses((status = 200, body = Plugins, description = "Every plugin version")))]
pub async fn list(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Plugins>> {
    Ok(Json(Plugins {
        plugins: state.store.plugins(None).await?,
    }))
}

/// Every version of one plugin.
#[utoipa::path(get, path = "/api/plugins/{name}", tag = "plugins", params(("name" = String, Path, description = "Plugin name")), responses(
    (status = 200, body = PluginVersions, description = "Every version of the plugin"),
    (status = 404, description = "`not_found`"),
))]
pub async fn show(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<PluginVersions>> {
    let versions = state.store.plugins(Some(&name)).await?;
    if versions.is_empty() {
        return Err(ApiError::not_found(format!("no plugin named '{name}'")));
    }
    Ok(Json(PluginVersions { name, versions }))
}

/// The header a component's bytes come with: the digest the registry pins
/// them to (the fetcher checks the bytes against the digest it was told,
/// not against this header).
pub const SHA256_HEADER: &str = "x-switchyard-sha256";

/// One version's bytes, for a worker that runs it: the node's credential
/// (`Authorization: Bearer` with `X-Switchyard-Node`) fetches the carrier
/// and tunnel components its carrier set names; an admin key fetches any.
/// The worker checks the bytes against the SHA-256 the heartbeat named
/// before it keeps or compiles them.
#[utoipa::path(get, path = "/api/plugins/{name}/{version}/component", tag = "plugins",
    params(
        ("name" = String, Path, description = "Plugin name"),
        ("version" = String, Path, description = "Version"),
    ),
    responses(
        (status = 200, description = "The component bytes; the `x-switchyard-sha256` header names their digest", content_type = "application/wasm"),
        (status = 401, description = "`unauthorized`: no node credential and no API key, or a wrong one"),
        (status = 403, description = "`node_pending` (the node waits for approval) or `forbidden` (a key without `admin`; a node asking for a policy)"),
        (status = 404, description = "`not_found`"),
    ))]
pub async fn component(
    State(state): State<Arc<AppState>>,
    ApiPath((name, version)): ApiPath<(String, String)>,
    connection: crate::edge::ThisConnection,
    headers: HeaderMap,
) -> ApiResult<Response> {
    // A node gets only what a carrier set runs; the policies and the grant
    // evaluator stay the admin's, as every other registry route.
    let node_kinds = [PluginKind::Carrier, PluginKind::Tunnel];
    let node = if headers.contains_key(NODE_HEADER) {
        Some(super::cluster::approved_node(&state, &headers).await?)
    } else {
        crate::auth::authenticate(&state, &headers)
            .await?
            .require(Admin::NAME)?;
        None
    };
    connection.prove();
    let record = state
        .store
        .plugin(&name, &version)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no plugin {name}@{version}")))?;
    if node.is_some() && !node_kinds.contains(&record.kind) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{name}@{version} is a {} component; a node fetches only carrier and tunnel components",
                record.kind
            ),
        ));
    }
    let bytes = state.store.plugin_bytes(&record.sha256).await?;
    tracing::debug!(plugin = %name, %version, node = node.as_deref().unwrap_or("-"), "component fetched");
    Ok((
        [
            (header::CONTENT_TYPE, "application/wasm".to_string()),
            (
                HeaderName::from_static(SHA256_HEADER),
                record.sha256.clone(),
            ),
        ],
        bytes,
    )
        .into_response())
}
