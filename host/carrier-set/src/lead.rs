//! The leader of carrier changes: one replica at a time, the one holding
//! the leader lock on a connection of its own (`store::LeaderSeat`), moves
//! a change along. It keeps nothing but the lock: everything it decides on
//! is in the row and the reports, so when it dies (its connection ends, the
//! lock with it) another replica takes the lock and carries on from the
//! row. What to do is [`decide::next_move`](super::decide::next_move); this
//! module reads its inputs and carries the move out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_protocol::state::CarrierRowState;
use switchyard_store::carrier_switch::{CARRIER_CHANNEL, LeaderSeat};
use switchyard_store::cluster::ClusterCarrier;
use tokio::sync::watch;

use super::decide::{Move, next_move};
use super::{Carriers, LIVE, units};

/// How often the leader looks at the row when nothing is under way.
const IDLE: Duration = Duration::from_secs(1);
/// How often during a change (a hint usually wakes it sooner).
const CHANGING: Duration = Duration::from_millis(50);
/// How often a replica that is not the leader tries the lock.
const TRY_LOCK: Duration = Duration::from_secs(1);

/// Runs until `stop`.
pub async fn run(carriers: Arc<Carriers>, mut stop: watch::Receiver<bool>) {
    loop {
        let seat = tokio::select! {
            _ = stop.changed() => return,
            seat = take_the_lead(&carriers) => seat,
        };
        let seat = match seat {
            Ok(seat) => seat,
            Err(e) => {
                tracing::warn!(error = %e, "could not try the carrier leader lock; retrying");
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(TRY_LOCK) => continue,
                }
            }
        };
        tracing::info!(instance = %carriers.instance_id, "leading carrier changes");
        if lead(&carriers, &seat, &mut stop).await.is_break() {
            return;
        }
        tracing::warn!("the carrier leader lock's connection ended; trying again");
    }
}

/// Waits until this replica holds the leader lock.
async fn take_the_lead(carriers: &Carriers) -> Result<LeaderSeat, switchyard_store::StoreError> {
    let seat = carriers.builder.store.leader_seat().await?;
    while !seat.try_lead().await? {
        tokio::time::sleep(TRY_LOCK).await;
    }
    Ok(seat)
}

/// Leads until the seat's connection ends (continue) or `stop` (break).
async fn lead(
    carriers: &Carriers,
    seat: &LeaderSeat,
    stop: &mut watch::Receiver<bool>,
) -> std::ops::ControlFlow<()> {
    let mut hints = carriers.builder.store.listen(CARRIER_CHANNEL).await.ok();
    let mut changing = false;
    while !seat.is_lost() {
        let wait = if changing { CHANGING } else { IDLE };
        tokio::select! {
            _ = stop.changed() => return std::ops::ControlFlow::Break(()),
            _ = async {
                match &mut hints {
                    Some((_, rx)) => { rx.recv().await; }
                    None => std::future::pending().await,
                }
            } => {}
            _ = tokio::time::sleep(wait) => {}
        }
        match drive(carriers).await {
            Ok(state) => changing = state != CarrierRowState::Stable,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "moving the carrier change along failed; retrying")
            }
        }
    }
    std::ops::ControlFlow::Continue(())
}

/// One look at the row by the leader: read, decide, act; the state it
/// found.
async fn drive(carriers: &Carriers) -> anyhow::Result<CarrierRowState> {
    let store = &carriers.builder.store;
    let Some(row) = store.cluster_carrier().await? else {
        return Ok(CarrierRowState::Stable);
    };
    let state = row.state();
    let (replicas, workers) = match state {
        CarrierRowState::Stable => (Vec::new(), Vec::new()),
        CarrierRowState::Prepare => (
            store.live_replicas(LIVE, None).await?,
            store.carrier_workers().await?,
        ),
        CarrierRowState::Commit => (store.live_replicas(LIVE, None).await?, Vec::new()),
    };
    act(carriers, &row, next_move(&row, &replicas, &workers)).await?;
    Ok(state)
}

/// Carries out `step` on `row`; every move is a compare-and-set on the
/// row's epoch, so a move another leader made first is a no-op.
async fn act(carriers: &Carriers, row: &ClusterCarrier, step: Move) -> anyhow::Result<()> {
    let store = &carriers.builder.store;
    let active = &row.active.carrier;
    match step {
        Move::Wait(_) => {}
        Move::Commit => {
            let window = Duration::from_millis(store.cluster_settings().await?.window_ms);
            if let Some(moved) = store.commit_change(row.epoch, window).await? {
                tracing::info!(carrier = %moved.active.carrier, epoch = moved.epoch, "carrier change committed");
            }
        }
        Move::Abort(reason) => {
            if store.abort_change(row.epoch, &reason).await?.is_some() {
                tracing::warn!(%reason, "carrier change aborted");
            }
        }
        Move::Settle { behind } => {
            let started = Instant::now();
            if store.settle_change(row.epoch).await?.is_some() {
                tracing::info!(carrier = %active, behind, "carrier change settled");
                let moved = units::move_to_active(carriers, active).await?;
                if moved > 0 {
                    let from = row.phase.draining().map(|d| d.carrier.as_str());
                    tracing::info!(moved, ?from, to = %active, elapsed_ms = started.elapsed().as_millis() as u64, "work units moved to the new set");
                }
            }
        }
        Move::Tidy => {
            let (demoted, promoted) = store.demote_unattached(active, row.epoch).await?;
            if demoted + promoted > 0 {
                tracing::info!(demoted, promoted, carrier = %active, "workers demoted or promoted by what they are attached to");
            }
            let swept = units::move_to_active(carriers, active).await?;
            if swept > 0 {
                tracing::info!(swept, carrier = %active, "work units that reached a released pgbus queue after the settle moved to the active set");
            }
        }
    }
    Ok(())
}
