//! `GET /api/cluster/relay`: another replica asks this one, which holds a
//! worker's session, to open a stream on it (see `cluster::relay`).

use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::SinkExt;
use serde::Deserialize;
use switchyard_carrier::Refusal;
use switchyard_carrier::framed;
use switchyard_carrier::streams::Lane;
use switchyard_carrier::tunnel::WEBSOCKET_BUFFER;
use switchyard_carrier::tunnel::websocket;

use crate::cluster::relay::{require_replica, verdict};
use crate::cluster::session::axum_codec;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// The stream the asking replica wants.
#[derive(Debug, Deserialize)]
pub struct RelayParams {
    node: String,
    lane: String,
    service: String,
}

/// Opens the stream on the session held here and pipes it over the
/// websocket. Only replicas of this cluster (holding its relay secret) may ask.
pub async fn relay(
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<RelayParams>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> ApiResult<Response> {
    require_replica(
        &state.store,
        &headers,
        "relay requests come from replicas of this cluster",
    )
    .await?;
    let lane = Lane::parse(&params.lane)
        .ok_or_else(|| ApiError::invalid_request("lane must be 'inference' or 'bulk'"))?;
    let registry = state
        .cluster
        .as_ref()
        .and_then(|c| c.tunnel.as_ref())
        .map(|(registry, _)| registry.clone());
    Ok(upgrade
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_message_size(WEBSOCKET_BUFFER)
        .on_upgrade(move |socket| async move {
            // Only a session held here: a relay never relays again.
            let opened = match registry.and_then(|r| r.local(&params.node, lane)) {
                Some(session) => session.open(&params.service).await,
                None => Err(Refusal::NotDelivered(format!(
                    "this replica no longer holds node {}'s {} session",
                    params.node, params.lane
                ))),
            };
            let mut socket = socket;
            let answer = verdict(opened.as_ref().map(|_| ()));
            if socket.send(Message::Text(answer.into())).await.is_err() {
                return;
            }
            let Ok(stream) = opened else {
                let _ = socket.close().await;
                return;
            };
            let (incoming, outgoing) = websocket::frames(socket, axum_codec());
            framed::serve(stream, incoming, outgoing).await;
        }))
}
