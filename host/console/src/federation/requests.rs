//! Review access: the requests peers sent this cluster and those it sent
//! them; approving one with exact resources (the owner's key signs the
//! grant and the peer is offered it), discarding one no grant answered,
//! and sharing with a peer unprompted.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use switchyard_protocol::federation::RequestState;
use switchyard_protocol::federation::{AccessRequest, Direction, GrantRecord, Operation, Peer};

use super::super::ConsoleState;
use super::super::api::ApiFailure;
use super::super::api::typed;
use super::super::form::{Posted, call_and_redirect, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::offers::Offers;
use super::{SCOPE, badge, grant_form, segment, subnav};

const HERE: &str = "/console/federation/requests";
const SHARE: &str = "/console/federation/share";

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route(HERE, get(list))
        .route("/console/federation/requests/{id}", get(review))
        .route("/console/federation/requests/{id}/approve", post(approve))
        .route("/console/federation/requests/{id}/discard", post(discard))
        .route(SHARE, get(share_form).post(share))
}

/// `GET /api/federation/requests`.
#[derive(Deserialize)]
struct Requests {
    requests: Vec<AccessRequest>,
}

#[derive(Deserialize)]
struct Peers {
    peers: Vec<Peer>,
}

fn operations(ops: &[Operation]) -> String {
    ops.iter()
        .map(|o| o.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let requests = session
        .api(&console)
        .get_as::<Requests>("/api/federation/requests")
        .await;
    let body = html! {
        (subnav(HERE))
        p { a.button href=(SHARE) { "Share with a peer unprompted" } }
        @match &requests {
            Err(failure) => { (page::failure(failure)) }
            Ok(requests) => {
                @let (incoming, outgoing): (Vec<&AccessRequest>, Vec<&AccessRequest>) =
                    requests.requests.iter().partition(|r| r.direction == Direction::Incoming);
                h2 { "Peers asking this cluster" }
                @if incoming.is_empty() {
                    (page::empty("No peer has asked this cluster for access.", html! {
                        "A peer's operator asks from their console; you may also "
                        a href=(SHARE) { "share with a peer" } " unprompted."
                    }))
                } @else {
                    (table(&session, &incoming, true))
                }
                h2 { "This cluster asking peers" }
                @if outgoing.is_empty() {
                    (page::empty("This cluster has asked no peer for access.", html! {
                        "Open a peer's page from " a href="/console/federation" { "Peers" } " and request access there."
                    }))
                } @else {
                    (table(&session, &outgoing, false))
                }
            }
        }
    };
    page::render(&session, "Requests", body)
}

fn table(session: &Session, requests: &[&AccessRequest], incoming: bool) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr { th { "Request" } th { "Peer" } th { "Operations" } th { "Note" } th { "State" } th { "Made" } th { span.muted { "Actions" } } } }
            tbody {
                @for request in requests {
                    @let pending = request.state == RequestState::Pending;
                    tr {
                        td { code { (request.id) } }
                        td { a href=(format!("/console/federation/peers/{}", segment(&request.peer))) { (request.peer) } }
                        td { (operations(&request.operations)) }
                        td { (request.note) }
                        td {
                            (badge(request.state.as_str()))
                            @if let Some(grant) = &request.grant {
                                " " a href=(format!("/console/federation/grants/{}", segment(grant))) { (grant) }
                            }
                        }
                        td { (request.created_at) }
                        td {
                            @if incoming && pending {
                                a.button href=(format!("{HERE}/{}", segment(&request.id))) aria-label=(format!("Review request {}", request.id)) { "Review" }
                                " "
                            }
                            @if pending {
                                form.inline method="post" action=(format!("{HERE}/{}/discard", segment(&request.id))) {
                                    (csrf_field(session))
                                    button.secondary type="submit" aria-label=(format!("Discard request {}", request.id)) { "Discard" }
                                }
                            }
                        }
                    }
                }
            }
        } }
    }
}

