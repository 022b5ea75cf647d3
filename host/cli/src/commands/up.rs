//! `switchyard up`: a whole cluster on this machine. A frontend with the
//! embedded PostgreSQL and the `tunnel` carrier set (`nats` with
//! `--nats-url`) from the components built into the binary (or a
//! `--carrier-plugins` folder), a worker (a child process, which fetches
//! the carrier components from the frontend) with a declared GPU, a demo
//! model imported into the library and
//! deployed on the reference engine, an API key with the `inference` scope,
//! the shipped admission policies bound (`up_policies`); then a working
//! `curl`, the OpenAI client snippet, and one request the chain clamped and
//! one it denied. Ctrl-C stops the
//! worker (its engine with it), the frontend and its PostgreSQL.
//!
//! The admin token and the demo key are kept under the data directory
//! (`up-credentials.json`, mode 0600) so that a second `up` reuses them:
//! this is a local cluster for one person.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_protocol::admin::{NewDeployment, NewKey, NewRegistrationToken};
use switchyard_protocol::engines::EngineKind;
use switchyard_protocol::models::{ModelFile, ModelRevision};
use tokio::process::Command;

use super::up_policies;
use crate::cli::{ApiArgs, UpArgs};
use crate::client::Client;

pub(super) const DEMO_MODEL: &str = "demo-tiny";
const DEMO_REVISION: &str = "r1";
/// The demo model's file: its bytes seed the reference engine.
const DEMO_BYTES: usize = 4 * 1024 * 1024;
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long `up`'s registration token opens a registration: the local
/// worker registers within seconds of its start; a token that outlived it
/// would be one more secret to leak.
const UP_REGISTRATION_TTL_SECONDS: i64 = 300;

pub(super) fn say(message: &str) {
    eprintln!("up: {message}");
}

/// Runs the cluster until Ctrl-C.
pub async fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.data_dir)?;
    let data_dir = std::fs::canonicalize(&args.data_dir)?;
    let mut credentials = Credentials::load(&data_dir)?;
    let frontend = Frontend::start(&args, &data_dir, &credentials.admin).await?;
    let mut worker = start_worker(&args, &frontend, &data_dir).await?;
    let outcome = demo(&args, &frontend, &data_dir, &mut credentials).await;
    if let Err(e) = outcome {
        say(&format!("{e:#}"));
    } else {
        tokio::select! {
            _ = crate::signal::shutdown_signal() => {}
            status = worker.wait() => say(&format!("the worker exited ({status:?})")),
        }
    }
    say("stopping the worker, the frontend and PostgreSQL");
    if let Some(pid) = worker.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(15), worker.wait()).await;
    let _ = frontend.stop.send(());
    frontend.running.await??;
    Ok(ExitCode::SUCCESS)
}

/// The admin token and the demo key, kept in `up-credentials.json` under
/// the data directory.
struct Credentials {
    path: std::path::PathBuf,
    saved: Value,
    admin: String,
}

impl Credentials {
    /// The saved credentials; the admin token is `SWITCHYARD_ADMIN_TOKEN`
    /// when set, else the saved one, else a new one (saved).
    fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join("up-credentials.json");
        let mut saved: Value = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| json!({}));
        let chosen = std::env::var("SWITCHYARD_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        let (admin, changed) = admin_token(chosen.as_deref(), &mut saved)?;
        if changed {
            store_credentials(&path, &saved)?;
        }
        if chosen.is_some() {
            say("using the admin token from SWITCHYARD_ADMIN_TOKEN");
        }
        Ok(Self { path, saved, admin })
    }

    /// The demo key with the `inference` scope: the saved one, else a new
    /// one (saved).
    async fn inference_key(&mut self, api: &Client) -> anyhow::Result<String> {
        if let Some(key) = self.saved["inference_key"].as_str() {
            return Ok(key.to_string());
        }
        let created = api
            .send_json(
                Method::POST,
                "/api/keys",
                &NewKey {
                    name: "up-demo".into(),
                    scopes: vec!["inference".into()],
                    team: None,
                },
            )
            .await?;
        let key = created["token"].as_str().context("a key")?.to_string();
        self.saved["inference_key"] = json!(key);
        store_credentials(&self.path, &self.saved)?;
        Ok(key)
    }
}

