//! Projections of the jobs this cluster made on peers, refreshed while the
//! link to their owner is up: by the replica holding the link (one per
//! cluster), every few seconds, and so at once after a link returns.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::stream_seam::Lane;
use switchyard_protocol::batch::BatchList;
use switchyard_protocol::jobs::{JobAction, MAX_REFRESH};
use tokio::sync::watch;

use crate::state::AppState;

/// How often projections of jobs not ended are refreshed.
const EVERY: Duration = Duration::from_secs(2);

/// Refreshes projections until `stop`.
pub async fn run(state: Arc<AppState>, mut stop: watch::Receiver<bool>) {
    let Some(federation) = state.federation.clone() else {
        return;
    };
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
        let peers = match federation.peers().await {
            Ok(peers) => peers,
            Err(_) => continue,
        };
        for peer in peers {
            if federation
                .links()
                .session(&peer.id, Lane::Inference)
                .is_none()
            {
                continue;
            }
            if let Err(e) = refresh(&state, &federation, &peer.id).await {
                tracing::debug!(peer = %peer.label, error = %e, "projections not refreshed");
            }
        }
    }
}

/// Asks the owner `peer_id` about its jobs this cluster projects.
async fn refresh(
    state: &AppState,
    federation: &switchyard_federation::Federation,
    peer_id: &str,
) -> Result<(), String> {
    let ids = state
        .store
        .active_projections(peer_id, MAX_REFRESH as i64)
        .await
        .map_err(|e| e.to_string())?;
    if ids.is_empty() {
        return Ok(());
    }
    let answer = federation
        .job_call(peer_id, JobAction::Refresh { ids }, Bytes::new())
        .await
        .map_err(|e| e.to_string())?;
    let list: BatchList = super::forward::read_json(answer)
        .await
        .map_err(|e| format!("{e:?}"))?;
    for batch in &list.data {
        state
            .store
            .put_projection(peer_id, batch, None)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
