//! Registration and the heartbeat loop.

use std::future::Future;
use std::sync::Arc;

use switchyard_protocol::carrier::CarrierNews;
use switchyard_protocol::limits::MAX_FILES_REPORTED;
use switchyard_protocol::node::{Heartbeat, HeartbeatAnswer, Inventory, RegisterNode};
use switchyard_protocol::state::NodeState;
use switchyard_runtime::{Runtime, RuntimeConfig};
use tokio::sync::watch;

use crate::carrier::CarrierLink;
use crate::client::{Beaten, FrontendClient};
use crate::components::ComponentCache;
use crate::config::WorkerConfig;
use crate::engines::EngineBinaries;
use crate::identity::{self, Identity};
use crate::node::Node;
use crate::placement::Placement;
use crate::{WorkerError, inventory};

/// The engines' node (its placement cache under the data folder) and the
/// carrier link that serves it.
fn open_node(config: &WorkerConfig) -> Result<(Arc<Node>, CarrierLink), WorkerError> {
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
    if let Some(endpoint) = &config.otlp_endpoint {
        let (tracer, export) =
            switchyard_telemetry::Tracer::start(switchyard_telemetry::TracerConfig {
                endpoint: endpoint.clone(),
                service: "switchyard-worker".into(),
            });
        tokio::spawn(export);
        node.trace_to(tracer);
    }
    let link = CarrierLink::new(
        runtime,
        ComponentCache::new(&config.data_dir),
        config.carrier_plugins.clone(),
        config.address.clone(),
        config.nats_url.clone(),
        node.clone(),
    );
    Ok((node, link))
}

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
    let mut state: Option<NodeState> = None;
    let (node, link) = open_node(&config)?;
    let (wanted, wanted_rx) = watch::channel(None);
    let carriers = link.status();
    let link_task = tokio::spawn(follow_news(link, wanted_rx));
    // The files the frontend last took; a heartbeat carries them only when they change.
    let mut reported: Option<Vec<String>> = None;
    loop {
        let held = node.placement().held(MAX_FILES_REPORTED);
        let beat = Heartbeat {
            inventory: report(&gpus, &config, &node),
            labels: Some(config.labels.clone()),
            files_held: (reported.as_ref() != Some(&held)).then(|| held.clone()),
            // Every heartbeat: the frontend's preflight and routing read it.
            carriers: Some(carriers.attachment()),
        };
        let answer = client.heartbeat(&identity, &beat).await;
        match answer {
            Ok(Beaten::Answered(answer)) => {
                let HeartbeatAnswer {
                    state: now,
                    carrier,
                    engines,
                } = *answer;
                reported = Some(held);
                if let Some(known) = engines {
                    node.stop_unknown(&known);
                }
                // A pending node is refused at connect; wait for approval.
                if now != NodeState::Pending
                    && let Some(news) = carrier
                {
                    // Sent at every heartbeat: a set whose components could
                    // not be fetched is tried again.
                    wanted.send_replace(Some((news, identity.clone())));
                }
                if state != Some(now) {
                    tracing::info!(node = %identity.node_id, state = %now, "node state");
                    if now == NodeState::Pending {
                        println!(
                            "node {} is pending: approve it with `switchyard node approve {}`",
                            identity.node_id, identity.node_id
                        );
                    }
                    state = Some(now);
                }
            }
            Ok(Beaten::CredentialRefused) => {
                tracing::warn!(node = %identity.node_id, "the frontend refused this node's credential; registering again");
                wanted.send_replace(None);
                identity = register(&client, &config, &gpus, Some(&identity)).await?;
                // A registration starts the node's row afresh.
                reported = None;
                continue;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying"),
        }
        tokio::select! {
            _ = &mut shutdown => {
                link_task.abort();
                return Ok(());
            }
            _ = tokio::time::sleep(config.heartbeat_interval) => {}
        }
    }
}

/// Runs what the heartbeats ask for (`None`: nothing). Attaching to a set
/// (a fetch, a compile, a connect) runs here, never in the heartbeat loop:
/// a node whose heartbeats waited for it would look silent, then
/// unhealthy, to the frontends. Besides each news, it wakes when the link
/// asks (a target's jitter, a backoff, a set that drains).
async fn follow_news(
    mut link: CarrierLink,
    mut wanted: watch::Receiver<Option<(CarrierNews, Identity)>>,
) {
    loop {
        let now = wanted.borrow_and_update().clone();
        let wake = match now {
            Some((news, identity)) => link.follow(&news, &identity).await,
            None => {
                link.stop();
                None
            }
        };
        let later = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = wanted.changed() => if changed.is_err() { return },
            () = later => {}
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
    let registration = RegisterNode {
        name: config.name.clone(),
        address: config.address.clone(),
        inventory: inventory::collect(gpus, &config.data_dir),
        labels: config.labels.clone(),
        credential: held.map(|identity| identity.credential.clone()),
    };
    let (identity, state) = client.register(token, &registration).await?;
    identity::store(&config.data_dir, &identity)?;
    println!("registered as {} ({state})", identity.node_id);
    Ok(identity)
}

/// A heartbeat's report: the machine and the engines.
fn report(gpus: &switchyard_gpu::Inventory, config: &WorkerConfig, node: &Node) -> Inventory {
    Inventory {
        engines: Some(node.engines()),
        ..inventory::collect(gpus, &config.data_dir)
    }
}
