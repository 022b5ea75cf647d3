//! `switchyard policy test COMPONENT --cases FILE`: named requests, each with
//! the decision it expects, run through the real runtime. One format for
//! every language a policy is written in, so the Rust, Python and JavaScript
//! examples are held to the same cases.
//!
//! ```json
//! { "settings": "settings.json",
//!   "cases": [
//!     { "name": "research may call llama", "point": "inference",
//!       "request": "test_data/inference-research-llama.json",
//!       "expect": { "decision": "allow" } },
//!     { "name": "clamped", "point": "inference", "request": { ... },
//!       "settings": { "max_tokens": 1024, "mode": "clamp" },
//!       "expect": { "decision": "patch", "patch": { "max_tokens": 1024 } } },
//!     { "name": "a rule without models is refused", "settings": { "rules": [{}] },
//!       "expect": { "decision": "invalid_settings" } } ] }
//! ```
//!
//! `settings` and `request` are a path (relative to the cases file) or the
//! JSON itself; a case's `settings` replaces the file's default.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, Decision,
};
use switchyard_runtime::policy::PolicyPlugin;
use switchyard_runtime::{LoadError, Runtime};

use super::policy_test::{ComponentFile, describe, parse_point, read_json};

/// Most cases one file may hold: a file is read whole.
const MAX_CASES: usize = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    /// The settings of every case that names none [default: `{}`].
    #[serde(default)]
    settings: Option<Value>,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    /// Not needed when the case expects the settings to be refused.
    #[serde(default)]
    point: Option<String>,
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    settings: Option<Value>,
    expect: Expect,
}

/// What a case expects, in the form `--json` prints a decision.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
enum Expect {
    Allow,
    Deny {
        code: String,
    },
    Patch {
        patch: Value,
    },
    /// `validate-settings` refuses the case's settings.
    InvalidSettings,
}

/// One case's outcome.
#[derive(Debug, Serialize)]
struct Outcome {
    name: String,
    passed: bool,
    expected: Expect,
    /// What happened, as `describe` words it.
    got: String,
}

/// What a case got: a decision, or why there was none.
enum Got {
    Decision(Decision),
    /// `validate-settings` refused the case's settings (its message).
    InvalidSettings(String),
    /// The settings were accepted (what an `invalid_settings` case got instead).
    SettingsAccepted,
    /// The policy failed the call (the step's error).
    Error(String),
    /// The policy does not judge the case's point.
    PointNotJudged(AdmissionPoint),
}

impl Got {
    fn is(&self, expect: &Expect) -> bool {
        match (expect, self) {
            (Expect::Allow, Got::Decision(Decision::Allow)) => true,
            (Expect::Deny { code }, Got::Decision(Decision::Deny(denial))) => denial.code == *code,
            (Expect::Patch { patch }, Got::Decision(Decision::Patch { patch: got })) => {
                serde_json::to_value(got).is_ok_and(|got| got == *patch)
            }
            (Expect::InvalidSettings, Got::InvalidSettings(_)) => true,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Got::Decision(decision) => describe(decision),
            Got::InvalidSettings(message) => format!("invalid settings: {message}"),
            Got::SettingsAccepted => "settings accepted".into(),
            Got::Error(error) => error.clone(),
            Got::PointNotJudged(point) => format!("the policy does not judge the {point} point"),
        }
    }
}

pub fn run(
    runtime: &Arc<Runtime>,
    component: &Path,
    cases_path: &Path,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let file: CasesFile = serde_json::from_value(read_json(cases_path)?)
        .with_context(|| format!("{} is not a cases file", cases_path.display()))?;
    if file.cases.is_empty() || file.cases.len() > MAX_CASES {
        bail!("{} must hold 1 to {MAX_CASES} cases", cases_path.display());
    }
    let base = cases_path.parent().unwrap_or(Path::new("."));
    let default_settings = match &file.settings {
        Some(s) => resolve(base, s)?,
        None => Value::Object(Default::default()),
    };
    let component = ComponentFile::read(component)?;
    // One load per distinct settings document: loading validates them. A
    // refusal of the settings is a case's outcome; any other load error ends the run.
    let mut loaded: HashMap<String, Result<Arc<PolicyPlugin>, String>> = HashMap::new();

    let mut outcomes = Vec::with_capacity(file.cases.len());
    for case in file.cases {
        let settings = match &case.settings {
            Some(s) => resolve(base, s)?,
            None => default_settings.clone(),
        }
        .to_string();
        let policy = match loaded.get(&settings) {
            Some(policy) => policy.clone(),
            None => {
                let policy = match component.load(runtime, &settings) {
                    Ok(policy) => Ok(policy),
                    Err(LoadError::InvalidSettings(message)) => Err(message),
                    Err(e) => bail!("{}: {e}", component.path().display()),
                };
                loaded.insert(settings, policy.clone());
                policy
            }
        };
        let got = match (policy, &case.expect) {
            (Err(message), _) => Got::InvalidSettings(message),
            (Ok(_), Expect::InvalidSettings) => Got::SettingsAccepted,
            (Ok(policy), _) => evaluate(&policy, &case, base)?,
        };
        outcomes.push(Outcome {
            name: case.name,
            passed: got.is(&case.expect),
            expected: case.expect,
            got: got.describe(),
        });
    }

    let failed = outcomes.iter().filter(|o| !o.passed).count();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "passed": outcomes.len() - failed,
                "failed": failed,
                "cases": outcomes,
            }))?
        );
    } else {
        for o in &outcomes {
            if o.passed {
                println!("ok    {}", o.name);
            } else {
                println!(
                    "FAIL  {}\n        expected {}\n        got      {}",
                    o.name,
                    serde_json::to_string(&o.expected).unwrap_or_default(),
                    o.got
                );
            }
        }
        println!(
            "{} cases: {} passed, {failed} failed",
            outcomes.len(),
            outcomes.len() - failed
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The case's request through a chain of this one policy, as a server judges it.
fn evaluate(policy: &Arc<PolicyPlugin>, case: &Case, base: &Path) -> anyhow::Result<Got> {
    let (Some(point), Some(request)) = (&case.point, &case.request) else {
        bail!("case '{}' needs a point and a request", case.name);
    };
    let point = parse_point(point)?;
    let request = resolve(base, request)?;
    let request = AdmissionRequest::from_json(point, request)
        .with_context(|| format!("case '{}': not a {point} request record", case.name))?;
    if !policy.points().contains(&point) {
        return Ok(Got::PointNotJudged(point));
    }
    let chain = Chain::new(
        point,
        0,
        vec![ChainEntry {
            policy: policy.clone(),
            mode: Default::default(),
            fail: Default::default(),
            log: Default::default(),
        }],
    );
    let verdict = chain.evaluate(request);
    if let Some(error) = verdict.steps.iter().find_map(|s| s.error.as_ref()) {
        return Ok(Got::Error(format!(
            "error {}: {}",
            error.kind, error.message
        )));
    }
    Ok(Got::Decision(verdict.decision))
}

/// A path relative to the cases file, or the JSON itself.
fn resolve(base: &Path, value: &Value) -> anyhow::Result<Value> {
    match value {
        Value::String(path) => read_json(&base.join(PathBuf::from(path))),
        other => Ok(other.clone()),
    }
}
