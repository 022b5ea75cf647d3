//! The console's nodes page: every worker with its state, address, labels,
//! last heartbeat, machine, GPUs (memory bars) and engines; the actions
//! approve, maintenance, drain and undrain; and the registration tokens a
//! worker joins with ([`super::nodes_tokens`]). The list refreshes in place.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde_json::{Value, json};
use switchyard_protocol::node::Inventory;

use super::ConsoleState;
use super::api::ApiFailure;
use super::form::{Posted, redirect_after};
use super::page::{self, csrf_field};
use super::session::{Session, form_urlencoded_component};

/// The scope every nodes page needs.
pub const SCOPE: &str = "nodes:manage";
/// How often the list refreshes, in ms.
const EVERY_MS: u64 = 2000;

/// The nodes pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/nodes", get(list))
        .route("/console/nodes/live", get(live))
        .route("/console/nodes/{id}/{action}", post(act))
        .merge(super::nodes_tokens::routes())
}

async fn list(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let body = page_body(&console, &session, None).await;
    page::render(&session, "Nodes", body)
}

/// The page: the nodes (refreshed in place), then the registration tokens;
/// `created` is a token just made, shown once.
pub async fn page_body(
    console: &ConsoleState,
    session: &Session,
    created: Option<&Value>,
) -> Markup {
    let nodes = session.api(console).get("/api/nodes").await;
    let tokens = super::nodes_tokens::section(console, session, created).await;
    html! {
        div #nodes data-live="/console/nodes/live" data-every=(EVERY_MS) {
            (nodes_list(session, &nodes))
        }
        (tokens)
    }
}

async fn live(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let nodes = session.api(&console).get("/api/nodes").await;
    nodes_list(&session, &nodes).into_response()
}

fn nodes_list(session: &Session, nodes: &Result<Value, ApiFailure>) -> Markup {
    let nodes = match nodes {
        Err(failure) => return page::failure(failure),
        Ok(list) => list["nodes"].as_array().cloned().unwrap_or_default(),
    };
    if nodes.is_empty() {
        return page::empty(
            "No worker has joined this cluster yet.",
            html! {
                "Create a registration token below, then on each GPU machine run "
                code { "switchyard worker --frontend URL --registration-token TOKEN" }
                "; the worker appears here as pending until you approve it."
            },
        );
    }
    html! {
        @for node in &nodes { (node_panel(session, node)) }
    }
}

fn node_panel(session: &Session, node: &Value) -> Markup {
    let id = text(&node["id"]);
    let name = text(&node["name"]);
    let state = text(&node["state"]);
    let maintenance = node["maintenance"] == true;
    let inventory: Inventory =
        serde_json::from_value(node["inventory"].clone()).unwrap_or_default();
    let labels: Vec<String> = node["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    html! {
        section.panel.node aria-labelledby=(format!("node-{id}")) data-node=(name) {
            h2 #(format!("node-{id}")) {
                (name) " "
                span class=(format!("state {state}")) data-state=(state) { (state) }
                @if maintenance { " " span.state.waiting data-maintenance { "maintenance" } }
            }
            dl.facts {
                dt { "Id" } dd { code { (id) } }
                dt { "Address" } dd { (node["address"].as_str().unwrap_or("none (reached through the carrier)")) }
                dt { "Labels" } dd {
                    @if labels.is_empty() { span.muted { "none" } }
                    @for label in &labels { code { (label) } " " }
                }
                dt { "Last heartbeat" } dd { (node["last_heartbeat_at"].as_str().unwrap_or("never")) }
                dt { "Registered" } dd { (text(&node["registered_at"])) }
                dt { "Machine" } dd { (machine(&inventory)) }
                @if let Some(disk) = inventory.disk {
                    dt { "Disk" } dd { (usage(&format!("Disk of {name}"), disk.total_bytes - disk.available_bytes.min(disk.total_bytes), disk.total_bytes)) }
                }
            }
            (gpus(&name, &inventory))
            (engines(&inventory))
            (actions(session, &id, &name, &state, maintenance))
        }
    }
}

fn machine(inventory: &Inventory) -> Markup {
    html! {
        @if !inventory.hostname.is_empty() { code { (inventory.hostname) } " · " }
        (inventory.cpus) " CPUs"
        @if let Some(memory) = inventory.memory_bytes {
            " · " (page::bytes(memory)) " memory"
            @if let Some(free) = inventory.memory_available_bytes { " (" (page::bytes(free)) " free)" }
        }
    }
}

