//! Job ownership: whether peers may choose this cluster as the owner of
//! new batch jobs. Maintenance and drain refuse their new jobs (running
//! jobs go on and stay here); undrain takes them again.

use axum::Router;
use axum::extract::State;
use axum::http::Method;
use axum::response::Response;
use axum::routing::get;
use maud::html;
use serde::Deserialize;
use serde_json::json;
use switchyard_protocol::jobs::{Eligibility, OwnerEligibility};

use super::super::ConsoleState;
use super::super::form::{Posted, redirect_after, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::{SCOPE, badge, invalid, subnav};

const HERE: &str = "/console/federation/eligibility";
/// The longest reason the API keeps.
const MAX_REASON: usize = 256;

pub fn routes() -> Router<ConsoleState> {
    Router::new().route(HERE, get(show).post(set))
}

/// What each state means, for the select.
fn meaning(state: Eligibility) -> &'static str {
    match state {
        Eligibility::Eligible => "eligible: peers may make this cluster a job's owner (undrain)",
        Eligibility::Maintenance => "maintenance: refuse peers' new jobs",
        Eligibility::Draining => "draining: refuse peers' new jobs until running ones end",
    }
}

async fn show(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let now = session
        .api(&console)
        .get_as::<OwnerEligibility>("/api/federation/eligibility")
        .await;
    let body = html! {
        (subnav(HERE))
        @match &now {
            Err(failure) => { (page::failure(failure)) }
            Ok(now) => {
                section.panel {
                    dl.facts {
                        dt { "State" } dd { (badge(now.state.as_str())) }
                        dt { "Reason" } dd { @if now.reason.is_empty() { span.muted { "none given" } } @else { (now.reason) } }
                        dt { "Since" } dd { (now.changed_at) }
                        dt { "Jobs this cluster owns, not ended" } dd { (now.active_jobs) }
                    }
                    @if now.state == Eligibility::Draining && now.active_jobs == 0 {
                        p.flash.ok role="status" { "Drained: no job this cluster owns is running." }
                    }
                }
                section.panel aria-labelledby="eligibility-title" {
                    h2 #eligibility-title { "Change" }
                    form.stack method="post" action=(HERE) {
                        (csrf_field(&session))
                        label for="eligibility-state" { "Peers' new jobs" }
                        select #eligibility-state name="state" {
                            @for state in Eligibility::ALL {
                                option value=(state.as_str()) selected[*state == now.state] { (meaning(*state)) }
                            }
                        }
                        label for="eligibility-reason" { "Reason" }
                        input #eligibility-reason type="text" name="reason" maxlength=(MAX_REASON) placeholder="host maintenance";
                        button type="submit" { "Set" }
                    }
                }
            }
        }
    };
    page::render(&session, "Job ownership", body)
}

#[derive(Debug, Default, Deserialize)]
struct SetForm {
    #[serde(default)]
    state: String,
    #[serde(default)]
    reason: String,
}

async fn set(State(console): State<ConsoleState>, posted: Posted<SetForm>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let Ok(state) = posted.fields.state.parse::<Eligibility>() else {
        let failure = invalid(format!("no state '{}'", posted.fields.state));
        return redirect_with(session, HERE, Flash::failed(&failure));
    };
    let result = session
        .api(&console)
        .call(
            Method::PUT,
            "/api/federation/eligibility",
            Some(json!({"state": state, "reason": posted.fields.reason.trim()})),
        )
        .await;
    redirect_after(
        session,
        HERE,
        format!("Peers' new jobs: {}.", meaning(state)),
        result,
    )
}
