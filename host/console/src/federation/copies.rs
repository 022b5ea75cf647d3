//! Acquire or resume a verified copy: a granted revision's manifest as the
//! owner states it (licence, files, sizes, SHA-256; never an upstream URL),
//! and the copies into this cluster's library with their progress, drawn
//! in place while any runs, with pause, resume and delete. Copies need
//! `models:manage` as well; the API says so when the key lacks it.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;
use switchyard_protocol::copies::{CopyRecord, CopyState, ModelManifest};

use super::super::ConsoleState;
use super::super::api::Api;
use super::super::api::typed;
use super::super::form::{Posted, call_and_redirect, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::{SCOPE, badge, invalid, segment, subnav};

const HERE: &str = "/console/federation/copies";
/// How often the copies' progress is redrawn while one runs, in ms.
const LIVE_EVERY_MS: u32 = 1000;

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route(HERE, get(list).post(start))
        .route("/console/federation/copies/{id}/live", get(live))
        .route("/console/federation/copies/{id}/{action}", post(act))
        .route(
            "/console/federation/peers/{peer}/models/{model}/{revision}",
            get(manifest),
        )
}

/// `GET /api/federation/copies`.
#[derive(Deserialize)]
struct Copies {
    copies: Vec<CopyRecord>,
}

/// What the start form (and a peer page's copy button) posts.
#[derive(Debug, Default, Deserialize)]
struct NewCopyForm {
    #[serde(default)]
    peer: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    revision: String,
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let copies = copies_table(&session, &session.api(&console)).await;
    let body = html! {
        (subnav(HERE))
        p { "A copy brings a revision a peer granted (" code { "models:transfer" } ") into this cluster's library, "
            "in verified ranges that resume from the durable offset. Only a complete file with its declared SHA-256 "
            "becomes usable; a completed copy stays after its peer or grant is removed." }
        (copies)
        section.panel aria-labelledby="copy-title" {
            h2 #copy-title { "Acquire or resume a verified copy" }
            form.stack method="post" action=(HERE) {
                (csrf_field(&session))
                label for="copy-peer" { "Peer" }
                input #copy-peer type="text" name="peer" required maxlength="64" placeholder="beta";
                label for="copy-model" { "Model" }
                input #copy-model type="text" name="model" required maxlength="256";
                label for="copy-revision" { "Revision" }
                input #copy-revision type="text" name="revision" required maxlength="256";
                button type="submit" { "Acquire or resume copy" }
            }
        }
    };
    page::render(&session, "Model copies", body)
}

/// One copy's state and progress, for its row's refresh.
async fn live(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    session: Session,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let path = format!("/api/federation/copies/{}", segment(&id));
    match session.api(&console).get_as::<CopyRecord>(&path).await {
        Ok(copy) => progress(&copy).into_response(),
        // Nothing will change by itself: stop redrawing.
        Err(failure) => html! { div data-final { (page::failure(&failure)) } }.into_response(),
    }
}

/// A copy's state, why it stopped, its bytes and reconnects; final (no
/// more redrawing) once no replica runs it. The buttons stay outside, so
/// a redraw never takes keyboard focus away.
fn progress(copy: &CopyRecord) -> Markup {
    html! {
        @if !copy.state.is_active() {
            span data-final hidden {}
        }
        (badge(copy.state.as_str()))
        @if let Some(code) = &copy.code {
            " " code { (code) } " " (copy.message.as_deref().unwrap_or(""))
        }
        (page::progress(&format!("Copy of {}@{}", copy.model, copy.revision), copy.bytes_held as f64, copy.bytes_total as f64))
        span.muted {
            (page::bytes(copy.bytes_held)) " of " (page::bytes(copy.bytes_total))
            " · reconnects " (copy.reconnects.len()) " of 3"
        }
    }
}

async fn copies_table(session: &Session, api: &Api) -> Markup {
    let copies = match api.get_as::<Copies>("/api/federation/copies").await {
        Ok(copies) => copies.copies,
        Err(failure) => return page::failure(&failure),
    };
    if copies.is_empty() {
        return page::empty(
            "No model copies.",
            html! {
                "Open a peer's page from " a href="/console/federation" { "Peers" }
                " and choose Acquire or resume verified copy on a granted revision, or name one below."
            },
        );
    }
    html! {
        div.table-wrap { table {
            thead { tr { th { "Revision" } th { "Peer" } th { "State and progress" } th { span.muted { "Actions" } } } }
            tbody {
                @for copy in &copies {
                    tr {
                        td { code { (copy.model) "@" (copy.revision) } br; span.muted { (copy.id) } }
                        td { (copy.peer) }
                        td {
                            @if copy.state.is_active() {
                                div.copy-progress data-live=(format!("{HERE}/{}/live", segment(&copy.id))) data-every=(LIVE_EVERY_MS) {
                                    (progress(copy))
                                }
                            } @else {
                                div.copy-progress { (progress(copy)) }
                            }
                        }
                        td {
                            (actions(session, copy))
                            @if copy.state.is_active() {
                                br; span.hint { "Reload when it ends for its next actions." }
                            }
                        }
                    }
                }
            }
        } }
    }
}

