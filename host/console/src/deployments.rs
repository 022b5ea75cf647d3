//! The console's deployments page: every deployment with the state of each
//! replica (staging progress while its files move, refreshed in place until
//! every replica settles), why a wanted replica is not placed, scaling and
//! deleting; the create form with the scheduler's preview is
//! [`super::deployments_create`].

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ConsoleState;
use super::api::ApiFailure;
use super::deployments_create::{self, CreateForm};
use super::form::{Posted, call_and_redirect, redirect_after};
use super::overview::deployment_state;
use super::page::{self, csrf_field};
use super::session::{Session, form_urlencoded_component};

/// The scope every deployments page needs.
pub const SCOPE: &str = "models:manage";
/// How often the list refreshes while a replica is on its way, in ms.
const EVERY_MS: u64 = 1000;

/// The deployments pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route(
            "/console/deployments",
            get(list).post(deployments_create::submit),
        )
        .route("/console/deployments/live", get(live))
        .route("/console/deployments/{id}/scale", post(scale))
        .route("/console/deployments/{id}/delete", post(delete))
}

/// A revision to preselect (the revision page's "Deploy" link).
#[derive(Debug, Default, Deserialize)]
struct Preselect {
    #[serde(default)]
    model: String,
    #[serde(default)]
    revision: String,
}

async fn list(
    State(console): State<ConsoleState>,
    session: Session,
    Query(preselect): Query<Preselect>,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let mut form = CreateForm::default();
    if !preselect.model.is_empty() {
        form.model = format!("{}@{}", preselect.model, preselect.revision);
    }
    let body = page_body(&console, &session, &form, None).await;
    page::render(&session, "Deployments", body)
}

/// The page: the deployments (refreshed in place), then the create form
/// with `form`'s values and what the last submit answered (`below`).
pub async fn page_body(
    console: &ConsoleState,
    session: &Session,
    form: &CreateForm,
    below: Option<Markup>,
) -> Markup {
    let list = deployments(console, session).await;
    let create = deployments_create::section(console, session, form, below).await;
    html! {
        div #deployments data-live="/console/deployments/live" data-every=(EVERY_MS) { (list) }
        (create)
    }
}

async fn live(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    deployments(&console, &session).await.into_response()
}

/// Node names by id, when the key may list nodes (else ids are shown).
async fn node_names(console: &ConsoleState, session: &Session) -> HashMap<String, String> {
    if !session.can("nodes:manage") {
        return HashMap::new();
    }
    let Ok(nodes) = session.api(console).get("/api/nodes").await else {
        return HashMap::new();
    };
    nodes["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            Some((
                n["id"].as_str()?.to_string(),
                n["name"].as_str()?.to_string(),
            ))
        })
        .collect()
}

async fn deployments(console: &ConsoleState, session: &Session) -> Markup {
    let list = session.api(console).get("/api/deployments").await;
    let names = node_names(console, session).await;
    match list {
        Err(failure) => html! { (page::failure(&failure)) },
        Ok(list) => {
            let items = list["deployments"].as_array().cloned().unwrap_or_default();
            // Settled: nothing left to watch until someone acts (a form
            // reloads the page).
            let settled = items.iter().all(|d| {
                let state = deployment_state(d);
                state == "ready" || state == "stopped"
            });
            html! {
                @if items.is_empty() {
                    (page::empty("No deployment yet.", html! {
                        "Create one below: pick a model from the library (fetch one on the "
                        a href="/console/models" { "Models" } " page first), press Preview to see where its replicas would go, then Create."
                    }))
                }
                @for item in &items { (deployment(session, item, &names)) }
                @if settled { span data-final hidden {} }
            }
        }
    }
}

