//! The dry-run evaluator: a request record judged by the chain this replica
//! serves (`POST /api/admission/{point}/evaluate`), with the final decision
//! and each policy's decision, code, message and time. An inference
//! request is written field by field; every point also takes a record as
//! JSON (prefilled with an example of the point's shape).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchyard_protocol::dry_run::DryRun as Verdict;
use switchyard_runtime::admission::{
    AdmissionPoint, Caller, DeployRequest, FederationRequest, Gpu, InferenceRequest,
    TransferRequest,
};

use super::super::ConsoleState;
use super::super::api::ApiFailure;
use super::super::api::typed;
use super::super::form::Posted;
use super::super::page::{self, csrf_field};
use super::super::session::Session;

/// The endpoints an inference record may name.
const ENDPOINTS: [&str; 3] = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"];

/// What the dry-run form carries (every field as typed).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DryRun {
    /// A whole request record as JSON; when given, the fields are unused.
    record: String,
    model: String,
    endpoint: String,
    prompt_tokens: String,
    max_tokens: String,
    stream: Option<String>,
    key_id: String,
    project: String,
    scopes: String,
}

impl DryRun {
    /// The form's first look: a chat request as this session's key.
    fn initial(session: &Session, point: AdmissionPoint) -> Self {
        Self {
            record: if point == AdmissionPoint::Inference {
                String::new()
            } else {
                example(session, point)
            },
            model: "tiny".into(),
            endpoint: ENDPOINTS[0].into(),
            prompt_tokens: "12".into(),
            max_tokens: "256".into(),
            stream: None,
            key_id: session.caller.key_id.clone(),
            project: String::new(),
            scopes: "inference".into(),
        }
    }

    /// The request record to evaluate.
    fn record(&self) -> Result<Value, String> {
        if !self.record.trim().is_empty() {
            return serde_json::from_str(&self.record)
                .map_err(|e| format!("the request record is not JSON: {e}"));
        }
        let number = |what: &str, text: &str| -> Result<Option<u32>, String> {
            let text = text.trim();
            if text.is_empty() {
                return Ok(None);
            }
            text.parse()
                .map(Some)
                .map_err(|_| format!("{what} must be a whole number from 0 to {}", u32::MAX))
        };
        let model = self.model.trim();
        if model.is_empty() {
            return Err("give the model the request asks for".into());
        }
        let request = InferenceRequest {
            caller: Caller {
                key_id: self.key_id.trim().to_string(),
                project: super::super::form::optional(&self.project),
                scopes: self
                    .scopes
                    .split([',', ' '])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            },
            model: model.to_string(),
            endpoint: self.endpoint.clone(),
            prompt_tokens: number("prompt tokens", &self.prompt_tokens)?.unwrap_or(0),
            max_tokens: number("max tokens", &self.max_tokens)?,
            stream: self.stream.is_some(),
        };
        Ok(serde_json::to_value(request).expect("a request record serialises"))
    }
}

/// An example record of the point's shape, as JSON to edit.
fn example(session: &Session, point: AdmissionPoint) -> String {
    let caller = Caller {
        key_id: session.caller.key_id.clone(),
        project: None,
        scopes: session.caller.scopes.clone(),
    };
    let value = match point {
        AdmissionPoint::Inference => serde_json::to_value(InferenceRequest {
            caller,
            model: "tiny".into(),
            endpoint: ENDPOINTS[0].into(),
            prompt_tokens: 12,
            max_tokens: Some(256),
            stream: false,
        }),
        AdmissionPoint::Deploy => serde_json::to_value(DeployRequest {
            caller,
            deployment: "tiny".into(),
            model: "tiny".into(),
            revision: "main".into(),
            engine: "reference".into(),
            node: "gpu-a".into(),
            node_labels: Vec::new(),
            gpus: vec![Gpu {
                index: 0,
                name: "L4".into(),
                memory_total_bytes: 24 << 30,
                memory_free_bytes: 24 << 30,
            }],
            memory_per_gpu_bytes: 4 << 30,
        }),
        AdmissionPoint::Transfer => serde_json::to_value(TransferRequest {
            caller,
            model: "tiny".into(),
            revision: "main".into(),
            file: "tiny.gguf".into(),
            size_bytes: 24 << 20,
            source: "library".into(),
            destination: "gpu-a".into(),
        }),
        AdmissionPoint::Federation => serde_json::to_value(FederationRequest {
            peer: "eu-west".into(),
            grant_id: "g-1".into(),
            service: "inference".into(),
            model: Some("tiny".into()),
            prompt_tokens: 12,
            max_tokens: Some(256),
        }),
    };
    value
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_default()
}

