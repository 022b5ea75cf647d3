//! The plugin registry: every version with its kind, world, size, digest and
//! signer, and an upload form. The upload is a multipart form the console
//! reads itself (the CSRF token first, before any file byte), then hands to
//! `POST /api/plugins` in-process exactly as `switchyard plugin push` does:
//! the bytes as `application/wasm`, name, version and SHA-256 in the query,
//! a detached signature base64'd into `x-switchyard-signature`.
//!
//! Layout: this file holds the routes and the registry page;
//! `plugins/upload.rs` reads the form and pushes it.

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchyard_protocol::signing::Signer;

use super::ConsoleState;
use super::api::ApiFailure;
use super::page::{self, csrf_field};
use super::session::Session;
use switchyard_server::routes::MAX_COMPONENT_BYTES;

/// The whole upload form: the component at its API limit, and room for the
/// other fields and the multipart framing.
const MAX_UPLOAD_FORM: usize = MAX_COMPONENT_BYTES + (64 << 10);

mod upload;

/// The plugins pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new().route(
        "/console/plugins",
        get(list)
            .post(upload::upload)
            .layer(DefaultBodyLimit::max(MAX_UPLOAD_FORM)),
    )
}

/// One registered version, as `GET /api/plugins` lists it.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Version {
    pub name: String,
    pub version: String,
    pub kind: String,
    world: String,
    sha256: String,
    size: u64,
    #[serde(default)]
    uploaded_by: String,
    #[serde(default)]
    uploaded_at: String,
    pub signature: Option<Signer>,
}

#[derive(Debug, Deserialize)]
struct Registry {
    plugins: Vec<Version>,
}

/// The version an upload just stored, to show in full after the redirect.
#[derive(Debug, Default, Deserialize)]
struct Shown {
    uploaded: Option<String>,
    version: Option<String>,
}

/// What the upload form said, kept to refill it after a refusal.
#[derive(Debug, Default)]
struct Entered {
    name: String,
    version: String,
}

async fn list(
    State(console): State<ConsoleState>,
    session: Session,
    shown: Result<Query<Shown>, QueryRejection>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let registry = registry(&console, &session).await;
    let shown = shown.map(|Query(s)| s).unwrap_or_default();
    let uploaded = match (&registry, shown.uploaded, shown.version) {
        (Ok(versions), Some(name), Some(version)) => versions
            .iter()
            .find(|v| v.name == name && v.version == version)
            .cloned(),
        _ => None,
    };
    let body = html! {
        @if let Some(uploaded) = &uploaded { (uploaded_panel(uploaded)) }
        (plugins_page(&session, &registry, &Entered::default()))
    };
    page::render(&session, "Plugins", body)
}

/// Every registered version, as the session's key reads them.
pub(super) async fn registry(
    console: &ConsoleState,
    session: &Session,
) -> Result<Vec<Version>, ApiFailure> {
    let answer = session.api(console).get("/api/plugins").await?;
    serde_json::from_value::<Registry>(answer)
        .map(|r| r.plugins)
        .map_err(|e| unreadable(&format!("the registry's answer: {e}")))
}

fn plugins_page(
    session: &Session,
    registry: &Result<Vec<Version>, ApiFailure>,
    entered: &Entered,
) -> Markup {
    html! {
        h2 { "Registry" }
        @match registry {
            Err(failure) => { (page::failure(failure)) }
            Ok(versions) if versions.is_empty() => {
                (page::empty("No component is registered yet.", html! {
                    "Upload one below, or push one with " code { "switchyard plugin push" } "."
                }))
            }
            Ok(versions) => { (registry_table(versions)) }
        }
        section.panel aria-labelledby="upload-title" {
            h2 #upload-title { "Upload a component" }
            p.hint { "A WebAssembly component: a policy, a grant evaluator or a carrier. Its digest is computed here and checked by the registry; the world it targets is read from the component. At most " (page::bytes(MAX_COMPONENT_BYTES as u64)) "." }
            form.stack method="post" action="/console/plugins" enctype="multipart/form-data" {
                // First: the server checks it before it reads the file.
                (csrf_field(session))
                label for="plugin-name" { "Name" }
                input #plugin-name type="text" name="name" required maxlength="64"
                    pattern="[a-z0-9._\\-]+" placeholder="e.g. model-allowlist" value=(entered.name);
                label for="plugin-version" { "Version" }
                input #plugin-version type="text" name="version" required maxlength="64"
                    placeholder="e.g. 1.0.0" value=(entered.version);
                label for="plugin-file" { "Component file (.wasm)" }
                input #plugin-file type="file" name="file" required accept=".wasm,application/wasm";
                label for="plugin-signature" { "Signature file (optional)" }
                input #plugin-signature type="file" name="signature" accept=".json,.sig,application/json";
                p.hint { "The file " code { "switchyard plugin sign" } " writes. Where the cluster requires signed components of this kind, an upload without one is refused." }
                div { button type="submit" { "Upload" } }
            }
        }
    }
}

fn registry_table(versions: &[Version]) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr {
                th { "Name" } th { "Version" } th { "Kind" } th { "World" } th { "Size" }
                th { "SHA-256" } th { "Signature" } th { "Uploaded" }
            } }
            tbody {
                @for v in versions {
                    tr {
                        td { (v.name) }
                        td { code { (v.version) } }
                        td { (v.kind) }
                        td { code { (v.world) } }
                        td { (page::bytes(v.size)) }
                        td { code.short-digest title=(v.sha256) { (short(&v.sha256)) } }
                        td { (signature(&v.signature)) }
                        td { (v.uploaded_at) br; span.muted { "by " (v.uploaded_by) } }
                    }
                }
            }
        } }
    }
}

fn uploaded_panel(v: &Version) -> Markup {
    html! {
        section.panel.created aria-labelledby="uploaded-title" {
            h2 #uploaded-title { "Uploaded " (v.name) " " (v.version) }
            dl.facts {
                dt { "Kind" } dd { (v.kind) }
                dt { "World" } dd { code { (v.world) } }
                dt { "Size" } dd { (page::bytes(v.size)) " (" (v.size) " bytes)" }
                dt { "SHA-256" } dd { code.digest { (v.sha256) } }
                dt { "Signature" } dd { (signature(&v.signature)) }
            }
            @if v.kind == "policy" {
                p { "Bind it to an admission point on the " a href="/console/admission" { "Admission" } " page." }
            }
        }
    }
}

/// Who signed a version, and whether the cluster trusts the key.
pub(super) fn signature(signer: &Option<Signer>) -> Markup {
    match signer {
        None => html! { span.muted { "unsigned" } },
        Some(s) => {
            let trust = s.trust.as_str();
            let class = if s.trusted {
                "state ok"
            } else {
                "state failed"
            };
            html! {
                span class=(class) { (trust.replace('_', " ")) }
                " " code { (s.key_id) }
                @if let Some(name) = &s.key_name { " (" (name) ")" }
            }
        }
    }
}

/// The first 16 hex digits of a digest (the whole one is its title).
fn short(sha256: &str) -> String {
    match sha256.get(..16) {
        Some(head) if sha256.len() > 16 => format!("{head}…"),
        _ => sha256.to_string(),
    }
}

/// A failure of ours (an answer of another shape), shown as the API's are.
fn unreadable(message: &str) -> ApiFailure {
    ApiFailure {
        status: StatusCode::BAD_GATEWAY,
        code: "internal".into(),
        message: message.into(),
        body: Value::Null,
    }
}