/// The frontend, run in this process with its embedded PostgreSQL.
struct Frontend {
    /// Its admin API, as the admin.
    api: Client,
    /// `http://<listen>`.
    base: String,
    /// Stops it.
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Frontend {
    /// Starts it; resolves once it is ready.
    async fn start(args: &UpArgs, data_dir: &Path, admin: &str) -> anyhow::Result<Self> {
        let mut config = switchyard_server::ServeConfig {
            listen: args.listen,
            data_dir: data_dir.to_path_buf(),
            admin_token: Some(admin.to_string()),
            auto_approve: true,
            seed_components: crate::built_in::seeds(args.carrier_plugins.is_some()),
            carrier_plugins: args.carrier_plugins.clone(),
            nats_url: args.nats_url.clone(),
            pages: Some(switchyard_console::router),
            usage_metering: !args.no_usage_metering,
            otlp_endpoint: args.otlp_endpoint.clone(),
            ..Default::default()
        };
        config.runtime.cache_dir = Some(data_dir.join("cache"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        say(&format!(
            "starting the frontend on http://{} (data in {})",
            args.listen,
            data_dir.display()
        ));
        let running = tokio::spawn(switchyard_server::run(config, async {
            let _ = stopped.await;
        }));
        let base = format!("http://{}", args.listen);
        let api = Client::new(&ApiArgs {
            server: base.clone(),
            token: Some(admin.to_string()),
        });
        wait_until("the frontend is ready", || async {
            api.send(api.request(Method::GET, "/readyz")).await.is_ok()
        })
        .await?;
        Ok(Self {
            api,
            base,
            stop,
            running,
        })
    }
}

/// Starts the local worker as a child process. The registration token goes
/// by environment, not on the command line (where `ps` shows it to every
/// user), and opens one registration within minutes: it is spent once the
/// worker holds its credential.
async fn start_worker(
    args: &UpArgs,
    frontend: &Frontend,
    data_dir: &Path,
) -> anyhow::Result<tokio::process::Child> {
    let worker_dir = data_dir.join("worker");
    let mut worker_args = vec![
        "worker".to_string(),
        "--frontend".into(),
        frontend.base.clone(),
        "--data-dir".into(),
        worker_dir.display().to_string(),
        "--name".into(),
        format!("{}-local", switchyard_worker::inventory::hostname()),
        "--heartbeat-ms".into(),
        "1000".into(),
    ];
    for gpu in &args.gpus {
        worker_args.push("--gpu".into());
        worker_args.push(format!(
            "name={},memory={}B,count={}",
            gpu.name, gpu.memory_bytes, gpu.count
        ));
    }
    if args.nats_url.is_some() {
        // The nats set dials the worker's streams; the URL itself goes by
        // environment (it may hold credentials; arguments are public).
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        worker_args.extend(["--address".into(), format!("127.0.0.1:{port}")]);
    }
    let mut registration_token = None;
    if !worker_dir.join("node.json").exists() {
        let token = frontend
            .api
            .send_json(
                Method::POST,
                "/api/nodes/registration-tokens",
                &NewRegistrationToken {
                    name: "up".into(),
                    ttl_seconds: Some(UP_REGISTRATION_TTL_SECONDS),
                    max_uses: Some(1),
                },
            )
            .await?;
        registration_token = Some(
            token["value"]
                .as_str()
                .context("a registration token")?
                .to_string(),
        );
    }
    say("starting a local worker");
    let mut worker = Command::new(std::env::current_exe()?);
    if let Some(url) = &args.nats_url {
        worker.env("SWITCHYARD_NATS_URL", url);
    }
    if let Some(endpoint) = &args.otlp_endpoint {
        worker.env("SWITCHYARD_OTLP_ENDPOINT", endpoint);
    }
    if let Some(token) = &registration_token {
        worker.env("SWITCHYARD_REGISTRATION_TOKEN", token);
    }
    worker
        .args(&worker_args)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the worker")
}

/// Binds the shipped policies, deploys the demo model and prints how to
/// call it, with one request the chain clamped and one it denied.
async fn demo(
    args: &UpArgs,
    frontend: &Frontend,
    data_dir: &Path,
    credentials: &mut Credentials,
) -> anyhow::Result<()> {
    let api = &frontend.api;
    // Bound first, so that the guard on `deploy` judges the demo deployment.
    let chains = up_policies::bind_shipped(api, data_dir).await?;
    import_demo_model(api, data_dir).await?;
    deploy_demo(api, args.token_delay_ms).await?;
    let key = credentials.inference_key(api).await?;
    let at_work = up_policies::show_at_work(&frontend.base, &key).await?;
    print_examples(&frontend.base, &credentials.admin, &key);
    print_policies(&frontend.base, data_dir, &chains, &at_work);
    println!("Ctrl-C stops the worker, the frontend and its PostgreSQL.");
    Ok(())
}

async fn wait_until<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        if started.elapsed() > READY_WITHIN {
            bail!("gave up waiting: {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// 32 bytes from the kernel's generator.
/// The admin token `up` starts the frontend with, and whether `credentials`
/// changed: `SWITCHYARD_ADMIN_TOKEN` when set (as `serve` takes it; it must
/// be long enough), else the one a previous `up` kept, else a minted one.
/// The token used is kept, so that the next `up` (whose database knows it)
/// reuses it.
fn admin_token(chosen: Option<&str>, credentials: &mut Value) -> anyhow::Result<(String, bool)> {
    let token = match (chosen, credentials["admin_token"].as_str()) {
        (Some(chosen), _) => {
            switchyard_server::config::check_admin_token(chosen)?;
            chosen.to_string()
        }
        (None, Some(kept)) => return Ok((kept.to_string(), false)),
        (None, None) => format!("sy_{}", hex::encode(rand_bytes()?)),
    };
    let changed = credentials["admin_token"].as_str() != Some(token.as_str());
    credentials["admin_token"] = json!(token);
    Ok((token, changed))
}

fn rand_bytes() -> anyhow::Result<[u8; 32]> {
    use std::io::Read;
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    Ok(seed)
}

fn store_credentials(path: &Path, credentials: &Value) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(credentials)?)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// The demo model: 4 MiB of deterministic bytes, imported once.
async fn import_demo_model(api: &Client, data_dir: &Path) -> anyhow::Result<()> {
    let path = format!("/api/models/{DEMO_MODEL}/{DEMO_REVISION}");
    if api.send(api.request(Method::GET, &path)).await.is_ok() {
        return Ok(());
    }
    say("importing the demo model into the library");
    let mut state: u64 = 0x5157_4954_4348_5944;
    let bytes: Vec<u8> = (0..DEMO_BYTES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::create_dir_all(data_dir.join("demo-model"))?;
    std::fs::write(data_dir.join("demo-model/demo-tiny.gguf"), &bytes)?;
    let digest = hex::encode(Sha256::digest(&bytes));
    api.send(
        api.request(Method::PUT, &format!("/api/library/blobs/{digest}"))
            .body(bytes.clone()),
    )
    .await
    .context("uploading the demo model")?;
    api.send_json(
        Method::POST,
        "/api/models",
        &ModelRevision {
            id: DEMO_MODEL.into(),
            revision: DEMO_REVISION.into(),
            licence: Some("demo".into()),
            files: vec![ModelFile {
                path: "demo-tiny.gguf".into(),
                size: bytes.len() as i64,
                sha256: digest,
            }],
            imported_by: String::new(),
            imported_at: String::new(),
        },
    )
    .await?;
    Ok(())
}

/// The demo deployment (one replica on one GPU), then waits until it serves.
async fn deploy_demo(api: &Client, token_delay_ms: i32) -> anyhow::Result<()> {
    let listed = api
        .send(api.request(Method::GET, "/api/deployments"))
        .await?;
    let existing = listed["deployments"].as_array().and_then(|all| {
        all.iter()
            .find(|d| d["deployment"]["served_model_name"] == DEMO_MODEL)
            .and_then(|d| d["deployment"]["id"].as_str().map(str::to_string))
    });
    let id = match existing {
        Some(id) => id,
        None => {
            say("deploying the demo model on the reference engine");
            let created = api
                .send_json(
                    Method::POST,
                    "/api/deployments",
                    &NewDeployment {
                        model: DEMO_MODEL.into(),
                        revision: DEMO_REVISION.into(),
                        engine: EngineKind::Reference.as_str().into(),
                        gpus_per_replica: Some(1),
                        gpu_memory_bytes: Some(1 << 30),
                        token_delay_ms: Some(token_delay_ms),
                        ..NewDeployment::default()
                    },
                )
                .await?;
            created["id"]
                .as_str()
                .context("a deployment id")?
                .to_string()
        }
    };
    let mut shown = String::new();
    let started = Instant::now();
    loop {
        let status = api
            .send(api.request(Method::GET, &format!("/api/deployments/{id}")))
            .await?;
        let replica = &status["replicas_status"][0];
        let now = format!(
            "{} {}",
            replica["state"].as_str().unwrap_or("waiting for a node"),
            replica["detail"].as_str().unwrap_or("")
        );
        if now != shown {
            say(&format!("replica: {}", now.trim()));
            shown = now;
        }
        if replica["state"] == "ready" {
            return Ok(());
        }
        if started.elapsed() > READY_WITHIN {
            bail!("the demo deployment did not become ready: {status}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn print_examples(base: &str, admin: &str, key: &str) {
    println!(
        r#"
Switchyard is up at {base}: a frontend, a worker with a declared GPU and
the reference engine serving `{DEMO_MODEL}`.

Admin token: {admin}
Inference key: {key}
(both kept in the data directory's up-credentials.json)

The web console: {base}/console/ (sign in with the admin token)

Try a chat completion:
    curl -s {base}/v1/chat/completions -H "Authorization: Bearer {key}" \
      -H 'content-type: application/json' \
      -d '{{"model": "{DEMO_MODEL}", "messages": [{{"role": "user", "content": "Hello!"}}], "max_tokens": 16}}'

Or with the OpenAI Python client:
    from openai import OpenAI
    client = OpenAI(base_url="{base}/v1", api_key="{key}")
    for chunk in client.chat.completions.create(model="{DEMO_MODEL}", stream=True,
            messages=[{{"role": "user", "content": "Hello!"}}]):
        print(chunk.choices[0].delta.content or "", end="", flush=True)
"#
    );
}

/// The chains in force, what they did to the two example requests, and the
/// commands that change them.
fn print_policies(base: &str, data_dir: &Path, chains: &[String], at_work: &[String]) {
    println!("Admission policies judge every request and deployment:");
    for chain in chains {
        println!("    {chain}");
    }
    println!("\nJust now, with the inference key:");
    for line in at_work {
        println!("    {line}");
    }
    println!(
        "\nChange them (admin commands read SWITCHYARD_SERVER={base} and SWITCHYARD_TOKEN=<the admin token>):\n{}\n",
        up_policies::commands(data_dir)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_token_from_the_environment_is_the_one_used_and_kept() {
        let chosen = "sy_chosen_0123456789abcdef0123456789";
        let mut credentials = json!({"admin_token": "sy_kept_by_a_previous_up"});
        let (token, changed) = admin_token(Some(chosen), &mut credentials).unwrap();
        assert_eq!((token.as_str(), changed), (chosen, true));
        assert_eq!(credentials["admin_token"], chosen);

        let (token, changed) = admin_token(None, &mut credentials).unwrap();
        assert_eq!((token.as_str(), changed), (chosen, false));

        let mut fresh = json!({});
        let (minted, changed) = admin_token(None, &mut fresh).unwrap();
        assert!(changed && minted.starts_with("sy_") && minted.len() == 67);

        let error = admin_token(Some("sy_short"), &mut fresh).unwrap_err();
        assert!(error.to_string().contains("at least 32"), "{error}");
        assert_eq!(
            fresh["admin_token"],
            minted.as_str(),
            "a refused token is not kept"
        );
    }
}
