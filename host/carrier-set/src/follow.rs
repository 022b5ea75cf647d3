//! Every replica follows the cluster row: it polls it (with jitter, and at
//! once on a `pg_notify` hint), builds a change's target beside the active
//! set and makes every holder listen on both, swaps the holders at the
//! commit (control and streams go through the [`Window`] until the
//! settle), releases the old set at the settle, drops an aborted target,
//! and reports in `instances` what it built, the epoch it acted on, and
//! whether it could build each set.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use switchyard_carrier::SetName;
use switchyard_carrier::window::{Route, Window};
use switchyard_protocol::carrier::{CanBuild, ClusterSettings, SetKey};
use switchyard_protocol::state::CarrierRowState;
use switchyard_store::carrier_switch::{CARRIER_CHANNEL, REFRESH_REPORT};
use switchyard_store::cluster::ClusterCarrier;
use tokio::sync::watch;
use tracing::Instrument;

use super::build::BuiltSet;
use super::{Built, Carriers, View};

/// How often a replica reads the row when nothing is under way (±20 %).
const POLL: Duration = Duration::from_secs(1);
/// How often during a change: a hint usually wakes it sooner.
const POLL_CHANGING: Duration = Duration::from_millis(100);
/// How long a replica waits before it tries again to build a target that failed.
const RETRY_BUILD: Duration = Duration::from_secs(2);
/// Every how many polls `can_build` is refreshed unasked (it dials NATS).
const CAN_BUILD_EVERY: u32 = 30;

/// Runs until `stop`.
pub async fn run(carriers: Arc<Carriers>, mut stop: watch::Receiver<bool>) {
    let store = carriers.builder.store.clone();
    let mut hints = None;
    let mut asked = true;
    let mut polls: u32 = 0;
    let mut can_build = BTreeMap::new();
    loop {
        if hints.is_none() {
            hints = store.listen(CARRIER_CHANNEL).await.ok();
        }
        let changing = carriers.view().row.state() != CarrierRowState::Stable;
        let wait = match changing {
            true => POLL_CHANGING,
            false => POLL.mul_f64(rand::random_range(0.8..1.2)),
        };
        tokio::select! {
            _ = stop.changed() => return,
            hint = async {
                match &mut hints {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => match hint {
                Some(payload) if payload == REFRESH_REPORT => asked = true,
                Some(_) => {}
                // The LISTEN connection dropped: make another next time.
                None => hints = None,
            },
            _ = tokio::time::sleep(wait) => {}
        }
        let refresh = asked || polls.is_multiple_of(CAN_BUILD_EVERY);
        match step(&carriers, &mut can_build, refresh).await {
            Ok(()) => asked = false,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "following the carrier row failed; retrying")
            }
        }
        polls = polls.wrapping_add(1);
    }
}

/// One look at the row: act on it and report. `can_build` is what this
/// replica last found it can build, checked again when `refresh`.
async fn step(
    carriers: &Carriers,
    can_build: &mut BTreeMap<String, CanBuild>,
    refresh: bool,
) -> anyhow::Result<()> {
    let store = &carriers.builder.store;
    let row = store
        .cluster_carrier()
        .await?
        .context("the cluster_carrier row is gone")?;
    let settings = store.cluster_settings().await?;
    // During a change the workers that must attach are counted: how many
    // they are sets how long each waits at random before it attaches.
    let workers = match row.state() {
        CarrierRowState::Stable => None,
        _ => Some(store.carrier_workers().await?),
    };
    carriers.view.store(Arc::new(View {
        row: row.clone(),
        settings: settings.clone(),
        workers: workers.as_ref().map_or(0, Vec::len),
    }));
    if let Some(workers) = workers {
        let attached: HashMap<String, Vec<String>> = workers
            .into_iter()
            .filter(|w| w.report.reported)
            .map(|w| (w.report.node, w.report.attached))
            .collect();
        carriers.attachments.store(Arc::new(attached));
    }
    let mut built = carriers.built.lock().await;
    let mut failures = BTreeMap::new();
    if let Err((set, e)) = reconcile(carriers, &mut built, &row, &settings).await {
        tracing::warn!(%set, error = %format!("{e:#}"), "could not build a carrier set");
        failures.insert(set, format!("{e:#}"));
    }
    let labels = built.labels();
    let epoch = built.epoch;
    drop(built);
    if refresh {
        can_build.clear();
        for set in SetName::ALL {
            let verdict = carriers.builder.can_build(set, &settings).await;
            can_build.insert(set.as_str().to_string(), verdict);
        }
    }
    // A set that failed to build here cannot be built here, whatever the
    // check said (until the next check).
    for (set, reason) in failures {
        can_build.insert(
            set,
            CanBuild {
                ok: false,
                reason: Some(reason),
            },
        );
    }
    store
        .report_instance(
            &carriers.instance_id,
            env!("CARGO_PKG_VERSION"),
            epoch,
            &labels,
            can_build,
            refresh,
        )
        .await?;
    Ok(())
}

