//! One peer: its identity and link, asking it for access, the grants
//! between the two clusters, what it shares with this cluster (browse
//! shared resources: services `/v1` can call, model revisions to copy),
//! and inspecting an operation's outcome on it before acting again.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;
use switchyard_protocol::federation::{
    AccessRequest, Direction, GrantRecord, GrantState, MAX_NAME, Operation, OperationRecord, Peer,
    RemoteService,
};

use super::super::ConsoleState;
use super::super::api::typed;
use super::super::api::{Api, ApiFailure};
use super::super::form::{Posted, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::grants::{self, Grants};
use super::managed;
use super::{SCOPE, badge, fingerprint, invalid, segment, subnav};

/// The longest note a request carries from this form.
const MAX_NOTE: usize = 512;

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/federation/peers/{peer}", get(show))
        .route("/console/federation/peers/{peer}/request", post(request))
}

/// `GET /api/federation/services`.
#[derive(Deserialize)]
struct Services {
    services: Vec<RemoteService>,
}

/// The inspect-operation form (a GET: it changes nothing).
#[derive(Debug, Default, Deserialize)]
struct Inspect {
    #[serde(default)]
    operation: String,
}

fn here(peer: &str) -> String {
    format!("/console/federation/peers/{}", segment(peer))
}

async fn show(
    State(console): State<ConsoleState>,
    Path(label): Path<String>,
    Query(inspect): Query<Inspect>,
    session: Session,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let peer = match api
        .get_as::<Peer>(&format!("/api/federation/peers/{}", segment(&label)))
        .await
    {
        Ok(peer) => peer,
        Err(failure) => {
            let body = html! {
                (subnav("/console/federation"))
                (page::failure(&failure))
                p { "Back to " a href="/console/federation" { "Peers" } "." }
            };
            return page::render_status(&session, failure.status, &format!("Peer {label}"), body);
        }
    };
    let grants: Vec<GrantRecord> = api
        .get_as::<Grants>("/api/federation/grants")
        .await
        .map(|g| {
            g.grants
                .into_iter()
                .filter(|g| g.peer == peer.label)
                .collect()
        })
        .unwrap_or_default();
    let operation = form_operation(&inspect.operation);
    let inspected = match &operation {
        Some(Ok(id)) => Some(
            api.get_as::<OperationRecord>(&format!(
                "/api/federation/peers/{}/operations/{}",
                segment(&peer.label),
                segment(id)
            ))
            .await,
        ),
        Some(Err(failure)) => Some(Err(failure.clone())),
        None => None,
    };
    let body = html! {
        (subnav("/console/federation"))
        (facts(&session, &peer))
        div.cards.wide {
            (request_form(&session, &peer))
            (inspect_form(&peer, &inspect.operation, inspected.as_ref()))
        }
        h2 { "Grants between the two clusters" }
        @if grants.is_empty() {
            (page::empty("No grants with this peer yet.", html! {
                "Ask it for access above; to share this cluster's resources with it, "
                a href="/console/federation/share" { "share with it" } "."
            }))
        } @else {
            (grants::table(&session, &grants))
        }
        h2 { "Shared with this cluster" }
        (shared(&session, &api, &peer, &grants).await)
    };
    page::render(&session, &format!("Peer {}", peer.label), body)
}

fn facts(session: &Session, peer: &Peer) -> Markup {
    html! {
        section.panel {
            dl.facts {
                dt { "Link" }
                dd {
                    (badge(peer.link.state.as_str()))
                    @if let Some(since) = &peer.link.since { " since " (since) }
                    @if let Some(error) = &peer.link.last_error { br; span.muted { (error) } }
                }
                dt { "Cluster id" } dd { code { (peer.cluster_id) } }
                dt { "Key fingerprint" } dd { code { (fingerprint(&peer.public_key)) } }
                dt { "Identity last proved" } dd { (peer.last_verified_at.as_deref().unwrap_or("not yet")) }
                dt { "Dialled at" }
                dd { @match &peer.url { Some(url) => { code { (url) } } None => { span.muted { "it dials this cluster" } } } }
            }
            form.inline method="post" action=(format!("{}/forget", here(&peer.label))) {
                (csrf_field(session))
                button.danger type="submit" { "Forget this peer" }
            }
        }
    }
}

fn request_form(session: &Session, peer: &Peer) -> Markup {
    html! {
        section.card aria-labelledby="request-title" {
            h2 #request-title { "Request access" }
            p { "Ask " (peer.label) "'s operator for operations; they choose the exact services, models and machines." }
            form.stack method="post" action=(format!("{}/request", here(&peer.label))) {
                (csrf_field(session))
                fieldset {
                    legend { "Operations" }
                    @for op in Operation::ALL {
                        @let id = format!("request-op-{}", op.as_str().replace(':', "-"));
                        span.check {
                            input #(id) type="checkbox" name="operation" value=(op.as_str()) checked[*op == Operation::Inference];
                            " " label for=(id) { (op.as_str()) }
                        }
                        " "
                    }
                }
                label for="request-note" { "Note for their operator" }
                input #request-note type="text" name="note" maxlength=(MAX_NOTE) placeholder="e.g. support bot";
                button type="submit" { "Request access" }
            }
        }
    }
}

/// An operation id typed into the form: none when blank.
fn form_operation(text: &str) -> Option<Result<String, ApiFailure>> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let valid = text.len() <= MAX_NAME
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    Some(if valid {
        Ok(text.to_string())
    } else {
        Err(invalid(format!(
            "an operation id is 1 to {MAX_NAME} letters, digits, '-', '_' or '.'"
        )))
    })
}

