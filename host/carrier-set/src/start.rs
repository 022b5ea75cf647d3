//! Starting the carrier set the `cluster_carrier` row names, from the
//! components the plugin registry holds.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use arc_swap::{ArcSwap, ArcSwapOption};
use switchyard_carrier::set::{self, SideKind};
use switchyard_carrier::{FanOut, Holder, SetName, TunnelRegistry, WorkQueue};
use switchyard_protocol::carrier::{ClusterSettings, Pin, Pins};
use switchyard_runtime::{PluginKind, Runtime, RuntimeConfig};
use switchyard_store::cluster::ClusterCarrier;
use switchyard_store::{PoolTimeouts, Store};

use super::build::Builder;
use super::seed::{self, SeedComponent};
use super::{Built, Carriers, View, probe, relay};

/// How long one try of a work-queue submit waits for its answer.
const SUBMIT_ANSWER: Duration = Duration::from_secs(5);

/// What a replica's carriers start from (the `serve` flags that concern them).
#[derive(Debug, Clone, Default)]
pub struct CarrierConfig {
    /// The compile cache of the carrier components.
    pub cache_dir: std::path::PathBuf,
    /// The NATS server the flag names (`--nats-url`); a stored one wins.
    pub nats_url: Option<String>,
    /// A directory of carrier components to seed the registry with.
    pub carrier_plugins: Option<std::path::PathBuf>,
    /// Carrier components to seed the registry with.
    pub seed_components: Vec<SeedComponent>,
}

/// Seeds the plugin registry with this replica's carrier components, reads
/// (or seeds) the cluster row and starts its active set from the registry.
/// `Ok(None)` when the registry holds none of the set's components (the
/// replica then holds no worker sessions: the connect endpoint answers 503).
/// A change under way is picked up by the follower ([`super::follow`]).
pub async fn start(
    config: &CarrierConfig,
    store: &Store,
    database_url: &str,
    instance_id: &str,
) -> anyhow::Result<Option<Arc<Carriers>>> {
    let Some((row, settings)) = active_row(config, store).await? else {
        return Ok(None);
    };
    // Carriers run beside the policies with limits of their own.
    let runtime = Runtime::new(RuntimeConfig::for_carriers(Some(config.cache_dir.clone())))?;
    let sessions = Arc::new(TunnelRegistry::default());
    sessions.set_relay(relay::relay(store.clone(), instance_id.to_string()).await?);
    let carrier_database_url = carrier_database_url(store, database_url).await?;
    let builder = Builder {
        store: store.clone(),
        runtime: runtime.clone(),
        sessions: sessions.clone(),
        bus: Store::connect_lazily(&carrier_database_url, PoolTimeouts::default())?,
        carrier_database_url,
        flag_nats_url: config.nats_url.clone(),
    };
    let active = builder.build(&row.active, &settings).await?;
    // The replica's sessions run whatever set is active: the tunnel
    // component is resolved for them even when the set does not name it.
    let tunnel = match &active.tunnel {
        Some(tunnel) => Some(tunnel.clone()),
        None => {
            seed::resolve(
                store,
                set::Needed {
                    name: "tunnel",
                    kind: PluginKind::Tunnel,
                },
            )
            .await?
        }
    };
    let cluster = Arc::new(Carriers {
        runtime,
        fanout: FanOut::new(active.messages.clone()),
        queue: WorkQueue::new(active.messages.clone(), SUBMIT_ANSWER),
        control: Holder::new(active.control.clone()),
        streams: Holder::new(active.streams.clone()),
        sessions,
        tunnel: ArcSwapOption::from_pointee(tunnel),
        probe: probe::Probe::default(),
        instance_id: instance_id.to_string(),
        builder,
        view: ArcSwap::from_pointee(View {
            row: row.clone(),
            settings,
            workers: 0,
        }),
        built: tokio::sync::Mutex::new(Built {
            active,
            target: None,
            draining: None,
            epoch: row.epoch,
            failed: None,
        }),
        attachments: Default::default(),
        tasks: std::sync::Mutex::new(Vec::new()),
    });
    probe::listen(cluster.clone()).await?;
    tracing::info!(carrier = %row.active.carrier, epoch = row.epoch, "carrier set started");
    Ok(Some(cluster))
}

/// Seeds the registry, then reads (or seeds) the cluster row with its
/// pins and the cluster settings. `None` when the registry holds none of
/// the set's components.
async fn active_row(
    config: &CarrierConfig,
    store: &Store,
) -> anyhow::Result<Option<(ClusterCarrier, ClusterSettings)>> {
    let mut seeds = config.seed_components.clone();
    if let Some(dir) = &config.carrier_plugins {
        seeds.extend(SeedComponent::from_dir(dir)?);
    }
    seed::seed(store, &seeds).await?;
    let mut settings = store.cluster_settings().await?;
    // The flag names the cluster's NATS server when none is stored; a
    // stored one wins, so that every replica dials the same server.
    if settings.nats_url.is_none()
        && let Some(url) = &config.nats_url
    {
        settings.nats_url = Some(url.clone());
        store.put_cluster_settings(&settings).await?;
    }
    let seed_set = match config.nats_url {
        Some(_) => SetName::Nats,
        None => SetName::Tunnel,
    };
    let row = store
        .ensure_cluster_carrier(seed_set.as_str(), &newest_pins(store, seed_set).await?)
        .await?;
    let Some(name) = SetName::parse(&row.active.carrier) else {
        bail!(
            "the cluster's carrier is `{}` (cluster_carrier row), which this build does not run; it runs {}",
            row.active.carrier,
            SetName::names()
        );
    };
    // A row from before pins (or seeded while the registry was empty)
    // pins the newest components now.
    let row = match row.active.pins.is_empty() {
        true => {
            let pins = newest_pins(store, name).await?;
            if pins.is_empty() {
                tracing::warn!(
                    carrier = %name,
                    "the plugin registry holds no carrier components (give --carrier-plugins): this replica holds no worker sessions"
                );
                return Ok(None);
            }
            store.pin_cluster_plugins(&pins).await?
        }
        false => row,
    };
    let row = pin_missing(store, name, row).await?;
    Ok(Some((row, settings)))
}

/// A row pinned before its set ran one of its components now (the `nats`
/// set before its streams rode `tunnel` sessions) pins the newest version
/// of those it lacks; its other pins stay.
async fn pin_missing(
    store: &Store,
    set: SetName,
    row: ClusterCarrier,
) -> anyhow::Result<ClusterCarrier> {
    let lacks = set
        .entry()
        .components(SideKind::Frontend)
        .iter()
        .any(|needed| !row.active.pins.contains_key(needed.name));
    if !lacks {
        return Ok(row);
    }
    let mut missing = newest_pins(store, set).await?;
    missing.retain(|name, _| !row.active.pins.contains_key(name));
    if missing.is_empty() {
        // The registry holds none: building the set says which.
        return Ok(row);
    }
    tracing::info!(carrier = %set, components = ?missing.keys().collect::<Vec<_>>(), "pinning the components the cluster's set now runs");
    Ok(store
        .pin_missing_cluster_plugins(set.as_str(), &missing)
        .await?)
}

/// The newest registered version of each component a frontend runs for `set`.
pub async fn newest_pins(store: &Store, set: SetName) -> anyhow::Result<Pins> {
    let components = seed::resolve_all(store, set.entry().components(SideKind::Frontend)).await?;
    Ok(components
        .into_iter()
        .map(|c| {
            (
                c.name.clone(),
                Pin {
                    version: c.version.clone(),
                    sha256: c.sha256.clone(),
                },
            )
        })
        .collect())
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
