//! The audit trail: whether its chain holds, and the newest admin changes,
//! filtered by who made them or what they changed.

use axum::Router;
use axum::extract::{Query, State};
use axum::response::Response;
use axum::routing::get;
use maud::{Markup, html};
use serde::Deserialize;
use switchyard_protocol::audit::{AuditLog, AuditVerification};

use super::ConsoleState;
use super::api::ApiFailure;
use super::page;
use super::session::Session;

/// The audit page's route.
pub fn routes() -> Router<ConsoleState> {
    Router::new().route("/console/audit", get(show))
}

/// The filter form's fields.
#[derive(Debug, Default, Deserialize)]
struct Filter {
    actor: Option<String>,
    object: Option<String>,
}

async fn show(
    State(console): State<ConsoleState>,
    session: Session,
    Query(filter): Query<Filter>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let api = session.api(&console);
    let query: Vec<(&str, &str)> = [("actor", &filter.actor), ("object", &filter.object)]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref().filter(|v| !v.is_empty())?)))
        .collect();
    let path = match serde_urlencoded::to_string(&query) {
        Ok(text) if !text.is_empty() => format!("/api/audit?{text}"),
        _ => "/api/audit".to_string(),
    };
    let log = api.get_as::<AuditLog>(&path).await;
    let verified = api.get_as::<AuditVerification>("/api/audit/verify").await;
    page::render(&session, "Audit", audit_page(&filter, &log, &verified))
}

fn audit_page(
    filter: &Filter,
    log: &Result<AuditLog, ApiFailure>,
    verified: &Result<AuditVerification, ApiFailure>,
) -> Markup {
    html! {
        section.panel aria-labelledby="chain-title" {
            h2 #chain-title { "Chain of digests" }
            @match verified {
                Err(failure) => { (page::failure(failure)) }
                Ok(v) => @match &v.broken {
                    None => p { span.state.ok { "holds" } " " (v.records) " records checked." }
                    Some(broken) => p { span.state.failed { "broken" } " at record " code { (broken.seq) } ": " (broken.reason) "." }
                }
            }
        }
        section.panel {
            h2 { "Filter" }
            form.stack method="get" action="/console/audit" {
                label for="audit-actor" { "Key id" }
                input #audit-actor type="text" name="actor" maxlength="200" value=(filter.actor.clone().unwrap_or_default());
                label for="audit-object" { "Object" }
                input #audit-object type="text" name="object" maxlength="200" value=(filter.object.clone().unwrap_or_default());
                button type="submit" { "Show" }
            }
        }
        h2 { "Newest changes" }
        @match log {
            Err(failure) => { (page::failure(failure)) }
            Ok(log) if log.records.is_empty() => {
                (page::empty("No changes recorded.", html! { "Every admin change made with a key appears here." }))
            }
            Ok(log) => {
                div.table-wrap { table {
                    thead { tr { th { "#" } th { "When" } th { "Who" } th { "From" } th { "Change" } th { "Object" } th { "Status" } th { "Summary" } } }
                    tbody {
                        @for r in log.records.iter().rev() {
                            tr {
                                td { (r.seq) }
                                td { (r.at) }
                                td { (r.actor_name) " " code { (r.actor) } }
                                td { (r.remote.as_deref().unwrap_or("-")) }
                                td { code { (r.method) " " (r.route) } }
                                td { (r.object.as_deref().unwrap_or("-")) }
                                td { (r.status) }
                                td { code { (r.summary) } }
                            }
                        }
                    }
                } }
            }
        }
    }
}
