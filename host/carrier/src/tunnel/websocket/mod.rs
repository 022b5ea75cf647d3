//! Websockets for the tunnel and the relay. A worker's sessions with its
//! frontend run on this crate's own framing ([`wire`], with [`handshake`]
//! and [`frame`]), written for their throughput. The federation's links
//! and the relay, whose handshakes exchange messages first, use a library
//! (tungstenite, or axum at a frontend's endpoint): a [`Codec`] says how to
//! build and read its messages; [`pump`] moves a session's messages over
//! it, [`frames`] turns it into [`Frame`]s for a relayed stream.

pub mod frame;
pub mod frames;
pub mod handshake;
pub mod wire;

use std::fmt::Display;

use bytes::Bytes;
use futures::{Sink, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::{Transport, WEBSOCKET_BUFFER};
use crate::framed::Frame;

/// The websocket settings of a tunnel: 64 KiB buffers, one frame per message.
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(WEBSOCKET_BUFFER)
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_write_buffer_size(8 * WEBSOCKET_BUFFER)
        .max_message_size(Some(WEBSOCKET_BUFFER))
        .max_frame_size(Some(WEBSOCKET_BUFFER))
}

/// A received message, as the tunnel sees it.
#[derive(Debug)]
pub enum Received {
    /// Binary data.
    Binary(Bytes),
    /// Text.
    Text(String),
    /// The peer closed.
    Closed,
    /// Ping, pong and the like.
    Other,
}

/// How one websocket library's message type is built and read.
pub struct Codec<M> {
    /// A binary message.
    pub binary: fn(Bytes) -> M,
    /// A text message.
    pub text: fn(String) -> M,
    /// A close message.
    pub close: fn() -> M,
    /// What a received message is.
    pub read: fn(M) -> Received,
}

/// tungstenite's messages.
pub fn tungstenite() -> Codec<Message> {
    Codec {
        binary: Message::Binary,
        text: |text| Message::Text(text.into()),
        close: || Message::Close(None),
        read: |message| match message {
            Message::Binary(data) => Received::Binary(data),
            Message::Text(text) => Received::Text(text.to_string()),
            Message::Close(_) => Received::Closed,
            _ => Received::Other,
        },
    }
}

/// Runs until either end closes: incoming binary messages go to the
/// session, the session's messages go out.
pub async fn pump<S>(websocket: WebSocketStream<S>, transport: Transport)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    pump_with(websocket, transport, tungstenite()).await;
}

/// [`pump`] for any websocket library.
pub async fn pump_with<W, M, E>(websocket: W, transport: Transport, codec: Codec<M>)
where
    W: Sink<M, Error = E> + futures::Stream<Item = Result<M, E>> + Send + 'static,
    M: Send + 'static,
    E: Display + Send + 'static,
{
    let Transport {
        incoming,
        mut outgoing,
    } = transport;
    let (mut sink, mut source) = websocket.split();
    let binary = codec.binary;
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            // Feed what is already queued, flush once.
            if sink.feed(binary(message.joined())).await.is_err() {
                return;
            }
            while let Ok(more) = outgoing.try_recv() {
                if sink.feed(binary(more.joined())).await.is_err() {
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
            Some(Ok(message)) => match (codec.read)(message) {
                Received::Binary(message) => {
                    if !incoming.message(message) {
                        break "the session has ended".to_string();
                    }
                }
                Received::Closed => break "the peer closed the websocket".into(),
                Received::Text(_) | Received::Other => {}
            },
            None => break "the peer closed the websocket".into(),
            Some(Err(e)) => break format!("websocket error: {e}"),
        }
    };
    incoming.closed(&reason);
    let _ = writer.await;
}

/// A websocket as [`Frame`]s: binary messages carry data, the text message
/// `fin` ends one direction, a close ends both.
pub fn frames<W, M, E>(
    websocket: W,
    codec: Codec<M>,
) -> (
    impl futures::Stream<Item = Frame> + Send + Unpin + 'static,
    impl Sink<Frame, Error = String> + Send + Unpin + 'static,
)
where
    W: Sink<M, Error = E> + futures::Stream<Item = Result<M, E>> + Send + 'static,
    M: Send + 'static,
    E: Display + Send + 'static,
{
    let (sink, source) = websocket.split();
    let read = codec.read;
    let incoming = source.filter_map(move |message| {
        let frame = match message.map(read) {
            Ok(Received::Binary(data)) => Some(Frame::Data(data)),
            Ok(Received::Text(text)) if text == "fin" => Some(Frame::Fin),
            Ok(Received::Closed) | Err(_) => Some(Frame::Closed),
            Ok(_) => None,
        };
        std::future::ready(frame)
    });
    let (binary, text, close) = (codec.binary, codec.text, codec.close);
    let outgoing = futures::sink::unfold(sink, move |mut sink, frame: Frame| async move {
        let message = match frame {
            Frame::Data(data) => binary(data),
            Frame::Fin => text("fin".into()),
            Frame::Closed => close(),
        };
        sink.send(message).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(sink)
    });
    (Box::pin(incoming), Box::pin(outgoing))
}
