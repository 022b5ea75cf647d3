//! Fetching a model by URL from the console. The form's request goes to
//! `POST /api/models/fetch` with `Accept: application/x-ndjson`; a task of
//! this replica reads the answer's progress lines into an [`Import`], and
//! the import page draws it (refreshed in place) until the outcome line.
//!
//! The imports live in this process only: the download itself runs on this
//! replica and ends with it, so another replica has nothing to show. The
//! page's refreshes reach the replica that serves the browser's session
//! behind a sticky balancer; without one, the library shows the revision
//! once it is registered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{Method, Request, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchyard_protocol::admin::{FetchLine, FetchModel};

use super::ConsoleState;
use super::api::{Api, ApiFailure, read_json};
use super::form::{Posted, optional, redirect_with};
use super::models::{SCOPE, library_page, revision_path};
use super::page::{self, Flash};
use super::session::{Session, form_urlencoded_component};

/// Imports kept at once; the oldest finished one makes room. A bound on
/// what a busy console holds, far above what people start by hand.
const MAX_IMPORTS: usize = 64;
/// How long a finished import stays to be looked at.
const KEPT_FOR: Duration = Duration::from_secs(15 * 60);
/// The longest line of the streamed answer (a manifest of one file).
const MAX_LINE: usize = 1 << 20;
/// How often the import page refreshes, in ms.
const EVERY_MS: u64 = 500;

/// One fetch started from the console.
#[derive(Debug, Clone)]
struct Import {
    /// The key that started it (only its sessions see it).
    owner: String,
    model: String,
    revision: String,
    received: u64,
    total: Option<u64>,
    outcome: Option<Result<(), ApiFailure>>,
    finished: Option<Instant>,
}

/// The imports this replica follows, by job id (see the module's header).
#[derive(Debug, Clone, Default)]
pub struct Imports(Arc<Mutex<HashMap<String, Import>>>);

impl Imports {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Import>> {
        self.0.lock().expect("imports lock")
    }
}

/// The import routes (one path segment under `/console/models`, so no
/// model id is shadowed).
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/models/fetch", post(fetch))
        .route("/console/models/import", get(import_page))
        .route("/console/models/import-live", get(import_live))
}

/// The fetch form's fields.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct FetchForm {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub sha256: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub revision: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub licence: String,
}

async fn fetch(State(console): State<ConsoleState>, posted: Posted<FetchForm>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let form = &posted.fields;
    let body = FetchModel {
        url: form.url.trim().to_string(),
        sha256: form.sha256.trim().to_string(),
        id: form.id.trim().to_string(),
        revision: form.revision.trim().to_string(),
        name: optional(&form.name),
        licence: optional(&form.licence),
    };
    let api = session.api(&console);
    match start(&api, &console.imports, &session.caller.key_id, &body).await {
        Ok(Started::Streaming(job)) => axum::response::Redirect::to(&format!(
            "/console/models/import?job={}",
            form_urlencoded_component(&job)
        ))
        .into_response(),
        Ok(Started::Registered) => redirect_with(
            session,
            &revision_path(&body.id, &body.revision),
            Flash::done(format!(
                "{}@{} is in the library (its file was there already).",
                body.id, body.revision
            )),
        ),
        // The form again, with what was typed and the API's refusal.
        Err(failure) => {
            let page = library_page(&console, session, form, Some(&failure)).await;
            page::render_status(session, failure.status, "Models", page)
        }
    }
}

enum Started {
    /// Downloading: the job's id.
    Streaming(String),
    /// The library held the file: registered at once.
    Registered,
}

async fn start(
    api: &Api,
    imports: &Imports,
    owner: &str,
    body: &FetchModel,
) -> Result<Started, ApiFailure> {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/models/fetch")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/x-ndjson")
        .body(Body::from(
            serde_json::to_vec(body).expect("a fetch request serialises"),
        ))
        .expect("a fixed request");
    let answer = api.send(request).await;
    let streamed = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-ndjson"));
    if !answer.status().is_success() || !streamed {
        return read_json(answer).await.map(|_| Started::Registered);
    }
    let job = switchyard_store::keys::random_id("imp");
    {
        let mut held = imports.lock();
        make_room(&mut held);
        held.insert(
            job.clone(),
            Import {
                owner: owner.to_string(),
                model: body.id.clone(),
                revision: body.revision.clone(),
                received: 0,
                total: None,
                outcome: None,
                finished: None,
            },
        );
    }
    tokio::spawn(follow(imports.clone(), job.clone(), answer.into_body()));
    Ok(Started::Streaming(job))
}

