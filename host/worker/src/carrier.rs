//! The worker's side of the cluster's carrier sets, following what the
//! heartbeat answers: the set's catalog says what a worker runs
//! ([`switchyard_carrier::set`]); the components come from the frontend's
//! plugin registry, verified by digest ([`crate::components`]). For
//! `tunnel`, a websocket per lane dialled to the frontend (inference first;
//! bulk on the replica that took it); for `nats`, control verbs on NATS and
//! stream sessions (one per frontend replica and lane) served on the
//! worker's own address. Either way the same
//! services answer.
//!
//! During a carrier change several sets run side by side, each keyed by its
//! name and its components' digests ([`SetKey`]): the news names the active
//! set, the target of a change (prepare, commit) and the set that drains
//! (commit). A target is attached after a random wait ([`jitter`]) so that a
//! fleet does not connect at once, with [`attach_backoff`] after a failed
//! attach; a set the news no longer names is closed by [`may_close`]: once
//! the active set is connected and nothing runs on it, or after the drain
//! time; an aborted target goes by the same rule (at once, in practice:
//! nothing was routed to it).
//! Engines are never touched by any of this.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::Digest;
use switchyard_carrier::client::Carrier;
use switchyard_carrier::control::{CarrierControl, subscribe_control_on_carrier};
use switchyard_carrier::dialled::SessionServer;
use switchyard_carrier::set::{self, SetEnv, Side, SideKind, StreamsVia};
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::tunnel::websocket::{frame, handshake, wire};
use switchyard_carrier::tunnel::{Lane, Side as TunnelSide, TunnelSession};
use switchyard_carrier::{ComponentSpec, ControlSeam, Refusal, SetName};
use switchyard_protocol::carrier::{
    Attachment, CarrierNews, ComponentRef, MAX_ATTACH_JITTER_MS, SetRef,
};
use switchyard_runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::components::ComponentCache;
use crate::identity::Identity;
use crate::node::Node;
use crate::services::InFlight;

/// Longest wait between two dials of a lane.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// The first wait after a failed attach (a component not fetched, a set
/// not started, NATS not answering); it doubles up to
/// [`MAX_ATTACH_BACKOFF`].
pub const FIRST_ATTACH_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attaches of one set.
pub const MAX_ATTACH_BACKOFF: Duration = Duration::from_secs(30);
/// The longest random wait before attaching to a target, when the news
/// does not say (the cluster setting `attach_jitter_ms`).
pub const DEFAULT_ATTACH_JITTER: Duration = Duration::from_secs(10);
/// How long a released set is kept for work still running on it, when the
/// news does not say (the cluster setting `max_drain_ms`).
pub const DEFAULT_MAX_DRAIN: Duration = Duration::from_secs(120);
/// How long an attach waits for the NATS server to answer; past it the
/// attach failed and is tried again after its backoff.
const NATS_CONNECT: Duration = Duration::from_secs(10);
/// How often a released set is looked at while it drains (its work is
/// counted, not signalled).
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// `cannot_follow`'s reason for `nats` on a worker without `--address`.
pub const NO_ADDRESS: &str = "no routable --address";
/// `cannot_follow`'s reason for `nats` without a NATS URL.
pub const NO_NATS_URL: &str = "no NATS URL";

/// A set as the worker runs it: its name and its components' digests (a
/// new version of a component is another set, run beside the old one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    /// The set's name.
    pub set: String,
    /// Its components' SHA-256s, sorted.
    pub digests: Vec<String>,
}

impl SetKey {
    /// The key of a set the news names.
    pub fn of(set: &SetRef) -> Self {
        let mut digests: Vec<String> = set.components.iter().map(|c| c.sha256.clone()).collect();
        digests.sort();
        Self {
            set: set.carrier.clone(),
            digests,
        }
    }
}

/// What the news says of a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The cluster's set now.
    Active,
    /// The set a change moves to: attached after a random wait.
    Target,
    /// The set a committed change leaves: kept, never newly attached.
    Draining,
}

/// Every set the news names, each once, with its role: active first.
pub fn desired(news: &CarrierNews) -> Vec<(SetKey, SetRef, Role)> {
    let active = SetRef {
        carrier: news.carrier.clone(),
        components: news.components.clone(),
    };
    let mut sets: Vec<(SetKey, SetRef, Role)> = Vec::new();
    let named = std::iter::once((active, Role::Active))
        .chain(news.target.clone().map(|t| (t, Role::Target)))
        .chain(news.draining.clone().map(|d| (d, Role::Draining)));
    for (set, role) in named {
        let key = SetKey::of(&set);
        if !sets.iter().any(|(k, _, _)| *k == key) {
            sets.push((key, set, role));
        }
    }
    sets
}

/// The wait after `failures` failed attaches in a row (at least one):
/// 1 s, 2 s, 4 s … up to 30 s.
pub fn attach_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_ATTACH_BACKOFF * 2u32.pow(doublings)).min(MAX_ATTACH_BACKOFF)
}

/// A random wait of up to `max` before attaching to a target, so that a
/// fleet of workers told of a change at once does not connect at once.
pub fn jitter(max: Duration) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..=max_ms))
}

/// Whether a set the cluster released may close now: once the active set
/// is connected and nothing runs on it, or once `max_drain` has passed
/// since it was released whatever still runs (frontends dropped their side
/// of it by then, so nothing new reaches it).
pub fn may_close(
    released_for: Duration,
    active_connected: bool,
    in_flight: usize,
    max_drain: Duration,
) -> bool {
    released_for >= max_drain || (active_connected && in_flight == 0)
}

