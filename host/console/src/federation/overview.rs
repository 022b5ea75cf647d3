//! Federation's first page: this cluster's identity (what a peer's
//! operator compares), whether federation runs here, the bounds, and every
//! peer with its link (refreshed in place), with forgetting one.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use switchyard_protocol::federation::{
    FederationStatus, Identity, MAX_GRANTS, MAX_OFFERS, MAX_OPERATIONS, MAX_PEERS, Peer, PeerStatus,
};

use super::super::ConsoleState;
use super::super::api::{Api, ApiFailure};
use super::super::form::{Posted, call_and_redirect};
use super::super::page::{self, csrf_field};
use super::super::session::Session;
use super::{SCOPE, badge, fingerprint, segment, subnav};

/// How often the peers' links refresh, in ms.
const LIVE_EVERY_MS: u32 = 2000;

/// `GET /api/federation/peers`.
#[derive(Deserialize)]
struct Peers {
    peers: Vec<Peer>,
}

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/federation", get(overview))
        .route("/console/federation/live", get(live))
        .route("/console/federation/peers/{peer}/forget", post(forget))
        .route("/console/federation/forget", post(forget_chosen))
}

async fn overview(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let identity = api.get_as::<Identity>("/api/federation/identity").await;
    let status = api
        .get_as::<FederationStatus>("/api/federation/status")
        .await;
    let peers = peers_table(&api).await;
    let labels = api
        .get_as::<Peers>("/api/federation/peers")
        .await
        .ok()
        .map(|p| p.peers.into_iter().map(|p| p.label).collect::<Vec<_>>());
    let body = html! {
        (subnav("/console/federation"))
        section.panel aria-labelledby="identity-title" {
            h2 #identity-title { "This cluster" }
            @match &identity {
                Err(failure) => { (page::failure(failure)) }
                Ok(identity) => { (identity_list(identity, &status)) }
            }
        }
        @if let Ok(status) = &status {
            (bounds(status))
        }
        h2 { "Peers" }
        div #federation-peers data-live="/console/federation/live" data-every=(LIVE_EVERY_MS) {
            (peers)
        }
        // Outside the region that refreshes, so keyboard focus on it stays.
        @if let Some(labels) = labels.filter(|l| !l.is_empty()) {
            section.panel aria-labelledby="forget-title" {
                h2 #forget-title { "Forget a peer" }
                p.hint { "Forgetting a peer deletes its requests, grants and receipts and closes its link; "
                    "managed services and completed model copies stay. To pair again, one side joins again." }
                form.inline method="post" action="/console/federation/forget" {
                    (csrf_field(&session))
                    label for="forget-peer" { "Peer to forget" }
                    select #forget-peer name="peer" {
                        @for label in &labels { option value=(label) { (label) } }
                    }
                    button.danger type="submit" { "Forget" }
                }
            }
        }
    };
    page::render(&session, "Federation", body)
}

/// The peers' table alone, for the page's refresh.
async fn live(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    peers_table(&session.api(&console)).await.into_response()
}

fn identity_list(identity: &Identity, status: &Result<FederationStatus, ApiFailure>) -> Markup {
    html! {
        dl.facts {
            dt { "Label" } dd { (identity.label) }
            dt { "Cluster id" } dd { code { (identity.cluster_id) } }
            dt { "Key fingerprint" }
            dd {
                @match &identity.public_key {
                    Some(key) => {
                        code #key-fingerprint { (fingerprint(key)) }
                        details { summary { "Public key" } code.wrap { (key) } }
                    }
                    None => { span.muted { "no key configured yet" } }
                }
            }
            dt { "Federation here" }
            dd {
                @match status {
                    Ok(status) => {
                        (badge(&status.identity))
                        @if let Some(why) = &status.suspended {
                            " " span.muted { (why) }
                        }
                    }
                    Err(failure) => { (page::failure(failure)) }
                }
            }
        }
        @if let Ok(status) = status {
            @if status.identity != "verified" {
                p.flash.warn role="status" {
                    "Federation is suspended on this replica: give it the cluster's key file, or adopt "
                    "a new key and pair again (" code { "switchyard federation identity --adopt" } ")."
                }
            }
        }
        p.hint { "A peer's operator compares this fingerprint with the one their console shows before trusting the pairing." }
    }
}

