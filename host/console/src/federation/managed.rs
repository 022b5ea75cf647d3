//! Managed services on a peer, under an `inference:manage` grant it gave
//! this cluster: the services the grant created (as the owner says), a new
//! one from the owner's runtime offer, and start, drain, stop and remove,
//! each naming the revision it saw.
//!
//! Every change carries an operation id chosen when the page is drawn and
//! shown on it before anything is sent, so an operator whose change ended
//! uncertain (the link broke) can inspect that id on the peer rather than
//! act again. One id per drawn page is enough: a page sends one change,
//! and the next page draws a new id.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use maud::{Markup, html};
use rand::RngCore;
use serde::Deserialize;
use switchyard_protocol::federation::{
    GrantRecord, GrantState, MAX_NAME, ManageAction, ManageCall, ManagedService,
    ManagedServiceSpec, Operation,
};

use super::super::ConsoleState;
use super::super::api::{Api, ApiFailure};
use super::super::form::{Posted, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::{SCOPE, badge, invalid, segment};

/// The most replicas the create form asks for.
const MAX_REPLICAS: i32 = 64;

pub fn routes() -> Router<ConsoleState> {
    Router::new().route("/console/federation/peers/{peer}/services", post(change))
}

/// `GET /api/federation/peers/{peer}/services?grant=`.
#[derive(Deserialize)]
struct Services {
    services: Vec<ManagedService>,
}

/// A fresh operation id: `op_` and 64 random bits.
fn operation_id() -> String {
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    format!("op_{}", hex::encode(bytes))
}

/// The managed-services sections of a peer's page: one per active grant
/// from it that allows `inference:manage`; nothing when there is none.
pub async fn sections(session: &Session, api: &Api, peer: &str, grants: &[&GrantRecord]) -> Markup {
    let managing: Vec<&GrantRecord> = grants
        .iter()
        .copied()
        .filter(|g| {
            g.state == GrantState::Active
                && g.terms.operations.contains(&Operation::InferenceManage)
        })
        .collect();
    if managing.is_empty() {
        return html! {};
    }
    let operation = operation_id();
    let mut drawn = Vec::new();
    for grant in managing {
        let path = format!(
            "/api/federation/peers/{}/services?grant={}",
            segment(peer),
            segment(&grant.id)
        );
        let services = api.get_as::<Services>(&path).await;
        drawn.push(section(session, peer, grant, &services, &operation));
    }
    html! {
        h3 { "Managed services" }
        p.hint {
            "The next change from this page is sent as operation " code #next-operation { (operation) }
            ". If its outcome is uncertain, inspect that id above before acting again."
        }
        @for markup in drawn { (markup) }
    }
}

fn section(
    session: &Session,
    peer: &str,
    grant: &GrantRecord,
    services: &Result<Services, ApiFailure>,
    operation: &str,
) -> Markup {
    let action = format!("/console/federation/peers/{}/services", segment(peer));
    let hidden = html! {
        (csrf_field(session))
        input type="hidden" name="grant" value=(grant.id);
        input type="hidden" name="operation_id" value=(operation);
    };
    html! {
        section.panel {
            h4 { "Under grant " code { (grant.id) } }
            @match services {
                Err(failure) => { (page::failure(failure)) }
                Ok(list) if list.services.is_empty() => {
                    (page::empty("This grant created no service yet.", html! { "Create one below from the peer's runtime offer." }))
                }
                Ok(list) => {
                    div.table-wrap { table {
                        thead { tr { th { "Service" } th { "State" } th { "Revision" } th { "Model" } th { "Ready" } th { span.muted { "Actions" } } } }
                        tbody {
                            @for s in &list.services {
                                tr {
                                    td { code { (s.service) } }
                                    td { (badge(s.state.as_str())) }
                                    td { (s.revision) }
                                    td { code { (s.spec.model) } br; span.muted { (s.spec.runtime) " on " (s.spec.machines.join(", ")) } }
                                    td { (s.ready_replicas) " of " (s.spec.replicas) }
                                    td {
                                        @for (verb, text) in [("start", "Start"), ("drain", "Drain"), ("stop", "Stop"), ("remove", "Remove")] {
                                            form.inline method="post" action=(action) {
                                                (hidden)
                                                input type="hidden" name="action" value=(verb);
                                                input type="hidden" name="service" value=(s.service);
                                                input type="hidden" name="revision" value=(s.revision);
                                                button.danger[verb == "remove"] type="submit"
                                                    aria-label=(format!("{text} service {}", s.service)) { (text) }
                                            }
                                            " "
                                        }
                                    }
                                }
                            }
                        }
                    } }
                }
            }
            @let id = |field: &str| format!("manage-{}-{field}", grant.id);
            details {
                summary { "New service under this grant" }
                form.stack method="post" action=(action) {
                    (hidden)
                    input type="hidden" name="action" value="create";
                    label for=(id("service")) { "Service id" }
                    input #(id("service")) type="text" name="service" required maxlength=(MAX_NAME);
                    label for=(id("model")) { "Model revision" }
                    select #(id("model")) name="model" required {
                        @for model in &grant.terms.models { option value=(model) { (model) } }
                    }
                    label for=(id("runtime")) { "Runtime offer id" }
                    input #(id("runtime")) type="text" name="runtime" required maxlength=(MAX_NAME * 3) placeholder="reference-1gpu";
                    fieldset {
                        legend { "Machines" }
                        @for (i, machine) in grant.terms.machines.iter().enumerate() {
                            @let mid = format!("{}-{i}", id("machine"));
                            span.check {
                                input #(mid) type="checkbox" name="machine" value=(machine) checked;
                                " " label for=(mid) { (machine) }
                            }
                        }
                    }
                    label for=(id("replicas")) { "Replicas" }
                    input #(id("replicas")) type="number" name="replicas" min="1" max=(MAX_REPLICAS) value="1" required;
                    button type="submit" { "Create service" }
                }
            }
        }
    }
}

