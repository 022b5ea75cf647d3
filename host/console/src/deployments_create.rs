//! The create form of the deployments page. "Preview" asks the scheduler
//! where the replicas would go and why nodes refuse one
//! (`POST /api/deployments/preview`) and draws the same form with the
//! answer below it; "Create" creates (`POST /api/deployments`).

use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchyard_protocol::admin::{DeploymentPreview, NewDeployment};
use switchyard_protocol::engines::EngineKind;

use super::ConsoleState;
use super::api::ApiFailure;
use super::deployments::{SCOPE, page_body};
use super::form::{Posted, optional, redirect_with};
use super::page::{self, Flash, csrf_field};
use super::session::Session;

/// The form's fields, as typed (drawn again after a preview or a refusal).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct CreateForm {
    /// `id@revision` (neither may hold an `@`).
    pub model: String,
    pub engine: String,
    pub served_model_name: String,
    pub replicas: String,
    pub gpus_per_replica: String,
    /// GiB; empty: the API's estimate from the files' size.
    pub gpu_memory_gib: String,
    pub max_concurrency: String,
    pub token_delay_ms: String,
    pub strategy: String,
    /// `key=value` pairs separated by commas or lines.
    pub node_selector: String,
    /// `preview` or `create`: the button pressed.
    pub intent: String,
}

impl Default for CreateForm {
    fn default() -> Self {
        Self {
            model: String::new(),
            engine: EngineKind::Reference.as_str().into(),
            served_model_name: String::new(),
            replicas: "1".into(),
            gpus_per_replica: "1".into(),
            gpu_memory_gib: String::new(),
            max_concurrency: "8".into(),
            token_delay_ms: "0".into(),
            strategy: "binpack".into(),
            node_selector: String::new(),
            intent: String::new(),
        }
    }
}

/// The most `key=value` pairs the selector field takes (the API bounds
/// labels further).
const MAX_SELECTOR_PAIRS: usize = 32;

impl CreateForm {
    /// The API's body, or what is wrong with a field (the API checks the rest).
    fn parse(&self) -> Result<NewDeployment, String> {
        let (model, revision) = self
            .model
            .split_once('@')
            .ok_or("pick a model revision from the library")?;
        let number = |name: &str, text: &str| -> Result<Option<i32>, String> {
            optional(text)
                .map(|t| t.parse::<i32>())
                .transpose()
                .map_err(|_| format!("{name} must be a whole number"))
        };
        let gpu_memory_bytes = optional(&self.gpu_memory_gib)
            .map(|t| t.parse::<f64>())
            .transpose()
            .map_err(|_| "GPU memory must be a number of GiB".to_string())?
            .map(|gib| (gib * (1u64 << 30) as f64) as i64);
        let mut selector = std::collections::BTreeMap::new();
        for pair in self
            .node_selector
            .split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("node selector: `{pair}` is not key=value"))?;
            selector.insert(key.trim().to_string(), value.trim().to_string());
        }
        if selector.len() > MAX_SELECTOR_PAIRS {
            return Err(format!("node selector: at most {MAX_SELECTOR_PAIRS} pairs"));
        }
        Ok(NewDeployment {
            model: model.to_string(),
            revision: revision.to_string(),
            engine: self.engine.trim().to_string(),
            served_model_name: optional(&self.served_model_name),
            replicas: number("replicas", &self.replicas)?,
            gpus_per_replica: number("GPUs per replica", &self.gpus_per_replica)?,
            gpu_memory_bytes,
            max_concurrency: number("max concurrency", &self.max_concurrency)?,
            token_delay_ms: number("token delay", &self.token_delay_ms)?,
            strategy: optional(&self.strategy),
            node_selector: (!selector.is_empty()).then_some(selector),
        })
    }
}

