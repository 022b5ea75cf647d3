//! Starting the carrier set the `cluster_carrier` row names.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sha2::Digest;
use switchyard_carrier::control::{CarrierControl, StreamControl};
use switchyard_carrier::direct::{DirectStreams, NodeAddress, Resolver};
use switchyard_carrier::{
    Carrier, CarrierSpec, Endpoint, FanOut, Holder, StreamsSeam, TunnelRegistry, TunnelSpec,
    WorkQueue,
};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_store::Store;

use super::{CARRIER_SETS, Cluster, probe, relay};
use crate::config::ServeConfig;

/// How long a replica waits for its carrier to connect at start.
const CONNECT_WAIT: Duration = Duration::from_secs(15);
/// How long one try of a work-queue submit waits for its answer.
const SUBMIT_ANSWER: Duration = Duration::from_secs(5);
/// The subject roots the carriers carry.
const ROOTS: [&str; 4] = ["jobs", "cache", "node", "work"];

/// Reads (or seeds) the cluster row and starts its carrier set. `Ok(None)`
/// when this replica has no carrier components (it then holds no worker
/// sessions: the connect endpoint answers 503).
pub async fn start(
    config: &ServeConfig,
    store: &Store,
    database_url: &str,
    instance_id: &str,
) -> anyhow::Result<Option<Arc<Cluster>>> {
    let seed = if config.nats_url.is_some() {
        "nats"
    } else {
        "tunnel"
    };
    let row = store.ensure_cluster_carrier(seed).await?;
    if !CARRIER_SETS.contains(&row.carrier.as_str()) {
        bail!(
            "the cluster's carrier is `{}` (cluster_carrier row), which this build does not run; it runs {}",
            row.carrier,
            CARRIER_SETS.join(" and ")
        );
    }
    // Carriers run beside the policies with limits of their own.
    let carrier_runtime = Runtime::new(RuntimeConfig::for_carriers(Some(
        config.data_dir.join("cache"),
    )))?;
    let runtime = &carrier_runtime;
    let Some(dir) = &config.carrier_plugins else {
        tracing::warn!(
            "no carrier components (--carrier-plugins): this replica holds no worker sessions"
        );
        return Ok(None);
    };
    let (fanout_carrier, control, streams, tunnel) = match row.carrier.as_str() {
        "nats" => {
            let url = config.nats_url.as_deref().with_context(
                || "the cluster's carrier is `nats`: give this replica the NATS URL (--nats-url)",
            )?;
            // The operator's --nats-url is the only place the plugin may dial.
            let allowed = vec![Endpoint::Tcp(url.to_string())];
            let nats = carrier(dir, "nats", json_config_nats(url), None, allowed, runtime)?;
            let resolve: Resolver = {
                let store = store.clone();
                Arc::new(move |node: String| {
                    let store = store.clone();
                    Box::pin(async move { node_address(&store, &node).await })
                })
            };
            let streams: Arc<dyn StreamsSeam> = Arc::new(DirectStreams::new(resolve));
            let control = Arc::new(CarrierControl::new(nats.clone()));
            (nats, control as Arc<_>, streams, None)
        }
        _ => {
            let pgbus = carrier(
                dir,
                "pgbus",
                serde_json::json!({"roots": ["jobs", "cache", "node"], "queue_roots": ["work"]})
                    .to_string(),
                Some(carrier_database_url(store, database_url).await?),
                // The host's database, dialled by the host: no TCP endpoint at all.
                vec![Endpoint::Database],
                runtime,
            )?;
            let registry = Arc::new(TunnelRegistry::default());
            registry.set_relay(relay::relay(store.clone(), instance_id.to_string()).await?);
            let streams: Arc<dyn StreamsSeam> = registry.clone();
            let control = Arc::new(StreamControl::new(streams.clone()));
            let tunnel_spec = spec(dir, "tunnel")?;
            (
                pgbus,
                control as Arc<_>,
                streams,
                Some((registry, tunnel_spec)),
            )
        }
    };
    if !fanout_carrier.wait_ready(CONNECT_WAIT).await {
        bail!(
            "the `{}` carrier did not connect within {}s",
            row.carrier,
            CONNECT_WAIT.as_secs()
        );
    }
    let cluster = Arc::new(Cluster {
        row,
        runtime: carrier_runtime.clone(),
        fanout: FanOut::new(fanout_carrier.clone()),
        queue: WorkQueue::new(fanout_carrier, SUBMIT_ANSWER),
        control: Holder::new(control),
        streams: Holder::new(streams),
        tunnel,
        probe: probe::Probe::default(),
        tasks: std::sync::Mutex::new(Vec::new()),
    });
    probe::listen(cluster.clone()).await?;
    tracing::info!(carrier = %cluster.row.carrier, epoch = cluster.row.epoch, "carrier set started");
    Ok(Some(cluster))
}

/// The database login pgbus uses: a role limited to its own schema, or,
/// where the server's role may not create roles, the server's own login.
async fn carrier_database_url(store: &Store, database_url: &str) -> anyhow::Result<String> {
    match store.ensure_carrier_login().await? {
        Some(login) => Ok(login.url(database_url)),
        None => {
            tracing::warn!(
                "the database role cannot create roles (CREATEROLE): the pgbus carrier uses \
                 the server's own login, which can read every platform table; grant CREATEROLE \
                 to give carriers a login limited to their own schema"
            );
            Ok(database_url.to_string())
        }
    }
}

fn json_config_nats(url: &str) -> String {
    serde_json::json!({"servers": [url], "roots": ROOTS}).to_string()
}

/// A carrier component from the plugins folder, started.
fn carrier(
    dir: &Path,
    name: &str,
    config: String,
    database_url: Option<String>,
    allowed_endpoints: Vec<Endpoint>,
    runtime: &Arc<Runtime>,
) -> anyhow::Result<Arc<Carrier>> {
    let TunnelSpec {
        name,
        version,
        bytes,
        sha256,
    } = spec(dir, name)?;
    Carrier::start(
        CarrierSpec {
            name,
            version,
            bytes,
            sha256,
            config,
            database_url,
            allowed_endpoints,
        },
        runtime.clone(),
    )
    .map_err(|e| anyhow::anyhow!("the carrier did not start: {e}"))
}

/// Reads `<dir>/<name>.wasm` and pins its digest.
fn spec(dir: &Path, name: &str) -> anyhow::Result<TunnelSpec> {
    let path = dir.join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path)
        .with_context(|| format!("reading the {name} carrier component {}", path.display()))?;
    Ok(TunnelSpec {
        name: name.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        bytes: bytes.into(),
    })
}

/// Where the `nats` set dials a node's streams.
async fn node_address(store: &Store, node: &str) -> Result<NodeAddress, String> {
    let lookup = async {
        let found = store.node(node).await.map_err(|e| e.to_string())?;
        let credential = store
            .node_credential(node)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((found, credential))
    };
    match lookup.await? {
        (Some(found), Some(credential)) => match found.address {
            Some(address) => Ok(NodeAddress {
                address,
                key: switchyard_carrier::direct::stream_key(&credential.credential_sha256),
            }),
            None => Err(format!("node {node} has no routable address")),
        },
        _ => Err(format!("no node {node}")),
    }
}