/// The posted change as the API's manage call.
fn manage_call(fields: &[(String, String)]) -> Result<ManageCall, ApiFailure> {
    let one = |name: &str| -> String {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let service = one("service");
    if service.is_empty() {
        return Err(invalid("name the service"));
    }
    let revision = || -> Result<i64, ApiFailure> {
        one("revision")
            .parse()
            .map_err(|_| invalid("the revision the page showed is missing"))
    };
    let action = match one("action").as_str() {
        "create" => ManageAction::Create {
            spec: ManagedServiceSpec {
                service,
                model: one("model"),
                runtime: one("runtime"),
                machines: fields
                    .iter()
                    .filter(|(k, _)| k == "machine")
                    .map(|(_, v)| v.clone())
                    .collect(),
                replicas: one("replicas")
                    .parse()
                    .ok()
                    .filter(|r| (1..=MAX_REPLICAS).contains(r))
                    .ok_or_else(|| invalid(format!("replicas are 1 to {MAX_REPLICAS}")))?,
            },
        },
        "start" => ManageAction::Start {
            service,
            revision: revision()?,
        },
        "drain" => ManageAction::Drain {
            service,
            revision: revision()?,
        },
        "stop" => ManageAction::Stop {
            service,
            revision: revision()?,
        },
        "remove" => ManageAction::Remove {
            service,
            revision: revision()?,
        },
        other => return Err(invalid(format!("no change '{other}'"))),
    };
    Ok(ManageCall {
        grant: one("grant"),
        operation_id: one("operation_id"),
        action,
    })
}

async fn change(
    State(console): State<ConsoleState>,
    Path(peer): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let back = format!("/console/federation/peers/{}", segment(&peer));
    let call = match manage_call(&posted.fields) {
        Ok(call) => call,
        Err(failure) => return redirect_with(session, &back, Flash::failed(&failure)),
    };
    let operation = call.operation_id.clone();
    let (verb, service) = match &call.action {
        ManageAction::Create { spec } => ("create", spec.service.clone()),
        ManageAction::Configure { service, .. } => ("configure", service.clone()),
        ManageAction::Start { service, .. } => ("start", service.clone()),
        ManageAction::Drain { service, .. } => ("drain", service.clone()),
        ManageAction::Stop { service, .. } => ("stop", service.clone()),
        ManageAction::Remove { service, .. } => ("remove", service.clone()),
    };
    let body = serde_json::to_value(&call).expect("a manage call serialises");
    let answer = session
        .api(&console)
        .post(
            &format!("/api/federation/peers/{}/services", segment(&peer)),
            body,
        )
        .await;
    let flash = match answer {
        Ok(answer) => {
            let mut text = format!("Operation {operation}: {verb} {service} done");
            if let (Some(state), Some(revision)) =
                (answer["state"].as_str(), answer["revision"].as_i64())
            {
                text.push_str(&format!("; it is {state} at revision {revision}"));
            }
            Flash::done(text + ".")
        }
        // The operation id goes with a refusal: an uncertain outcome is
        // inspected by it, never sent again under a new one.
        Err(failure) => Flash {
            failed: true,
            text: format!(
                "{}: {} (operation {operation}; inspect it before acting again)",
                failure.code, failure.message
            ),
        },
    };
    redirect_with(session, &back, flash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_change_names_the_revision_and_operation_the_page_showed() {
        let call = manage_call(&pairs(&[
            ("grant", "grant_1"),
            ("operation_id", "op_1"),
            ("action", "stop"),
            ("service", "mine"),
            ("revision", "3"),
        ]))
        .unwrap();
        assert_eq!(call.operation_id, "op_1");
        assert_eq!(
            call.action,
            ManageAction::Stop {
                service: "mine".into(),
                revision: 3
            }
        );
        let missing = manage_call(&pairs(&[("action", "start"), ("service", "mine")]));
        assert_eq!(missing.unwrap_err().code, "invalid_request");
    }

    #[test]
    fn operation_ids_are_fresh_and_valid_names() {
        let (a, b) = (operation_id(), operation_id());
        assert_ne!(a, b);
        assert!(a.len() <= MAX_NAME && a.starts_with("op_"));
    }
}
