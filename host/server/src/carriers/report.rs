//! The carrier status (`GET /api/cluster/carrier`) and a change's
//! preflight: what blocks moving the cluster to a set.

use std::time::{Duration, Instant};

use switchyard_carrier::SetName;
use switchyard_carrier_set::LIVE;
use switchyard_protocol::carrier::{
    Blocker, CarrierStatus, InFlight, Phase, Pins, PluginHealth, SessionRef, WorkerReport, blockers,
};
use switchyard_protocol::state::{CarrierRowState, NodeState};
use switchyard_store::StoreError;
use switchyard_store::cluster::ClusterCarrier;

use crate::state::AppState;

/// How long a dry run waits for every live replica to refresh its report
/// (a replica busy building a set answers once it is done).
const REPORT_WAIT: Duration = Duration::from_secs(10);
/// How often it looks meanwhile.
const REPORT_POLL: Duration = Duration::from_millis(50);

/// The carrier status.
pub async fn status(state: &AppState) -> Result<CarrierStatus, StoreError> {
    let store = &state.store;
    let row = store.cluster_carrier().await?;
    let settings = store.cluster_settings().await?;
    let replicas = store.live_replicas(LIVE, None).await?;
    let workers = store.carrier_workers().await?;
    let last_change = store.carrier_changes(1).await?.into_iter().next();
    let replicas = replicas
        .into_iter()
        .map(|replica| {
            let mut report = replica.report;
            report.ready = row.as_ref().is_some_and(|row| {
                report.epoch >= row.epoch
                    && replica.built.first() == Some(&row.active.label())
                    && row
                        .phase
                        .target()
                        .is_none_or(|t| replica.built.contains(&t.label()))
            });
            report
        })
        .collect();
    let units = match &state.carriers {
        Some(carriers) => switchyard_carrier_set::units::pending(carriers)
            .await
            .unwrap_or(0),
        None => 0,
    };
    let left = |phase: CarrierRowState| {
        row.as_ref()
            .filter(|r| r.state() == phase)
            .and_then(|r| r.deadline_in_ms)
            .map(|ms| ms.max(0))
    };
    let carriers = state.carriers.as_ref();
    let target = row.as_ref().and_then(|r| r.phase.target());
    let trust_warnings = match &row {
        Some(row) => switchyard_binding::signing::pin_warnings(store, &row.active.pins).await?,
        None => Vec::new(),
    };
    Ok(CarrierStatus {
        carrier: row.as_ref().map(|r| r.active.carrier.clone()),
        plugins: row
            .as_ref()
            .map(|r| r.active.pins.clone())
            .unwrap_or_default(),
        epoch: row.as_ref().map(|r| r.epoch),
        state: row.as_ref().map(|r| r.state()),
        target: target.map(|t| t.carrier.clone()),
        target_plugins: target.map(|t| t.pins.clone()),
        draining: row
            .as_ref()
            .and_then(|r| r.phase.draining())
            .map(|d| d.carrier.clone()),
        drain_left_ms: left(CarrierRowState::Commit),
        prepare_left_ms: left(CarrierRowState::Prepare),
        forced: row
            .as_ref()
            .is_some_and(|r| matches!(r.phase, Phase::Prepare { forced: true, .. })),
        replicas,
        workers: workers.into_iter().map(|w| w.report).collect(),
        in_flight: InFlight {
            streams: state
                .inference
                .routing
                .in_flight()
                .iter()
                .map(|(_, n)| *n as u64)
                .sum(),
            units,
        },
        settings: switchyard_carrier_set::nats_url::masked(settings),
        last_change,
        running: carriers.map(|c| c.view().row.active.carrier.clone()),
        connected: carriers.is_some_and(|c| c.fanout.active().is_ready()),
        plugin: carriers.map(|c| {
            let plugin = c.fanout.active().plugin_state();
            PluginHealth {
                state: plugin.state.to_string(),
                failed_rebuilds: plugin.failed_rebuilds,
                last_error: plugin.last_error,
                next_retry_unix_ms: plugin.next_retry_unix_ms,
            }
        }),
        sessions: carriers
            .map(|c| {
                c.sessions
                    .held()
                    .into_iter()
                    .map(|(node, lane)| SessionRef {
                        node,
                        lane: lane.as_str().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        trust_warnings,
    })
}

/// What blocks moving from `row` to `target` with `pins`, after every live
/// replica refreshed its report. `force` leaves out the workers that
/// cannot follow (they are demoted once the change settles).
pub async fn preflight(
    state: &AppState,
    row: &ClusterCarrier,
    target: SetName,
    pins: &Pins,
    force: bool,
) -> Result<Vec<Blocker>, StoreError> {
    let store = &state.store;
    let mut found = Vec::new();
    let mut block = |code: &str, message: String| {
        found.push(Blocker {
            code: code.to_string(),
            message,
        })
    };
    if row.state() != CarrierRowState::Stable {
        let moving_to = row.phase.target().unwrap_or(&row.active);
        block(
            blockers::CHANGE_UNDER_WAY,
            format!(
                "a change to `{}` is under way ({})",
                moving_to.carrier,
                row.state()
            ),
        );
    }
    if row.active.carrier == target.as_str() && row.active.pins == *pins {
        block(
            blockers::ALREADY_ACTIVE,
            format!("`{target}` with these component versions is what the cluster runs"),
        );
    }
    let asked = Instant::now();
    store.ask_for_reports().await?;
    let replicas = loop {
        let replicas = store
            .live_replicas(LIVE, Some(asked.elapsed() + REPORT_POLL))
            .await?;
        if replicas.iter().all(|r| r.reported) || asked.elapsed() >= REPORT_WAIT {
            break replicas;
        }
        tokio::time::sleep(REPORT_POLL).await;
    };
    for replica in &replicas {
        let id = &replica.report.id;
        if !replica.reported {
            block(
                blockers::REPLICA_SILENT,
                format!(
                    "replica {id} did not refresh its report within {}s",
                    REPORT_WAIT.as_secs()
                ),
            );
            continue;
        }
        match replica.report.can_build.get(target.as_str()) {
            Some(verdict) if verdict.ok => {}
            Some(verdict) => block(
                blockers::REPLICA_CANNOT_BUILD,
                format!(
                    "replica {id} cannot build `{target}`: {}",
                    verdict.reason.as_deref().unwrap_or("no reason given")
                ),
            ),
            None => block(
                blockers::REPLICA_CANNOT_BUILD,
                format!("replica {id} did not say whether it can build `{target}`"),
            ),
        }
    }
    if !force {
        for worker in store.carrier_workers().await? {
            if worker.state == NodeState::Unhealthy && worker.report.demoted_reason.is_none() {
                continue;
            }
            let WorkerReport {
                node,
                cannot_follow,
                ..
            } = worker.report;
            if let Some(reason) = cannot_follow.get(target.as_str()) {
                block(
                    blockers::WORKER_CANNOT_FOLLOW,
                    format!("worker {node} cannot follow to `{target}`: {reason}"),
                );
            }
        }
    }
    Ok(found)
}
