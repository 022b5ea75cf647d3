//! Admission: every point's chain, its generation and what each replica
//! serves; per point, a form that sets the chain (one or more steps), a
//! rollback, the dry-run evaluator and the recent decisions.
//!
//! Layout: this file holds the routes and the two pages; `admission/view.rs`
//! reads the API's answers once into types and draws them;
//! `admission/set.rs` the set and rollback forms; `admission/dry_run.rs` the
//! evaluator.

mod dry_run;
mod set;
mod view;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use switchyard_runtime::admission::AdmissionPoint;

use super::ConsoleState;
use super::api::ApiFailure;
use super::api::typed;
use super::page;
use super::session::Session;
use switchyard_protocol::generations::ChainStatus;

/// How often a point's replicas and decisions are redrawn, in milliseconds.
const LIVE_EVERY_MS: u64 = 3000;

/// The admission pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/admission", get(points))
        .route("/console/admission/{point}", get(point_page))
        .route("/console/admission/{point}/live", get(live))
        .route("/console/admission/{point}/set", post(set::submit))
        .route("/console/admission/{point}/rollback", post(set::rollback))
        .route(
            "/console/admission/{point}/dry-run",
            get(dry_run::form).post(dry_run::evaluate),
        )
}

/// A point's name from the path, or the console's 404 page.
async fn known(name: &str) -> Result<AdmissionPoint, Response> {
    match AdmissionPoint::parse(name) {
        Some(point) => Ok(point),
        None => Err(page::not_found().await),
    }
}

/// `GET /api/admission/{point}`, read once.
pub(super) async fn chain(
    console: &ConsoleState,
    session: &Session,
    point: AdmissionPoint,
) -> Result<ChainStatus, ApiFailure> {
    let answer = session
        .api(console)
        .get(&format!("/api/admission/{point}"))
        .await?;
    typed(answer)
}

/// Every point, its generation, chain and replicas at a glance.
async fn points(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let mut chains = Vec::new();
    for point in AdmissionPoint::ALL {
        chains.push((point, chain(&console, &session, point).await));
    }
    let body = html! {
        p.hint { "Each admission point judges its requests with an ordered chain of policies: the first enforced deny wins. Every change is a new generation that each replica builds, then swaps in." }
        div.table-wrap { table {
            thead { tr { th { "Point" } th { "Generation" } th { "Chain" } th { "Replicas" } } }
            tbody {
                @for (point, chain) in &chains {
                    tr {
                        td { a href=(format!("/console/admission/{point}")) { (point.as_str()) } }
                        @match chain {
                            Err(failure) => { td colspan="3" { (page::failure(failure)) } }
                            Ok(chain) => {
                                td { (chain.generation) }
                                td { (view::chain_summary(chain)) }
                                td { (view::replicas_summary(&chain.replicas)) }
                            }
                        }
                    }
                }
            }
        } }
        @if chains.iter().all(|(_, c)| c.as_ref().is_ok_and(|c| c.policies.is_empty())) {
            (page::empty("No point has a policy yet: every request is allowed.", html! {
                "Upload a policy on the " a href="/console/plugins" { "Plugins" } " page, then open a point above to bind it."
            }))
        }
    };
    page::render(&session, "Admission", body)
}

async fn point_page(
    State(console): State<ConsoleState>,
    session: Session,
    Path(name): Path<String>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    let body = point_body(&console, &session, point, None).await;
    page::render(&session, &format!("Admission: {point}"), body)
}

/// A point's page: its chain, replicas and decisions, and the forms. `set`
/// is what a set form carried back after a refusal or "add step".
async fn point_body(
    console: &ConsoleState,
    session: &Session,
    point: AdmissionPoint,
    set: Option<(&[set::Step], Option<&ApiFailure>)>,
) -> Markup {
    let chain = chain(console, session, point).await;
    let policies = super::plugins::registry(console, session).await;
    let live = live_fragment(console, session, point).await;
    html! {
        nav.jump aria-label="On this page" {
            a href="/console/admission" { "All admission points" } " · "
            a href="#set" { "Set the chain" } " · "
            a href="#dry-run" { "Dry run" } " · "
            a href="#admission-live" { "Replicas and decisions" }
        }
        @match &chain {
            Err(failure) => { (page::failure(failure)) }
            Ok(chain) => { (view::chain_panel(chain)) }
        }
        div #admission-live data-live=(format!("/console/admission/{point}/live")) data-every=(LIVE_EVERY_MS) {
            (live)
        }
        (set::forms(session, point, chain.as_ref().ok(), &policies, set))
        (dry_run::section(session, point, None))
    }
}

/// The replicas and the recent decisions alone, for the page's refresh.
async fn live(
    State(console): State<ConsoleState>,
    session: Session,
    Path(name): Path<String>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    live_fragment(&console, &session, point)
        .await
        .into_response()
}

async fn live_fragment(console: &ConsoleState, session: &Session, point: AdmissionPoint) -> Markup {
    let chain = chain(console, session, point).await;
    let decisions = session
        .api(console)
        .get(&format!("/api/admission/{point}/decisions?limit=20"))
        .await
        .and_then(typed);
    html! {
        h2 { "Replicas" }
        @match &chain {
            Err(failure) => { (page::failure(failure)) }
            Ok(chain) => { (view::replicas_table(chain)) }
        }
        h2 { "Recent decisions" }
        @match &decisions {
            Err(failure) => { (page::failure(failure)) }
            Ok(log) => { (view::decisions_table(log)) }
        }
    }
}
