//! Usage: tokens metered per answer, by team, model, key, peer or node, as
//! a bar per group (prompt and completion tokens) and a table per time
//! bucket, with the same report exported as CSV.

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{Request, header};
use axum::response::Response;
use axum::routing::get;
use maud::{Markup, html};
use serde::{Deserialize, Serialize};
use switchyard_protocol::usage::{UsageReport, UsageRow};

use super::ConsoleState;
use super::api::ApiFailure;
use super::page;
use super::session::Session;

/// The usage page's routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new().route("/console/usage", get(show))
}

/// What the form asks for; passed on to `/api/usage` as it is.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Filter {
    #[serde(default = "by_team")]
    group_by: String,
    #[serde(default = "daily")]
    granularity: String,
}

fn by_team() -> String {
    "team".into()
}

fn daily() -> String {
    "day".into()
}

const DIMENSIONS: [&str; 5] = ["team", "model", "key", "peer", "node"];
const GRANULARITIES: [&str; 3] = ["minute", "hour", "day"];

/// Width of the bar chart's drawing, in its own units.
const WIDTH: f64 = 560.0;
/// Height of one bar's row.
const ROW: f64 = 22.0;

fn api_path(filter: &Filter) -> String {
    let query = serde_urlencoded::to_string(filter).unwrap_or_default();
    format!("/api/usage?{query}")
}

/// `?format=csv` asks for the report as a download.
#[derive(Debug, Default, Deserialize)]
struct Format {
    format: Option<String>,
}

async fn show(
    State(console): State<ConsoleState>,
    session: Session,
    Query(filter): Query<Filter>,
    Query(format): Query<Format>,
) -> Response {
    if let Err(forbidden) = session.require("usage:read") {
        return forbidden;
    }
    let api = session.api(&console);
    if format.format.as_deref() == Some("csv") {
        return export(&api, &filter).await;
    }
    let report = api.get_as::<UsageReport>(&api_path(&filter)).await;
    page::render(&session, "Usage", usage_page(&filter, &report))
}

/// The report as CSV, as a download: the API's own answer (or its
/// refusal), named as a file.
async fn export(api: &super::api::Api, filter: &Filter) -> Response {
    let request = Request::get(api_path(filter))
        .header(header::ACCEPT, "text/csv")
        .body(Body::empty())
        .expect("a request to a fixed path");
    let mut answer = api.send(request).await;
    if answer.status().is_success() {
        answer.headers_mut().insert(
            header::CONTENT_DISPOSITION,
            header::HeaderValue::from_static("attachment; filename=\"switchyard-usage.csv\""),
        );
    }
    answer
}

/// A row's group, as the page names it.
fn group(row: &UsageRow) -> String {
    let parts: Vec<&str> = [&row.team, &row.model, &row.key, &row.peer, &row.node]
        .into_iter()
        .filter_map(|v| v.as_deref())
        .collect();
    if parts.is_empty() {
        "(none)".into()
    } else {
        parts.join(" / ")
    }
}

/// Prompt and completion tokens per group, over every bucket, largest first.
fn totals(report: &UsageReport) -> Vec<(String, u64, u64)> {
    let mut by_group: Vec<(String, u64, u64)> = Vec::new();
    for row in &report.rows {
        let name = group(row);
        match by_group.iter_mut().find(|(g, _, _)| *g == name) {
            Some(entry) => {
                entry.1 += row.prompt_tokens;
                entry.2 += row.completion_tokens;
            }
            None => by_group.push((name, row.prompt_tokens, row.completion_tokens)),
        }
    }
    by_group.sort_by_key(|(_, p, c)| std::cmp::Reverse(p + c));
    by_group
}

fn chart(totals: &[(String, u64, u64)]) -> Markup {
    let top = totals
        .iter()
        .map(|(_, p, c)| p + c)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let height = ROW * totals.len() as f64;
    let label = "Prompt and completion tokens per group";
    html! {
        svg.bars viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label=(label) {
            @for (i, (name, prompt, completion)) in totals.iter().enumerate() {
                @let y = i as f64 * ROW;
                @let p = *prompt as f64 / top * WIDTH * 0.6;
                @let c = *completion as f64 / top * WIDTH * 0.6;
                rect.prompt x="0" y=(format!("{:.1}", y + 3.0)) width=(format!("{p:.1}")) height="16" {}
                rect.completion x=(format!("{p:.1}")) y=(format!("{:.1}", y + 3.0)) width=(format!("{c:.1}")) height="16" {}
                text x=(format!("{:.1}", p + c + 6.0)) y=(format!("{:.1}", y + 15.0)) {
                    (name) ": " (prompt) " + " (completion)
                }
            }
        }
    }
}

fn usage_page(filter: &Filter, report: &Result<UsageReport, ApiFailure>) -> Markup {
    html! {
        section.panel {
            h2 { "Report" }
            form.stack method="get" action="/console/usage" {
                label for="usage-group" { "Group by" }
                select #usage-group name="group_by" {
                    @for dim in DIMENSIONS {
                        option value=(dim) selected[filter.group_by == dim] { (dim) }
                    }
                }
                label for="usage-granularity" { "Per" }
                select #usage-granularity name="granularity" {
                    @for g in GRANULARITIES {
                        option value=(g) selected[filter.granularity == g] { (g) }
                    }
                }
                button type="submit" { "Show" }
            }
            p { a #usage-export href=(format!("/console/usage?{}&format=csv", serde_urlencoded::to_string(filter).unwrap_or_default())) { "Export as CSV" } }
        }
        @match report {
            Err(failure) => { (page::failure(failure)) }
            Ok(report) if report.rows.is_empty() => {
                (page::empty("No usage metered yet.", html! { "Every answer an engine gives is counted here." }))
            }
            Ok(report) => {
                h2 { "Tokens by " (filter.group_by) }
                (chart(&totals(report)))
                @if report.dropped > 0 {
                    p.muted { (report.dropped) " events were dropped on this replica (its queue was full)." }
                }
                div.table-wrap { table {
                    thead { tr { th { "Bucket" } th { "Group" } th { "Requests" } th { "Prompt" } th { "Completion" } th { "Cached" } } }
                    tbody {
                        @for row in report.rows.iter().rev() {
                            tr {
                                td { (row.bucket) }
                                td { (group(row)) }
                                td { (row.requests) }
                                td { (row.prompt_tokens) }
                                td { (row.completion_tokens) }
                                td { (row.cached_tokens) }
                            }
                        }
                    }
                } }
            }
        }
    }
}