/// Forgets finished imports past [`KEPT_FOR`], then the oldest finished
/// ones beyond [`MAX_IMPORTS`] (running ones are never dropped).
fn make_room(imports: &mut HashMap<String, Import>) {
    imports.retain(|_, i| i.finished.is_none_or(|at| at.elapsed() < KEPT_FOR));
    while imports.len() >= MAX_IMPORTS {
        let oldest = imports
            .iter()
            .filter_map(|(id, i)| i.finished.map(|at| (at, id.clone())))
            .min();
        match oldest {
            Some((_, id)) => imports.remove(&id),
            None => break,
        };
    }
}

/// Reads the answer's lines into the import until its outcome.
async fn follow(imports: Imports, job: String, body: Body) {
    let mut stream = body.into_data_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut outcome: Option<Result<(), ApiFailure>> = None;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            match serde_json::from_slice::<FetchLine>(&line) {
                Ok(FetchLine::Progress { received, total }) => update(&imports, &job, |i| {
                    i.received = received;
                    i.total = total;
                }),
                Ok(FetchLine::Outcome { status, error, .. }) => {
                    outcome = Some(match error {
                        None => Ok(()),
                        Some(e) => Err(ApiFailure {
                            status: axum::http::StatusCode::from_u16(status)
                                .unwrap_or(axum::http::StatusCode::BAD_GATEWAY),
                            code: e.code,
                            message: e.message,
                            body: Value::Null,
                        }),
                    });
                }
                Err(_) => {}
            }
        }
        if buffer.len() > MAX_LINE {
            break;
        }
    }
    let outcome = outcome.unwrap_or_else(|| {
        Err(ApiFailure {
            status: axum::http::StatusCode::BAD_GATEWAY,
            code: "interrupted".into(),
            message: "the fetch ended without an outcome".into(),
            body: Value::Null,
        })
    });
    update(&imports, &job, |i| {
        if outcome.is_ok()
            && let Some(total) = i.total
        {
            i.received = total;
        }
        i.outcome = Some(outcome);
        i.finished = Some(Instant::now());
    });
}

fn update(imports: &Imports, job: &str, change: impl FnOnce(&mut Import)) {
    if let Some(import) = imports.lock().get_mut(job) {
        change(import);
    }
}

#[derive(Deserialize)]
struct Job {
    job: String,
}

/// The import the session's key started, if any.
fn find(imports: &Imports, session: &Session, job: &str) -> Option<Import> {
    imports
        .lock()
        .get(job)
        .filter(|i| i.owner == session.caller.key_id)
        .cloned()
}

async fn import_page(
    State(console): State<ConsoleState>,
    session: Session,
    Query(Job { job }): Query<Job>,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let Some(import) = find(&console.imports, &session, &job) else {
        return page::render_status(
            &session,
            axum::http::StatusCode::NOT_FOUND,
            "Model import",
            page::empty(
                "No such import on this replica (it finished long ago, or another replica runs it).",
                html! { "See the " a href="/console/models" { "library" } "." },
            ),
        );
    };
    let live = format!(
        "/console/models/import-live?job={}",
        form_urlencoded_component(&job)
    );
    page::render(
        &session,
        "Model import",
        html! {
            p { "Fetching " code { (import.model) "@" (import.revision) } " into the library: the file is hashed as it arrives and kept only if it matches the SHA-256 given." }
            div #import data-live=(live) data-every=(EVERY_MS) { (progress(&import)) }
            p { a href="/console/models" { "Back to the library" } }
        },
    )
}

async fn import_live(
    State(console): State<ConsoleState>,
    session: Session,
    Query(Job { job }): Query<Job>,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    match find(&console.imports, &session, &job) {
        Some(import) => progress(&import).into_response(),
        None => html! { p data-final { "This import is no longer known here." } }.into_response(),
    }
}

fn progress(import: &Import) -> Markup {
    let label = format!("Download of {}@{}", import.model, import.revision);
    html! {
        @match &import.outcome {
            None => {
                p role="status" { "Downloading…" }
                @match import.total {
                    Some(total) => {
                        (page::progress(&label, import.received as f64, total as f64))
                        p.hint { (page::bytes(import.received)) " of " (page::bytes(total)) }
                    }
                    None => {
                        div.progress { progress aria-label=(label) {} }
                        p.hint { (page::bytes(import.received)) " so far (the source did not say its size)" }
                    }
                }
            }
            Some(Ok(())) => {
                div data-final {
                    (page::progress(&label, 1.0, 1.0))
                    p.flash.ok role="status" {
                        code { (import.model) "@" (import.revision) } " is in the library (" (page::bytes(import.received)) ", verified). "
                    }
                    p { a href=(revision_path(&import.model, &import.revision)) { "Open the revision" } }
                }
            }
            Some(Err(failure)) => {
                div data-final {
                    (page::failure(failure))
                    p { "Nothing was kept. Check the URL and the SHA-256, then " a href="/console/models" { "try again" } "." }
                }
            }
        }
    }
}
