//! The carrier: the cluster's set and where a change is, every replica and
//! worker, and the switch: a preflight (a dry run) that lists what blocks
//! it and, on the same page, the live replicas and workers that would move
//! (the confirmation); then the real change, whose phases (prepare →
//! commit → drain → stable) are drawn as they happen; and abort.
//!
//! Layout: this file holds the routes and handlers; `carrier/view.rs`
//! draws the status, the phases and the preflight.

mod view;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchyard_carrier::SetName;
use switchyard_protocol::carrier::{Blocked, CarrierChange, CarrierStatus, ChangeMoved, Preflight};

use super::ConsoleState;
use super::api::ApiFailure;
use super::api::typed;
use super::form::{Posted, redirect_after, redirect_with};
use super::page::{self, Flash, csrf_field};
use super::session::Session;

/// How often the status is redrawn, in milliseconds.
const STATUS_EVERY_MS: u64 = 2000;
/// How often the phases of a change are redrawn, in milliseconds.
const PHASES_EVERY_MS: u64 = 1000;

/// The carrier pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/carrier", get(carrier_page))
        .route("/console/carrier/live", get(live_status))
        .route("/console/carrier/phases", get(live_phases))
        .route("/console/carrier/preflight", post(preflight))
        .route("/console/carrier/switch", post(switch))
        .route("/console/carrier/abort", post(abort))
}

/// `GET /api/cluster/carrier`, read once.
async fn status(console: &ConsoleState, session: &Session) -> Result<CarrierStatus, ApiFailure> {
    session.api(console).get_as("/api/cluster/carrier").await
}

async fn carrier_page(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let status = status(&console, &session).await;
    let body = match &status {
        Err(failure) => page::failure(failure),
        Ok(status) => html! {
            section.panel aria-labelledby="phases-title" {
                h2 #phases-title { "Change" }
                div #carrier-phases data-live="/console/carrier/phases" data-every=(PHASES_EVERY_MS) {
                    (view::phases(&session, status))
                }
            }
            div #carrier-status data-live="/console/carrier/live" data-every=(STATUS_EVERY_MS) {
                (view::status(status))
            }
            (switch_form(&session, status))
        },
    };
    page::render(&session, "Carrier", body)
}

/// The status alone, for the page's refresh.
async fn live_status(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    match status(&console, &session).await {
        Ok(status) => view::status(&status).into_response(),
        Err(failure) => page::failure(&failure).into_response(),
    }
}

/// The phases alone: final once the change settled or aborted.
async fn live_phases(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    match status(&console, &session).await {
        Ok(status) => view::phases(&session, &status).into_response(),
        Err(failure) => page::failure(&failure).into_response(),
    }
}

fn switch_form(session: &Session, status: &CarrierStatus) -> Markup {
    let active = status.carrier.as_deref().unwrap_or("");
    let preferred = SetName::ALL
        .iter()
        .map(|s| s.as_str())
        .find(|s| *s != active)
        .unwrap_or(active);
    html! {
        section.panel aria-labelledby="switch-title" {
            h2 #switch-title { "Switch the carrier" }
            p.hint { "First a preflight: every live replica refreshes its report and says whether it can build the target; nothing changes. The next page lists the replicas and workers that would move, and asks to confirm." }
            form.stack method="post" action="/console/carrier/preflight" {
                (csrf_field(session))
                label for="switch-target" { "Target carrier set" }
                select #switch-target name="target" {
                    @for set in SetName::ALL {
                        option value=(set.as_str()) selected[set.as_str() == preferred] {
                            (set.as_str()) @if set.as_str() == active { " (active)" }
                        }
                    }
                }
                label for="switch-versions" { "Component versions (optional)" }
                input #switch-versions type="text" name="versions" maxlength="512"
                    placeholder="e.g. tunnel=0.2.0" aria-describedby="switch-versions-hint";
                p.hint #switch-versions-hint { "Without them the target runs the newest registered version of each component; naming a newer version of the active set upgrades it by the same protocol." }
                label.check for="switch-force" {
                    input #switch-force type="checkbox" name="force" value="1";
                    " Force: go ahead although some workers cannot follow (they are demoted until they can)"
                }
                div { button type="submit" { "Check the switch" } }
            }
        }
    }
}

/// The switch form's fields.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Switch {
    target: String,
    force: Option<String>,
    /// `name=version` pairs: component versions other than the newest.
    versions: String,
}

/// The most component versions one switch names (a set has three).
const MAX_VERSIONS: usize = 8;

impl Switch {
    /// The API's body; the error says which pair is wrong.
    fn change(&self, dry_run: bool) -> Result<CarrierChange, ApiFailure> {
        let invalid = |message: String| ApiFailure {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request".into(),
            message,
            body: Value::Null,
        };
        let mut plugins = std::collections::BTreeMap::new();
        for pair in self.versions.split([',', ' ', '\n']).map(str::trim) {
            if pair.is_empty() {
                continue;
            }
            let Some((name, version)) = pair.split_once('=') else {
                return Err(invalid(format!(
                    "component versions are name=version pairs (tunnel=0.2.0), got `{}`",
                    pair.chars().take(64).collect::<String>()
                )));
            };
            plugins.insert(name.trim().to_string(), version.trim().to_string());
        }
        if plugins.len() > MAX_VERSIONS {
            return Err(invalid(format!(
                "name at most {MAX_VERSIONS} component versions"
            )));
        }
        Ok(CarrierChange {
            target: Some(self.target.trim().to_string()),
            plugins,
            dry_run,
            force: self.force.is_some(),
            abort: false,
        })
    }