/// The create section: the form with `form`'s values, then `below` (a
/// preview or a refusal).
pub async fn section(
    console: &ConsoleState,
    session: &Session,
    form: &CreateForm,
    below: Option<Markup>,
) -> Markup {
    let models = session.api(console).get("/api/models").await;
    let revisions: Vec<String> = match &models {
        Ok(list) => list["models"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| Some(format!("{}@{}", m["id"].as_str()?, m["revision"].as_str()?)))
            .collect(),
        Err(_) => Vec::new(),
    };
    html! {
        section.panel #create aria-labelledby="create-title" {
            h2 #create-title { "New deployment" }
            @if let Err(failure) = &models { (page::failure(failure)) }
            @if revisions.is_empty() {
                (page::empty("The library holds no model to deploy.", html! {
                    "Fetch one on the " a href="/console/models" { "Models" } " page first."
                }))
            } @else {
                (create_form(session, form, &revisions))
            }
            @if let Some(below) = below { div #preview { (below) } }
        }
    }
}

fn create_form(session: &Session, form: &CreateForm, revisions: &[String]) -> Markup {
    html! {
        form.stack method="post" action="/console/deployments#preview" {
            (csrf_field(session))
            label for="dep-model" { "Model" }
            select #dep-model name="model" required {
                @for revision in revisions {
                    option value=(revision) selected[*revision == form.model] { (revision) }
                }
            }
            label for="dep-engine" { "Engine" }
            select #dep-engine name="engine" {
                @for kind in EngineKind::ALL {
                    option value=(kind.as_str()) selected[kind.as_str() == form.engine] { (kind.as_str()) }
                }
            }
            label for="dep-served" { "Served model name (optional)" }
            input #dep-served type="text" name="served_model_name" maxlength="256" value=(form.served_model_name) placeholder="default: the model's id";
            div.fields {
                div {
                    label for="dep-replicas" { "Replicas" }
                    input #dep-replicas type="number" name="replicas" min="0" max="256" required value=(form.replicas);
                }
                div {
                    label for="dep-gpus" { "GPUs per replica" }
                    input #dep-gpus type="number" name="gpus_per_replica" min="0" max="64" required value=(form.gpus_per_replica);
                }
                div {
                    label for="dep-memory" { "GPU memory (GiB, optional)" }
                    input #dep-memory type="number" name="gpu_memory_gib" min="0" step="any" value=(form.gpu_memory_gib) placeholder="estimate";
                }
                div {
                    label for="dep-concurrency" { "Max concurrency" }
                    input #dep-concurrency type="number" name="max_concurrency" min="1" max="4096" required value=(form.max_concurrency);
                }
                div {
                    label for="dep-delay" { "Token delay ms" }
                    input #dep-delay type="number" name="token_delay_ms" min="0" max="60000" value=(form.token_delay_ms);
                }
                div {
                    label for="dep-strategy" { "Strategy" }
                    select #dep-strategy name="strategy" {
                        @for strategy in ["binpack", "spread"] {
                            option value=(strategy) selected[strategy == form.strategy] { (strategy) }
                        }
                    }
                }
            }
            label for="dep-selector" { "Node selector (optional)" }
            input #dep-selector type="text" name="node_selector" maxlength="2048" value=(form.node_selector) placeholder="e.g. gpu=l4, zone=a";
            p.hint { "Token delay: the reference engine's pause per token. Node selector: labels a node must have, every pair." }
            div {
                button.secondary type="submit" name="intent" value="preview" { "Preview" } " "
                button type="submit" name="intent" value="create" { "Create" }
            }
        }
    }
}

