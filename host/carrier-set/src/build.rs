//! Building a carrier set on this replica from the components the cluster
//! row pins, and telling whether a set could be built here.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use switchyard_carrier::direct::{NodeAddress, Resolver};
use switchyard_carrier::set::{self, Frontend, SetEnv, Side, SideKind};
use switchyard_carrier::{
    Carrier, ComponentSpec, ControlSeam, SetName, StreamsSeam, TunnelRegistry,
};
use switchyard_protocol::carrier::{CanBuild, ClusterSettings, SetKey};
use switchyard_runtime::Runtime;
use switchyard_store::Store;

use super::nats_url::NatsTarget;
use super::seed;

/// How long a set's messages carrier gets to connect.
pub const CONNECT_WAIT: Duration = Duration::from_secs(15);

/// A set running on this replica.
pub struct BuiltSet {
    /// What it is.
    pub key: SetKey,
    /// The carrier fan-out and the work queue ride.
    pub messages: Arc<Carrier>,
    /// Control calls through this set.
    pub control: Arc<dyn ControlSeam>,
    /// Streams through this set.
    pub streams: Arc<dyn StreamsSeam>,
    /// The tunnel component, where the set's streams ride sessions.
    pub tunnel: Option<ComponentSpec>,
}

impl std::fmt::Debug for BuiltSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltSet")
            .field("key", &self.key.label())
            .finish_non_exhaustive()
    }
}

/// What building a set needs of this replica.
#[derive(Clone)]
pub struct Builder {
    /// The registry the components come from.
    pub store: Store,
    /// The runtime carriers run on.
    pub runtime: Arc<Runtime>,
    /// The replica's worker sessions.
    pub sessions: Arc<TunnelRegistry>,
    /// The database login carriers on PostgreSQL use (may hold a password).
    pub carrier_database_url: String,
    /// A pool on that login (connected on first use): pgbus's queue table
    /// lives in its schema.
    pub bus: Store,
    /// `--nats-url`, used where the cluster's settings name none.
    pub flag_nats_url: Option<String>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").finish_non_exhaustive()
    }
}

impl Builder {
    /// The NATS server this replica dials: the cluster's setting, else its flag.
    pub fn nats_url(&self, settings: &ClusterSettings) -> Option<String> {
        settings
            .nats_url
            .clone()
            .or_else(|| self.flag_nats_url.clone())
    }

    /// Builds `key` from the registry and waits for its carrier to connect.
    pub async fn build(
        &self,
        key: &SetKey,
        settings: &ClusterSettings,
    ) -> anyhow::Result<BuiltSet> {
        let set = SetName::parse(&key.carrier)
            .with_context(|| format!("`{}` is not a carrier set this build runs", key.carrier))?;
        let entry = set.entry();
        let mut components = Vec::new();
        for needed in entry.components(SideKind::Frontend) {
            let pin = key.pins.get(needed.name).with_context(|| {
                format!("the `{set}` set's row pins no `{}` component", needed.name)
            })?;
            let component = seed::resolve_pinned(&self.store, needed.name, pin)
                .await?
                .with_context(|| {
                    format!(
                        "the plugin registry no longer holds {}@{}",
                        needed.name, pin.version
                    )
                })?;
            components.push(component);
        }
        let env = SetEnv {
            runtime: self.runtime.clone(),
            components,
            nats_url: self.nats_url(settings),
        };
        let frontend = Frontend {
            database_url: entry
                .messages_on_database
                .then(|| self.carrier_database_url.clone()),
            sessions: self.sessions.clone(),
            resolve: resolver(&self.store),
        };
        let seams = set::start(set, &env, Side::Frontend(frontend))?;
        let (Some(messages), Some(control), Some(streams)) =
            (seams.messages, seams.control, seams.streams)
        else {
            bail!("the `{set}` set started without a frontend's seams");
        };
        if !messages.wait_ready(CONNECT_WAIT).await {
            bail!(
                "the `{set}` carrier did not connect within {}s",
                CONNECT_WAIT.as_secs()
            );
        }
        Ok(BuiltSet {
            key: key.clone(),
            messages,
            control,
            streams,
            tunnel: seams.tunnel,
        })
    }

    /// Whether this replica could build `set` now: its components are in
    /// the registry and, for `nats`, a NATS server is named and answers.
    pub async fn can_build(&self, set: SetName, settings: &ClusterSettings) -> CanBuild {
        let no = |reason: String| CanBuild {
            ok: false,
            reason: Some(reason),
        };
        for needed in set.entry().components(SideKind::Frontend) {
            // Whether the registry holds one: its bytes are read only to build.
            let held = self
                .store
                .plugins(Some(needed.name))
                .await
                .map(|records| records.iter().any(|r| r.kind == needed.kind).then_some(()));
            match held {
                Ok(Some(())) => {}
                Ok(None) => {
                    return no(format!(
                        "the plugin registry holds no `{}` component",
                        needed.name
                    ));
                }
                Err(e) => return no(format!("reading the plugin registry: {e}")),
            }
        }
        if set == SetName::Nats {
            let Some(url) = self.nats_url(settings) else {
                return no("no NATS URL: set `nats_url` in the cluster settings".into());
            };
            let reached = match NatsTarget::parse(&url) {
                Ok(target) => target.reach().await,
                Err(why) => Err(why),
            };
            if let Err(why) = reached {
                return no(format!("the cluster's NATS server: {why}"));
            }
        }
        CanBuild {
            ok: true,
            reason: None,
        }
    }
}

/// Where the `nats` set finds a node's address and stream key.
fn resolver(store: &Store) -> Resolver {
    let store = store.clone();
    Arc::new(move |node: String| {
        let store = store.clone();
        Box::pin(async move { node_address(&store, &node).await })
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
