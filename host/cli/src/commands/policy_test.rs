//! `switchyard policy test`: one component or a chain on a request file,
//! through the real runtime, with no server and no database.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, Decision,
};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::cli::PolicyTestArgs;

pub fn run(args: PolicyTestArgs) -> anyhow::Result<ExitCode> {
    if args.components.len() > 1 && !args.chain {
        bail!("several components form a chain: add --chain");
    }
    if args.settings.len() > 1 && args.settings.len() != args.components.len() {
        bail!("give one --settings per component, or one for all");
    }
    let point = AdmissionPoint::parse(&args.point).with_context(|| {
        format!(
            "unknown point '{}'; points: inference, deploy, transfer, federation",
            args.point
        )
    })?;
    let request: serde_json::Value = read_json(&args.request)?;
    let request = AdmissionRequest::from_json(point, request)
        .with_context(|| format!("{} is not a {point} request record", args.request.display()))?;
    let runtime = Runtime::new(RuntimeConfig {
        call_deadline: Duration::from_millis(args.deadline_ms),
        ..RuntimeConfig::default()
    })?;

    let mut entries = Vec::new();
    for (i, path) in args.components.iter().enumerate() {
        let settings = match args.settings.get(i).or(args.settings.first()) {
            Some(file) => read_json(file)?.to_string(),
            None => "{}".to_string(),
        };
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("component");
        let policy = PolicyPlugin::load(
            &runtime,
            PolicySource {
                component: ComponentSource {
                    name,
                    version: "local",
                    bytes: &bytes,
                    sha256: &sha256,
                },
                settings: &settings,
            },
        )
        .with_context(|| format!("loading {}", path.display()))?;
        if !policy.points().contains(&point) {
            bail!("{} does not judge the {point} point", path.display());
        }
        entries.push(ChainEntry {
            policy,
            mode: Default::default(),
            fail: Default::default(),
        });
    }
    let chain = Chain {
        point,
        generation: 0,
        entries,
    };
    let verdict = chain.evaluate(request);

    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else {
        for step in &verdict.steps {
            let outcome = match (&step.decision, &step.error) {
                (_, Some(e)) => format!("error {}: {}", e.kind, e.message),
                (Some(d), None) => describe(d),
                (None, None) => "no answer".into(),
            };
            println!(
                "{:<28} {:<60} {:>9.1} us",
                step.plugin, outcome, step.time_us
            );
        }
        println!("=> {}", describe(&verdict.decision));
    }
    let errored = verdict.steps.iter().any(|s| s.error.is_some());
    Ok(match (&verdict.decision, errored) {
        (_, true) => ExitCode::from(2),
        (Decision::Deny(_), false) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allow".into(),
        Decision::Deny(d) => format!("deny {}: {}", d.code, d.message),
        Decision::Patch { patch } => {
            format!("patch {}", serde_json::to_string(patch).unwrap_or_default())
        }
    }
}

fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}
