//! `GET /api/cluster/relay`: another replica asks this one, which holds a
//! worker's session, to open a stream on it (see `cluster::relay`).

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use switchyard_carrier::Refusal;
use switchyard_carrier::framed::{self, Frame};
use switchyard_carrier::streams::Lane;
use switchyard_carrier::tunnel::WEBSOCKET_BUFFER;

use crate::cluster::relay::{RELAY_HEADER, verdict};
use crate::error::{ApiError, ApiResult};
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
    Query(params): Query<RelayParams>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> ApiResult<Response> {
    let secret = state.store.relay_secret().await?;
    let given = headers
        .get(RELAY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !bool::from(given.ct_eq(secret.as_bytes())) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "relay requests come from replicas of this cluster",
        ));
    }
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
            let (mut sink, source) = socket.split();
            let answer = verdict(opened.as_ref().map(|_| ()));
            if sink.send(Message::Text(answer.into())).await.is_err() {
                return;
            }
            let Ok(stream) = opened else {
                let _ = sink.close().await;
                return;
            };
            let incoming = source.filter_map(|message| async move {
                match message {
                    Ok(Message::Binary(data)) => Some(Frame::Data(data)),
                    Ok(Message::Text(text)) if text.as_str() == "fin" => Some(Frame::Fin),
                    Ok(Message::Close(_)) | Err(_) => Some(Frame::Closed),
                    Ok(_) => None,
                }
            });
            let outgoing = futures::sink::unfold(sink, |mut sink, frame: Frame| async move {
                let message = match frame {
                    Frame::Data(data) => Message::Binary(data),
                    Frame::Fin => Message::Text("fin".into()),
                    Frame::Closed => Message::Close(None),
                };
                sink.send(message).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(sink)
            });
            framed::serve(stream, Box::pin(incoming), Box::pin(outgoing)).await;
        }))
}
