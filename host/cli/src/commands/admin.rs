//! The admin CLI: thin clients of the admin API.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_protocol::admin::{
    NewDeployment, NewKey, NewRegistrationToken, PolicyBinding, Scale, SetChain,
};
use switchyard_protocol::decisions::DecisionLogging;
use switchyard_protocol::dry_run::{DecisionKind, DryRun};
use switchyard_protocol::plugin::{FailMode, Mode};

use super::deployment_watch::{self, Outcome};
use crate::cli::{
    AdmissionCommand, ApiArgs, DeploymentCommand, KeyCommand, NodeCommand, PluginCommand,
};
use crate::client::Client;

fn print(value: &Value) -> anyhow::Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(ExitCode::SUCCESS)
}

pub async fn plugin(command: PluginCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginCommand::Push {
            file,
            name,
            version,
            signature,
            api,
        } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let sha256 = hex::encode(Sha256::digest(&bytes));
            let client = Client::new(&api);
            let mut request = client
                .request(Method::POST, "/api/plugins")
                .query(&[("name", &name), ("version", &version), ("sha256", &sha256)])
                .header("content-type", "application/wasm");
            if let Some(path) = signature {
                let header = super::plugin_sign::header(&path)?;
                request = request.header(switchyard_protocol::signing::SIGNATURE_HEADER, header);
            }
            print(&client.send(request.body(bytes)).await?)
        }
        PluginCommand::Sign(args) => super::plugin_sign::sign(args),
        PluginCommand::List { name, api } => {
            let client = Client::new(&api);
            let path = match name {
                Some(n) => format!("/api/plugins/{n}"),
                None => "/api/plugins".into(),
            };
            print(&client.send(client.request(Method::GET, &path)).await?)
        }
    }
}

/// The i-th of a per-policy option list (one value applies to all).
fn nth<'a, T>(values: &'a [T], i: usize, what: &str, n: usize) -> anyhow::Result<Option<&'a T>> {
    if values.len() > 1 && values.len() != n {
        bail!("give one --{what} per policy, or one for all");
    }
    Ok(values.get(i).or(values.first()))
}

fn read_json(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

pub async fn admission(command: AdmissionCommand) -> anyhow::Result<ExitCode> {
    match command {
        AdmissionCommand::Set {
            point,
            policies,
            settings,
            mode,
            fail,
            log_requests,
            allow_sample,
            api,
        } => {
            let n = policies.len();
            let mut chain = Vec::new();
            for (i, policy) in policies.iter().enumerate() {
                let (plugin, version) = policy
                    .split_once('@')
                    .with_context(|| format!("'{policy}' is not name@version"))?;
                let settings = match nth(&settings, i, "settings", n)? {
                    Some(file) => read_json(file)?,
                    None => json!({}),
                };
                let mode = match nth(&mode, i, "mode", n)? {
                    Some(text) => text.parse::<Mode>().map_err(anyhow::Error::msg)?,
                    None => Mode::default(),
                };
                let fail = match nth(&fail, i, "fail", n)? {
                    Some(text) => text.parse::<FailMode>().map_err(anyhow::Error::msg)?,
                    None => FailMode::default(),
                };
                let mut log = DecisionLogging::default();
                if let Some(keep) = nth(&log_requests, i, "log-requests", n)? {
                    log.log_requests = *keep;
                }
                if let Some(sample) = nth(&allow_sample, i, "allow-sample", n)? {
                    log.allow_sample = *sample;
                }
                chain.push(PolicyBinding {
                    plugin: plugin.to_string(),
                    version: version.to_string(),
                    settings,
                    mode,
                    fail,
                    log,
                });
            }
            let client = Client::new(&api);
            let request = client
                .request(Method::PUT, &format!("/api/admission/{point}"))
                .json(&SetChain { policies: chain });
            print(&client.send(request).await?)
        }
        AdmissionCommand::Show { point, api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, &format!("/api/admission/{point}")))
                    .await?,
            )
        }
        AdmissionCommand::Rollback { point, api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::POST, &format!("/api/admission/{point}/rollback")))
                    .await?,
            )
        }
        AdmissionCommand::Decisions(args) => super::admission_decisions::run(args).await,
        AdmissionCommand::Evaluate {
            point,
            request,
            api,
        } => {
            let client = Client::new(&api);
            let body = read_json(&request)?;
            let verdict: DryRun = client
                .send_as(
                    client
                        .request(Method::POST, &format!("/api/admission/{point}/evaluate"))
                        .json(&body),
                )
                .await?;
            println!("{}", serde_json::to_string_pretty(&verdict)?);
            Ok(match verdict.judgement.decision {
                DecisionKind::Deny => ExitCode::from(1),
                _ => ExitCode::SUCCESS,
            })
        }
    }
}

