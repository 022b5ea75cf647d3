//! The overview: the carrier set and its state, the replicas, nodes and
//! deployments by state, and this replica's requests and errors per second
//! with a small chart. The figures refresh in place every two seconds.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::Value;

use switchyard_protocol::carrier::CarrierStatus;

use super::ConsoleState;
use super::page;
use super::session::Session;
use super::stats::{self, Rate};

/// The overview page.
pub async fn page(State(console): State<ConsoleState>, session: Session) -> Response {
    let figures = figures(&console, &session).await;
    page::render(
        &session,
        "Overview",
        html! {
            div #overview data-live="/console/overview/live" data-every=(stats::EVERY.as_millis()) {
                (figures)
            }
            @if session.can("inference") && !session.can("admin") {
                p { "This key can send requests: try one on the " a href="/console/try" { "Try prompt" } " page." }
            }
        },
    )
}

/// The overview's figures alone, for the page's refresh.
pub async fn live(State(console): State<ConsoleState>, session: Session) -> Response {
    figures(&console, &session).await.into_response()
}

async fn figures(console: &ConsoleState, session: &Session) -> Markup {
    let api = session.api(console);
    let carrier = if session.can("admin") {
        Some(api.get_as::<CarrierStatus>("/api/cluster/carrier").await)
    } else {
        None
    };
    let nodes = if session.can("nodes:manage") {
        Some(api.get("/api/nodes").await)
    } else {
        None
    };
    let deployments = if session.can("models:manage") {
        Some(api.get("/api/deployments").await)
    } else {
        None
    };
    let rates = console.stats.all();
    html! {
        div.cards {
            @if let Some(carrier) = &carrier {
                div.card {
                    h2 { "Carrier" }
                    @match carrier {
                        Ok(status) => {
                            @let state = status.state.map_or("none", |s| s.as_str());
                            p.figure { (status.carrier.as_deref().unwrap_or("none")) }
                            p { "state " span class=(format!("state {state}")) { (state) }
                                " · epoch " (status.epoch.unwrap_or(0)) }
                            p { a href="/console/carrier" { "Carrier status and switch" } }
                        }
                        Err(failure) => { (page::failure(failure)) }
                    }
                }
                div.card {
                    h2 { "Replicas" }
                    @match carrier {
                        Ok(status) => {
                            p.figure { (status.replicas.len()) }
                            p { (status.replicas.iter().filter(|r| r.ready).count()) " ready" }
                        }
                        Err(failure) => { (page::failure(failure)) }
                    }
                }
            }
            @if let Some(nodes) = &nodes {
                div.card {
                    h2 { "Nodes" }
                    @match nodes {
                        Ok(list) => { (by_state(&list["nodes"], |n| text(&n["state"]))) p { a href="/console/nodes" { "Nodes" } } }
                        Err(failure) => { (page::failure(failure)) }
                    }
                }
            }
            @if let Some(deployments) = &deployments {
                div.card {
                    h2 { "Deployments" }
                    @match deployments {
                        Ok(list) => { (by_state(&list["deployments"], deployment_state)) p { a href="/console/deployments" { "Deployments" } } }
                        Err(failure) => { (page::failure(failure)) }
                    }
                }
            }
            div.card {
                h2 { "Requests" }
                @let last = rates.last().copied().unwrap_or(Rate { requests: 0.0, errors: 0.0 });
                p.figure { (format!("{:.1}", last.requests)) " /s" }
                p { (format!("{:.1}", last.errors)) " errors/s · this replica" }
            }
        }
        h2 { "Requests and errors per second (last two minutes)" }
        (chart(&rates))
        p.hint { "Blue: answers per second on this replica's /v1 API; red: answers with a status of 400 or more." }
    }
}

/// "3 healthy · 1 pending" for a list, by each item's state.
fn by_state(items: &Value, state: impl Fn(&Value) -> String) -> Markup {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for item in items.as_array().into_iter().flatten() {
        *counts.entry(state(item)).or_default() += 1;
    }
    let total: usize = counts.values().sum();
    html! {
        p.figure { (total) }
        @if counts.is_empty() {
            p.muted { "none yet" }
        } @else {
            p {
                @for (i, (state, n)) in counts.iter().enumerate() {
                    @if i > 0 { " · " }
                    span class=(format!("state {state}")) { (n) " " (state) }
                }
            }
        }
    }
}

/// A deployment's state for counting: ready when every wanted replica is,
/// failed when one failed, else progressing.
pub fn deployment_state(item: &Value) -> String {
    let wanted = item["deployment"]["replicas"].as_u64().unwrap_or(0) as usize;
    let replicas = item["replicas_status"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = replicas.iter().filter(|r| r["state"] == "ready").count();
    if replicas.iter().any(|r| r["state"] == "failed") {
        "failed".into()
    } else if wanted == 0 {
        "stopped".into()
    } else if ready >= wanted {
        "ready".into()
    } else {
        "staging".into()
    }
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| "none".into())
}

/// The rates as two lines in an inline SVG, scaled to the highest.
fn chart(rates: &[Rate]) -> Markup {
    const WIDTH: f64 = 560.0;
    const HEIGHT: f64 = 90.0;
    let top = rates
        .iter()
        .map(|r| r.requests.max(r.errors))
        .fold(1.0_f64, f64::max);
    let line = |value: fn(&Rate) -> f64| -> String {
        let step = if rates.len() > 1 {
            WIDTH / (rates.len() - 1) as f64
        } else {
            WIDTH
        };
        rates
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let x = i as f64 * step;
                let y = HEIGHT - 4.0 - value(r) / top * (HEIGHT - 8.0);
                format!("{x:.1},{y:.1}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let label = format!(
        "Requests per second over the last {} seconds, highest {:.1}",
        rates.len() as u64 * stats::EVERY.as_secs(),
        top
    );
    html! {
        svg.chart viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) preserveAspectRatio="none" role="img" aria-label=(label) {
            polyline.requests points=(line(|r| r.requests)) {}
            polyline.errors points=(line(|r| r.errors)) {}
        }
    }
}
