//! Moves a tungstenite websocket's messages through a session's
//! [`Transport`] (the worker's dialled sessions; the frontend's axum
//! websockets have their own pump in the server).

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::{Transport, WEBSOCKET_BUFFER};

/// The websocket settings of a tunnel: 64 KiB buffers, one frame per message.
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(WEBSOCKET_BUFFER)
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_write_buffer_size(8 * WEBSOCKET_BUFFER)
        .max_message_size(Some(WEBSOCKET_BUFFER))
        .max_frame_size(Some(WEBSOCKET_BUFFER))
}

/// Runs until either end closes: incoming binary messages go to the
/// session, the session's messages go out.
pub async fn pump<S>(websocket: WebSocketStream<S>, transport: Transport)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Transport {
        incoming,
        mut outgoing,
    } = transport;
    let (mut sink, mut source) = websocket.split();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            // Feed what is already queued, flush once.
            let mut batch = vec![message];
            while let Ok(more) = outgoing.try_recv() {
                batch.push(more);
                if batch.len() >= 64 {
                    break;
                }
            }
            for message in batch {
                if sink.feed(Message::Binary(message)).await.is_err() {
                    return;
                }
            }
            if sink.flush().await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let reason = loop {
        match source.next().await {
            Some(Ok(Message::Binary(message))) => {
                if !incoming.message(message) {
                    break "the session has ended".to_string();
                }
            }
            Some(Ok(Message::Close(_))) | None => break "the peer closed the websocket".into(),
            Some(Ok(_)) => {}
            Some(Err(e)) => break format!("websocket error: {e}"),
        }
    };
    incoming.closed(&reason);
    let _ = writer.await;
}
