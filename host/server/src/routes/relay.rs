//! `GET /api/cluster/relay`: another replica asks this one, which holds a
//! worker's session, to open a stream on it (see `carriers::relay`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::SinkExt;
use serde::Deserialize;
use switchyard_carrier::Refusal;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::tunnel::WEBSOCKET_BUFFER;
use switchyard_carrier::tunnel::websocket;
use switchyard_carrier::{framed, handshake};

use crate::auth::require_replica;
use crate::carriers::axum_codec::axum_codec;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// How long a refused stream's early request is read before closing: it
/// is already on its way (one request), so this only ends askers that
/// neither finish nor close.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

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
    connection: crate::edge::ThisConnection,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> ApiResult<Response> {
    require_replica(
        &state.store,
        &headers,
        "relay requests come from replicas of this cluster",
    )
    .await?;
    connection.prove();
    let lane = Lane::parse(&params.lane)
        .ok_or_else(|| ApiError::invalid_request("lane must be 'inference' or 'bulk'"))?;
    let registry = state.carriers.as_ref().map(|c| c.sessions.clone());
    let federation = state.federation.clone();
    Ok(upgrade
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_message_size(WEBSOCKET_BUFFER)
        .on_upgrade(move |socket| async move {
            // Only a session held here: a relay never relays again.
            // A worker's session, or a federation link (keyed by the peer's id).
            let held = registry
                .and_then(|r| r.local(&params.node, lane))
                .or_else(|| federation.and_then(|f| f.links().session(&params.node, lane)));
            let opened = match held {
                Some(session) => session.open(&params.service).await,
                None => Err(Refusal::NotDelivered(format!(
                    "this replica no longer holds node {}'s {} session",
                    params.node, params.lane
                ))),
            };
            let mut socket = socket;
            let answer = handshake::answer_line(opened.as_ref().map(|_| ()));
            if socket.send(Message::Text(answer.into())).await.is_err() {
                return;
            }
            let Ok(stream) = opened else {
                let _ = socket.close().await;
                // The asker may have sent its request with the open: read it
                // to its end (bounded) first, for closing with it unread
                // resets the connection and the asker could lose the
                // refusal (the direct streams drain a refused stream alike).
                let _ = tokio::time::timeout(DRAIN_LIMIT, async {
                    while let Some(Ok(_)) = socket.recv().await {}
                })
                .await;
                return;
            };
            let (incoming, outgoing) = websocket::frames(socket, axum_codec());
            framed::serve(stream, incoming, outgoing).await;
        }))
}