fn actions(session: &Session, copy: &CopyRecord) -> Markup {
    let mut buttons: Vec<(&str, &str, bool)> = Vec::new();
    match copy.state {
        CopyState::Running | CopyState::Waiting => buttons.push(("pause", "Pause", false)),
        CopyState::Paused | CopyState::Interrupted | CopyState::Stopped => {
            buttons.push(("resume", "Resume", false));
            buttons.push(("delete", "Delete", true));
        }
        CopyState::Complete => buttons.push(("delete", "Delete record", true)),
    }
    html! {
        @for (action, text, danger) in buttons {
            form.inline method="post" action=(format!("{HERE}/{}/{action}", segment(&copy.id))) {
                (csrf_field(session))
                button.danger[danger] type="submit" aria-label=(format!("{text} copy {}", copy.id)) { (text) }
            }
            " "
        }
    }
}

async fn start(State(console): State<ConsoleState>, posted: Posted<NewCopyForm>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let form = &posted.fields;
    let (peer, model, revision) = (form.peer.trim(), form.model.trim(), form.revision.trim());
    if peer.is_empty() || model.is_empty() || revision.is_empty() {
        let failure = invalid("name the peer, the model and the revision");
        return redirect_with(session, HERE, Flash::failed(&failure));
    }
    let answer = session
        .api(&console)
        .post(
            "/api/federation/copies",
            json!({"peer": peer, "model": model, "revision": revision}),
        )
        .await
        .and_then(typed::<CopyRecord>);
    match answer {
        Ok(copy) => {
            let done = match copy.state {
                CopyState::Complete => format!("{model}@{revision} is in the library already."),
                _ => format!(
                    "Copy {} of {model}@{revision} from {peer}: {}.",
                    copy.id,
                    copy.state.as_str()
                ),
            };
            redirect_with(session, HERE, Flash::done(done))
        }
        Err(failure) => redirect_with(session, HERE, Flash::failed(&failure)),
    }
}

async fn act(
    State(console): State<ConsoleState>,
    Path((id, action)): Path<(String, String)>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let copy = format!("/api/federation/copies/{}", segment(&id));
    let (method, path, done) = match action.as_str() {
        "pause" => (
            Method::POST,
            format!("{copy}/pause"),
            format!("Copy {id} paused; its verified bytes stay."),
        ),
        "resume" => (
            Method::POST,
            format!("{copy}/resume"),
            format!("Copy {id} resumed from its durable offsets."),
        ),
        "delete" => (
            Method::DELETE,
            copy,
            format!("Copy {id} deleted with its partial bytes."),
        ),
        _ => return page::not_found().await,
    };
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        (method, &path),
        HERE,
        done,
    )
    .await
}

async fn manifest(
    State(console): State<ConsoleState>,
    Path((peer, model, revision)): Path<(String, String, String)>,
    session: Session,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let path = format!(
        "/api/federation/peers/{}/models/{}/{}",
        segment(&peer),
        segment(&model),
        segment(&revision)
    );
    let found = session.api(&console).get_as::<ModelManifest>(&path).await;
    let title = format!("{model}@{revision} on {peer}");
    let body = html! {
        (subnav(HERE))
        @match &found {
            Err(failure) => {
                (page::failure(failure))
                p { "Back to " a href=(format!("/console/federation/peers/{}", segment(&peer))) { "the peer" } "." }
            }
            Ok(manifest) => {
                @let total = manifest.size();
                section.panel {
                    dl.facts {
                        dt { "Licence" } dd { (manifest.licence.as_deref().unwrap_or("not stated")) }
                        dt { "Files" } dd { (manifest.files.len()) ", " (page::bytes(total)) }
                    }
                    p.hint { "The owner states no upstream URL; every byte comes over the link and is checked against these digests." }
                    form.inline method="post" action=(HERE) {
                        (csrf_field(&session))
                        input type="hidden" name="peer" value=(peer);
                        input type="hidden" name="model" value=(model);
                        input type="hidden" name="revision" value=(revision);
                        button type="submit" { "Acquire or resume verified copy" }
                    }
                }
                div.table-wrap { table {
                    thead { tr { th { "File" } th { "Size" } th { "SHA-256" } } }
                    tbody {
                        @for file in &manifest.files {
                            tr { td { code { (file.path) } } td { (page::bytes(file.size.max(0) as u64)) } td { code.wrap { (file.sha256) } } }
                        }
                    }
                } }
            }
        }
    };
    page::render(&session, &title, body)
}
