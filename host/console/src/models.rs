//! The console's models pages: the library (every revision, its size and
//! files), fetching a model by URL with a progress bar
//! ([`super::models_import`]), one revision's files and digests, deleting a
//! revision.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde_json::Value;

use super::ConsoleState;
use super::api::ApiFailure;
use super::form::{Posted, call_and_redirect};
use super::models_import::FetchForm;
use super::page::{self, csrf_field};
use super::session::{Session, form_urlencoded_component};

/// The scope every models page needs.
pub const SCOPE: &str = "models:manage";

/// The models pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/models", get(list))
        .route("/console/models/{id}/{revision}", get(revision))
        .route("/console/models/{id}/{revision}/delete", post(delete))
        .merge(super::models_import::routes())
}

/// The console path of a revision's page.
pub fn revision_path(id: &str, revision: &str) -> String {
    format!(
        "/console/models/{}/{}",
        form_urlencoded_component(id),
        form_urlencoded_component(revision)
    )
}

fn api_path(id: &str, revision: &str) -> String {
    format!(
        "/api/models/{}/{}",
        form_urlencoded_component(id),
        form_urlencoded_component(revision)
    )
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let body = library_page(&console, &session, &FetchForm::default(), None).await;
    page::render(&session, "Models", body)
}

/// The library page: every revision, then the fetch form (with `typed`
/// and the API's refusal of it, if any).
pub async fn library_page(
    console: &ConsoleState,
    session: &Session,
    typed: &FetchForm,
    refused: Option<&ApiFailure>,
) -> Markup {
    let models = session.api(console).get("/api/models").await;
    html! {
        h2 { "Library" }
        @match &models {
            Err(failure) => { (page::failure(failure)) }
            Ok(list) => { (library(session, list)) }
        }
        section.panel aria-labelledby="fetch-title" {
            h2 #fetch-title { "Fetch a model by URL" }
            @if let Some(failure) = refused { (page::failure(failure)) }
            form.stack method="post" action="/console/models/fetch#fetch-title" {
                (csrf_field(session))
                label for="fetch-url" { "File URL" }
                input #fetch-url type="url" name="url" required maxlength="4096" value=(typed.url) placeholder="https://hub.example/org/model/resolve/main/model-q4_k_m.gguf";
                label for="fetch-sha256" { "SHA-256 of the file" }
                input #fetch-sha256 type="text" name="sha256" required minlength="64" maxlength="64" pattern="[0-9a-fA-F]{64}" value=(typed.sha256) spellcheck="false" autocomplete="off";
                label for="fetch-id" { "Model id" }
                input #fetch-id type="text" name="id" required maxlength="256" value=(typed.id) placeholder="e.g. qwen2.5-0.5b";
                label for="fetch-revision" { "Revision" }
                input #fetch-revision type="text" name="revision" required maxlength="256" value=(typed.revision) placeholder="e.g. q4_k_m";
                label for="fetch-name" { "File name in the revision (optional)" }
                input #fetch-name type="text" name="name" maxlength="256" value=(typed.name) placeholder="default: the URL's last segment";
                label for="fetch-licence" { "Licence (optional)" }
                input #fetch-licence type="text" name="licence" maxlength="256" value=(typed.licence);
                div { button type="submit" { "Fetch" } }
                p.hint { "The server downloads the file, hashes it as it arrives and keeps it only if it matches; progress is shown on the next page." }
            }
        }
    }
}

fn library(session: &Session, list: &Value) -> Markup {
    let models = list["models"].as_array().cloned().unwrap_or_default();
    if models.is_empty() {
        return page::empty(
            "The library is empty.",
            html! { "Fetch a model file by URL below (or push one with " code { "switchyard model import" } "), then deploy it on the " a href="/console/deployments" { "Deployments" } " page." },
        );
    }
    html! {
        div.table-wrap { table {
            thead { tr { th { "Model" } th { "Revision" } th { "Size" } th { "Licence" } th { "Imported" } th { span.muted { "Actions" } } } }
            tbody {
                @for model in &models {
                    @let id = model["id"].as_str().unwrap_or("");
                    @let revision = model["revision"].as_str().unwrap_or("");
                    tr {
                        td { a href=(revision_path(id, revision)) { (id) } }
                        td { code { (revision) } }
                        td { (page::bytes(model["size"].as_u64().unwrap_or(0))) }
                        td { (model["licence"].as_str().unwrap_or("")) }
                        td { (model["imported_at"].as_str().unwrap_or("")) }
                        td { (delete_form(session, id, revision)) }
                    }
                }
            }
        } }
    }
}

fn delete_form(session: &Session, id: &str, revision: &str) -> Markup {
    html! {
        form.inline method="post" action=(format!("{}/delete", revision_path(id, revision))) {
            (csrf_field(session))
            button.danger type="submit" aria-label=(format!("Delete {id}@{revision}")) { "Delete" }
        }
    }
}

async fn revision(
    State(console): State<ConsoleState>,
    session: Session,
    Path((id, revision)): Path<(String, String)>,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let title = format!("{id}@{revision}");
    match session.api(&console).get(&api_path(&id, &revision)).await {
        Err(failure) => page::render_status(
            &session,
            failure.status,
            &title,
            html! { (page::failure(&failure)) p { a href="/console/models" { "Back to the library" } } },
        ),
        Ok(manifest) => {
            let files = manifest["files"].as_array().cloned().unwrap_or_default();
            let body = html! {
                dl.facts {
                    dt { "Model" } dd { code { (id) } }
                    dt { "Revision" } dd { code { (revision) } }
                    dt { "Licence" } dd { (manifest["licence"].as_str().unwrap_or("not recorded")) }
                    dt { "Imported" } dd { (manifest["imported_at"].as_str().unwrap_or("")) " by " code { (manifest["imported_by"].as_str().unwrap_or("")) } }
                }
                h2 { "Files" }
                div.table-wrap { table #files {
                    thead { tr { th { "Path" } th { "Size" } th { "SHA-256" } } }
                    tbody {
                        @for file in &files {
                            tr {
                                td { code { (file["path"].as_str().unwrap_or("")) } }
                                td { (page::bytes(file["size"].as_u64().unwrap_or(0))) }
                                td { code.digest { (file["sha256"].as_str().unwrap_or("")) } }
                            }
                        }
                    }
                } }
                p.hint { "Workers verify every file against its SHA-256 before an engine runs it." }
                h2 { "Actions" }
                p {
                    a.button href=(format!("/console/deployments?model={}&revision={}", form_urlencoded_component(&id), form_urlencoded_component(&revision))) { "Deploy this revision" }
                }
                (delete_form(&session, &id, &revision))
                p { a href="/console/models" { "Back to the library" } }
            };
            page::render(&session, &title, body)
        }
    }
}

async fn delete(
    State(console): State<ConsoleState>,
    Path((id, revision)): Path<(String, String)>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = api_path(&id, &revision);
    let done = format!("{id}@{revision} deleted.");
    let call = (Method::DELETE, path.as_str());
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        call,
        "/console/models",
        done,
    )
    .await
}
