//! Grants, both directions: the list, one grant's acceptance receipt (its
//! signed terms, both signatures, usage and quotas left), and what each
//! side may do with it: the grantee completes the pairing and refreshes
//! remote access, the owner revokes, either retires one no longer active.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;
use switchyard_protocol::federation::GrantStanding;
use switchyard_protocol::federation::{
    Direction, FederationStatus, GrantRecord, GrantState, GrantStatus, Party,
};

use super::super::ConsoleState;
use super::super::form::{Posted, redirect_after};
use super::super::page::{self, csrf_field};
use super::super::session::Session;
use super::{SCOPE, badge, fingerprint, segment, subnav};

const HERE: &str = "/console/federation/grants";

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route(HERE, get(list))
        .route("/console/federation/grants/{id}", get(detail))
        .route("/console/federation/grants/{id}/{action}", post(act))
}

/// `GET /api/federation/grants`.
#[derive(Deserialize)]
pub struct Grants {
    pub grants: Vec<GrantRecord>,
}

/// A Unix time in ms as `YYYY-MM-DD HH:MM UTC` (the terms keep ms; the
/// server has no calendar crate, and the civil date is a few lines:
/// Howard Hinnant's days-to-civil).
fn unix_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let (hour, minute) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let grants = session
        .api(&console)
        .get_as::<Grants>("/api/federation/grants")
        .await;
    let body = html! {
        (subnav(HERE))
        p { a.button href="/console/federation/share" { "Share with a peer" } }
        @match &grants {
            Err(failure) => { (page::failure(failure)) }
            Ok(grants) if grants.grants.is_empty() => {
                (page::empty("No grants yet, in either direction.", html! {
                    "Approve a peer's request on " a href="/console/federation/requests" { "Requests" }
                    " or " a href="/console/federation/share" { "share with a peer" }
                    "; a grant a peer offers this cluster appears here for you to complete."
                }))
            }
            Ok(grants) => { (table(&session, &grants.grants)) }
        }
    };
    page::render(&session, "Grants", body)
}

/// A grant's list of granted resources, in words.
fn resources(grant: &GrantRecord) -> Markup {
    let t = &grant.terms;
    html! {
        @if !t.services.is_empty() { "services " code { (t.services.join(", ")) } br; }
        @if !t.models.is_empty() { "models " code { (t.models.join(", ")) } br; }
        @if !t.machines.is_empty() { "machines " code { (t.machines.join(", ")) } }
        @if t.services.is_empty() && t.models.is_empty() && t.machines.is_empty() { span.muted { "none" } }
    }
}

/// Grant tables elsewhere (a peer's page) draw the same rows.
pub fn table(session: &Session, grants: &[GrantRecord]) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr {
                th { "Grant" } th { "Direction" } th { "Peer" } th { "Status" } th { "Operations" }
                th { "Resources" } th { "Expires" } th { "Requests used" } th { span.muted { "Actions" } }
            } }
            tbody {
                @for grant in grants {
                    tr {
                        td { a href=(format!("{HERE}/{}", segment(&grant.id))) { code { (grant.id) } } }
                        td { (direction(grant.direction)) }
                        td { (grant.peer) }
                        td { (badge(grant.status.as_str())) }
                        td { (grant.terms.operations.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", ")) }
                        td { (resources(grant)) }
                        td { (unix_ms(grant.terms.expires_at_unix_ms)) }
                        td {
                            (grant.usage.requests) " of " (grant.terms.max_requests)
                            br;
                            meter min="0" max=(grant.terms.max_requests) value=(grant.usage.requests)
                                aria-label=(format!("Requests used of grant {}", grant.id)) {}
                        }
                        td { (actions(session, grant)) }
                    }
                }
            }
        } }
    }
}

fn direction(direction: Direction) -> &'static str {
    match direction {
        Direction::Outgoing => "this cluster shares",
        Direction::Incoming => "shared with this cluster",
    }
}

/// The buttons that apply to `grant` from this side.
fn actions(session: &Session, grant: &GrantRecord) -> Markup {
    let mut buttons: Vec<(&str, &str, bool)> = Vec::new();
    match (grant.direction, grant.state) {
        (Direction::Incoming, GrantState::Offered) => {
            buttons.push(("complete", "Complete pairing", false))
        }
        (Direction::Incoming, GrantState::Active) => buttons.push(("refresh", "Refresh", false)),
        (Direction::Outgoing, GrantState::Offered | GrantState::Active) => {
            buttons.push(("revoke", "Revoke", true))
        }
        _ => {}
    }
    if grant.status != GrantStanding::Active {
        buttons.push(("retire", "Retire", true));
    }
    html! {
        @for (action, text, danger) in buttons {
            form.inline method="post" action=(format!("{HERE}/{}/{action}", segment(&grant.id))) {
                (csrf_field(session))
                button.danger[danger] type="submit" aria-label=(format!("{text} grant {}", grant.id)) { (text) }
            }
            " "
        }
    }
}

async fn detail(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    session: Session,
) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let grant = api
        .get_as::<GrantRecord>(&format!("/api/federation/grants/{}", segment(&id)))
        .await;
    let quotas: Option<GrantStatus> = api
        .get_as::<FederationStatus>("/api/federation/status")
        .await
        .ok()
        .and_then(|s| {
            s.peers
                .into_iter()
                .flat_map(|p| p.grants)
                .find(|g| g.id == id)
        });
    let body = html! {
        (subnav(HERE))
        @match &grant {
            Err(failure) => { (page::failure(failure)) p { "Back to " a href=(HERE) { "Grants" } "." } }
            Ok(grant) => { (receipt(&session, grant, quotas.as_ref())) }
        }
    };
    page::render(&session, &format!("Grant {id}"), body)
}

