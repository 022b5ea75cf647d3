//! Registration tokens on the nodes page: a new token (its value shown
//! once, on the answer to the form, as keys are), the list, revoking one.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::post;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ConsoleState;
use super::form::{Posted, call_and_redirect, optional};
use super::nodes::{SCOPE, page_body};
use super::page::{self, csrf_field};
use super::session::{Session, form_urlencoded_component};

/// The registration tokens' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/nodes/registration-tokens", post(create))
        .route(
            "/console/nodes/registration-tokens/{id}/revoke",
            post(revoke),
        )
}

/// The section: a token just created (once), the form, the list.
pub async fn section(console: &ConsoleState, session: &Session, created: Option<&Value>) -> Markup {
    let tokens = session
        .api(console)
        .get("/api/nodes/registration-tokens")
        .await;
    html! {
        h2 #tokens { "Registration tokens" }
        @if let Some(created) = created {
            section.panel.created aria-labelledby="token-created" {
                h3 #token-created { "Token created: copy it now" }
                p { "This is the only time it is shown. A worker joins with "
                    code { "switchyard worker --frontend URL --registration-token TOKEN" } "." }
                p {
                    label for="new-registration-token" { "Token " code { (created["token"]["id"].as_str().unwrap_or("")) } }
                    br;
                    input #new-registration-token type="text" readonly size="70" value=(created["value"].as_str().unwrap_or(""));
                }
                p { a href="/console/nodes" { "Done" } }
            }
        }
        form.stack method="post" action="/console/nodes/registration-tokens" {
            (csrf_field(session))
            label for="token-name" { "Token name" }
            input #token-name type="text" name="name" required maxlength="128" placeholder="e.g. rack-4";
            label for="token-ttl" { "Valid for (hours, empty: until revoked)" }
            input #token-ttl type="number" name="ttl_hours" min="1" max="8784" placeholder="24";
            label for="token-uses" { "Workers it may register (empty: any number)" }
            input #token-uses type="number" name="max_uses" min="1" max="1000000" placeholder="1";
            div { button type="submit" { "Create registration token" } }
        }
        @match &tokens {
            Err(failure) => { (page::failure(failure)) }
            Ok(list) => {
                @let tokens = list["tokens"].as_array().cloned().unwrap_or_default();
                @if tokens.is_empty() {
                    p.muted { "No registration token yet." }
                } @else {
                    div.table-wrap { table {
                        thead { tr { th { "Name" } th { "Id" } th { "Uses" } th { "Expires" } th { "State" } th { span.muted { "Actions" } } } }
                        tbody { @for token in &tokens { (token_row(session, token)) } }
                    } }
                }
            }
        }
    }
}

fn token_row(session: &Session, token: &Value) -> Markup {
    let id = token["id"].as_str().unwrap_or("");
    let revoked = !token["revoked_at"].is_null();
    html! {
        tr {
            td { (token["name"].as_str().unwrap_or("")) }
            td { code { (id) } }
            td { (token["uses"]) @if let Some(max) = token["max_uses"].as_i64() { " of " (max) } }
            td { (token["expires_at"].as_str().unwrap_or("never")) }
            td {
                @if revoked { span.state.failed { "revoked" } } @else { span.state.ok { "usable" } }
            }
            td {
                @if !revoked {
                    form.inline method="post" action=(format!("/console/nodes/registration-tokens/{}/revoke", form_urlencoded_component(id))) {
                        (csrf_field(session))
                        button.danger type="submit" aria-label=(format!("Revoke registration token {id}")) { "Revoke" }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct NewToken {
    #[serde(default)]
    name: String,
    #[serde(default)]
    ttl_hours: String,
    #[serde(default)]
    max_uses: String,
}

async fn create(State(console): State<ConsoleState>, posted: Posted<NewToken>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let fields = &posted.fields;
    let number = |what: &str, text: &str| -> Result<Option<i64>, String> {
        optional(text)
            .map(|t| t.parse::<i64>())
            .transpose()
            .map_err(|_| format!("{what} must be a whole number"))
    };
    let limits = number("the validity", &fields.ttl_hours)
        .and_then(|ttl| Ok((ttl, number("the number of workers", &fields.max_uses)?)));
    let (ttl_hours, max_uses) = match limits {
        Ok(limits) => limits,
        Err(message) => return page::bad_request(session, &message),
    };
    let body = json!({
        "name": fields.name.trim(),
        "ttl_seconds": ttl_hours.map(|h| h.saturating_mul(3600)),
        "max_uses": max_uses,
    });
    match session
        .api(&console)
        .post("/api/nodes/registration-tokens", body)
        .await
    {
        // Rendered on the answer itself: the value never goes into a
        // cookie, a URL or a log.
        Ok(created) => {
            let body = page_body(&console, session, Some(&created)).await;
            page::render(session, "Nodes", body)
        }
        Err(failure) => {
            let body =
                html! { (page::failure(&failure)) (page_body(&console, session, None).await) };
            page::render_status(session, failure.status, "Nodes", body)
        }
    }
}

async fn revoke(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!(
        "/api/nodes/registration-tokens/{}",
        form_urlencoded_component(&id)
    );
    let done = format!("Registration token {id} revoked.");
    let call = (Method::DELETE, path.as_str());
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        call,
        "/console/nodes#tokens",
        done,
    )
    .await
}