/// Why this worker cannot follow the cluster to each set of the catalog
/// (every set, not only those in the news, so that a change's preflight
/// can tell before it starts): `nats` needs an address the frontends dial
/// and a NATS URL; a set whose components could not be fetched or
/// verified says why (`component_errors`, by set name).
pub fn cannot_follow(
    address: Option<&str>,
    nats_url: Option<&str>,
    component_errors: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    SetName::ALL
        .into_iter()
        .filter_map(|set| {
            let reason = match set {
                SetName::Nats if address.is_none_or(|a| a.trim().is_empty()) => {
                    Some(NO_ADDRESS.to_string())
                }
                SetName::Nats if nats_url.is_none_or(|u| u.trim().is_empty()) => {
                    Some(NO_NATS_URL.to_string())
                }
                _ => component_errors.get(set.as_str()).cloned(),
            };
            reason.map(|r| (set.as_str().to_string(), r))
        })
        .collect()
}

/// The worker's tunnel sessions of one set, one per lane while dialled.
#[derive(Default)]
struct Lanes {
    held: Mutex<[Option<TunnelSession>; 2]>,
}

impl Lanes {
    fn slot(lane: Lane) -> usize {
        match lane {
            Lane::Inference => 0,
            Lane::Bulk => 1,
        }
    }

    fn hold(&self, lane: Lane, session: Option<TunnelSession>) {
        self.held.lock().expect("lanes lock")[Self::slot(lane)] = session;
    }

    /// Connected: the inference lane's session lives.
    fn connected(&self) -> bool {
        self.held.lock().expect("lanes lock")[0]
            .as_ref()
            .is_some_and(|s| !s.is_lost())
    }

    fn close(&self) {
        for session in self.held.lock().expect("lanes lock").iter_mut() {
            if let Some(session) = session.take() {
                session.close();
            }
        }
    }
}

/// How to tell whether a running set is connected.
#[derive(Clone)]
enum Probe {
    Messages(Arc<Carrier>),
    Lanes(Arc<Lanes>),
    /// A test's say-so.
    #[cfg(test)]
    Flag(Arc<std::sync::atomic::AtomicBool>),
}

impl Probe {
    fn connected(&self) -> bool {
        match self {
            Probe::Messages(carrier) => carrier.is_ready(),
            Probe::Lanes(lanes) => lanes.connected(),
            #[cfg(test)]
            Probe::Flag(flag) => flag.load(std::sync::atomic::Ordering::SeqCst),
        }
    }
}

#[derive(Default)]
struct StatusInner {
    running: Vec<(String, Probe)>,
    epoch_seen: Option<i64>,
    cannot_follow: BTreeMap<String, String>,
}

/// What a heartbeat reports of the carriers, read without waiting for the
/// link (which may be fetching or connecting): connected is looked at when
/// the heartbeat is sent.
#[derive(Clone, Default)]
pub struct LinkStatus(Arc<Mutex<StatusInner>>);

impl std::fmt::Debug for LinkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LinkStatus")
            .field(&self.attachment())
            .finish()
    }
}

impl LinkStatus {
    /// The sets attached and connected now (by name, each once), the epoch
    /// of the news last acted on, and the sets this worker cannot follow.
    pub fn attachment(&self) -> Attachment {
        let inner = self.0.lock().expect("status lock");
        let attached: BTreeSet<String> = inner
            .running
            .iter()
            .filter(|(_, probe)| probe.connected())
            .map(|(name, _)| name.clone())
            .collect();
        Attachment {
            attached: attached.into_iter().collect(),
            epoch_seen: inner.epoch_seen,
            cannot_follow: inner.cannot_follow.clone(),
        }
    }
}

/// A set that runs.
struct Running {
    name: SetName,
    /// What the news said of it last.
    role: Role,
    /// When the news stopped naming it.
    released_at: Option<Instant>,
    /// Streams and control calls running on it.
    in_flight: InFlight,
    probe: Option<Probe>,
    /// The tunnel component its lanes run, and its sessions (`tunnel` sets).
    tunnel: Option<(ComponentSpec, Arc<Lanes>)>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    fn connected(&self) -> bool {
        self.probe.as_ref().is_some_and(Probe::connected)
    }

    fn close(self) {
        self.tasks.iter().for_each(JoinHandle::abort);
        if let Some((_, lanes)) = &self.tunnel {
            lanes.close();
        }
    }
}

/// A set the news names that does not run yet.
struct Pending {
    set: SetRef,
    role: Role,
    due: Instant,
    failures: u32,
}

/// The worker's sessions listener on `--address`: one for every `nats` set
/// that runs (two versions of the set share it; the newest attached names
/// the tunnel component new sessions run), with the streams it serves
/// counted.
struct Direct {
    task: JoinHandle<()>,
    server: Arc<SessionServer>,
    in_flight: InFlight,
}

impl Direct {
    /// Stops listening and ends the sessions.
    fn close(self) {
        self.task.abort();
        self.server.close();
    }
}

/// What runs for the carrier sets the cluster names.
pub struct CarrierLink {
    runtime: Arc<Runtime>,
    cache: ComponentCache,
    plugins: Option<PathBuf>,
    address: Option<String>,
    nats_url: Option<String>,
    node: Arc<Node>,
    running: BTreeMap<SetKey, Running>,
    pending: BTreeMap<SetKey, Pending>,
    direct: Option<Direct>,
    /// The `tunnel` set whose lanes are dialled, and the task dialling them:
    /// the frontend holds one session per node and lane, so one set dials.
    dialling: Option<(SetKey, JoinHandle<()>)>,
    /// The NATS URL the news gave (the worker's own wins).
    news_nats_url: Option<String>,
    /// Why a set's components could not be fetched or verified, by set name.
    component_errors: BTreeMap<String, String>,
    /// The node's identity the news came with (tunnel lanes dial with it).
    identity: Option<Identity>,
    status: LinkStatus,
}

