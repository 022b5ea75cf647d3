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
//! name and its components' pins ([`SetKey`], the type the frontends' row
//! and reports use too): the news names the active
//! set, the target of a change (prepare, commit) and the set that drains
//! (commit). A target is attached after a random wait ([`jitter`]) so that a
//! fleet does not connect at once, with [`attach_backoff`] after a failed
//! attach; a set the news no longer names is closed by [`may_close`]: once
//! the active set is connected and nothing runs on it, or after the drain
//! time; an aborted target goes by the same rule (at once, in practice:
//! nothing was routed to it).
//! Engines are never touched by any of this.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchyard_carrier::SetName;
use switchyard_carrier::set::StreamsVia;
use switchyard_protocol::carrier::{CarrierNews, MAX_ATTACH_JITTER_MS, SetRef};
use switchyard_runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::components::ComponentCache;
use crate::identity::Identity;
use crate::node::Node;

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

mod attach;
mod lanes;
mod rules;
mod running;
mod status;

use lanes::{Probe, hold_lanes};
pub use rules::{Role, attach_backoff, cannot_follow, desired, jitter, may_close};
use running::{Direct, Pending, Running};
pub use status::LinkStatus;
pub use switchyard_protocol::carrier::SetKey;

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

        self.plan(&wanted, now, jitter_max);
        self.attach_due(identity).await;
        self.dial_newest();
        self.close_released(max_drain);

        self.publish(self.acted().then_some(news.epoch));

        let draining = self
            .running
            .values()
            .filter_map(|r| r.released_at)
            .map(|at| (at + max_drain).min(Instant::now() + DRAIN_POLL));
        self.pending.values().map(|p| p.due).chain(draining).min()
    }

    /// Marks what runs as named again or released, and keeps a pending
    /// entry, with its due time, for each set to attach.
    fn plan(&mut self, wanted: &[(SetKey, SetRef, Role)], now: Instant, jitter_max: Duration) {
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
        for (key, set, role) in wanted {
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
    }

    /// Attaches every set that is due, the active set first; a failure is
    /// tried again after a backoff.
    async fn attach_due(&mut self, identity: &Identity) {
        let now = Instant::now();
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
                    tracing::info!(set = %key.carrier, "attached to the carrier set");
                    self.running.insert(key, running);
                }
                Err(e) => {
                    pending.failures += 1;
                    let wait = attach_backoff(pending.failures);
                    let retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                    // Said once; the retries (every 30 s at most) quietly.
                    if pending.failures == 1 {
                        tracing::warn!(set = %key.carrier, error = %e, retry_in_ms, "attaching to the carrier set failed");
                    } else {
                        tracing::debug!(set = %key.carrier, error = %e, retry_in_ms, "attaching to the carrier set failed again");
                    }
                    pending.due = Instant::now() + wait;
                    self.pending.insert(key, pending);
                }
            }
        }
    }

    /// Acted on: every set this news names is connected, or was tried
    /// and failed (then `cannot_follow` or the logs say why). A set
    /// still connecting is not yet acted on: a frontend reads an epoch
    /// seen without the active set attached as "cannot follow". Two
    /// versions of `tunnel` share the lanes: one of them connected is
    /// the name connected.
    fn acted(&self) -> bool {
        let named: std::collections::HashSet<SetName> = self
            .running
            .values()
            .filter(|r| r.released_at.is_none())
            .map(|r| r.name)
            .collect();
        self.pending.values().all(|p| p.failures > 0)
            && named.iter().all(|name| {
                self.running
                    .values()
                    .any(|r| r.name == *name && r.released_at.is_none() && r.connected())
            })
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
                tracing::info!(set = %key.carrier, in_flight = running.in_flight.count(), "closing a released carrier set");
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

#[cfg(test)]
mod tests;