pub async fn key(command: KeyCommand) -> anyhow::Result<ExitCode> {
    match command {
        KeyCommand::Create {
            name,
            scopes,
            team,
            api,
        } => {
            let client = Client::new(&api);
            let request =
                client
                    .request(Method::POST, "/api/keys")
                    .json(&NewKey { name, scopes, team });
            print(&client.send(request).await?)
        }
        KeyCommand::List { api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, "/api/keys"))
                    .await?,
            )
        }
        KeyCommand::Revoke { id, api } => {
            let client = Client::new(&api);
            let response = client
                .request(Method::DELETE, &format!("/api/keys/{id}"))
                .send()
                .await?;
            if !response.status().is_success() {
                bail!(
                    "{}: {}",
                    response.status(),
                    response.text().await.unwrap_or_default()
                );
            }
            println!("revoked {id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub async fn node(command: NodeCommand) -> anyhow::Result<ExitCode> {
    match command {
        NodeCommand::List { api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, "/api/nodes"))
                    .await?,
            )
        }
        NodeCommand::Approve { id, api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::POST, &format!("/api/nodes/{id}/approve")))
                    .await?,
            )
        }
        NodeCommand::Show { id, api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, &format!("/api/nodes/{id}")))
                    .await?,
            )
        }
        NodeCommand::Drain { id, api } => node_action(&api, &id, "drain").await,
        NodeCommand::Undrain { id, api } => node_action(&api, &id, "undrain").await,
        NodeCommand::Maintenance { id, api } => node_action(&api, &id, "maintenance").await,
        NodeCommand::Token {
            name,
            ttl_seconds,
            max_uses,
            api,
        } => {
            let client = Client::new(&api);
            let request = client
                .request(Method::POST, "/api/nodes/registration-tokens")
                .json(&NewRegistrationToken {
                    name,
                    ttl_seconds,
                    max_uses,
                });
            print(&client.send(request).await?)
        }
        NodeCommand::Tokens { api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, "/api/nodes/registration-tokens"))
                    .await?,
            )
        }
        NodeCommand::RevokeToken { id, api } => {
            let client = Client::new(&api);
            let path = format!("/api/nodes/registration-tokens/{id}");
            print(&client.send(client.request(Method::DELETE, &path)).await?)
        }
        NodeCommand::Release { id, api } => node_action(&api, &id, "release").await,
    }
}

async fn node_action(api: &ApiArgs, id: &str, action: &str) -> anyhow::Result<ExitCode> {
    let client = Client::new(api);
    print(
        &client
            .send(client.request(Method::POST, &format!("/api/nodes/{id}/{action}")))
            .await?,
    )
}

/// A watch's exit code: 0 when ready, 1 when a replica failed.
fn exit(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Ready => ExitCode::SUCCESS,
        Outcome::Failed(..) => ExitCode::from(1),
    }
}

/// Runs a `deployment` command.
pub async fn deployment(command: DeploymentCommand) -> anyhow::Result<ExitCode> {
    match command {
        DeploymentCommand::Create {
            model,
            revision,
            engine,
            served_model_name,
            replicas,
            gpus,
            gpu_memory_mib,
            max_concurrency,
            strategy,
            node_selector,
            wait,
            api,
        } => {
            let client = Client::new(&api);
            let node_selector: std::collections::BTreeMap<String, String> =
                node_selector.into_iter().collect();
            let body = NewDeployment {
                model,
                revision,
                engine,
                served_model_name,
                replicas: Some(replicas),
                gpus_per_replica: Some(gpus),
                gpu_memory_bytes: gpu_memory_mib.map(|m| m << 20),
                max_concurrency: Some(max_concurrency),
                token_delay_ms: None,
                strategy: Some(strategy),
                node_selector: Some(node_selector),
            };
            let created = client
                .send(client.request(Method::POST, "/api/deployments").json(&body))
                .await?;
            print(&created)?;
            if !wait {
                return Ok(ExitCode::SUCCESS);
            }
            let id = created["id"].as_str().unwrap_or_default();
            let (outcome, _) = deployment_watch::watch(&client, id).await?;
            Ok(exit(&outcome))
        }
        DeploymentCommand::List { api } => {
            let client = Client::new(&api);
            print(
                &client
                    .send(client.request(Method::GET, "/api/deployments"))
                    .await?,
            )
        }
        DeploymentCommand::Status { id, watch, api } => {
            let client = Client::new(&api);
            if !watch {
                return print(
                    &client
                        .send(client.request(Method::GET, &format!("/api/deployments/{id}")))
                        .await?,
                );
            }
            let (outcome, last) = deployment_watch::watch(&client, &id).await?;
            print(&last)?;
            Ok(exit(&outcome))
        }
        DeploymentCommand::Scale { id, replicas, api } => {
            let client = Client::new(&api);
            let request = client
                .request(Method::PUT, &format!("/api/deployments/{id}/replicas"))
                .json(&Scale { replicas });
            client.send(request).await?;
            println!("{id}: {replicas} replicas wanted");
            Ok(ExitCode::SUCCESS)
        }
        DeploymentCommand::Delete { id, api } => {
            let client = Client::new(&api);
            client
                .send(client.request(Method::DELETE, &format!("/api/deployments/{id}")))
                .await?;
            println!("deleted {id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