/// The dry-run form, filled with `entered` (or the initial request).
pub fn section(session: &Session, point: AdmissionPoint, entered: Option<&DryRun>) -> Markup {
    let initial = DryRun::initial(session, point);
    let d = entered.unwrap_or(&initial);
    let action = format!("/console/admission/{point}/dry-run");
    html! {
        section.panel #dry-run aria-labelledby="dry-run-title" {
            h2 #dry-run-title { "Dry run" }
            p.hint { "Judges a request with the chain this replica serves, policy by policy. Nothing is sent anywhere and nothing is recorded." }
            @if point == AdmissionPoint::Inference {
                form.stack method="post" action=(action) {
                    (csrf_field(session))
                    label for="dry-model" { "Model" }
                    input #dry-model type="text" name="model" required maxlength="256" value=(d.model);
                    label for="dry-endpoint" { "Endpoint" }
                    select #dry-endpoint name="endpoint" {
                        @for e in ENDPOINTS { option value=(e) selected[e == d.endpoint] { (e) } }
                    }
                    label for="dry-prompt-tokens" { "Prompt tokens" }
                    input #dry-prompt-tokens type="number" name="prompt_tokens" min="0" value=(d.prompt_tokens);
                    label for="dry-max-tokens" { "Max tokens (optional)" }
                    input #dry-max-tokens type="number" name="max_tokens" min="0" value=(d.max_tokens);
                    label.check for="dry-stream" {
                        input #dry-stream type="checkbox" name="stream" value="1" checked[d.stream.is_some()];
                        " Streamed"
                    }
                    label for="dry-key" { "Caller key id" }
                    input #dry-key type="text" name="key_id" maxlength="128" value=(d.key_id);
                    label for="dry-project" { "Caller project (optional)" }
                    input #dry-project type="text" name="project" maxlength="128" value=(d.project);
                    label for="dry-scopes" { "Caller scopes" }
                    input #dry-scopes type="text" name="scopes" maxlength="512" value=(d.scopes);
                    div { button type="submit" { "Evaluate" } }
                }
                details {
                    summary { "Or evaluate a request record written as JSON" }
                    (record_form(session, &action, &if d.record.is_empty() { example(session, point) } else { d.record.clone() }))
                }
            } @else {
                (record_form(session, &action, &d.record))
            }
        }
    }
}

fn record_form(session: &Session, action: &str, record: &str) -> Markup {
    html! {
        form.stack method="post" action=(action) {
            (csrf_field(session))
            label for="dry-record" { "Request record (JSON)" }
            textarea #dry-record name="record" rows="12" maxlength="65536" spellcheck="false" required { (record) }
            div { button type="submit" { "Evaluate record" } }
        }
    }
}

/// The dry-run page alone.
pub async fn form(
    State(_console): State<ConsoleState>,
    session: Session,
    Path(name): Path<String>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match super::known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    page::render(
        &session,
        &format!("Dry run: {point}"),
        page_body(&session, point, None, None),
    )
}

/// Evaluates the form's request and shows the verdict above the form.
pub async fn evaluate(
    State(console): State<ConsoleState>,
    Path(name): Path<String>,
    posted: Posted<DryRun>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match super::known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    let entered = &posted.fields;
    let verdict = match entered.record() {
        Err(message) => Err(ApiFailure {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request".into(),
            message,
            body: Value::Null,
        }),
        Ok(record) => session
            .api(&console)
            .post(&format!("/api/admission/{point}/evaluate"), record)
            .await
            .and_then(typed::<Verdict>),
    };
    let status = verdict.as_ref().err().map_or(StatusCode::OK, |f| f.status);
    let body = page_body(session, point, Some(&verdict), Some(entered));
    page::render_status(session, status, &format!("Dry run: {point}"), body)
}

fn page_body(
    session: &Session,
    point: AdmissionPoint,
    verdict: Option<&Result<Verdict, ApiFailure>>,
    entered: Option<&DryRun>,
) -> Markup {
    html! {
        p { a href=(format!("/console/admission/{point}")) { "Back to the " (point.as_str()) " chain" } }
        @match verdict {
            None => {}
            Some(Err(failure)) => { (page::failure(failure)) }
            Some(Ok(verdict)) => { (verdict_panel(verdict)) }
        }
        (section(session, point, entered))
    }
}

fn verdict_panel(v: &Verdict) -> Markup {
    html! {
        section.panel.verdict aria-labelledby="verdict-title" role="status" {
            h2 #verdict-title {
                @let decision = v.judgement.decision.as_str();
                "Decision: " span class=(format!("state {}", decision_class(decision))) { (decision) }
            }
            @if let Some(code) = &v.judgement.code {
                p { code { (code) } " " (v.judgement.message.as_deref().unwrap_or("")) }
            }
            @if let Some(patch) = &v.judgement.patch {
                p { "Patch: " code { (patch.to_string()) } }
            }
            p.muted { "Judged by generation " (v.generation) "." }
            @if v.steps.is_empty() {
                p { "The chain is empty: every request is allowed." }
            } @else {
                div.table-wrap { table {
                    thead { tr {
                        th { "#" } th { "Policy" } th { "Mode" } th { "Decision" }
                        th { "Code" } th { "Message" } th { "Time" }
                    } }
                    tbody {
                        @for (i, s) in v.steps.iter().enumerate() {
                            @let decision = s.judgement.as_ref().map_or("error", |j| j.decision.as_str());
                            @let code = s.judgement.as_ref().and_then(|j| j.code.as_ref());
                            @let message = s.judgement.as_ref().and_then(|j| j.message.as_ref());
                            @let patch = s.judgement.as_ref().and_then(|j| j.patch.as_ref());
                            tr {
                                td { (i + 1) }
                                td { code { (s.plugin) } }
                                td { (s.mode) " · fails " (s.fail) }
                                td {
                                    span class=(format!("state {}", decision_class(decision))) { (decision) }
                                    @if !s.enforced { " " span.muted { "(not enforced)" } }
                                }
                                td {
                                    @if let Some(code) = code { code { (code) } }
                                    @if let Some(error) = &s.error { code { (error.kind) } }
                                }
                                td {
                                    @if let Some(message) = message { (message) }
                                    @if let Some(error) = &s.error { (error.message) }
                                    @if let Some(patch) = patch { "patch " code { (patch.to_string()) } }
                                }
                                td { (format!("{:.0} µs", s.time_us)) }
                            }
                        }
                    }
                } }
            }
            details {
                summary { "The request as the engine would see it" }
                pre { code { (serde_json::to_string_pretty(&v.request).unwrap_or_default()) } }
            }
        }
    }
}

fn decision_class(decision: &str) -> &'static str {
    match decision {
        "allow" => "allow",
        "patch" => "pending",
        _ => "deny",
    }
}
