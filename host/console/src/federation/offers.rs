//! Share local resources: the offers this cluster publishes (a deployment
//! as a service, a model revision, a machine, a runtime for managed
//! services), publishing one and withdrawing one. An offer shares nothing
//! by itself; a grant names offers for one peer.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use switchyard_protocol::federation::{MAX_NAME, NewOffer, Offer, Resource};

use super::super::ConsoleState;
use super::super::api::{Api, ApiFailure};
use super::super::form::{Posted, call_and_redirect, optional, redirect_after, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::Session;
use super::{SCOPE, invalid, segment, subnav};

const HERE: &str = "/console/federation/offers";

/// The engines a runtime offer may name.
const ENGINES: [&str; 3] = ["reference", "llama-cpp", "vllm"];

/// The most GPUs per replica a runtime offer may name (the API's bound).
const MAX_GPUS: i32 = 64;

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route(HERE, get(show).post(publish))
        .route("/console/federation/offers/{id}/withdraw", post(withdraw))
}

/// `GET /api/federation/offers`.
#[derive(Deserialize)]
pub struct Offers {
    pub offers: Vec<Offer>,
}

#[derive(Deserialize)]
struct Deployments {
    deployments: Vec<DeploymentRow>,
}

#[derive(Deserialize)]
struct DeploymentRow {
    deployment: Named,
}

#[derive(Deserialize)]
struct Named {
    id: String,
    #[serde(default)]
    served_model_name: String,
}

#[derive(Deserialize)]
struct Node {
    id: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Models {
    models: Vec<ModelRevision>,
}

#[derive(Deserialize)]
struct ModelRevision {
    id: String,
    revision: String,
}

#[derive(Deserialize)]
struct Nodes {
    nodes: Vec<Node>,
}

/// One of the publish forms: `kind` says which fields count.
#[derive(Debug, Default, Deserialize)]
struct OfferForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    deployment: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    node: String,
    #[serde(default)]
    engine: String,
    #[serde(default)]
    gpus: String,
}

impl OfferForm {
    /// The offer the form asks for, or what is wrong with it.
    fn offer(&self) -> Result<NewOffer, ApiFailure> {
        let resource = match self.kind.as_str() {
            "service" => Resource::Service {
                deployment: required("deployment", &self.deployment)?,
            },
            "model" => {
                let chosen = required("model revision", &self.model)?;
                let (model, revision) = chosen
                    .split_once('@')
                    .ok_or_else(|| invalid("a model revision is written model@revision"))?;
                Resource::Model {
                    model: model.into(),
                    revision: revision.into(),
                }
            }
            "machine" => Resource::Machine {
                node: required("machine", &self.node)?,
            },
            "runtime" => Resource::Runtime {
                engine: required("engine", &self.engine)?,
                gpus_per_replica: self.gpus.trim().parse().map_err(|_| {
                    invalid(format!(
                        "GPUs per replica is a whole number from 0 to {MAX_GPUS}"
                    ))
                })?,
            },
            other => return Err(invalid(format!("no offer of the kind '{other}'"))),
        };
        Ok(NewOffer {
            id: optional(&self.id),
            resource,
        })
    }
}

fn required(what: &str, value: &str) -> Result<String, ApiFailure> {
    optional(value).ok_or_else(|| invalid(format!("choose a {what}")))
}

async fn show(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let offers = api.get_as::<Offers>("/api/federation/offers").await;
    let body = html! {
        (subnav(HERE))
        p { "An offer publishes a resource peers may be granted; it shares nothing by itself. "
            "A grant names exact offers for one peer (" a href="/console/federation/requests" { "Requests" } ")." }
        h2 { "Published" }
        @match &offers {
            Err(failure) => { (page::failure(failure)) }
            Ok(offers) if offers.offers.is_empty() => {
                (page::empty("Nothing is offered yet.", html! {
                    "Publish a deployment as a service, a model revision, a machine or a runtime below; "
                    "then approve a peer's request or share with a peer."
                }))
            }
            Ok(offers) => { (offers_table(&session, &offers.offers)) }
        }
        h2 { "Publish" }
        (publish_forms(&session, &api).await)
    };
    page::render(&session, "Offers", body)
}

fn offers_table(session: &Session, offers: &[Offer]) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr { th { "Offer id" } th { "Kind" } th { "Resource" } th { "Published" } th { span.muted { "Actions" } } } }
            tbody {
                @for offer in offers {
                    tr {
                        td { code { (offer.id) } }
                        td { (offer.resource.kind().as_str()) }
                        td { (describe(&offer.resource)) }
                        td { (offer.created_at) }
                        td {
                            form.inline method="post" action=(format!("/console/federation/offers/{}/withdraw", segment(&offer.id))) {
                                (csrf_field(session))
                                button.danger type="submit" aria-label=(format!("Withdraw offer {}", offer.id)) { "Withdraw" }
                            }
                        }
                    }
                }
            }
        } }
    }
}

/// A resource in words.
pub fn describe(resource: &Resource) -> Markup {
    match resource {
        Resource::Service { deployment } => html! { "deployment " code { (deployment) } },
        Resource::Model { model, revision } => html! { "model " code { (model) "@" (revision) } },
        Resource::Machine { node } => html! { "node " code { (node) } },
        Resource::Runtime {
            engine,
            gpus_per_replica,
        } => {
            let gpus = if *gpus_per_replica == 1 {
                "GPU"
            } else {
                "GPUs"
            };
            html! { code { (engine) } ", " (gpus_per_replica) " " (gpus) " per replica" }
        }
    }
}

