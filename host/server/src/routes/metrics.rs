//! Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use switchyard_runtime::admission::AdmissionPoint;

use crate::auth::{MetricsRead, Scope};
use crate::error::ApiError;
use crate::state::AppState;
use switchyard_inference::metrics::escape;

/// Plugin calls, denials, errors, traps, timeouts and latency; the generation each point serves;
/// `/v1` requests and head latency; the carrier, nodes and replicas by state.
///
/// Anonymous by default; with `--metrics-auth` a key with `metrics:read`
/// (or `admin`) is needed. The `model` labels are the served models and
/// `other`, never a string a client sent.
#[utoipa::path(get, path = "/metrics", tag = "health", responses(
    (status = 200, description = "Prometheus text exposition"),
    (status = 401, description = "`unauthorized`: with `--metrics-auth`, no or an unknown key"),
    (status = 403, description = "`forbidden`: with `--metrics-auth`, a key without `metrics:read`"),
))]
pub async fn metrics(
    State(state): State<Arc<AppState>>,
    connection: crate::edge::ThisConnection,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if state.metrics_auth {
        crate::auth::authenticate(&state, &headers)
            .await?
            .require(MetricsRead::NAME)?;
        connection.prove();
    }
    let mut out = String::new();
    state.runtime.metrics().render_prometheus(&mut out);
    let name = "switchyard_admission_generation";
    let _ = writeln!(
        out,
        "# HELP {name} The admission generation this replica serves.\n# TYPE {name} gauge"
    );
    for point in AdmissionPoint::ALL {
        let generation = state.admission.chain(point).generation;
        let _ = writeln!(out, "{name}{{point=\"{point}\"}} {generation}");
    }
    let name = "switchyard_admission_generation_failed";
    let _ = writeln!(
        out,
        "# HELP {name} 1 when a newer generation failed to build here.\n# TYPE {name} gauge"
    );
    for point in AdmissionPoint::ALL {
        let failed = u8::from(state.admission.failure(point).is_some());
        let _ = writeln!(out, "{name}{{point=\"{point}\"}} {failed}");
    }
    state.admission.recorder().render(&mut out);
    state.inference.metrics.render(&mut out);
    if let Some(meter) = &state.inference.usage {
        meter.render(&mut out);
    }
    plugin_instances(&state, &mut out);
    cluster(&state, &mut out).await;
    if let Some(federation) = &state.federation {
        federation.render_metrics(&mut out).await;
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out))
}

/// The cluster as this replica sees it: the carrier, nodes and replicas by
/// state (from the database; left out when it does not answer), and the
/// requests this replica has in flight per replica.
/// Live plugin instances per runtime: the policies' (warm pools and calls
/// in flight) and the carriers' (carriers and worker sessions), which have
/// limits of their own.
fn plugin_instances(state: &AppState, out: &mut String) {
    let name = "switchyard_plugin_instances";
    let _ = writeln!(
        out,
        "# HELP {name} Plugin instances alive, by runtime.\n# TYPE {name} gauge"
    );
    let policies = state.runtime.live_instances();
    let _ = writeln!(out, "{name}{{runtime=\"policies\"}} {policies}");
    if let Some(cluster) = &state.carriers {
        let carriers = cluster.runtime.live_instances();
        let _ = writeln!(out, "{name}{{runtime=\"carriers\"}} {carriers}");
    }
}

async fn cluster(state: &AppState, out: &mut String) {
    if let Some(cluster) = &state.carriers {
        let name = "switchyard_carrier_connected";
        let _ = writeln!(
            out,
            "# HELP {name} 1 while this replica's fan-out carrier is connected.\n# TYPE {name} gauge"
        );
        let connected = u8::from(cluster.fanout.active().is_ready());
        let view = cluster.view();
        let carrier = escape(&view.row.active.carrier);
        let _ = writeln!(out, "{name}{{carrier=\"{carrier}\"}} {connected}");
        switch_metrics(state, cluster, out).await;
    }
    if let Ok(nodes) = state.store.nodes().await {
        let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
        for node in nodes {
            *by_state.entry(node.state.as_str()).or_default() += 1;
        }
        let name = "switchyard_nodes";
        let _ = writeln!(out, "# HELP {name} Nodes by state.\n# TYPE {name} gauge");
        for (node_state, n) in by_state {
            let _ = writeln!(out, "{name}{{state=\"{}\"}} {n}", escape(node_state));
        }
    }
    if let (Ok(deployments), Ok(replicas)) = (
        state.store.deployments().await,
        state.store.replicas().await,
    ) {
        let names: BTreeMap<&str, &str> = deployments
            .iter()
            .map(|d| (d.id.as_str(), d.served_model_name.as_str()))
            .collect();
        let mut by_state: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for replica in &replicas {
            let model = names
                .get(replica.deployment_id.as_str())
                .copied()
                .unwrap_or("");
            *by_state.entry((model, replica.state.as_str())).or_default() += 1;
        }
        let name = "switchyard_replicas";
        let _ = writeln!(
            out,
            "# HELP {name} Replicas by served model and state.\n# TYPE {name} gauge"
        );
        for ((model, replica_state), n) in by_state {
            let _ = writeln!(
                out,
                "{name}{{model=\"{}\",state=\"{}\"}} {n}",
                escape(model),
                escape(replica_state)
            );
        }
    }
    let name = "switchyard_replica_in_flight";
    let _ = writeln!(
        out,
        "# HELP {name} Requests this replica of the frontend has in flight, by engine replica.\n# TYPE {name} gauge"
    );
    for (replica, n) in state.inference.routing.in_flight() {
        let _ = writeln!(out, "{name}{{replica=\"{}\"}} {n}", escape(&replica));
    }
}