fn bounds(status: &FederationStatus) -> Markup {
    let rows = [
        ("Peers", status.bounds.peers, MAX_PEERS),
        ("Offers", status.bounds.offers, MAX_OFFERS),
        ("Grants", status.bounds.grants, MAX_GRANTS),
        (
            "Operation receipts",
            status.bounds.operations,
            MAX_OPERATIONS,
        ),
    ];
    html! {
        div.cards {
            @for (name, used, max) in rows {
                div.card {
                    h3 { (name) }
                    p.figure { (used) span.muted { " of " (max) } }
                    meter min="0" max=(max) value=(used) aria-label=(format!("{name} kept of {max}")) {}
                }
            }
            div.card {
                h3 { "Model copies under way" }
                p.figure { (status.copies.len()) }
                p { a href="/console/federation/copies" { "Model copies" } }
            }
        }
    }
}

async fn peers_table(api: &Api) -> Markup {
    let peers = match api.get_as::<Peers>("/api/federation/peers").await {
        Ok(peers) => peers.peers,
        Err(failure) => return page::failure(&failure),
    };
    // The status adds what only it knows: whether each key was proved since
    // this replica started, and the grants.
    let status: HashMap<String, PeerStatus> = api
        .get_as::<FederationStatus>("/api/federation/status")
        .await
        .map(|s| s.peers.into_iter().map(|p| (p.id.clone(), p)).collect())
        .unwrap_or_default();
    if peers.is_empty() {
        return page::empty(
            "No peers yet: this cluster shares nothing and uses nothing of another.",
            html! {
                a href="/console/federation/pair" { "Pair a cluster" }
                ": mint a join token for another cluster's operator, or join theirs with its URL and token."
            },
        );
    }
    html! {
        div.table-wrap { table {
            thead { tr {
                th { "Peer" } th { "Link" } th { "Identity" } th { "Dials" } th { "Grants" }
            } }
            tbody {
                @for peer in &peers {
                    @let known = status.get(&peer.id);
                    tr {
                        td {
                            a href=(format!("/console/federation/peers/{}", segment(&peer.label))) { (peer.label) }
                            br; span.muted { "key " code { (fingerprint(&peer.public_key)) } }
                        }
                        td {
                            (badge(peer.link.state.as_str()))
                            @if let Some(since) = &peer.link.since { br; span.muted { "since " (since) } }
                            @if let Some(error) = &peer.link.last_error { br; span.muted { (error) } }
                        }
                        td {
                            @if known.is_some_and(|k| k.identity_verified) {
                                span.state.ok { "proved" }
                            } @else {
                                span.state { "not proved since this replica started" }
                            }
                            @if let Some(at) = &peer.last_verified_at { br; span.muted { "last " (at) } }
                        }
                        td {
                            @match &peer.url {
                                Some(url) => { code { (url) } }
                                None => { span.muted { "it dials this cluster" } }
                            }
                        }
                        td { (known.map(|k| k.grants.len()).unwrap_or(0)) }
                    }
                }
            }
        } }
    }
}

async fn forget(
    State(console): State<ConsoleState>,
    Path(peer): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!("/api/federation/peers/{}", segment(&peer));
    let done = format!("Peer {peer} forgotten: its link is closed and its grants are gone.");
    let call = (Method::DELETE, path.as_str());
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        call,
        "/console/federation",
        done,
    )
    .await
}

/// The overview's form: the peer chosen in its select.
async fn forget_chosen(
    State(console): State<ConsoleState>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let peer = posted
        .fields
        .iter()
        .find(|(k, _)| k == "peer")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    forget(State(console), Path(peer), posted).await
}
