//! Registration and the heartbeat loop.

use std::future::Future;

use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::carrier::CarrierLink;
use crate::client::{Beat, FrontendClient, HeartbeatAnswer};
use crate::config::WorkerConfig;
use crate::engines::EngineBinaries;
use crate::identity::{self, Identity};
use crate::node::Node;
use crate::placement::Placement;
use crate::{WorkerError, inventory};

/// Most cached files a heartbeat reports; the frontend refuses more
/// (`MAX_FILES_HELD` in the server's node routes). Past it a node only loses
/// the scheduler's bonus for the files left out.
const MAX_FILES_REPORTED: usize = 4096;

/// Registers if this machine has no identity yet (or its credential was
/// refused), then heartbeats until `shutdown` resolves.
pub async fn run(
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let client = FrontendClient::new(&config.frontend);
    let declared = config.gpus.clone();
    // NVML and nvidia-smi block: off the async workers.
    let gpus = tokio::task::spawn_blocking(move || switchyard_gpu::detect(&declared))
        .await
        .unwrap_or_else(|_| switchyard_gpu::Inventory::none());
    tracing::info!(source = %gpus.source, count = gpus.gpus.len(), "GPU inventory");
    let mut identity = match identity::load(&config.data_dir)? {
        Some(identity) if identity.frontend == config.frontend.trim_end_matches('/') => identity,
        held => register(&client, &config, &gpus, held.as_ref()).await?,
    };
    tokio::pin!(shutdown);
    let mut state = String::new();
    let runtime = Runtime::new(RuntimeConfig::for_carriers(Some(
        config.data_dir.join("cache"),
    )))
    .map_err(|e| WorkerError::Frontend(format!("the plugin runtime did not start: {e}")))?;
    let placement = Placement::open(&config.data_dir.join("models"), config.disk_reserve_bytes)
        .map_err(|e| WorkerError::Identity {
            path: config.data_dir.join("models").display().to_string(),
            message: e.to_string(),
        })?;
    let node = Node::new(
        placement,
        EngineBinaries::default(),
        config.engine_start.clone(),
    );
    let mut link = CarrierLink::new(
        runtime,
        config.carrier_plugins.clone(),
        config.address.clone(),
        config.nats_url.clone(),
        node.clone(),
    );
    // The files the frontend last took; a heartbeat carries them only when they change.
    let mut reported: Option<Vec<String>> = None;
    loop {
        let held = node.placement().held(MAX_FILES_REPORTED);
        let beat = Beat {
            inventory: report(&gpus, &config, &node),
            labels: &config.labels,
            files_held: (reported.as_ref() != Some(&held)).then_some(held.as_slice()),
        };
        let answer = client.heartbeat(&identity, &beat).await;
        match answer {
            Ok(HeartbeatAnswer::Ok {
                state: now,
                carrier,
                engines,
            }) => {
                reported = Some(held);
                if let Some(known) = engines {
                    node.stop_unknown(&known);
                }
                // A pending node is refused at connect; wait for approval.
                if now != "pending"
                    && let Some(name) = carrier["carrier"].as_str()
                {
                    link.follow(name, &identity);
                }
                if now != state {
                    tracing::info!(node = %identity.node_id, state = %now, "node state");
                    if now == "pending" {
                        println!(
                            "node {} is pending: approve it with `switchyard node approve {}`",
                            identity.node_id, identity.node_id
                        );
                    }
                    state = now;
                }
            }
            Ok(HeartbeatAnswer::CredentialRefused) => {
                tracing::warn!(node = %identity.node_id, "the frontend refused this node's credential; registering again");
                link.stop();
                identity = register(&client, &config, &gpus, Some(&identity)).await?;
                // A registration starts the node's row afresh.
                reported = None;
                continue;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying"),
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(config.heartbeat_interval) => {}
        }
    }
}

async fn register(
    client: &FrontendClient,
    config: &WorkerConfig,
    gpus: &switchyard_gpu::Inventory,
    held: Option<&Identity>,
) -> Result<Identity, WorkerError> {
    let token = config
        .registration_token
        .as_deref()
        .ok_or(WorkerError::RegistrationRefused)?;
    let (identity, state) = client
        .register(
            token,
            &config.name,
            config.address.as_deref(),
            &inventory::collect(gpus, &config.data_dir),
            &config.labels,
            held.map(|identity| identity.credential.as_str()),
        )
        .await?;
    identity::store(&config.data_dir, &identity)?;
    println!("registered as {} ({state})", identity.node_id);
    Ok(identity)
}

/// A heartbeat's report: the machine and the engines.
fn report(
    gpus: &switchyard_gpu::Inventory,
    config: &WorkerConfig,
    node: &Node,
) -> serde_json::Value {
    let mut report = inventory::collect(gpus, &config.data_dir);
    report["engines"] = serde_json::json!(node.engines());
    report
}
