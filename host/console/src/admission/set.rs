//! Setting a point's chain from a form of steps, and rolling it back.
//!
//! The form names each step's fields with its index (`policy.0`,
//! `mode.0`, ...); "Add step" posts the same form back and draws it again
//! with one more, so nothing typed is lost and no script is needed.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value, json};
use switchyard_protocol::admin::{PolicyBinding, SetChain};
use switchyard_protocol::decisions::{DEFAULT_ALLOW_SAMPLE, DecisionLogging};
use switchyard_protocol::plugin::{FailMode, Mode};
use switchyard_runtime::admission::AdmissionPoint;

use super::super::ConsoleState;
use super::super::api::ApiFailure;
use super::super::form::{Posted, redirect_after, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::plugins::Version;
use super::super::session::Session;
use switchyard_protocol::generations::ChainStatus;

/// The most steps one form carries: a chain is a handful of policies.
const MAX_STEPS: usize = 16;

/// One step as the form holds it (text, as typed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `name@version`, or empty: no policy (the step is dropped).
    pub policy: String,
    pub mode: String,
    pub fail: String,
    pub settings: String,
    pub allow_sample: String,
    pub log_requests: bool,
}

impl Default for Step {
    fn default() -> Self {
        Self {
            policy: String::new(),
            mode: Mode::Enforce.as_str().into(),
            fail: FailMode::Closed.as_str().into(),
            settings: "{}".into(),
            allow_sample: DEFAULT_ALLOW_SAMPLE.to_string(),
            log_requests: false,
        }
    }
}

/// The steps of the chain as it is.
fn steps_of(chain: &ChainStatus) -> Vec<Step> {
    chain
        .policies
        .iter()
        .map(|signed| &signed.component)
        .map(|p| Step {
            policy: format!("{}@{}", p.plugin, p.version),
            mode: p.mode.to_string(),
            fail: p.fail.to_string(),
            settings: serde_json::to_string_pretty(&p.settings).unwrap_or_else(|_| "{}".into()),
            allow_sample: p.log.allow_sample.to_string(),
            log_requests: p.log.log_requests,
        })
        .collect()
}

/// The set form and the rollback form. `posted` is a set form drawn again
/// (after "Add step" or a refusal, which shows above it).
pub fn forms(
    session: &Session,
    point: AdmissionPoint,
    chain: Option<&ChainStatus>,
    registry: &Result<Vec<Version>, ApiFailure>,
    posted: Option<(&[Step], Option<&ApiFailure>)>,
) -> Markup {
    let mut steps = match posted {
        Some((steps, _)) => steps.to_vec(),
        None => chain.map(steps_of).unwrap_or_default(),
    };
    if steps.is_empty() {
        steps.push(Step::default());
    }
    let policies: Vec<&Version> = match registry {
        Ok(versions) => versions.iter().filter(|v| v.kind == "policy").collect(),
        Err(_) => Vec::new(),
    };
    let generation = chain.map(|c| c.generation).unwrap_or(0);
    html! {
        section.panel #set aria-labelledby="set-title" {
            h2 #set-title { "Set the " (point.as_str()) " chain" }
            @if let Some((_, Some(failure))) = posted { (page::failure(failure)) }
            @if let Err(failure) = registry { (page::failure(failure)) }
            @if policies.is_empty() {
                (page::empty("No admission policy is registered.", html! {
                    "Upload one on the " a href="/console/plugins" { "Plugins" } " page, then bind it here."
                }))
            } @else {
                p.hint { "Policies judge in this order; the first enforced deny wins. Leave a step's policy empty to drop it. Every replica builds the new generation, checks its settings, then swaps it in." }
                form.stack method="post" action=(format!("/console/admission/{point}/set")) {
                    (csrf_field(session))
                    @for (i, step) in steps.iter().enumerate() {
                        (step_fields(i, step, &policies))
                    }
                    div {
                        button type="submit" { "Set chain" } " "
                        @if steps.len() < MAX_STEPS {
                            button.secondary type="submit" name="add" value="1" { "Add step" }
                        }
                    }
                }
            }
        }
        @if generation > 0 {
            section.panel aria-labelledby="rollback-title" {
                h2 #rollback-title { "Roll back" }
                p.hint { "Makes a new generation with an older chain: without a number, the one before the active chain." }
                form.inline method="post" action=(format!("/console/admission/{point}/rollback")) {
                    (csrf_field(session))
                    label for="rollback-generation" { "Generation to restore (optional)" }
                    input #rollback-generation type="number" name="generation" min="0" max=(generation - 1) inputmode="numeric";
                    button.secondary type="submit" { "Roll back" }
                }
            }
        }
    }
}