async fn review(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    session: Session,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let found = api
        .get_as::<Requests>("/api/federation/requests")
        .await
        .map(|r| r.requests.into_iter().find(|r| r.id == id));
    let offers = api.get_as::<Offers>("/api/federation/offers").await;
    let body = html! {
        (subnav(HERE))
        @match &found {
            Err(failure) => { (page::failure(failure)) }
            Ok(None) => {
                (page::empty("No such request: it was discarded, or the peer was forgotten.", html! {
                    "Back to " a href=(HERE) { "Requests" } "."
                }))
            }
            Ok(Some(request)) => {
                section.panel {
                    dl.facts {
                        dt { "Peer" } dd { a href=(format!("/console/federation/peers/{}", segment(&request.peer))) { (request.peer) } }
                        dt { "Asks for" } dd { (operations(&request.operations)) }
                        dt { "Note" } dd { (request.note) }
                        dt { "State" } dd { (badge(request.state.as_str())) }
                    }
                }
                @if request.state == RequestState::Pending {
                    section.panel aria-labelledby="approve-title" {
                        h2 #approve-title { "Approve exact resources" }
                        p { "Approval creates no general access: the peer gets exactly what is checked here, "
                            "signed by this cluster's key, and completes the pairing on its side." }
                        form.stack method="post" action=(format!("{HERE}/{}/approve", segment(&request.id))) {
                            (csrf_field(&session))
                            (grant_form::fieldset(&offers, &request.operations))
                            button type="submit" { "Approve" }
                        }
                    }
                    form.inline method="post" action=(format!("{HERE}/{}/discard", segment(&request.id))) {
                        (csrf_field(&session))
                        button.danger type="submit" { "Discard request" }
                    }
                }
            }
        }
    };
    page::render(&session, &format!("Review request {id}"), body)
}

async fn approve(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let back = format!("{HERE}/{}", segment(&id));
    let spec = match grant_form::read(&posted.fields, None) {
        Ok(spec) => spec,
        Err(failure) => return redirect_with(session, &back, Flash::failed(&failure)),
    };
    let body = serde_json::to_value(&spec).expect("a grant spec serialises");
    let answer = session
        .api(&console)
        .post(
            &format!("/api/federation/requests/{}/approve", segment(&id)),
            body,
        )
        .await;
    offered(session, &back, answer)
}

/// After a grant was offered: to its receipt, or back with the refusal.
fn offered(
    session: &Session,
    back: &str,
    answer: Result<serde_json::Value, ApiFailure>,
) -> Response {
    match answer.and_then(typed::<GrantRecord>) {
        Ok(grant) => redirect_with(
            session,
            &format!("/console/federation/grants/{}", segment(&grant.id)),
            Flash::done(format!(
                "Grant {} offered to {}, signed by this cluster's key; {} completes it on its side.",
                grant.id, grant.peer, grant.peer
            )),
        ),
        Err(failure) => redirect_with(session, back, Flash::failed(&failure)),
    }
}

async fn discard(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!("/api/federation/requests/{}", segment(&id));
    let done = format!("Request {id} discarded.");
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        (Method::DELETE, &path),
        HERE,
        done,
    )
    .await
}

async fn share_form(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let peers = api.get_as::<Peers>("/api/federation/peers").await;
    let offers = api.get_as::<Offers>("/api/federation/offers").await;
    let body = html! {
        (subnav("/console/federation/grants"))
        p { "Share local resources with a peer without its asking: a grant of its own, in one direction. "
            "The peer completes it on its side." }
        @match &peers {
            Err(failure) => { (page::failure(failure)) }
            Ok(peers) if peers.peers.is_empty() => {
                (page::empty("No peers to share with.", html! { a href="/console/federation/pair" { "Pair a cluster" } " first." }))
            }
            Ok(peers) => {
                form.stack method="post" action=(SHARE) {
                    (csrf_field(&session))
                    label for="share-peer" { "Peer" }
                    select #share-peer name="peer" required {
                        @for peer in &peers.peers { option value=(peer.label) { (peer.label) } }
                    }
                    (grant_form::fieldset(&offers, &[Operation::Inference]))
                    button type="submit" { "Share" }
                }
            }
        }
    };
    page::render(&session, "Share with a peer", body)
}

async fn share(
    State(console): State<ConsoleState>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let peer = posted
        .fields
        .iter()
        .find(|(k, _)| k == "peer")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let spec = match grant_form::read(&posted.fields, peer) {
        Ok(spec) => spec,
        Err(failure) => return redirect_with(session, SHARE, Flash::failed(&failure)),
    };
    let body = serde_json::to_value(&spec).expect("a grant spec serialises");
    let answer = session
        .api(&console)
        .post("/api/federation/grants", body)
        .await;
    offered(session, SHARE, answer)
}
