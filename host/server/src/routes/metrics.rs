//! Prometheus text.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use switchyard_runtime::admission::AdmissionPoint;

use crate::state::AppState;

/// Plugin calls, denials, errors, traps, timeouts and latency; the generation each point serves.
#[utoipa::path(get, path = "/metrics", tag = "health", responses((status = 200, description = "Prometheus text exposition")))]
pub async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
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
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
