//! The leader of carrier changes: one replica at a time, the one holding a
//! PostgreSQL advisory lock on a connection of its own, moves a change
//! along. It keeps nothing but the lock: everything it decides on is in the
//! row, so when it dies (its connection ends, the lock with it) another
//! replica takes the lock and carries on from the row.
//!
//! - prepare → commit once every live replica built the target at the
//!   prepare's epoch and every worker that can follow attached to it (a
//!   forced change skips the workers that cannot); → abort, saying what it
//!   waited for, when the prepare timeout passes.
//! - commit → settle once every live replica acted on the commit (its
//!   holders point at the new set), or when the window ends; then work
//!   units left on a released pgbus queue move to the new set.
//! - stable: workers not attached to the active set are demoted, and
//!   promoted again once they report it (never while a change is under way).

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_protocol::state::{CarrierRowState, NodeState};
use switchyard_store::carrier_switch::{CARRIER_CHANNEL, LEADER_LOCK};
use switchyard_store::cluster::ClusterCarrier;
use tokio::sync::watch;

use super::build::SetKey;
use super::report::LIVE;
use super::{Carriers, units};

/// How often the leader looks at the row when nothing is under way.
const IDLE: Duration = Duration::from_secs(1);
/// How often during a change (a hint usually wakes it sooner).
const CHANGING: Duration = Duration::from_millis(50);
/// How often a replica that is not the leader tries the lock.
const TRY_LOCK: Duration = Duration::from_secs(1);

/// Runs until `stop`.
pub async fn run(carriers: Arc<Carriers>, mut stop: watch::Receiver<bool>) {
    let store = carriers.builder.store.clone();
    loop {
        let lock = async {
            let client = store.dedicated().await?;
            loop {
                let held: bool = client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])
                    .await?
                    .get(0);
                if held {
                    return Ok::<_, switchyard_store::StoreError>(client);
                }
                tokio::time::sleep(TRY_LOCK).await;
            }
        };
        let client = tokio::select! {
            _ = stop.changed() => return,
            client = lock => client,
        };
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(error = %e, "could not try the carrier leader lock; retrying");
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(TRY_LOCK) => continue,
                }
            }
        };
        tracing::info!(instance = %carriers.instance_id, "leading carrier changes");
        let mut hints = store.listen(CARRIER_CHANNEL).await.ok();
        // Leads until the lock's connection ends.
        let mut changing = false;
        while !client.is_closed() {
            let wait = if changing { CHANGING } else { IDLE };
            tokio::select! {
                _ = stop.changed() => return,
                _ = async {
                    match &mut hints {
                        Some((_, rx)) => { rx.recv().await; }
                        None => std::future::pending().await,
                    }
                } => {}
                _ = tokio::time::sleep(wait) => {}
            }
            match drive(&carriers).await {
                Ok(state) => changing = state != CarrierRowState::Stable,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "moving the carrier change along failed; retrying")
                }
            }
        }
        tracing::warn!("the carrier leader lock's connection ended; trying again");
    }
}

/// One look at the row by the leader; the state it found.
async fn drive(carriers: &Carriers) -> anyhow::Result<CarrierRowState> {
    let store = &carriers.builder.store;
    let Some(row) = store.cluster_carrier().await? else {
        return Ok(CarrierRowState::Stable);
    };
    let state = row.state;
    match row.state {
        CarrierRowState::Prepare => prepare(carriers, &row).await,
        CarrierRowState::Commit => commit(carriers, &row).await,
        CarrierRowState::Stable => {
            let (demoted, promoted) = store.demote_unattached(&row.carrier, row.epoch).await?;
            if demoted + promoted > 0 {
                tracing::info!(demoted, promoted, carrier = %row.carrier, "workers demoted or promoted by what they are attached to");
            }
            let swept = units::move_to_active(carriers, &row.carrier).await?;
            if swept > 0 {
                tracing::info!(swept, carrier = %row.carrier, "work units that reached a released pgbus queue after the settle moved to the active set");
            }
            Ok(())
        }
    }?;
    Ok(state)
}

async fn prepare(carriers: &Carriers, row: &ClusterCarrier) -> anyhow::Result<()> {
    let store = &carriers.builder.store;
    let (Some(target), Some(key)) = (
        row.target.as_deref(),
        row.target
            .as_deref()
            .and_then(|t| SetKey::of(t, row.target_plugins.as_ref())),
    ) else {
        store
            .abort_change(row.epoch, "the row's target is not a set this build runs")
            .await?;
        return Ok(());
    };
    let label = key.label();
    let mut waiting = Vec::new();
    for replica in store.live_replicas(LIVE, None).await? {
        let report = &replica.report;
        if report.epoch < row.epoch || !replica.built.contains(&label) {
            let why = report
                .can_build
                .get(target)
                .filter(|c| !c.ok)
                .and_then(|c| c.reason.clone())
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            waiting.push(format!(
                "replica {} has not built `{target}`{why}",
                report.id
            ));
        }
    }
    for worker in store.carrier_workers().await? {
        // A worker that never reported its carriers, is demoted, or is
        // silent (unhealthy: its heartbeats stopped) does not hold a change.
        if !worker.report.reported
            || worker.report.demoted_reason.is_some()
            || worker.state == NodeState::Unhealthy
        {
            continue;
        }
        let w = &worker.report;
        if let Some(reason) = w.cannot_follow.get(target) {
            if !row.forced {
                waiting.push(format!("worker {} cannot follow: {reason}", w.node));
            }
            continue;
        }
        let attached = w.attached.iter().any(|s| s == target);
        if !attached || w.epoch_seen.unwrap_or(0) < row.epoch {
            waiting.push(format!("worker {} has not attached to `{target}`", w.node));
        }
    }
    if waiting.is_empty() {
        let window = Duration::from_millis(store.cluster_settings().await?.window_ms);
        if let Some(moved) = store.commit_change(row.epoch, window).await? {
            tracing::info!(carrier = %moved.carrier, epoch = moved.epoch, "carrier change committed");
        }
    } else if row.deadline_in_ms.is_some_and(|left| left <= 0) {
        let reason = format!("the prepare timed out: {}", waiting.join("; "));
        if store.abort_change(row.epoch, &reason).await?.is_some() {
            tracing::warn!(%reason, "carrier change aborted");
        }
    }
    Ok(())
}

async fn commit(carriers: &Carriers, row: &ClusterCarrier) -> anyhow::Result<()> {
    let store = &carriers.builder.store;
    let Some(active) = SetKey::of(&row.carrier, Some(&row.plugins)) else {
        return Ok(());
    };
    let label = active.label();
    let behind = store
        .live_replicas(LIVE, None)
        .await?
        .into_iter()
        .filter(|r| r.report.epoch < row.epoch || r.built.first() != Some(&label))
        .count();
    let window_over = row.deadline_in_ms.is_some_and(|left| left <= 0);
    if behind > 0 && !window_over {
        return Ok(());
    }
    let started = Instant::now();
    if store.settle_change(row.epoch).await?.is_some() {
        tracing::info!(carrier = %row.carrier, behind, "carrier change settled");
        let moved = units::move_to_active(carriers, &row.carrier).await?;
        if moved > 0 {
            tracing::info!(moved, from = ?row.draining, to = %row.carrier, elapsed_ms = started.elapsed().as_millis() as u64, "work units moved to the new set");
        }
    }
    Ok(())
}