fn step_fields(i: usize, step: &Step, policies: &[&Version]) -> Markup {
    let id = |field: &str| format!("step-{i}-{field}");
    let name = |field: &str| format!("{field}.{i}");
    let known = policies
        .iter()
        .any(|v| format!("{}@{}", v.name, v.version) == step.policy);
    html! {
        fieldset.step {
            legend { "Step " (i + 1) }
            label for=(id("policy")) { "Policy" }
            select #(id("policy")) name=(name("policy")) {
                option value="" selected[step.policy.is_empty()] { "(none: drop this step)" }
                @if !known && !step.policy.is_empty() {
                    option value=(step.policy) selected { (step.policy.replace('@', " ")) " (not in the registry)" }
                }
                @for v in policies {
                    @let value = format!("{}@{}", v.name, v.version);
                    option value=(value) selected[value == step.policy] { (v.name) " " (v.version) }
                }
            }
            label for=(id("mode")) { "Mode" }
            select #(id("mode")) name=(name("mode")) {
                option value="enforce" selected[step.mode != "monitor"] { "enforce" }
                option value="monitor" selected[step.mode == "monitor"] { "monitor (log what it would do)" }
            }
            label for=(id("fail")) { "On error" }
            select #(id("fail")) name=(name("fail")) {
                option value="closed" selected[step.fail != "open"] { "deny (fail closed)" }
                option value="open" selected[step.fail == "open"] { "allow (fail open)" }
            }
            label for=(id("settings")) { "Settings (JSON)" }
            textarea #(id("settings")) name=(name("settings")) rows="4" maxlength="65536" spellcheck="false" { (step.settings) }
            label for=(id("sample")) { "Record one allow in" }
            input #(id("sample")) type="number" name=(name("allow_sample")) min="0" max="1000000" value=(step.allow_sample);
            label.check for=(id("log")) {
                input #(id("log")) type="checkbox" name=(name("log_requests")) value="1" checked[step.log_requests];
                " Keep the request records in the decision log"
            }
        }
    }
}

/// The steps a set form carried, by index.
fn posted_steps(fields: &[(String, String)]) -> Vec<Step> {
    let mut steps: BTreeMap<usize, Step> = BTreeMap::new();
    for (key, value) in fields {
        let Some((field, index)) = key.split_once('.') else {
            continue;
        };
        let Ok(index) = index.parse::<usize>() else {
            continue;
        };
        if index >= MAX_STEPS {
            continue;
        }
        let step = steps.entry(index).or_default();
        match field {
            "policy" => step.policy = value.trim().to_string(),
            "mode" => step.mode = value.clone(),
            "fail" => step.fail = value.clone(),
            "settings" => step.settings = value.clone(),
            "allow_sample" => step.allow_sample = value.trim().to_string(),
            "log_requests" => step.log_requests = true,
            _ => {}
        }
    }
    steps.into_values().collect()
}

/// The steps as the API's bindings; the error names the step.
fn bindings(steps: &[Step]) -> Result<SetChain, String> {
    let mut policies = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if step.policy.is_empty() {
            continue;
        }
        let n = i + 1;
        let (plugin, version) = step
            .policy
            .rsplit_once('@')
            .ok_or_else(|| format!("step {n}: choose a policy"))?;
        let settings: Value = if step.settings.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&step.settings)
                .map_err(|e| format!("step {n}: the settings are not JSON: {e}"))?
        };
        let mode: Mode = step
            .mode
            .parse()
            .map_err(|_| format!("step {n}: mode must be enforce or monitor"))?;
        let fail: FailMode = step
            .fail
            .parse()
            .map_err(|_| format!("step {n}: on error must be closed or open"))?;
        let allow_sample = if step.allow_sample.is_empty() {
            DEFAULT_ALLOW_SAMPLE
        } else {
            step.allow_sample
                .parse()
                .map_err(|_| format!("step {n}: record one allow in a whole number of requests"))?
        };
        policies.push(PolicyBinding {
            plugin: plugin.to_string(),
            version: version.to_string(),
            settings,
            mode,
            fail,
            log: DecisionLogging {
                log_requests: step.log_requests,
                allow_sample,
            },
        });
    }
    Ok(SetChain { policies })
}