fn inspect_form(
    peer: &Peer,
    typed_id: &str,
    inspected: Option<&Result<OperationRecord, ApiFailure>>,
) -> Markup {
    html! {
        section.card aria-labelledby="inspect-title" {
            h2 #inspect-title { "Inspect operation" }
            p { "When a change's outcome is uncertain (the link broke), ask " (peer.label)
                " for its receipt before issuing a new action." }
            form.stack method="get" action=(here(&peer.label)) {
                label for="inspect-operation" { "Operation id" }
                input #inspect-operation type="text" name="operation" maxlength=(MAX_NAME) required value=(typed_id);
                button.secondary type="submit" { "Inspect" }
            }
            @match inspected {
                None => {}
                Some(Err(failure)) => { (page::failure(failure)) }
                Some(Ok(record)) => {
                    dl.facts {
                        dt { "State" } dd { (badge(record.state.as_str())) }
                        dt { "Grant" } dd { code { (record.grant) } }
                        dt { "Received" } dd { (record.created_at) }
                        @if let Some(status) = record.status { dt { "Answer" } dd { (status) } }
                    }
                    @if let Some(outcome) = &record.outcome {
                        details open { summary { "Recorded outcome" } pre.wrap { (serde_json::to_string_pretty(outcome).unwrap_or_default()) } }
                    }
                }
            }
        }
    }
}

/// Browse shared resources: the peer's services this cluster may call and
/// the model revisions it may copy, from the incoming grants.
async fn shared(session: &Session, api: &Api, peer: &Peer, grants: &[GrantRecord]) -> Markup {
    let incoming: Vec<&GrantRecord> = grants
        .iter()
        .filter(|g| g.direction == Direction::Incoming)
        .collect();
    if incoming.is_empty() {
        return page::empty(
            "This peer shares nothing with this cluster yet.",
            html! { "Request access above; once its operator approves, complete the pairing here." },
        );
    }
    let services = api
        .get_as::<Services>("/api/federation/services")
        .await
        .map(|s| {
            s.services
                .into_iter()
                .filter(|s| s.peer == peer.label)
                .collect::<Vec<_>>()
        });
    let copyable: Vec<(&GrantRecord, &String)> = incoming
        .iter()
        .filter(|g| {
            g.state == GrantState::Active && g.terms.operations.contains(&Operation::ModelsTransfer)
        })
        .flat_map(|g| g.terms.models.iter().map(move |m| (*g, m)))
        .collect();
    let managed = managed::sections(session, api, &peer.label, &incoming).await;
    html! {
        @if incoming.iter().any(|g| g.state == GrantState::Offered) {
            p.flash.warn role="status" { "A grant offered by this peer waits for you to complete the pairing (Complete pairing, above)." }
        }
        h3 { "Services" }
        @match &services {
            Err(failure) => { (page::failure(failure)) }
            Ok(list) if list.is_empty() => {
                (page::empty("No services from this peer in an active grant.", html! { "Ask for the inference operation; its operator names the services." }))
            }
            Ok(list) => {
                div.table-wrap { table {
                    thead { tr { th { "Model on /v1" } th { "Service" } th { "Grant" } } }
                    tbody {
                        @for s in list {
                            tr { td { code { (s.model) } } td { (s.service) } td { code { (s.grant) } } }
                        }
                    }
                } }
                p.hint { "Call them as the model on this cluster's " code { "/v1" } " with a " code { "federation:invoke" }
                    " key (never forwarded), or on " a href="/console/try" { "Try prompt" } "." }
            }
        }
        (managed)
        h3 { "Model revisions" }
        @if copyable.is_empty() {
            (page::empty("No model revisions from this peer in an active models:transfer grant.", html! {
                "Ask for models:transfer; its operator names the revisions and the bytes allowed."
            }))
        } @else {
            div.table-wrap { table {
                thead { tr { th { "Revision" } th { "Grant" } th { span.muted { "Actions" } } } }
                tbody {
                    @for (grant, model) in &copyable {
                        @let (name, revision) = model.split_once('@').unwrap_or((model.as_str(), ""));
                        tr {
                            td { code { (model) } }
                            td { code { (grant.id) } }
                            td {
                                a.button href=(format!("{}/models/{}/{}", here(&peer.label), segment(name), segment(revision))) { "Inspect" }
                                " "
                                form.inline method="post" action="/console/federation/copies" {
                                    (csrf_field(session))
                                    input type="hidden" name="peer" value=(peer.label);
                                    input type="hidden" name="model" value=(name);
                                    input type="hidden" name="revision" value=(revision);
                                    button type="submit" aria-label=(format!("Copy {model}")) { "Acquire or resume verified copy" }
                                }
                            }
                        }
                    }
                }
            } }
        }
    }
}

async fn request(
    State(console): State<ConsoleState>,
    Path(label): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let back = here(&label);
    let operations: Vec<&str> = posted
        .fields
        .iter()
        .filter(|(k, _)| k == "operation")
        .map(|(_, v)| v.as_str())
        .collect();
    let note = posted
        .fields
        .iter()
        .find(|(k, _)| k == "note")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    if operations.is_empty() {
        return redirect_with(
            session,
            &back,
            Flash::failed(&invalid("choose at least one operation")),
        );
    }
    let answer = session
        .api(&console)
        .post(
            &format!("/api/federation/peers/{}/requests", segment(&label)),
            json!({"operations": operations, "note": note}),
        )
        .await
        .and_then(typed::<AccessRequest>);
    match answer {
        Ok(made) => redirect_with(
            session,
            &back,
            Flash::done(format!(
                "Request {} sent to {label}: its operator reviews it, then you complete the pairing here.",
                made.id
            )),
        ),
        Err(failure) => redirect_with(session, &back, Flash::failed(&failure)),
    }
}
