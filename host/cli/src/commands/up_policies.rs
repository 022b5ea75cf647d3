//! What `up` shows of admission: it binds the shipped policies (the model
//! allowlist letting the demo model through and clamping `max_tokens` on
//! `inference`, the GPU memory guard on `deploy`), then sends one request the
//! chain clamps and one it denies, and its closing text reports what really
//! happened with the commands to change the chains.
//!
//! A point that already has a chain (an earlier `up`, or the operator's own)
//! is left as it is; only a point that was never bound gets the shipped one.

use std::path::{Path, PathBuf};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use switchyard_protocol::admin::{PolicyBinding, SetChain};
use switchyard_protocol::generations::ChainStatus;
use switchyard_protocol::plugin::Mode;
use switchyard_runtime::PluginKind;

use super::up::{DEMO_MODEL, say};
use crate::client::Client;

/// The cap the shipped `inference` chain clamps `max_tokens` to.
const CLAMP_TO: u64 = 128;
/// What the clamped example asks for.
const CLAMPED_ASK: u64 = 1000;
/// A model the allowlist refuses.
const REFUSED_MODEL: &str = "gpt-4o";

/// One binding of a shipped chain.
struct Shipped {
    plugin: &'static str,
    /// The settings file `up` writes, for the operator to edit and set again.
    settings: Value,
}

fn shipped_chains() -> [(&'static str, Vec<Shipped>); 2] {
    [
        (
            "inference",
            vec![
                Shipped {
                    plugin: "model-allowlist",
                    settings: json!({"default": ["demo-*"], "rules": []}),
                },
                Shipped {
                    plugin: "max-tokens",
                    settings: json!({"max_tokens": CLAMP_TO, "mode": "clamp"}),
                },
            ],
        ),
        (
            "deploy",
            vec![Shipped {
                plugin: "gpu-memory-guard",
                settings: json!({"max_fraction_of_free": 0.9}),
            }],
        ),
    ]
}

/// The version of a policy this binary carries (seeded into the registry).
fn shipped_version(plugin: &str) -> anyhow::Result<&'static str> {
    switchyard_artifacts::shipped()
        .iter()
        .find(|s| s.kind == PluginKind::Policy && s.name == plugin)
        .map(|s| s.version)
        .with_context(|| format!("this binary carries no policy {plugin}"))
}

/// Binds the shipped chains on points that have none; answers the chains in
/// force, one line per point, and the folder of the settings files.
pub async fn bind_shipped(api: &Client, data_dir: &Path) -> anyhow::Result<Vec<String>> {
    let settings_dir = data_dir.join("policies");
    std::fs::create_dir_all(&settings_dir)?;
    let mut lines = Vec::new();
    for (point, chain) in shipped_chains() {
        let path = format!("/api/admission/{point}");
        let mut shown: ChainStatus = api.send_as(api.request(Method::GET, &path)).await?;
        if shown.generation == 0 {
            let mut policies = Vec::new();
            for binding in &chain {
                let file = settings_file(&settings_dir, binding.plugin);
                std::fs::write(&file, serde_json::to_vec_pretty(&binding.settings)?)?;
                policies.push(PolicyBinding {
                    plugin: binding.plugin.into(),
                    version: shipped_version(binding.plugin)?.into(),
                    settings: binding.settings.clone(),
                    mode: Default::default(),
                    fail: Default::default(),
                    log: Default::default(),
                });
            }
            say(&format!("binding the shipped {point} chain"));
            api.send_json(Method::PUT, &path, &SetChain { policies })
                .await
                .with_context(|| format!("binding the shipped {point} chain"))?;
            shown = api.send_as(api.request(Method::GET, &path)).await?;
        }
        lines.push(describe_chain(point, &shown));
    }
    Ok(lines)
}

fn settings_file(dir: &Path, plugin: &str) -> PathBuf {
    dir.join(format!("{plugin}.json"))
}

/// `inference (generation 1): model-allowlist@0.1.0 {"default":["demo-*"]} -> max-tokens@0.1.0 ...`
fn describe_chain(point: &str, shown: &ChainStatus) -> String {
    let chain = if shown.policies.is_empty() {
        "nothing bound".to_string()
    } else {
        shown
            .policies
            .iter()
            .map(|signed| {
                let p = &signed.component;
                let mode = match p.mode {
                    Mode::Monitor => " (monitor)",
                    Mode::Enforce => "",
                };
                format!("{}@{}{mode} {}", p.plugin, p.version, p.settings)
            })
            .collect::<Vec<_>>()
            .join("\n        -> ")
    };
    format!("{point:<9} (generation {}): {chain}", shown.generation)
}

/// Sends the two example requests with the demo key and words what the
/// chain did to each, as it happened.
pub async fn show_at_work(base: &str, key: &str) -> anyhow::Result<Vec<String>> {
    let client = Client::new(&crate::cli::ApiArgs {
        server: base.to_string(),
        token: Some(key.to_string()),
    });
    let chat = |model: &str, max_tokens: u64| {
        json!({"model": model, "max_tokens": max_tokens,
               "messages": [{"role": "user", "content": "Hello!"}]})
    };
    let mut lines = Vec::new();

    let (status, body) = client
        .answer(
            client
                .request(Method::POST, "/v1/chat/completions")
                .json(&chat(DEMO_MODEL, CLAMPED_ASK)),
        )
        .await?;
    lines.push(match body["usage"]["completion_tokens"].as_u64() {
        Some(tokens) if status.is_success() => format!(
            "clamped: asked {DEMO_MODEL} for max_tokens {CLAMPED_ASK}, got {status} with {tokens} tokens (max-tokens clamps to {CLAMP_TO})"
        ),
        _ => format!("clamped: asked {DEMO_MODEL} for max_tokens {CLAMPED_ASK}, got {status}: {body}"),
    });

    let (status, body) = client
        .answer(
            client
                .request(Method::POST, "/v1/chat/completions")
                .json(&chat(REFUSED_MODEL, 16)),
        )
        .await?;
    lines.push(format!(
        "denied:  asked for {REFUSED_MODEL}, got {status} {}: {}",
        body["error"]["code"].as_str().unwrap_or("?"),
        body["error"]["message"].as_str().unwrap_or("")
    ));
    Ok(lines)
}

/// The commands that change what was shown.
pub fn commands(data_dir: &Path) -> String {
    let dir = data_dir.join("policies");
    let file = |plugin: &str| settings_file(&dir, plugin).display().to_string();
    let version = |plugin: &str| shipped_version(plugin).unwrap_or("0.1.0");
    format!(
        "    switchyard admission show inference
    switchyard admission decisions inference     # what the chain denied and patched
    # edit the settings files in {dir}, then:
    switchyard admission set inference --policy model-allowlist@{allow} --settings {allow_file} \\
      --policy max-tokens@{cap} --settings {cap_file}
    switchyard admission rollback inference",
        dir = dir.display(),
        allow = version("model-allowlist"),
        allow_file = file("model-allowlist"),
        cap = version("max-tokens"),
        cap_file = file("max-tokens"),
    )
}