    /// The target set, as given.
    pub fn target(&self) -> &str {
        self.target.trim()
    }

    /// Whether the form asked to go ahead past workers that cannot follow.
    pub fn force(&self) -> bool {
        self.force.is_some()
    }

    /// The component versions, as typed.
    pub fn versions(&self) -> &str {
        self.versions.trim()
    }
}

/// The dry run, shown as the confirmation page.
async fn preflight(State(console): State<ConsoleState>, posted: Posted<Switch>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let title = format!("Switch to {}: preflight", posted.fields.target());
    let answer = match posted.fields.change(true) {
        Err(failure) => Err(failure),
        Ok(change) => {
            let body = serde_json::to_value(change).expect("a change serialises");
            session
                .api(&console)
                .post("/api/cluster/carrier", body)
                .await
                .and_then(typed::<Preflight>)
        }
    };
    match answer {
        Ok(preflight) => page::render(
            session,
            &title,
            view::preflight(session, &posted.fields, &preflight),
        ),
        Err(failure) => refused(session, &title, &failure),
    }
}

/// The real change, after the confirmation.
async fn switch(State(console): State<ConsoleState>, posted: Posted<Switch>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let target = posted.fields.target().to_string();
    let answer = match posted.fields.change(false) {
        Err(failure) => Err(failure),
        Ok(change) => {
            let body = serde_json::to_value(change).expect("a change serialises");
            session
                .api(&console)
                .post("/api/cluster/carrier", body)
                .await
        }
    };
    match answer {
        Ok(moved) => {
            let moved: Result<ChangeMoved, _> = typed(moved);
            let done = match &moved {
                Ok(m) => format!(
                    "The change to {target} started (epoch {}): every replica and worker prepares it.",
                    m.epoch
                ),
                Err(_) => format!("The change to {target} started."),
            };
            redirect_with(session, "/console/carrier", Flash::done(done))
        }
        // Blocked since the preflight: the blockers and the report again.
        Err(failure) if failure.status == StatusCode::UNPROCESSABLE_ENTITY => {
            match serde_json::from_value::<Blocked>(failure.body.clone()) {
                Ok(blocked) => {
                    let preflight = Preflight {
                        ok: false,
                        blockers: blocked.blockers,
                        report: blocked.report,
                    };
                    let title = format!("Switch to {target}: blocked");
                    let body = html! {
                        (page::failure(&failure))
                        (view::preflight(session, &posted.fields, &preflight))
                    };
                    page::render_status(session, failure.status, &title, body)
                }
                Err(_) => refused(session, &format!("Switch to {target}"), &failure),
            }
        }
        Err(failure) => redirect_with(session, "/console/carrier", Flash::failed(&failure)),
    }
}

/// `{abort: true}`: the change in prepare stops; the cluster stays.
async fn abort(
    State(console): State<ConsoleState>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let body = serde_json::to_value(CarrierChange {
        abort: true,
        ..CarrierChange::default()
    })
    .expect("a change serialises");
    let result = session
        .api(&console)
        .post("/api/cluster/carrier", body)
        .await;
    let done = match &result {
        Ok(moved) => format!(
            "The change is aborted (epoch {}); the cluster stays on its set.",
            moved["epoch"]
        ),
        Err(_) => String::new(),
    };
    redirect_after(session, "/console/carrier", done, result)
}

fn refused(session: &Session, title: &str, failure: &ApiFailure) -> Response {
    let body = html! {
        (page::failure(failure))
        p { a href="/console/carrier" { "Back to the carrier" } }
    };
    page::render_status(session, failure.status, title, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(versions: &str) -> Switch {
        Switch {
            target: " tunnel ".into(),
            force: None,
            versions: versions.into(),
        }
    }

    #[test]
    fn component_versions_are_name_version_pairs() {
        let change = switch("tunnel=0.2.0, pgbus=0.3.0").change(true).unwrap();
        assert_eq!(change.target.as_deref(), Some("tunnel"));
        assert!(change.dry_run && !change.force && !change.abort);
        assert_eq!(change.plugins["tunnel"], "0.2.0");
        assert_eq!(change.plugins["pgbus"], "0.3.0");
        assert!(switch("").change(false).unwrap().plugins.is_empty());
    }

    #[test]
    fn a_pair_without_a_version_is_refused_with_a_code() {
        let failure = switch("tunnel").change(true).unwrap_err();
        assert_eq!(failure.code, "invalid_request");
        assert!(failure.message.contains("`tunnel`"), "{}", failure.message);
    }
}