/// `PUT /api/admission/{point}` from the form; "Add step" draws it again.
pub async fn submit(
    State(console): State<ConsoleState>,
    Path(name): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match super::known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    let mut steps = posted_steps(&posted.fields);
    if posted.fields.iter().any(|(k, _)| k == "add") {
        if steps.len() < MAX_STEPS {
            steps.push(Step::default());
        }
        return again(&console, session, point, &steps, None, StatusCode::OK).await;
    }
    let chain = match bindings(&steps) {
        Ok(chain) => chain,
        Err(message) => {
            let failure = ApiFailure {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_request".into(),
                message,
                body: Value::Null,
            };
            let status = failure.status;
            return again(&console, session, point, &steps, Some(&failure), status).await;
        }
    };
    let body = serde_json::to_value(&chain).expect("a chain serialises");
    let set = session
        .api(&console)
        .call(Method::PUT, &format!("/api/admission/{point}"), Some(body))
        .await;
    match set {
        Ok(generation) => {
            let n = generation["generation"].as_i64().unwrap_or_default();
            redirect_after(
                session,
                &format!("/console/admission/{point}"),
                format!(
                    "The {point} chain is set: generation {n}. Replicas swap it in within seconds."
                ),
                Ok::<_, ApiFailure>(()),
            )
        }
        Err(failure) => {
            let status = failure.status;
            again(&console, session, point, &steps, Some(&failure), status).await
        }
    }
}

/// The point's page with the set form as it was posted.
async fn again(
    console: &ConsoleState,
    session: &Session,
    point: AdmissionPoint,
    steps: &[Step],
    failure: Option<&ApiFailure>,
    status: StatusCode,
) -> Response {
    let body = super::point_body(console, session, point, Some((steps, failure))).await;
    page::render_status(session, status, &format!("Admission: {point}"), body)
}

/// `POST /api/admission/{point}/rollback`, to the generation given or the
/// one before.
pub async fn rollback(
    State(console): State<ConsoleState>,
    Path(name): Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let point = match super::known(&name).await {
        Ok(point) => point,
        Err(not_found) => return not_found,
    };
    let to = format!("/console/admission/{point}");
    let wanted = posted
        .fields
        .iter()
        .find(|(k, _)| k == "generation")
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty());
    let body = match wanted.map(str::parse::<i64>) {
        None => json!({}),
        Some(Ok(generation)) => json!({ "generation": generation }),
        Some(Err(_)) => {
            let failure = ApiFailure {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_request".into(),
                message: "the generation must be a whole number".into(),
                body: Value::Null,
            };
            return redirect_with(session, &to, Flash::failed(&failure));
        }
    };
    let result = session
        .api(&console)
        .post(&format!("/api/admission/{point}/rollback"), body)
        .await;
    let done = match &result {
        Ok(generation) => format!(
            "Rolled back: generation {} restores an older chain.",
            generation["generation"].as_i64().unwrap_or_default()
        ),
        Err(_) => String::new(),
    };
    redirect_after(session, &to, done, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    #[test]
    fn steps_are_read_by_index_and_empty_ones_are_dropped() {
        let fields = vec![
            field("csrf", "t"),
            field("policy.0", "model-allowlist@1.0.0"),
            field("mode.0", "enforce"),
            field("fail.0", "closed"),
            field("settings.0", r#"{"default": ["tiny*"]}"#),
            field("allow_sample.0", "1"),
            field("log_requests.0", "1"),
            field("policy.1", ""),
            field("mode.1", "monitor"),
        ];
        let steps = posted_steps(&fields);
        assert_eq!(steps.len(), 2);
        let chain = bindings(&steps).unwrap();
        assert_eq!(chain.policies.len(), 1);
        let binding = &chain.policies[0];
        assert_eq!(
            (binding.plugin.as_str(), binding.version.as_str()),
            ("model-allowlist", "1.0.0")
        );
        assert_eq!(binding.settings, json!({"default": ["tiny*"]}));
        assert!(binding.log.log_requests);
        assert_eq!(binding.log.allow_sample, 1);
    }

    #[test]
    fn settings_that_are_not_json_name_their_step() {
        let steps = posted_steps(&[
            field("policy.0", "a@1"),
            field("policy.1", "b@2"),
            field("settings.1", "{nope"),
        ]);
        let error = bindings(&steps).unwrap_err();
        assert!(
            error.starts_with("step 2: the settings are not JSON"),
            "{error}"
        );
    }

    #[test]
    fn an_index_past_the_bound_is_ignored() {
        let steps = posted_steps(&[field("policy.99999", "a@1")]);
        assert!(steps.is_empty());
    }
}
