//! API keys: the list, a new key (its token shown once, on the answer to
//! the form and nowhere else), revoking one.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde_json::{Value, json};

use super::ConsoleState;
use super::form::{Posted, call_and_redirect};
use super::page::{self, csrf_field};
use super::session::Session;
use switchyard_server::auth::SCOPES;

/// The API keys pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/keys", get(list).post(create))
        .route("/console/keys/{id}/revoke", post(revoke))
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let keys = session.api(&console).get("/api/keys").await;
    page::render(&session, "API keys", keys_page(&session, &keys, None))
}

fn keys_page(
    session: &Session,
    keys: &Result<Value, super::api::ApiFailure>,
    created: Option<&Value>,
) -> Markup {
    html! {
        @if let Some(created) = created {
            section.panel.created aria-labelledby="created-title" {
                h2 #created-title { "Key created: copy its token now" }
                p { "This is the only time the token is shown; the cluster keeps only its digest." }
                p { label for="new-token" { "Token of " code { (created["key"]["id"].as_str().unwrap_or("")) } }
                    br;
                    input #new-token type="text" readonly size="70" value=(created["token"].as_str().unwrap_or("")); }
                p { a href="/console/keys" { "Done" } }
            }
        }
        section.panel {
            h2 { "New key" }
            form.stack method="post" action="/console/keys" {
                (csrf_field(session))
                label for="key-name" { "Name" }
                input #key-name type="text" name="name" required maxlength="128" placeholder="e.g. team-search";
                fieldset {
                    legend { "Scopes" }
                    @for scope in SCOPES {
                        label.check {
                            input type="checkbox" name="scope" value=(scope) checked[scope == "inference"];
                            " " (scope)
                        }
                        " "
                    }
                }
                button type="submit" { "Create key" }
            }
        }
        h2 { "Keys" }
        @match keys {
            Err(failure) => { (page::failure(failure)) }
            Ok(keys) => {
                @let keys = keys["keys"].as_array().cloned().unwrap_or_default();
                @if keys.is_empty() {
                    (page::empty("No keys yet.", html! { "Create one above; give it only the scopes it needs." }))
                } @else {
                    div.table-wrap { table {
                        thead { tr { th { "Name" } th { "Id" } th { "Scopes" } th { "Created" } th { "State" } th { span.muted { "Actions" } } } }
                        tbody {
                            @for key in &keys {
                                @let id = key["id"].as_str().unwrap_or("");
                                @let revoked = !key["revoked_at"].is_null();
                                tr {
                                    td { (key["name"].as_str().unwrap_or("")) }
                                    td { code { (id) } }
                                    td { (key["scopes"].as_array().map(|s| s.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()) }
                                    td { (key["created_at"].as_str().unwrap_or("")) }
                                    td {
                                        @if revoked { span.state.failed { "revoked " (key["revoked_at"].as_str().unwrap_or("")) } }
                                        @else { span.state.ok { "live" } }
                                    }
                                    td {
                                        @if !revoked && id != session.caller.key_id {
                                            form.inline method="post" action=(format!("/console/keys/{id}/revoke")) {
                                                (csrf_field(session))
                                                button.danger type="submit" aria-label=(format!("Revoke key {id}")) { "Revoke" }
                                            }
                                        } @else if !revoked {
                                            span.muted { "this session's key" }
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
            }
        }
    }
}

async fn create(
    State(console): State<ConsoleState>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let name = posted
        .fields
        .iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let scopes: Vec<&str> = posted
        .fields
        .iter()
        .filter(|(k, _)| k == "scope")
        .map(|(_, v)| v.as_str())
        .collect();
    let api = session.api(&console);
    let created = api
        .post("/api/keys", json!({"name": name, "scopes": scopes}))
        .await;
    let keys = api.get("/api/keys").await;
    match created {
        // Rendered on the answer itself: the token never goes into a
        // cookie, a URL or a log.
        Ok(created) => page::render(
            &session.clone(),
            "API keys",
            keys_page(session, &keys, Some(&created)),
        ),
        Err(failure) => {
            let body = html! { (page::failure(&failure)) (keys_page(session, &keys, None)) };
            page::render_status(session, failure.status, "API keys", body)
        }
    }
}

async fn revoke(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!(
        "/api/keys/{}",
        super::session::form_urlencoded_component(&id)
    );
    let done = format!("Key {id} revoked.");
    let call = (Method::DELETE, path.as_str());
    call_and_redirect(
        &console,
        &posted.session,
        "admin",
        call,
        "/console/keys",
        done,
    )
    .await
}