async fn publish_forms(session: &Session, api: &Api) -> Markup {
    let deployments = api.get_as::<Deployments>("/api/deployments").await;
    let models = api.get_as::<Models>("/api/models").await;
    let nodes = api.get_as::<Nodes>("/api/nodes").await;
    html! {
        div.cards.wide {
            section.card aria-labelledby="offer-service-title" {
                h3 #offer-service-title { "A deployment as a service" }
                @match &deployments {
                    Err(failure) => { (page::failure(failure)) }
                    Ok(list) if list.deployments.is_empty() => {
                        (page::empty("No deployments here.", html! { "Create one on " a href="/console/deployments" { "Deployments" } " first." }))
                    }
                    Ok(list) => {
                        form.stack method="post" action=(HERE) {
                            (csrf_field(session))
                            input type="hidden" name="kind" value="service";
                            label for="offer-deployment" { "Deployment" }
                            select #offer-deployment name="deployment" required {
                                @for row in &list.deployments {
                                    option value=(row.deployment.id) { (row.deployment.served_model_name) " (" (row.deployment.id) ")" }
                                }
                            }
                            label for="offer-service-id" { "Service id" }
                            input #offer-service-id type="text" name="id" maxlength=(MAX_NAME) placeholder="default: the deployment's id";
                            span.hint { "Peers call it as " code { "<this cluster's label>/<service id>" } "." }
                            button type="submit" { "Publish service" }
                        }
                    }
                }
            }
            section.card aria-labelledby="offer-model-title" {
                h3 #offer-model-title { "A model revision" }
                @match &models {
                    Err(failure) => { (page::failure(failure)) }
                    Ok(list) if list.models.is_empty() => {
                        (page::empty("No models in the library.", html! { "Import one on " a href="/console/models" { "Models" } " first." }))
                    }
                    Ok(list) => {
                        form.stack method="post" action=(HERE) {
                            (csrf_field(session))
                            input type="hidden" name="kind" value="model";
                            label for="offer-model" { "Model revision" }
                            select #offer-model name="model" required {
                                @for m in &list.models {
                                    @let both = format!("{}@{}", m.id, m.revision);
                                    option value=(both) { (both) }
                                }
                            }
                            button type="submit" { "Publish model" }
                        }
                    }
                }
            }
            section.card aria-labelledby="offer-machine-title" {
                h3 #offer-machine-title { "A machine" }
                @match &nodes {
                    Err(failure) => { (page::failure(failure)) }
                    Ok(list) if list.nodes.is_empty() => {
                        (page::empty("No nodes here.", html! { "Start a worker and approve it on " a href="/console/nodes" { "Nodes" } "." }))
                    }
                    Ok(list) => {
                        form.stack method="post" action=(HERE) {
                            (csrf_field(session))
                            input type="hidden" name="kind" value="machine";
                            label for="offer-node" { "Machine" }
                            select #offer-node name="node" required {
                                @for n in &list.nodes {
                                    option value=(n.id) { (n.name) " (" (n.id) ")" }
                                }
                            }
                            button type="submit" { "Publish machine" }
                        }
                    }
                }
            }
            section.card aria-labelledby="offer-runtime-title" {
                h3 #offer-runtime-title { "A runtime for managed services" }
                form.stack method="post" action=(HERE) {
                    (csrf_field(session))
                    input type="hidden" name="kind" value="runtime";
                    label for="offer-engine" { "Engine" }
                    select #offer-engine name="engine" {
                        @for engine in ENGINES { option value=(engine) { (engine) } }
                    }
                    label for="offer-gpus" { "GPUs per replica" }
                    input #offer-gpus type="number" name="gpus" min="0" max=(MAX_GPUS) value="1" required;
                    button type="submit" { "Publish runtime" }
                }
            }
        }
    }
}

async fn publish(State(console): State<ConsoleState>, posted: Posted<OfferForm>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let offer = match posted.fields.offer() {
        Ok(offer) => offer,
        Err(failure) => return redirect_with(session, HERE, Flash::failed(&failure)),
    };
    let body = serde_json::to_value(&offer).expect("an offer serialises");
    let result = session
        .api(&console)
        .post("/api/federation/offers", body)
        .await;
    let done = match &result {
        Ok(value) => format!(
            "Offer {} published.",
            value["id"].as_str().unwrap_or_default()
        ),
        Err(_) => String::new(),
    };
    redirect_after(session, HERE, done, result)
}

async fn withdraw(
    State(console): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let path = format!("/api/federation/offers/{}", segment(&id));
    let done = format!("Offer {id} withdrawn.");
    call_and_redirect(
        &console,
        &posted.session,
        SCOPE,
        (Method::DELETE, &path),
        HERE,
        done,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_offer_is_read_from_model_at_revision() {
        let form = OfferForm {
            kind: "model".into(),
            model: "llama@q4".into(),
            ..OfferForm::default()
        };
        let offer = form.offer().unwrap();
        assert_eq!(
            offer.resource,
            Resource::Model {
                model: "llama".into(),
                revision: "q4".into()
            }
        );
        assert_eq!(offer.id, None);
    }

    #[test]
    fn a_runtime_needs_a_whole_number_of_gpus() {
        let form = OfferForm {
            kind: "runtime".into(),
            engine: "reference".into(),
            gpus: "two".into(),
            ..OfferForm::default()
        };
        assert_eq!(form.offer().unwrap_err().code, "invalid_request");
    }
}