impl std::fmt::Debug for CarrierLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarrierLink")
            .field("running", &self.running.keys().collect::<Vec<_>>())
            .field("pending", &self.pending.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl CarrierLink {
    /// Nothing runs until [`CarrierLink::follow`]. `plugins` is the
    /// worker's own folder of components, for a frontend whose news names
    /// none.
    pub fn new(
        runtime: Arc<Runtime>,
        cache: ComponentCache,
        plugins: Option<PathBuf>,
        address: Option<String>,
        nats_url: Option<String>,
        node: Arc<Node>,
    ) -> Self {
        let link = Self {
            runtime,
            cache,
            plugins,
            address,
            nats_url,
            node,
            running: BTreeMap::new(),
            pending: BTreeMap::new(),
            direct: None,
            dialling: None,
            news_nats_url: None,
            component_errors: BTreeMap::new(),
            identity: None,
            status: LinkStatus::default(),
        };
        link.publish(None);
        link
    }

    /// The sets running now (released ones that still drain included).
    pub fn running(&self) -> Vec<SetKey> {
        self.running.keys().cloned().collect()
    }

    /// What heartbeats report; it follows the link.
    pub fn status(&self) -> LinkStatus {
        self.status.clone()
    }

    /// The NATS URL the `nats` set uses: the worker's own, else the cluster's.
    fn effective_nats_url(&self) -> Option<String> {
        self.nats_url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| self.news_nats_url.clone().filter(|u| !u.trim().is_empty()))
    }

    /// Stops what runs (the node's identity changed), at once.
    pub fn stop(&mut self) {
        self.pending.clear();
        self.identity = None;
        if let Some((_, task)) = self.dialling.take() {
            task.abort();
        }
        for (_, running) in std::mem::take(&mut self.running) {
            running.close();
        }
        if let Some(direct) = self.direct.take() {
            direct.close();
        }
        self.publish(None);
    }

    /// Moves what runs towards what `news` names: attaches the sets due
    /// (the active set at once, a target after its jitter, a failed one
    /// after its backoff), closes released sets that may close, and
    /// returns when it wants to be called again (a set to attach, a set
    /// that drains); `None`: at the next news.
    pub async fn follow(&mut self, news: &CarrierNews, identity: &Identity) -> Option<Instant> {
        let now = Instant::now();
        self.news_nats_url = news.nats_url.clone();
        self.identity = Some(identity.clone());
        let jitter_max = news.attach_jitter_ms.map_or(DEFAULT_ATTACH_JITTER, |ms| {
            Duration::from_millis(ms.min(MAX_ATTACH_JITTER_MS))
        });
        let max_drain = news
            .max_drain_ms
            .map_or(DEFAULT_MAX_DRAIN, Duration::from_millis);
        let wanted = desired(news);

        // What still runs is named again, or released from now.
        for (key, running) in &mut self.running {
            match wanted.iter().find(|(k, _, _)| k == key) {
                Some((_, _, role)) => {
                    running.role = *role;
                    running.released_at = None;
                }
                None if running.released_at.is_none() => running.released_at = Some(now),
                None => {}
            }
        }
        // A set not yet attached is attached only while it is active or a
        // target: nothing new goes to a set that drains.
        self.pending.retain(|key, _| {
            wanted
                .iter()
                .any(|(k, _, role)| k == key && *role != Role::Draining)
        });
        for (key, set, role) in &wanted {
            if *role == Role::Draining || self.running.contains_key(key) {
                continue;
            }
            let pending = self.pending.entry(key.clone()).or_insert_with(|| Pending {
                set: set.clone(),
                role: *role,
                // The active set at once (a first start, a commit this
                // worker had not attached for yet); a target spread out.
                due: match role {
                    Role::Target => now + jitter(jitter_max),
                    _ => now,
                },
                failures: 0,
            });
            if *role == Role::Active && pending.role == Role::Target && pending.failures == 0 {
                pending.due = now;
            }
            pending.role = *role;
        }

        // Attach what is due, the active set first.
        let mut due: Vec<(Role, SetKey)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(k, p)| (p.role, k.clone()))
            .collect();
        due.sort();
        for (_, key) in due {
            let Some(mut pending) = self.pending.remove(&key) else {
                continue;
            };
            match self.attach(&pending.set, pending.role, identity).await {
                Ok(running) => {
                    tracing::info!(set = %key.set, "attached to the carrier set");
                    self.running.insert(key, running);
                }
                Err(e) => {
                    pending.failures += 1;
                    let wait = attach_backoff(pending.failures);
                    let retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                    // Said once; the retries (every 30 s at most) quietly.
                    if pending.failures == 1 {
                        tracing::warn!(set = %key.set, error = %e, retry_in_ms, "attaching to the carrier set failed");
                    } else {
                        tracing::debug!(set = %key.set, error = %e, retry_in_ms, "attaching to the carrier set failed again");
                    }
                    pending.due = Instant::now() + wait;
                    self.pending.insert(key, pending);
                }
            }
        }

        self.dial_newest();
        self.close_released(max_drain);

        // Acted on: every set this news names is connected, or was tried
        // and failed (then `cannot_follow` or the logs say why). A set
        // still connecting is not yet acted on: a frontend reads an epoch
        // seen without the active set attached as "cannot follow". Two
        // versions of `tunnel` share the lanes: one of them connected is
        // the name connected.
        let named: std::collections::HashSet<SetName> = self
            .running
            .values()
            .filter(|r| r.released_at.is_none())
            .map(|r| r.name)
            .collect();
        let acted = self.pending.values().all(|p| p.failures > 0)
            && named.iter().all(|name| {
                self.running
                    .values()
                    .any(|r| r.name == *name && r.released_at.is_none() && r.connected())
            });
        self.publish(acted.then_some(news.epoch));

        let draining = self
            .running
            .values()
            .filter_map(|r| r.released_at)
            .map(|at| (at + max_drain).min(Instant::now() + DRAIN_POLL));
        self.pending.values().map(|p| p.due).chain(draining).min()
    }

    /// Starts one set's worker side.
    async fn attach(
        &mut self,
        set: &SetRef,
        role: Role,
        identity: &Identity,
    ) -> Result<Running, String> {
        let Some(name) = SetName::parse(&set.carrier) else {
            return Err(format!(
                "this worker does not run the carrier set `{}`; it runs {}",
                set.carrier,
                SetName::names()
            ));
        };
        if name == SetName::Nats {
            // Checked before fetching: nothing to fetch for a set this
            // worker could not serve.
            if let Some(reason) = cannot_follow(
                self.address.as_deref(),
                self.effective_nats_url().as_deref(),
                &BTreeMap::new(),
            )
            .remove(name.as_str())
            {
                return Err(reason);
            }
        }
        let resolved = match (set.components.as_slice(), &self.plugins) {
            ([], None) => Err(
                "the frontend names no carrier components and this worker has no \
                 --carrier-plugins"
                    .to_string(),
            ),
            ([], Some(plugins)) => own_components(plugins, name),
            (named, _) => self.fetch(named, identity).await,
        };
        let components = match resolved {
            Ok(components) => {
                self.component_errors.remove(name.as_str());
                components
            }
            Err(e) => {
                self.component_errors
                    .insert(name.as_str().to_string(), e.clone());
                return Err(e);
            }
        };
        let env = SetEnv {
            runtime: self.runtime.clone(),
            components,
            nats_url: self.effective_nats_url(),
        };
        let seams = set::start(name, &env, Side::Worker).map_err(|e| e.to_string())?;
        let in_flight = InFlight::default();
        let mut running = Running {
            name,
            role,
            released_at: None,
            in_flight: in_flight.clone(),
            probe: None,
            // Lanes this worker dials (`tunnel`); a `nats` set's sessions
            // are dialled to it instead.
            tunnel: match name.entry().streams {
                StreamsVia::Tunnel(_) => seams.tunnel.clone().map(|spec| (spec, Arc::default())),
                StreamsVia::Dialled(_) => None,
            },
            tasks: Vec::new(),
        };
        if let Some(carrier) = seams.messages {
            if !carrier.wait_ready(NATS_CONNECT).await {
                return Err(format!(
                    "the `{}` carrier did not connect within {} s",
                    carrier.name(),
                    NATS_CONNECT.as_secs()
                ));
            }
            if let (StreamsVia::Dialled(_), Some(spec)) = (name.entry().streams, &seams.tunnel) {
                self.serve_direct(identity, spec.clone()).await?;
            }
            // Subscribed before the set counts as attached: a frontend's
            // first call must find this worker answering. Two versions of a
            // set both answer; a frontend takes the first answer.
            let control = in_flight.control(self.node.control());
            let serve = subscribe_control_on_carrier(carrier.clone(), &identity.node_id, control)
                .await
                .map_err(|e| format!("control verbs are not served on the carrier: {e}"))?;
            running.tasks.push(tokio::spawn(serve));
            // A SUB is not acknowledged: a `ping` to itself on the same
            // connection comes back only once the server has it, so a
            // frontend's call after this finds a responder.
            CarrierControl::new(carrier.clone())
                .call(&identity.node_id, "ping", bytes::Bytes::new(), NATS_CONNECT)
                .await
                .map_err(|e| format!("control verbs do not answer on the carrier: {e}"))?;
            running.probe = Some(Probe::Messages(carrier));
        }
        if let Some((_, lanes)) = &running.tunnel {
            // Dialled by `dial_newest`: one set's lanes at a time.
            running.probe = Some(Probe::Lanes(lanes.clone()));
        }
        Ok(running)
    }

    async fn fetch(
        &self,
        named: &[ComponentRef],
        identity: &Identity,
    ) -> Result<Vec<ComponentSpec>, String> {
        let mut components = Vec::new();
        for wanted in named {
            let component = self
                .cache
                .get(identity, wanted)
                .await
                .map_err(|e| format!("{}@{}: {e}", wanted.name, wanted.version))?;
            components.push(component);
        }
        Ok(components)
    }

    /// Serves sessions on the worker's own address (the frontend dials
    /// it), once for every `nats` set: a second version of the set shares
    /// it, and the sessions dialled from then on run its `tunnel`.
    async fn serve_direct(
        &mut self,
        identity: &Identity,
        tunnel: ComponentSpec,
    ) -> Result<(), String> {
        if let Some(direct) = self.direct.as_ref().filter(|d| !d.task.is_finished()) {
            direct.server.set_component(tunnel);
            return Ok(());
        }
        let address = self.address.clone().ok_or(NO_ADDRESS)?;
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|e| format!("cannot serve streams on {address}: {e}"))?;
        tracing::info!(%address, "serving stream sessions");
        let key = switchyard_carrier::direct::stream_key(&sha2::Sha256::digest(
            identity.credential.as_bytes(),
        ));
        let in_flight = InFlight::default();
        let acceptor = self.node.acceptor_counted(in_flight.clone());
        let server = SessionServer::new(self.runtime.clone(), key, tunnel, acceptor);
        self.direct = Some(Direct {
            task: tokio::spawn(server.clone().serve(listener)),
            server,
            in_flight,
        });
        Ok(())
    }

    /// Dials the lanes of the newest `tunnel` set that runs (a target, else
    /// the active set, else one that drains). The frontend holds one
    /// session per node and lane and replaces the old one when a new one
    /// arrives, so only one set dials: an older version's sessions are
    /// never redialled once a newer one dials, and stay open for what runs
    /// on them until their set closes.
    fn dial_newest(&mut self) {
        let newest = self
            .running
            .iter()
            .filter(|(_, r)| r.tunnel.is_some())
            .min_by_key(|(_, r)| {
                let order = match r.role {
                    Role::Target => 0,
                    Role::Active => 1,
                    Role::Draining => 2,
                };
                (r.released_at.is_some(), order)
            })
            .map(|(k, _)| k.clone());
        if self.dialling.as_ref().map(|(k, _)| k) == newest.as_ref()
            && self
                .dialling
                .as_ref()
                .is_some_and(|(_, task)| !task.is_finished())
        {
            return;
        }
        if let Some((_, task)) = self.dialling.take() {
            task.abort();
        }
        let Some(key) = newest else {
            return;
        };
        let running = &self.running[&key];
        let Some((spec, lanes)) = running.tunnel.clone() else {
            return;
        };
        let Some(identity) = self.identity.clone() else {
            return;
        };
        let acceptor = self.node.acceptor_counted(running.in_flight.clone());
        let task = tokio::spawn(hold_lanes(
            self.runtime.clone(),
            spec,
            identity,
            acceptor,
            lanes,
        ));
        self.dialling = Some((key, task));
    }

    /// Closes the released sets that may close ([`may_close`]): once the
    /// active set is connected and nothing runs on them, or after
    /// `max_drain`.
    fn close_released(&mut self, max_drain: Duration) {
        let now = Instant::now();
        let active_connected = self
            .running
            .values()
            .any(|r| r.role == Role::Active && r.released_at.is_none() && r.connected());
        let nats_sets = self
            .running
            .values()
            .filter(|r| matches!(r.name.entry().streams, StreamsVia::Dialled(_)))
            .count();
        let direct_in_flight = self.direct.as_ref().map_or(0, |d| d.in_flight.count());
        let closing: Vec<SetKey> = self
            .running
            .iter()
            .filter_map(|(key, r)| {
                let released = r.released_at?;
                let mut in_flight = r.in_flight.count();
                // Dialled sessions' streams belong to every `nats` set:
                // they hold the last one only.
                if matches!(r.name.entry().streams, StreamsVia::Dialled(_)) && nats_sets == 1 {
                    in_flight += direct_in_flight;
                }
                // An aborted target goes by the same rule: nothing runs on
                // a `nats` target, so it closes at once; a `tunnel` target
                // took over the lanes (the frontend holds one session per
                // lane, whatever its version), so it waits for the active
                // set's lanes to be back and its streams to end.
                may_close(
                    now.duration_since(released),
                    active_connected,
                    in_flight,
                    max_drain,
                )
                .then(|| key.clone())
            })
            .collect();
        for key in closing {
            if let Some(running) = self.running.remove(&key) {
                tracing::info!(set = %key.set, in_flight = running.in_flight.count(), "closing a released carrier set");
                if self.dialling.as_ref().is_some_and(|(k, _)| *k == key)
                    && let Some((_, task)) = self.dialling.take()
                {
                    task.abort();
                }
                running.close();
            }
        }
        let direct_needed = self
            .running
            .values()
            .any(|r| matches!(r.name.entry().streams, StreamsVia::Dialled(_)));
        if !direct_needed && let Some(direct) = self.direct.take() {
            // The last `nats` set closed once nothing ran on it (or its
            // drain time passed): its sessions end with it.
            direct.close();
        }
        // A tunnel set left alone dials again (an aborted target's set).
        self.dial_newest();
    }

    /// Shares what runs with the heartbeats.
    fn publish(&self, epoch_seen: Option<i64>) {
        let mut inner = self.status.0.lock().expect("status lock");
        inner.running = self
            .running
            .values()
            .filter_map(|r| r.probe.clone().map(|p| (r.name.as_str().to_string(), p)))
            .collect();
        if epoch_seen.is_some() {
            inner.epoch_seen = epoch_seen;
        }
        inner.cannot_follow = cannot_follow(
            self.address.as_deref(),
            self.effective_nats_url().as_deref(),
            &self.component_errors,
        );
    }
}

