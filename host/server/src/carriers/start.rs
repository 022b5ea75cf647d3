//! Starting the carrier set the `cluster_carrier` row names, from the
//! components the plugin registry holds.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use switchyard_carrier::direct::{NodeAddress, Resolver};
use switchyard_carrier::set::{self, Frontend, SetEnv, Side, SideKind};
use switchyard_carrier::{FanOut, Holder, SetName, TunnelRegistry, WorkQueue};
use switchyard_runtime::{PluginKind, Runtime, RuntimeConfig};
use switchyard_store::Store;

use super::seed::{self, SeedComponent};
use super::{Carriers, probe, relay};
use crate::config::ServeConfig;

/// How long a replica waits for its carrier to connect at start.
const CONNECT_WAIT: Duration = Duration::from_secs(15);
/// How long one try of a work-queue submit waits for its answer.
const SUBMIT_ANSWER: Duration = Duration::from_secs(5);

/// Seeds the plugin registry with this replica's carrier components, reads
/// (or seeds) the cluster row and starts its carrier set from the registry.
/// `Ok(None)` when the registry holds none of the set's components (the
/// replica then holds no worker sessions: the connect endpoint answers 503).
pub async fn start(
    config: &ServeConfig,
    store: &Store,
    database_url: &str,
    instance_id: &str,
) -> anyhow::Result<Option<Arc<Carriers>>> {
    let mut seeds = config.seed_components.clone();
    if let Some(dir) = &config.carrier_plugins {
        seeds.extend(SeedComponent::from_dir(dir)?);
    }
    seed::seed(store, &seeds).await?;
    let seed_set = if config.nats_url.is_some() {
        SetName::Nats
    } else {
        SetName::Tunnel
    };
    let row = store.ensure_cluster_carrier(seed_set.as_str()).await?;
    let Some(name) = SetName::parse(&row.carrier) else {
        bail!(
            "the cluster's carrier is `{}` (cluster_carrier row), which this build does not run; it runs {}",
            row.carrier,
            SetName::names()
        );
    };
    let entry = name.entry();
    let components = seed::resolve_all(store, entry.components(SideKind::Frontend)).await?;
    if components.is_empty() {
        tracing::warn!(
            carrier = %name,
            "the plugin registry holds no carrier components (give --carrier-plugins): this replica holds no worker sessions"
        );
        return Ok(None);
    }
    // Carriers run beside the policies with limits of their own.
    let runtime = Runtime::new(RuntimeConfig::for_carriers(Some(
        config.data_dir.join("cache"),
    )))?;
    let sessions = Arc::new(TunnelRegistry::default());
    sessions.set_relay(relay::relay(store.clone(), instance_id.to_string()).await?);
    // The replica's sessions run whatever set is active: the tunnel
    // component is resolved for them even when the set does not name it.
    let tunnel = seed::resolve(
        store,
        set::Needed {
            name: "tunnel",
            kind: PluginKind::Tunnel,
        },
    )
    .await?;
    let frontend = Frontend {
        database_url: match entry.messages_on_database {
            true => Some(carrier_database_url(store, database_url).await?),
            false => None,
        },
        sessions: sessions.clone(),
        resolve: resolver(store),
    };
    let env = SetEnv {
        runtime: runtime.clone(),
        components,
        nats_url: config.nats_url.clone(),
    };
    let seams = set::start(name, &env, Side::Frontend(frontend))?;
    let (Some(messages), Some(control), Some(streams)) =
        (seams.messages, seams.control, seams.streams)
    else {
        bail!("the `{name}` set started without a frontend's seams");
    };
    if !messages.wait_ready(CONNECT_WAIT).await {
        bail!(
            "the `{}` carrier did not connect within {}s",
            row.carrier,
            CONNECT_WAIT.as_secs()
        );
    }
    let workers_run: Vec<_> = entry
        .components(SideKind::Worker)
        .into_iter()
        .filter_map(|needed| env.components.iter().find(|c| c.name == needed.name))
        .cloned()
        .collect();
    let cluster = Arc::new(Carriers {
        row,
        runtime,
        fanout: FanOut::new(messages.clone()),
        queue: WorkQueue::new(messages, SUBMIT_ANSWER),
        control: Holder::new(control),
        streams: Holder::new(streams),
        sessions,
        tunnel: seams.tunnel.or(tunnel),
        worker_components: workers_run,
        probe: probe::Probe::default(),
        tasks: std::sync::Mutex::new(Vec::new()),
    });
    probe::listen(cluster.clone()).await?;
    tracing::info!(carrier = %cluster.row.carrier, epoch = cluster.row.epoch, "carrier set started");
    Ok(Some(cluster))
}

/// Where the `nats` set finds a node's address and stream key.
fn resolver(store: &Store) -> Resolver {
    let store = store.clone();
    Arc::new(move |node: String| {
        let store = store.clone();
        Box::pin(async move { node_address(&store, &node).await })
    })
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
