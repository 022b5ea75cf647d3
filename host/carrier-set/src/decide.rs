//! The carrier leader's decision, as a pure function of what it reads: the
//! row (its phase and the time left by the database clock, which is the
//! leader's "now"), the live replicas' reports and the workers' reports.
//! `lead` reads them, asks [`next_move`] and carries the move out; the
//! rules are tested here, table-driven, without a database.
//!
//! - prepare → commit once every live replica built the target at the
//!   prepare's epoch and every worker that can follow attached to it (a
//!   forced change skips the workers that cannot); → abort, saying what it
//!   waited for, when the prepare timeout passes.
//! - commit → settle once every live replica acted on the commit (its
//!   holders point at the new set), or when the window ends.
//! - stable: tidy (workers demoted or promoted by what they attached to,
//!   units left on a released pgbus queue moved to the active set).

use switchyard_carrier::SetName;
use switchyard_protocol::carrier::{Phase, SetKey};
use switchyard_protocol::state::NodeState;
use switchyard_store::carrier_switch::{CarrierWorker, LiveReplica};
use switchyard_store::cluster::ClusterCarrier;

/// Why a prepare whose target no build runs is aborted.
pub const UNKNOWN_TARGET: &str = "the row's target is not a set this build runs";

/// What the leader does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Nothing yet: what the change waits for (empty when stable work is
    /// all there is, or the row names a set this build does not run).
    Wait(Vec<String>),
    /// prepare → commit.
    Commit,
    /// prepare → stable, with why.
    Abort(String),
    /// commit → stable; `behind` replicas had not acted on the commit (the
    /// window ended without them).
    Settle {
        /// Replicas still behind.
        behind: usize,
    },
    /// Stable: demote and promote workers, sweep leftover units.
    Tidy,
}

/// The next move for `row`, given the live replicas and the workers.
pub fn next_move(
    row: &ClusterCarrier,
    replicas: &[LiveReplica],
    workers: &[CarrierWorker],
) -> Move {
    match &row.phase {
        Phase::Stable => Move::Tidy,
        Phase::Prepare { target, forced } => prepare(row, target, *forced, replicas, workers),
        Phase::Commit { .. } => commit(row, replicas),
    }
}

fn prepare(
    row: &ClusterCarrier,
    target: &SetKey,
    forced: bool,
    replicas: &[LiveReplica],
    workers: &[CarrierWorker],
) -> Move {
    if SetName::parse(&target.carrier).is_none() {
        return Move::Abort(UNKNOWN_TARGET.to_string());
    }
    let mut waiting = replicas_without(row, target, replicas);
    waiting.extend(workers_not_attached(
        row.epoch,
        &target.carrier,
        forced,
        workers,
    ));
    if waiting.is_empty() {
        Move::Commit
    } else if row.deadline_passed() {
        Move::Abort(format!("the prepare timed out: {}", waiting.join("; ")))
    } else {
        Move::Wait(waiting)
    }
}

/// The live replicas that have not built `target` at the row's epoch.
fn replicas_without(
    row: &ClusterCarrier,
    target: &SetKey,
    replicas: &[LiveReplica],
) -> Vec<String> {
    let label = target.label();
    let set = &target.carrier;
    replicas
        .iter()
        .filter(|r| r.report.epoch < row.epoch || !r.built.contains(&label))
        .map(|replica| {
            let why = replica
                .report
                .can_build
                .get(set)
                .filter(|c| !c.ok)
                .and_then(|c| c.reason.clone())
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            format!("replica {} has not built `{set}`{why}", replica.report.id)
        })
        .collect()
}

/// The workers that hold the change: not attached to `target` at `epoch`,
/// or unable to follow it (unless the change is forced). A worker that
/// never reported its carriers, is demoted, or is silent (its heartbeats
/// stopped) holds nothing.
fn workers_not_attached(
    epoch: i64,
    target: &str,
    forced: bool,
    workers: &[CarrierWorker],
) -> Vec<String> {
    let mut waiting = Vec::new();
    for worker in workers {
        let w = &worker.report;
        if !w.reported || w.demoted_reason.is_some() || worker.state == NodeState::Unhealthy {
            continue;
        }
        if let Some(reason) = w.cannot_follow.get(target) {
            if !forced {
                waiting.push(format!("worker {} cannot follow: {reason}", w.node));
            }
            continue;
        }
        let attached = w.attached.iter().any(|s| s == target);
        if !attached || w.epoch_seen.unwrap_or(0) < epoch {
            waiting.push(format!("worker {} has not attached to `{target}`", w.node));
        }
    }
    waiting
}

fn commit(row: &ClusterCarrier, replicas: &[LiveReplica]) -> Move {
    if SetName::parse(&row.active.carrier).is_none() {
        return Move::Wait(Vec::new());
    }
    let label = row.active.label();
    let behind: Vec<String> = replicas
        .iter()
        .filter(|r| r.report.epoch < row.epoch || r.built.first() != Some(&label))
        .map(|r| format!("replica {} has not acted on the commit", r.report.id))
        .collect();
    if behind.is_empty() || row.deadline_passed() {
        Move::Settle {
            behind: behind.len(),
        }
    } else {
        Move::Wait(behind)
    }
}

#[cfg(test)]
mod tests;
