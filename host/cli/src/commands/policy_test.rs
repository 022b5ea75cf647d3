//! `switchyard policy test`: one component or a chain on a request file, or
//! one component on a cases file, through the real runtime, with no server
//! and no database. Compiled components are kept in the on-disk cache, so a
//! large component (an 18 MB Python one) compiles once, not on every run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, Decision,
};
use switchyard_runtime::cache::CompileSource;
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{LoadError, Runtime, RuntimeConfig};

use super::{policy_cases, policy_watch};
use crate::cli::PolicyTestArgs;

pub fn run(args: PolicyTestArgs) -> anyhow::Result<ExitCode> {
    if args.components.len() > 1 && !args.chain {
        bail!("several components form a chain: add --chain");
    }
    if args.settings.len() > 1 && args.settings.len() != args.components.len() {
        bail!("give one --settings per component, or one for all");
    }
    let runtime = Runtime::new(RuntimeConfig {
        call_deadline: Duration::from_millis(args.deadline_ms),
        cache_dir: (!args.no_cache).then(compile_cache_dir).flatten(),
        ..RuntimeConfig::default()
    })?;
    if !args.watch {
        return run_once(&runtime, &args);
    }
    let mut watched = args.components.clone();
    watched.extend(args.cases.clone());
    watched.extend(args.request.clone());
    watched.extend(args.settings.iter().cloned());
    let mut watcher = policy_watch::Watcher::new(watched);
    loop {
        match run_once(&runtime, &args) {
            Ok(code) if code == ExitCode::SUCCESS => eprintln!("-- passed"),
            Ok(_) => eprintln!("-- failed"),
            Err(e) => eprintln!("error: {e:#}"),
        }
        eprintln!(
            "-- watching {} file(s) for changes (Ctrl-C to stop)",
            watcher.len()
        );
        let changed = watcher.wait_for_change();
        eprintln!("\n-- {} changed, running again", changed.display());
    }
}

fn run_once(runtime: &Arc<Runtime>, args: &PolicyTestArgs) -> anyhow::Result<ExitCode> {
    match &args.cases {
        Some(cases) => policy_cases::run(runtime, &args.components[0], cases, args.json),
        None => run_request(runtime, args),
    }
}

/// The components on one request file, as one chain.
fn run_request(runtime: &Arc<Runtime>, args: &PolicyTestArgs) -> anyhow::Result<ExitCode> {
    let (Some(point), Some(request_path)) = (&args.point, &args.request) else {
        bail!("give --point and --request, or --cases");
    };
    let point = parse_point(point)?;
    let request = read_json(request_path)?;
    let request = AdmissionRequest::from_json(point, request)
        .with_context(|| format!("{} is not a {point} request record", request_path.display()))?;

    let mut entries = Vec::new();
    for (i, path) in args.components.iter().enumerate() {
        let settings = match args.settings.get(i).or(args.settings.first()) {
            Some(file) => read_json(file)?.to_string(),
            None => "{}".to_string(),
        };
        let component = ComponentFile::read(path)?;
        let policy = component
            .load(runtime, &settings)
            .with_context(|| format!("loading {}", path.display()))?;
        if !policy.points().contains(&point) {
            bail!("{} does not judge the {point} point", path.display());
        }
        entries.push(ChainEntry {
            policy,
            mode: Default::default(),
            fail: Default::default(),
            log: Default::default(),
        });
    }
    let chain = Chain::new(point, 0, entries);
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
        (Decision::Deny(_) | Decision::Throttle(_), false) => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// A component read from disk, pinned by its digest.
pub(super) struct ComponentFile {
    path: PathBuf,
    bytes: Vec<u8>,
    sha256: String,
}

impl ComponentFile {
    pub(super) fn read(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            sha256,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Loads with these settings; the first load of a digest in this process
    /// says on stderr whether it was compiled or read from the cache.
    pub(super) fn load(
        &self,
        runtime: &Arc<Runtime>,
        settings: &str,
    ) -> Result<Arc<PolicyPlugin>, LoadError> {
        let name = self
            .path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("component");
        let started = Instant::now();
        let policy = PolicyPlugin::load(
            runtime,
            PolicySource {
                component: ComponentSource {
                    name,
                    version: "local",
                    bytes: &self.bytes,
                    sha256: &self.sha256,
                },
                settings,
            },
        )?;
        let how = match policy.compiled_from() {
            CompileSource::Memory => None,
            CompileSource::Disk => Some("from the compile cache"),
            CompileSource::Compiled => Some("compiled"),
        };
        if let Some(how) = how {
            eprintln!(
                "{} ({:.1} MB, sha256 {}): {how} in {:.2} s",
                self.path.display(),
                self.bytes.len() as f64 / 1e6,
                &self.sha256[..12],
                started.elapsed().as_secs_f64()
            );
        }
        Ok(policy)
    }
}

/// Where compiled components are kept between runs: the XDG cache folder.
fn compile_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("switchyard").join("components"))
}

pub(super) fn parse_point(name: &str) -> anyhow::Result<AdmissionPoint> {
    AdmissionPoint::parse(name).with_context(|| {
        format!("unknown point '{name}'; points: inference, deploy, transfer, federation")
    })
}

pub(super) fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allow".into(),
        Decision::Deny(d) => format!("deny {}: {}", d.code, d.message),
        Decision::Patch { patch } => {
            format!("patch {}", serde_json::to_string(patch).unwrap_or_default())
        }
        Decision::Throttle(t) => format!(
            "throttle {}: {} {}",
            t.denial.code,
            t.denial.message,
            serde_json::to_string(&t.limits).unwrap_or_default()
        ),
        Decision::Flag(d) => format!("flag {}: {}", d.code, d.message),
    }
}

pub(super) fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}
