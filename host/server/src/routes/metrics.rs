//! Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use switchyard_runtime::admission::AdmissionPoint;

use crate::auth::{Caller, MetricsRead, Scope};
use crate::error::ApiError;
use crate::inference_metrics::escape;
use crate::state::AppState;

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
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if state.metrics_auth {
        Caller::authenticate(&state, &headers)
            .await?
            .require(MetricsRead::NAME)?;
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
    state.inference.render(&mut out);
    plugin_instances(&state, &mut out);
    cluster(&state, &mut out).await;
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
        let carrier = escape(&cluster.row.carrier);
        let _ = writeln!(out, "{name}{{carrier=\"{carrier}\"}} {connected}");
        let name = "switchyard_carrier_epoch";
        let _ = writeln!(
            out,
            "# HELP {name} The cluster carrier's epoch this replica runs.\n# TYPE {name} gauge"
        );
        let _ = writeln!(out, "{name} {}", cluster.row.epoch);
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
    for (replica, n) in state.routing.in_flight() {
        let _ = writeln!(out, "{name}{{replica=\"{}\"}} {n}", escape(&replica));
    }
}