/// The carrier switch: the row as this replica last read it, each live
/// replica's readiness, the drain's time left, changes by outcome and how
/// long their phases took.
async fn switch_metrics(
    state: &AppState,
    cluster: &switchyard_carrier_set::Carriers,
    out: &mut String,
) {
    row_metrics(&cluster.view().row, out);
    if let Ok(replicas) = state
        .store
        .live_replicas(switchyard_carrier_set::LIVE, None)
        .await
    {
        gauge(
            out,
            "switchyard_carrier_replica_epoch",
            "The row epoch each live replica acted on last.",
        );
        for replica in replicas {
            let _ = writeln!(
                out,
                "switchyard_carrier_replica_epoch{{replica=\"{}\"}} {}",
                escape(&replica.report.id),
                replica.report.epoch
            );
        }
    }
    if let Ok(counts) = state.store.carrier_change_counts().await {
        let name = "switchyard_carrier_changes_total";
        let _ = writeln!(
            out,
            "# HELP {name} Carrier changes by outcome.\n# TYPE {name} counter"
        );
        for outcome in ["settled", "aborted"] {
            let n = counts.get(outcome).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {n}");
        }
    }
    if let Ok(changes) = state.store.carrier_changes(1000).await {
        let name = "switchyard_carrier_phase_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} How long carrier changes took, request to commit (prepare) and commit to settled (drain).\n# TYPE {name} histogram"
        );
        const BOUNDS: [f64; 9] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
        for (phase, values) in [
            (
                "prepare",
                changes
                    .iter()
                    .filter_map(|c| c.prepare_ms)
                    .collect::<Vec<_>>(),
            ),
            (
                "drain",
                changes
                    .iter()
                    .filter_map(|c| c.drain_ms)
                    .collect::<Vec<_>>(),
            ),
        ] {
            for bound in BOUNDS {
                let n = values.iter().filter(|ms| **ms / 1000.0 <= bound).count();
                let _ = writeln!(out, "{name}_bucket{{phase=\"{phase}\",le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{phase=\"{phase}\",le=\"+Inf\"}} {}",
                values.len()
            );
            let sum: f64 = values.iter().sum::<f64>() / 1000.0;
            let _ = writeln!(out, "{name}_sum{{phase=\"{phase}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{phase=\"{phase}\"}} {}", values.len());
        }
    }
}

/// The `# HELP` and `# TYPE` lines of a gauge.
fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// The carrier row as this replica last read it: epoch, state, the active
/// set's components and the drain's time left.
fn row_metrics(row: &switchyard_store::cluster::ClusterCarrier, out: &mut String) {
    gauge(
        out,
        "switchyard_carrier_epoch",
        "The cluster carrier row's epoch, as this replica last read it.",
    );
    let _ = writeln!(out, "switchyard_carrier_epoch {}", row.epoch);
    gauge(
        out,
        "switchyard_carrier_state",
        "1 for the state the carrier row is in (stable, prepare, commit).",
    );
    for s in switchyard_protocol::state::CarrierRowState::ALL {
        let _ = writeln!(
            out,
            "switchyard_carrier_state{{state=\"{}\"}} {}",
            s.as_str(),
            u8::from(*s == row.state())
        );
    }
    gauge(
        out,
        "switchyard_carrier_active",
        "1 per component of the active carrier set, with its version.",
    );
    for (plugin, pin) in &row.active.pins {
        let _ = writeln!(
            out,
            "switchyard_carrier_active{{set=\"{}\",plugin=\"{}\",version=\"{}\"}} 1",
            escape(&row.active.carrier),
            escape(plugin),
            escape(&pin.version)
        );
    }
    gauge(
        out,
        "switchyard_carrier_drain_left_seconds",
        "How long the old set may still drain (0 unless a change is in commit).",
    );
    let left = match row.state() {
        switchyard_protocol::state::CarrierRowState::Commit => {
            row.deadline_in_ms.unwrap_or(0).max(0)
        }
        _ => 0,
    };
    let _ = writeln!(
        out,
        "switchyard_carrier_drain_left_seconds {}",
        left as f64 / 1000.0
    );
}