/// Brings what runs here in line with `row`. A set that failed to build is
/// returned with its error (the rest of the row is still acted on).
async fn reconcile(
    carriers: &Carriers,
    built: &mut Built,
    row: &ClusterCarrier,
    settings: &ClusterSettings,
) -> Result<(), (String, anyhow::Error)> {
    if SetName::parse(&row.active.carrier).is_none() {
        // A set this build does not run; the start refused it already.
        return Ok(());
    }
    let active_key = row.active.clone();
    // A set this build does not run is not built (the leader aborts such
    // a prepare).
    let runs = |key: &&SetKey| SetName::parse(&key.carrier).is_some();
    let target_key = row.phase.target().filter(runs).cloned();
    let draining_key = row.phase.draining().filter(runs).cloned();

    // An aborted target (or one the row no longer names) is dropped.
    if built
        .target
        .as_ref()
        .is_some_and(|t| Some(&t.key) != target_key.as_ref() && t.key != active_key)
    {
        let dropped = built.target.take().expect("checked above");
        release(carriers, &dropped);
        tracing::info!(set = %dropped.key.label(), epoch = row.epoch, "dropped the target of an aborted change");
    }

    if built.active.key != active_key {
        commit(
            carriers,
            built,
            row,
            &active_key,
            draining_key.as_ref(),
            settings,
        )
        .await?;
    }
    // The settle: the set that drained is released.
    if built.draining.is_some() && draining_key.is_none() {
        let _span = tracing::info_span!("carrier_settle", epoch = row.epoch).entered();
        let old = built.draining.take().expect("checked above");
        release(carriers, &old);
        point_holders_at_active(carriers, built);
        tracing::info!(released = %old.key.label(), epoch = row.epoch, "settled: the old set is released");
    }

    if let Some(target_key) = target_key {
        prepare(carriers, built, row, target_key, settings).await?;
    }
    built.epoch = row.epoch;
    Ok(())
}

/// The commit: the target (built in prepare, or now by a replica that
/// missed it) becomes active; the old set drains or goes.
async fn commit(
    carriers: &Carriers,
    built: &mut Built,
    row: &ClusterCarrier,
    active_key: &SetKey,
    draining_key: Option<&SetKey>,
    settings: &ClusterSettings,
) -> Result<(), (String, anyhow::Error)> {
    let span = tracing::info_span!("carrier_commit", epoch = row.epoch, to = %active_key.label());
    let new = match built.target.take() {
        Some(target) if target.key == *active_key => target,
        other => {
            if let Some(other) = other {
                release(carriers, &other);
            }
            build_and_listen(carriers, active_key, settings)
                .instrument(span.clone())
                .await
                .map_err(|e| (active_key.carrier.clone(), e))?
        }
    };
    let _entered = span.enter();
    carriers.fanout.swap(new.messages.clone());
    carriers.queue.swap(new.messages.clone());
    if let Some(tunnel) = &new.tunnel {
        carriers.tunnel.store(Some(Arc::new(tunnel.clone())));
    }
    let old = std::mem::replace(&mut built.active, new);
    if let Some(previous) = built.draining.take() {
        release(carriers, &previous);
    }
    if draining_key == Some(&old.key) {
        let window = Window::new(
            route(&built.active),
            route(&old),
            carriers.attachments.clone(),
        );
        carriers.control.swap(window.clone());
        carriers.streams.swap(window);
        built.draining = Some(old);
    } else {
        release(carriers, &old);
        point_holders_at_active(carriers, built);
    }
    tracing::info!(carrier = %row.active.carrier, epoch = row.epoch, "committed: publishes go to the new set");
    Ok(())
}

/// The prepare: build the target beside the active set (a build that
/// failed is tried again after a pause, not at every poll).
async fn prepare(
    carriers: &Carriers,
    built: &mut Built,
    row: &ClusterCarrier,
    target_key: SetKey,
    settings: &ClusterSettings,
) -> Result<(), (String, anyhow::Error)> {
    let resting = built
        .failed
        .as_ref()
        .is_some_and(|(key, at)| *key == target_key && at.elapsed() < RETRY_BUILD);
    if target_key != built.active.key
        && built.target.as_ref().map(|t| &t.key) != Some(&target_key)
        && !resting
    {
        let span =
            tracing::info_span!("carrier_prepare", epoch = row.epoch, target = %target_key.label());
        let target = match build_and_listen(carriers, &target_key, settings)
            .instrument(span)
            .await
        {
            Ok(target) => target,
            Err(e) => {
                built.failed = Some((target_key.clone(), std::time::Instant::now()));
                return Err((target_key.carrier, e));
            }
        };
        tracing::info!(set = %target.key.label(), epoch = row.epoch, "prepared: the target runs beside the active set");
        built.target = Some(target);
    }
    Ok(())
}

/// Builds `key` and makes the fan-out and queue holders listen on it too.
async fn build_and_listen(
    carriers: &Carriers,
    key: &SetKey,
    settings: &ClusterSettings,
) -> anyhow::Result<BuiltSet> {
    let set = carriers.builder.build(key, settings).await?;
    carriers.fanout.listen(&set.messages).await?;
    carriers.queue.listen(&set.messages).await?;
    Ok(set)
}

/// The holders stop listening on `set`; it stops once calls in flight on
/// it let go of it.
fn release(carriers: &Carriers, set: &BuiltSet) {
    carriers.fanout.release(&set.messages);
    carriers.queue.release(&set.messages);
}

fn point_holders_at_active(carriers: &Carriers, built: &Built) {
    carriers.control.swap(built.active.control.clone());
    carriers.streams.swap(built.active.streams.clone());
}

fn route(set: &BuiltSet) -> Route {
    Route {
        set: set.key.carrier.clone(),
        control: set.control.clone(),
        streams: set.streams.clone(),
    }
}