fn party(title: &str, party: &Party) -> Markup {
    html! {
        dt { (title) }
        dd { (party.label) " · " code { (party.cluster_id) } br; span.muted { "key " code { (fingerprint(&party.public_key)) } } }
    }
}

fn receipt(session: &Session, grant: &GrantRecord, quotas: Option<&GrantStatus>) -> Markup {
    let t = &grant.terms;
    html! {
        section.panel {
            p { (badge(grant.status.as_str())) " " (direction(grant.direction)) " · peer "
                a href=(format!("/console/federation/peers/{}", segment(&grant.peer))) { (grant.peer) } }
            (actions(session, grant))
            @if let Some(at) = &grant.last_verified_at {
                p.hint { "The owner last confirmed it at " (at) "; refresh before acting on a remembered state." }
            }
        }
        div.cards.wide {
            section.card {
                h2 { "Terms" }
                dl.facts {
                    (party("Owner", &t.owner))
                    (party("Grantee", &t.grantee))
                    dt { "Operations" } dd { (t.operations.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(", ")) }
                    dt { "Resources" } dd { (resources(grant)) }
                    dt { "Issued" } dd { (unix_ms(t.issued_at_unix_ms)) }
                    dt { "Expires" } dd { (unix_ms(t.expires_at_unix_ms)) }
                    dt { "Concurrent calls" } dd { (t.max_concurrent) }
                    dt { "Requests in all" } dd { (t.max_requests) }
                    dt { "Model bytes" } dd { (page::bytes(t.max_model_bytes)) }
                    dt { "Stop on revoke" } dd { (if t.stop_on_revoke { "yes" } else { "no" }) }
                    @if let Some(request) = &t.request { dt { "Answers request" } dd { code { (request) } } }
                }
            }
            section.card {
                h2 { "Usage" }
                dl.facts {
                    dt { "In flight" } dd { (grant.usage.in_flight) " of " (t.max_concurrent) }
                    dt { "Requests" } dd { (grant.usage.requests) " of " (t.max_requests) }
                    dt { "Model bytes" } dd { (page::bytes(grant.usage.model_bytes)) " of " (page::bytes(t.max_model_bytes)) }
                    dt { "Tokens" } dd { (grant.usage.tokens) }
                    @if let Some(q) = quotas {
                        dt { "Exhausted" }
                        dd { @if q.exhausted.is_empty() { "nothing" } @else { (q.exhausted.join(", ")) } }
                    }
                }
                @if grant.direction == Direction::Incoming {
                    p.hint { "The owner counts; this is what it last said." }
                }
            }
        }
        section.panel {
            h2 { "Acceptance receipt" }
            p { "Both keys sign " code { "switchyard-federation-receipt/1" } " and the canonical JSON of the terms." }
            dl.facts {
                dt { "Owner's signature" } dd { code.wrap { (grant.owner_signature) } }
                dt { "Grantee's signature" }
                dd {
                    @match &grant.grantee_signature {
                        Some(signature) => { code.wrap { (signature) } }
                        None => { span.muted { "not yet: the grantee has not completed the pairing" } }
                    }
                }
            }
            details {
                summary { "The signed terms as JSON" }
                pre.wrap { (serde_json::to_string_pretty(t).unwrap_or_default()) }
            }
        }
    }
}

async fn act(
    State(console): State<ConsoleState>,
    Path((id, action)): Path<(String, String)>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let grant = segment(&id);
    let api = session.api(&console);
    let (result, done) = match action.as_str() {
        "complete" => (
            api.post(
                &format!("/api/federation/grants/{grant}/complete"),
                json!({}),
            )
            .await,
            format!(
                "Grant {id} completed: both keys signed the terms and both sides keep the receipt."
            ),
        ),
        "refresh" => (
            api.post(
                &format!("/api/federation/grants/{grant}/refresh"),
                json!({}),
            )
            .await,
            format!("Grant {id} refreshed from its owner."),
        ),
        "revoke" => {
            let result = api
                .post(&format!("/api/federation/grants/{grant}/revoke"), json!({}))
                .await;
            let told = result
                .as_ref()
                .map(|v| v["peer_notified"] == true)
                .unwrap_or(false);
            let done = if told {
                format!("Grant {id} revoked; the peer was told.")
            } else {
                format!(
                    "Grant {id} revoked; the peer could not be told now, and its calls are refused anyway."
                )
            };
            (result, done)
        }
        "retire" => {
            let result = api
                .call(
                    Method::DELETE,
                    &format!("/api/federation/grants/{grant}"),
                    None,
                )
                .await;
            return redirect_after(session, HERE, format!("Grant {id} retired."), result);
        }
        _ => return page::not_found().await,
    };
    redirect_after(session, &format!("{HERE}/{grant}"), done, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_reads_as_a_utc_date() {
        assert_eq!(unix_ms(0), "1970-01-01 00:00 UTC");
        // 2024-02-29 12:34:56 UTC, a leap day.
        assert_eq!(unix_ms(1_709_210_096_000), "2024-02-29 12:34 UTC");
    }
}