fn deployment(session: &Session, item: &Value, names: &HashMap<String, String>) -> Markup {
    let d = &item["deployment"];
    let id = text(&d["id"]);
    let served = text(&d["served_model_name"]);
    let state = deployment_state(item);
    let replicas = item["replicas_status"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    html! {
        section.panel.deployment aria-labelledby=(format!("dep-{id}")) data-deployment=(served) {
            h2 #(format!("dep-{id}")) {
                (served) " " span class=(format!("state {state}")) data-state=(state) { (state) }
            }
            p {
                code { (text(&d["model_id"])) "@" (text(&d["revision"])) }
                " · " (text(&d["engine"])) " engine · " (d["replicas"]) " wanted · "
                (d["gpus_per_replica"]) " GPU per replica"
                @if let Some(memory) = d["gpu_memory_bytes"].as_u64().filter(|m| *m > 0) { " of " (page::bytes(memory)) }
                " · " (text(&d["strategy"]))
                @if d["token_delay_ms"].as_u64().is_some_and(|t| t > 0) { " · " (d["token_delay_ms"]) " ms per token" }
                " · id " code { (id) }
            }
            @if let Some(why) = d["pending_reason"].as_str() {
                p.flash.warn role="status" { "Not placed: " (why) }
            }
            @if replicas.is_empty() {
                p.muted { "No replica placed yet." }
            } @else {
                div.table-wrap { table {
                    thead { tr { th { "Replica" } th { "Node" } th { "GPUs" } th { "State" } th { "Progress" } } }
                    tbody { @for replica in &replicas { (replica_row(replica, names)) } }
                } }
            }
            div.actions {
                form.inline method="post" action=(format!("/console/deployments/{}/scale", form_urlencoded_component(&id))) {
                    (csrf_field(session))
                    label for=(format!("scale-{id}")) { "Replicas of " (served) }
                    input #(format!("scale-{id}")) type="number" name="replicas" min="0" max="256" required value=(d["replicas"]);
                    button.secondary type="submit" aria-label=(format!("Scale {served}")) { "Scale" }
                }
                form.inline method="post" action=(format!("/console/deployments/{}/delete", form_urlencoded_component(&id))) {
                    (csrf_field(session))
                    button.danger type="submit" aria-label=(format!("Delete {served}")) { "Delete" }
                }
            }
        }
    }
}

fn replica_row(replica: &Value, names: &HashMap<String, String>) -> Markup {
    let node = text(&replica["node_id"]);
    let state = text(&replica["state"]);
    let gpus: Vec<String> = replica["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| g.to_string())
        .collect();
    let staged = replica["staged_bytes"].as_u64();
    let total = replica["staging_total_bytes"].as_u64();
    html! {
        tr data-replica-state=(state) {
            td { code { (text(&replica["id"])) } }
            td { (names.get(&node).cloned().unwrap_or(node)) }
            td { (gpus.join(", ")) }
            td { span class=(format!("state {state}")) { (state) } }
            td {
                @if let (Some(staged), Some(total), true) = (staged, total, state == "staging") {
                    (page::progress(&format!("Staging of replica {}", text(&replica["id"])), staged as f64, total as f64))
                    span.hint { (page::bytes(staged)) " of " (page::bytes(total)) " on the node" }
                } @else if let Some(detail) = replica["detail"].as_str() {
                    span.hint { (detail) }
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct ScaleForm {
    replicas: String,
}

async fn scale(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<ScaleForm>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let Ok(replicas) = posted.fields.replicas.trim().parse::<i32>() else {
        return page::bad_request(session, "replicas must be a whole number");
    };
    let path = format!(
        "/api/deployments/{}/replicas",
        form_urlencoded_component(&id)
    );
    let result: Result<Value, ApiFailure> = session
        .api(&console)
        .call(Method::PUT, &path, Some(json!({"replicas": replicas})))
        .await;
    redirect_after(
        session,
        "/console/deployments",
        format!("Deployment {id} scaled to {replicas} replicas."),
        result,
    )
}

async fn delete(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!("/api/deployments/{}", form_urlencoded_component(&id));
    let done = format!("Deployment {id} deleted; its replicas drain and stop.");
    let call = (Method::DELETE, path.as_str());
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        call,
        "/console/deployments",
        done,
    )
    .await
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staging_replica_draws_its_progress_and_a_ready_one_does_not() {
        let names = HashMap::from([("node_1".to_string(), "gpu-a".to_string())]);
        let staging = json!({"id": "rep_1", "node_id": "node_1", "gpus": [0], "state": "staging",
            "detail": "staging 12.0 of 24.0 MiB", "staged_bytes": 12u64 << 20, "staging_total_bytes": 24u64 << 20});
        let drawn = replica_row(&staging, &names).into_string();
        assert!(
            drawn.contains(r#"<progress max="100" value="50.0""#),
            "{drawn}"
        );
        assert!(drawn.contains("gpu-a"), "{drawn}");
        let mut ready = staging.clone();
        ready["state"] = json!("ready");
        ready["detail"] = Value::Null;
        assert!(
            !replica_row(&ready, &names)
                .into_string()
                .contains("<progress")
        );
    }
}