/// `used` of `total` as a meter with its figures.
fn usage(label: &str, used: u64, total: u64) -> Markup {
    html! {
        span.usage {
            meter min="0" max=(total) value=(used) aria-label=(label) {}
            " " (page::bytes(used)) " of " (page::bytes(total)) " used"
        }
    }
}

fn gpus(name: &str, inventory: &Inventory) -> Markup {
    html! {
        h3 { "GPUs" }
        @if inventory.gpus.is_empty() {
            p.muted { "No GPU reported." }
        } @else {
            div.table-wrap { table {
                thead { tr { th { "Index" } th { "Model" } th { "Memory" } } }
                tbody {
                    @for gpu in &inventory.gpus {
                        tr {
                            td { (gpu.index) }
                            td { (gpu.name) }
                            td {
                                @match gpu.memory_used_bytes {
                                    Some(used) => { (usage(&format!("Memory of GPU {} on {name}", gpu.index), used, gpu.memory_total_bytes)) }
                                    None => { (page::bytes(gpu.memory_total_bytes)) " " span.muted { "(declared; use not measured)" } }
                                }
                            }
                        }
                    }
                }
            } }
        }
    }
}

fn engines(inventory: &Inventory) -> Markup {
    let engines = inventory.engines.clone().unwrap_or_default();
    html! {
        h3 { "Engines" }
        @if engines.is_empty() {
            p.muted { "No engine running." }
        } @else {
            div.table-wrap { table {
                thead { tr { th { "Replica" } th { "Engine" } th { "Model" } th { "GPUs" } th { "State" } th { "In flight" } } }
                tbody {
                    @for engine in &engines {
                        @let state = serde_json::to_value(&engine.state).ok().map(|s| text(&s["state"])).unwrap_or_default();
                        tr {
                            td { code { (engine.id) } }
                            td { (engine.kind.as_str()) }
                            td { (engine.model) }
                            td { (engine.gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")) }
                            td { span class=(format!("state {state}")) { (state) } @if engine.restarts > 0 { " " span.muted { (engine.restarts) " restarts" } } }
                            td { (engine.in_flight) }
                        }
                    }
                }
            } }
        }
    }
}

/// The actions that apply to a node in `state`.
fn actions(session: &Session, id: &str, name: &str, state: &str, maintenance: bool) -> Markup {
    let mut offered: Vec<(&str, &str, bool)> = Vec::new();
    if state == "pending" {
        offered.push(("approve", "Approve", false));
    }
    if matches!(state, "healthy" | "unhealthy") && !maintenance {
        offered.push(("maintenance", "Maintenance", false));
    }
    if matches!(state, "healthy" | "unhealthy") {
        offered.push(("drain", "Drain", true));
    }
    if state == "draining" || maintenance {
        offered.push(("undrain", "Undrain", false));
    }
    html! {
        @if !offered.is_empty() {
            div.actions {
                @for (action, label, danger) in offered {
                    form.inline method="post" action=(format!("/console/nodes/{}/{action}", form_urlencoded_component(id))) {
                        (csrf_field(session))
                        @if danger {
                            button.danger type="submit" aria-label=(format!("{label} {name}")) { (label) }
                        } @else {
                            button type="submit" aria-label=(format!("{label} {name}")) { (label) }
                        }
                    }
                }
            }
            p.hint { "Maintenance: no new replicas, its replicas stay. Drain: no new replicas, its replicas move to other nodes. Undrain ends either." }
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
    let done = match action.as_str() {
        "approve" => "approved",
        "drain" => "draining",
        "maintenance" => "in maintenance",
        "undrain" => "back to normal scheduling",
        _ => return page::bad_request(session, "no such node action"),
    };
    let path = format!("/api/nodes/{}/{action}", form_urlencoded_component(&id));
    let result = session.api(&console).post(&path, json!({})).await;
    let name = result
        .as_ref()
        .ok()
        .and_then(|n| n["name"].as_str())
        .unwrap_or(&id)
        .to_string();
    redirect_after(
        session,
        "/console/nodes",
        format!("Node {name} {done}."),
        result,
    )
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or("").to_string()
}