/// The worker's own folder's components, for a frontend whose news names
/// none (an older frontend).
fn own_components(plugins: &Path, set: SetName) -> Result<Vec<ComponentSpec>, String> {
    set.entry()
        .components(SideKind::Worker)
        .into_iter()
        .map(|needed| {
            let path = plugins.join(format!("{}.wasm", needed.name));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(ComponentSpec::new(needed.name, "local", bytes))
        })
        .collect()
}

/// Keeps both lanes dialled, with backoff, for as long as the task runs;
/// the sessions are kept in `lanes` (their set closes them).
async fn hold_lanes(
    runtime: Arc<Runtime>,
    spec: ComponentSpec,
    identity: Identity,
    acceptor: Acceptor,
    lanes: Arc<Lanes>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match dial(&runtime, &spec, &identity, Lane::Inference, &acceptor).await {
            Ok(inference) => {
                backoff = FIRST_BACKOFF;
                tracing::info!(node = %identity.node_id, "inference lane connected");
                lanes.hold(Lane::Inference, Some(inference.clone()));
                // The bulk lane follows the inference lane's replica; it is
                // redialled while the inference lane lives.
                loop {
                    let bulk = dial(&runtime, &spec, &identity, Lane::Bulk, &acceptor).await;
                    let lost = match bulk {
                        Ok(bulk) => {
                            tracing::info!(node = %identity.node_id, "bulk lane connected");
                            lanes.hold(Lane::Bulk, Some(bulk.clone()));
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = bulk.lost() => { bulk.close(); None }
                            }
                        }
                        Err(e) if e.is_expected_on_bulk() => {
                            tracing::debug!(error = %e, "bulk lane not yet where the inference lane is; redialling");
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = tokio::time::sleep(FIRST_BACKOFF) => None,
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "bulk lane dial failed");
                            tokio::select! {
                                reason = inference.lost() => Some(reason),
                                _ = tokio::time::sleep(FIRST_BACKOFF) => None,
                            }
                        }
                    };
                    if let Some(reason) = lost {
                        tracing::warn!(reason, "inference lane lost; redialling");
                        break;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "inference lane dial failed"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Why a lane was not dialled.
#[derive(Debug, thiserror::Error)]
enum DialError {
    /// The frontend answered the upgrade with this status.
    #[error("the frontend answered {0}")]
    Answered(u16),
    /// Anything else (no connection, a bad credential header, the session).
    #[error("{0}")]
    Other(String),
}

impl From<String> for DialError {
    fn from(e: String) -> Self {
        Self::Other(e)
    }
}

impl DialError {
    /// A 409 to the bulk lane: the frontend that took the inference lane
    /// registers it once the session's HELLO is through, and a bulk dial
    /// right after can arrive first. The next dial finds it; a first start
    /// always sees this once, so it is no warning.
    fn is_expected_on_bulk(&self) -> bool {
        matches!(self, Self::Answered(409))
    }
}

/// Dials one lane and starts its session.
async fn dial(
    runtime: &Arc<Runtime>,
    spec: &ComponentSpec,
    identity: &Identity,
    lane: Lane,
    acceptor: &Acceptor,
) -> Result<TunnelSession, DialError> {
    let lane_name = lane.as_str();
    let url = format!(
        "{}/api/cluster/connect?lane={lane_name}",
        identity.frontend.replacen("http", "ws", 1)
    );
    let bearer = format!("Bearer {}", identity.credential);
    let headers = [
        ("authorization", bearer.as_str()),
        ("x-switchyard-node", identity.node_id.as_str()),
    ];
    let (socket, read_ahead) = handshake::dial(&url, &headers).await.map_err(|e| match e {
        handshake::DialError::Answered(status) => DialError::Answered(status),
        other => DialError::Other(other.to_string()),
    })?;
    let (session, transport) = TunnelSession::start(
        runtime.clone(),
        spec.clone(),
        TunnelSide::Worker,
        lane,
        acceptor.clone(),
    )
    .await?;
    tokio::spawn(wire::pump(
        socket,
        frame::Role::Client,
        read_ahead,
        transport,
    ));
    // The lane counts once the frontend answers on it: it starts its side
    // only after recording the session (its connection claim), so a round
    // trip here means other replicas can relay to this lane. Counted any
    // earlier, a change could commit to `tunnel` while the replicas still
    // find no session for this node. The frontend serves no streams: its
    // refusal is the answer.
    match tokio::time::timeout(LANE_ANSWER, session.open(LANE_CHECK)).await {
        Ok(Err(Refusal::UnknownService) | Ok(_)) => Ok(session),
        Ok(Err(refusal)) => {
            session.close();
            Err(DialError::Other(format!(
                "the frontend did not answer on the {lane_name} lane: {refusal}"
            )))
        }
        Err(_) => {
            session.close();
            Err(DialError::Other(format!(
                "the frontend did not answer on the {lane_name} lane within {}s",
                LANE_ANSWER.as_secs()
            )))
        }
    }
}

/// A service no frontend serves: opening it is the lane's first round trip.
const LANE_CHECK: &str = "switchyard.lane-check";
/// How long a new lane's first round trip may take.
const LANE_ANSWER: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use sha2::Digest;
    use switchyard_protocol::state::CarrierRowState;

    use super::*;
    use crate::engines::EngineBinaries;
    use crate::node::EngineStartPolicy;
    use crate::placement::Placement;

    #[test]
    fn only_a_409_to_the_bulk_lane_is_an_expected_race() {
        assert!(DialError::Answered(409).is_expected_on_bulk());
        for other in [401, 503] {
            assert!(!DialError::Answered(other).is_expected_on_bulk());
        }
        assert!(!DialError::Other("connection refused".into()).is_expected_on_bulk());
    }

    fn component(name: &str, version: &str, bytes: &[u8]) -> ComponentRef {
        ComponentRef {
            name: name.into(),
            version: version.into(),
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
        }
    }

    fn set(carrier: &str, components: Vec<ComponentRef>) -> SetRef {
        SetRef {
            carrier: carrier.into(),
            components,
        }
    }

    fn news(epoch: i64, state: CarrierRowState, active: SetRef) -> CarrierNews {
        CarrierNews {
            carrier: active.carrier,
            epoch,
            state,
            components: active.components,
            target: None,
            draining: None,
            nats_url: None,
            attach_jitter_ms: Some(0),
            max_drain_ms: None,
        }
    }

    fn roles(news: &CarrierNews) -> Vec<(String, Role)> {
        desired(news)
            .into_iter()
            .map(|(key, _, role)| (key.set, role))
            .collect()
    }

    #[test]
    fn the_news_names_the_sets_to_run_in_every_phase() {
        let nats = set("nats", vec![component("nats", "0.1.0", b"nats-1")]);
        let tunnel = set("tunnel", vec![component("tunnel", "0.2.0", b"tunnel-2")]);
        let mut n = news(1, CarrierRowState::Stable, nats.clone());
        assert_eq!(roles(&n), [("nats".into(), Role::Active)]);
        // Prepare: the target beside the active set.
        n.state = CarrierRowState::Prepare;
        n.target = Some(tunnel.clone());
        assert_eq!(
            roles(&n),
            [
                ("nats".into(), Role::Active),
                ("tunnel".into(), Role::Target)
            ]
        );
        // Commit: the new set is active, the old one drains.
        let mut committed = news(3, CarrierRowState::Commit, tunnel.clone());
        committed.draining = Some(nats.clone());
        assert_eq!(
            roles(&committed),
            [
                ("tunnel".into(), Role::Active),
                ("nats".into(), Role::Draining)
            ]
        );
        // A version upgrade: the same set twice, two keys.
        let mut upgrade = news(4, CarrierRowState::Prepare, nats.clone());
        upgrade.target = Some(set("nats", vec![component("nats", "0.2.0", b"nats-2")]));
        let keys: Vec<SetKey> = desired(&upgrade).into_iter().map(|(k, _, _)| k).collect();
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        // The same set named twice runs once, as the active set.
        let mut same = news(5, CarrierRowState::Prepare, nats.clone());
        same.target = Some(nats);
        assert_eq!(roles(&same), [("nats".into(), Role::Active)]);
    }

    #[test]
    fn attaching_backs_off_from_one_to_thirty_seconds_and_jitter_stays_in_bounds() {
        let waits: Vec<u64> = (1..=8).map(|n| attach_backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(attach_backoff(u32::MAX), MAX_ATTACH_BACKOFF);
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
        let max = Duration::from_millis(50);
        for _ in 0..1000 {
            assert!(jitter(max) <= max);
        }
        // Spread, not one value.
        let seen: BTreeSet<Duration> = (0..200).map(|_| jitter(Duration::from_secs(10))).collect();
        assert!(seen.len() > 100, "{}", seen.len());
    }

    #[test]
    fn cannot_follow_names_every_set_of_the_catalog_with_why() {
        let none = BTreeMap::new();
        assert_eq!(
            cannot_follow(None, Some("nats://n:4222"), &none),
            [("nats".to_string(), NO_ADDRESS.to_string())].into()
        );
        assert_eq!(
            cannot_follow(Some("10.0.0.5:7000"), None, &none),
            [("nats".to_string(), NO_NATS_URL.to_string())].into()
        );
        assert_eq!(
            cannot_follow(Some("10.0.0.5:7000"), Some("nats://n:4222"), &none),
            BTreeMap::new()
        );
        let fetch: BTreeMap<String, String> = [(
            "tunnel".to_string(),
            "tunnel@0.3.0: refused: digest".to_string(),
        )]
        .into();
        assert_eq!(
            cannot_follow(None, None, &fetch),
            [
                ("nats".to_string(), NO_ADDRESS.to_string()),
                (
                    "tunnel".to_string(),
                    "tunnel@0.3.0: refused: digest".to_string()
                ),
            ]
            .into()
        );
    }

    #[test]
    fn a_released_set_closes_when_idle_with_the_active_set_connected_or_after_the_drain() {
        let drain = Duration::from_secs(120);
        let early = Duration::from_secs(1);
        assert!(may_close(early, true, 0, drain));
        // Work still runs on it, or the new set is not connected yet: kept.
        assert!(!may_close(early, true, 1, drain));
        assert!(!may_close(early, false, 0, drain));
        // Past the drain, whatever runs.
        assert!(may_close(drain, false, 3, drain));
        assert!(may_close(early, false, 3, Duration::ZERO));
    }

    /// A link with components kept in its cache (so nothing is fetched)
    /// and a frontend nobody answers at (lanes are dialled in vain).
    struct Fixture {
        link: CarrierLink,
        identity: Identity,
        _dir: tempfile::TempDir,
    }

    fn fixture(kept: &[&[u8]], address: Option<&str>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let components = dir.path().join("components");
        std::fs::create_dir_all(&components).unwrap();
        for bytes in kept {
            let sha = hex::encode(sha2::Sha256::digest(bytes));
            std::fs::write(components.join(format!("{sha}.wasm")), bytes).unwrap();
        }
        let node = Node::new(
            Placement::open(&dir.path().join("models"), 0).unwrap(),
            EngineBinaries::default(),
            EngineStartPolicy::default(),
        );
        let runtime = Runtime::new(switchyard_runtime::RuntimeConfig::for_carriers(None)).unwrap();
        let link = CarrierLink::new(
            runtime,
            ComponentCache::new(dir.path()),
            None,
            address.map(str::to_string),
            None,
            node,
        );
        Fixture {
            link,
            identity: Identity {
                node_id: "node_test".into(),
                credential: "credential".into(),
                frontend: "http://127.0.0.1:1".into(),
            },
            _dir: dir,
        }
    }

    fn running(link: &CarrierLink) -> Vec<String> {
        link.running
            .keys()
            .map(|k| format!("{}:{}", k.set, &k.digests[0][..6]))
            .collect()
    }

    fn short(c: &SetRef) -> String {
        format!("{}:{}", c.carrier, &c.components[0].sha256[..6])
    }

    /// Says `key`'s set is connected (or not) from now on.
    fn connected(link: &mut CarrierLink, key: &SetKey, connected: bool) {
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(connected));
        link.running.get_mut(key).unwrap().probe = Some(Probe::Flag(flag));
        link.publish(None);
    }

    #[tokio::test]
    async fn a_tunnel_upgrade_attaches_beside_an_abort_lets_go_a_settle_drains() {
        let (old, new) = (b"tunnel-0.2.0".as_slice(), b"tunnel-0.3.0".as_slice());
        let mut f = fixture(&[old, new], None);
        let a = set("tunnel", vec![component("tunnel", "0.2.0", old)]);
        let b = set("tunnel", vec![component("tunnel", "0.3.0", new)]);
        let (key_a, key_b) = (SetKey::of(&a), SetKey::of(&b));

        let stable = news(1, CarrierRowState::Stable, a.clone());
        f.link.follow(&stable, &f.identity).await;
        assert_eq!(running(&f.link), [short(&a)]);
        let report = f.link.status().attachment();
        // Not connected (nobody answers the lanes): not attached, and the
        // news not yet acted on.
        assert!(report.attached.is_empty());
        assert_eq!(report.epoch_seen, None);
        assert_eq!(
            report.cannot_follow,
            [("nats".to_string(), NO_ADDRESS.to_string())].into()
        );
        connected(&mut f.link, &key_a, true);
        f.link.follow(&stable, &f.identity).await;
        assert_eq!(f.link.status().attachment().epoch_seen, Some(1));

        // Prepare: the new version runs beside the old one, and it dials.
        let mut prepare = stable.clone();
        prepare.epoch = 2;
        prepare.state = CarrierRowState::Prepare;
        prepare.target = Some(b.clone());
        f.link.follow(&prepare, &f.identity).await;
        let mut both = vec![short(&a), short(&b)];
        both.sort();
        let mut now = running(&f.link);
        now.sort();
        assert_eq!(now, both);
        assert_eq!(f.link.dialling.as_ref().map(|(k, _)| k), Some(&key_b));
        // Two versions of one set share the lanes: the old one's session
        // (still up) is the name connected.
        assert_eq!(f.link.status().attachment().epoch_seen, Some(2));
        connected(&mut f.link, &key_b, true);
        // The new version took the lanes over: the old one's are lost.
        connected(&mut f.link, &key_a, false);
        f.link.follow(&prepare, &f.identity).await;
        let report = f.link.status().attachment();
        assert_eq!(
            (report.attached, report.epoch_seen),
            (vec!["tunnel".to_string()], Some(2))
        );

        // Abort: the old version dials again at once; the target (which
        // took over the lanes) is let go once the old one is connected and
        // nothing runs on the target.
        let mut aborted = stable.clone();
        aborted.epoch = 3;
        aborted.max_drain_ms = Some(600_000);
        let work = f.link.running[&key_b].in_flight.enter();
        f.link.follow(&aborted, &f.identity).await;
        assert_eq!(f.link.dialling.as_ref().map(|(k, _)| k), Some(&key_a));
        assert_eq!(
            f.link.running.len(),
            2,
            "the old version is not connected yet"
        );
        connected(&mut f.link, &key_a, true);
        f.link.follow(&aborted, &f.identity).await;
        assert_eq!(f.link.running.len(), 2, "a stream still runs on the target");
        drop(work);
        f.link.follow(&aborted, &f.identity).await;
        assert_eq!(running(&f.link), [short(&a)]);

        // Prepare again, commit, settle: the old version is kept while the
        // new one is not connected, and closes once it is and nothing runs
        // on the old one.
        f.link.follow(&prepare, &f.identity).await;
        let mut commit = news(5, CarrierRowState::Commit, b.clone());
        commit.draining = Some(a.clone());
        f.link.follow(&commit, &f.identity).await;
        assert_eq!(f.link.running.len(), 2);
        let mut settled = news(6, CarrierRowState::Stable, b.clone());
        settled.max_drain_ms = Some(600_000);
        let wake = f.link.follow(&settled, &f.identity).await;
        assert_eq!(f.link.running.len(), 2, "the old set drains");
        assert!(wake.is_some_and(|at| at <= Instant::now() + DRAIN_POLL));
        connected(&mut f.link, &key_b, true);
        f.link.follow(&settled, &f.identity).await;
        assert_eq!(running(&f.link), [short(&b)]);
        assert_eq!(f.link.status().attachment().epoch_seen, Some(6));
    }

    #[tokio::test]
    async fn a_released_set_with_work_running_is_kept_until_its_drain_is_up() {
        let bytes = b"tunnel-0.2.0".as_slice();
        let mut f = fixture(&[bytes], None);
        let a = set("tunnel", vec![component("tunnel", "0.2.0", bytes)]);
        f.link
            .follow(&news(1, CarrierRowState::Stable, a.clone()), &f.identity)
            .await;
        // The cluster moved on to a set this worker cannot attach to (no
        // components at all): the old one is all it has, and a stream runs on it.
        let work = f.link.running[&SetKey::of(&a)].in_flight.enter();
        let mut settled = news(2, CarrierRowState::Stable, set("tunnel", Vec::new()));
        settled.max_drain_ms = Some(600_000);
        f.link.follow(&settled, &f.identity).await;
        assert!(f.link.running.contains_key(&SetKey::of(&a)));
        f.link.follow(&settled, &f.identity).await;
        assert!(f.link.running.contains_key(&SetKey::of(&a)));
        // Past the drain it closes, work or not.
        settled.max_drain_ms = Some(0);
        f.link.follow(&settled, &f.identity).await;
        assert!(f.link.running.is_empty());
        drop(work);
    }

    #[tokio::test]
    async fn a_target_waits_for_its_jitter_and_nats_without_an_address_is_not_attached() {
        let bytes = b"tunnel-0.2.0".as_slice();
        let mut f = fixture(&[bytes], None);
        let a = set("tunnel", vec![component("tunnel", "0.2.0", bytes)]);
        let nats = set("nats", vec![component("nats", "0.1.0", b"nats")]);
        let stable = news(1, CarrierRowState::Stable, a.clone());
        f.link.follow(&stable, &f.identity).await;
        connected(&mut f.link, &SetKey::of(&a), true);
        f.link.follow(&stable, &f.identity).await;
        let mut prepare = news(2, CarrierRowState::Prepare, a.clone());
        prepare.target = Some(nats.clone());
        prepare.nats_url = Some("nats://127.0.0.1:1".into());
        prepare.attach_jitter_ms = Some(600_000);
        let before = Instant::now();
        let wake = f.link.follow(&prepare, &f.identity).await.unwrap();
        // Not tried yet: the news is not acted on.
        assert!(wake <= before + Duration::from_secs(600) && wake >= before);
        assert!(f.link.pending.contains_key(&SetKey::of(&nats)));
        assert_eq!(f.link.status().attachment().epoch_seen, Some(1));

        // With no jitter it is tried at once, and fails for want of an
        // address, to be tried again after a second.
        prepare.epoch = 3;
        prepare.attach_jitter_ms = Some(0);
        f.link.pending.clear();
        let before = Instant::now();
        let wake = f.link.follow(&prepare, &f.identity).await.unwrap();
        assert!(wake >= before + FIRST_ATTACH_BACKOFF);
        let pending = &f.link.pending[&SetKey::of(&nats)];
        assert_eq!(pending.failures, 1);
        let report = f.link.status().attachment();
        assert_eq!(report.epoch_seen, Some(3));
        assert_eq!(report.cannot_follow["nats"], NO_ADDRESS);
        assert_eq!(running(&f.link), [short(&a)]);
    }

    #[tokio::test]
    async fn the_workers_own_nats_url_wins_and_a_component_that_cannot_be_fetched_is_reported() {
        let mut f = fixture(&[], Some("127.0.0.1:0"));
        let nats = set("nats", vec![component("nats", "0.1.0", b"nats")]);
        let mut n = news(1, CarrierRowState::Stable, nats);
        f.link.follow(&n, &f.identity).await;
        // No URL anywhere.
        assert_eq!(
            f.link.status().attachment().cannot_follow["nats"],
            NO_NATS_URL
        );
        n.nats_url = Some("nats://cluster:4222".into());
        assert_eq!(f.link.effective_nats_url(), None);
        f.link.pending.clear();
        f.link.follow(&n, &f.identity).await;
        assert_eq!(
            f.link.effective_nats_url().as_deref(),
            Some("nats://cluster:4222")
        );
        // The component is neither kept nor fetchable (nobody answers).
        let report = f.link.status().attachment();
        assert!(
            report.cannot_follow["nats"].starts_with("nats@0.1.0:"),
            "{:?}",
            report.cannot_follow
        );
        f.link.nats_url = Some("nats://own:4222".into());
        assert_eq!(
            f.link.effective_nats_url().as_deref(),
            Some("nats://own:4222")
        );
    }
}