/// The form's answer: a preview drawn below the form, or a deployment
/// created (back to the list), or the refusal below the form.
pub async fn submit(
    axum::extract::State(console): axum::extract::State<ConsoleState>,
    posted: Posted<CreateForm>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let form = &posted.fields;
    let body = match form.parse() {
        Ok(body) => body,
        Err(message) => {
            let failure = ApiFailure {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_request".into(),
                message,
                body: Value::Null,
            };
            return refused(&console, session, form, &failure).await;
        }
    };
    let json = serde_json::to_value(&body).expect("a deployment serialises");
    let api = session.api(&console);
    if form.intent == "create" {
        return match api.post("/api/deployments", json).await {
            Ok(created) => redirect_with(
                session,
                "/console/deployments",
                Flash::done(format!(
                    "Deployment {} created: the scheduler places its replicas.",
                    created["served_model_name"].as_str().unwrap_or("")
                )),
            ),
            Err(failure) => refused(&console, session, form, &failure).await,
        };
    }
    match api.post("/api/deployments/preview", json).await {
        Ok(answer) => match serde_json::from_value::<DeploymentPreview>(answer) {
            Ok(preview) => {
                let body = page_body(&console, session, form, Some(drawn(&preview))).await;
                page::render(session, "Deployments", body)
            }
            Err(e) => page::server_error(&format!("the preview's answer: {e}")),
        },
        Err(failure) => refused(&console, session, form, &failure).await,
    }
}

async fn refused(
    console: &ConsoleState,
    session: &Session,
    form: &CreateForm,
    failure: &ApiFailure,
) -> Response {
    let body = page_body(console, session, form, Some(page::failure(failure))).await;
    page::render_status(session, failure.status, "Deployments", body)
}

/// The scheduler's preview: where each replica goes, the nodes that refuse
/// one and why.
fn drawn(preview: &DeploymentPreview) -> Markup {
    html! {
        h3 { "Preview" }
        @if preview.placeable {
            p.flash.ok role="status" { "Every replica fits: press Create to deploy." }
        } @else {
            p.flash.warn role="status" { "Not every replica fits now: " (preview.pending_reason.as_deref().unwrap_or("")) }
        }
        @if !preview.placements.is_empty() {
            div.table-wrap { table #placements {
                thead { tr { th { "Replica" } th { "Node" } th { "GPUs" } } }
                tbody {
                    @for placement in &preview.placements {
                        tr {
                            td { (placement.replica + 1) }
                            td { (placement.node_name) " " span.muted { code { (placement.node) } } }
                            td { (placement.gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")) }
                        }
                    }
                }
            } }
        }
        @if !preview.refused.is_empty() {
            h3 { "Nodes that refuse a replica" }
            div.table-wrap { table #refused {
                thead { tr { th { "Node" } th { "Why" } } }
                tbody {
                    @for refusal in &preview.refused {
                        tr { td { (refusal.node_name) } td { (refusal.reason) } }
                    }
                }
            } }
        }
        p.hint { "The scheduler's own placement on the cluster as it is now; nothing was created." }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_becomes_the_apis_body_and_blank_fields_are_defaults() {
        let form = CreateForm {
            model: "tiny@r1".into(),
            token_delay_ms: "100".into(),
            gpu_memory_gib: "1.5".into(),
            node_selector: "gpu=l4, zone = a\nrack=7".into(),
            ..CreateForm::default()
        };
        let body = form.parse().unwrap();
        assert_eq!(
            (body.model.as_str(), body.revision.as_str()),
            ("tiny", "r1")
        );
        assert_eq!(body.token_delay_ms, Some(100));
        assert_eq!(body.gpus_per_replica, Some(1));
        assert_eq!(body.gpu_memory_bytes, Some(3 << 29));
        assert_eq!(body.served_model_name, None);
        let selector = body.node_selector.unwrap();
        assert_eq!(selector["zone"], "a");
        assert_eq!(selector.len(), 3);
    }

    #[test]
    fn a_field_that_is_not_a_number_or_a_pair_is_named() {
        let mut form = CreateForm {
            model: "tiny@r1".into(),
            replicas: "two".into(),
            ..CreateForm::default()
        };
        assert_eq!(form.parse().unwrap_err(), "replicas must be a whole number");
        form.replicas = "2".into();
        form.node_selector = "zone".into();
        assert!(
            form.parse()
                .unwrap_err()
                .contains("`zone` is not key=value")
        );
        form.model = String::new();
        assert!(form.parse().is_err());
    }
}
