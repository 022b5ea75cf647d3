//! axum's websocket messages as the carrier crate's [`Codec`]: the relay's
//! and the federation links' endpoints still upgrade through axum (their
//! handshakes exchange text messages first), while the workers' sessions
//! frame their own websocket (`upgrade.rs`).

use axum::extract::ws::Message;
use switchyard_carrier::tunnel::websocket::{Codec, Received};

/// axum's websocket messages.
pub fn axum_codec() -> Codec<Message> {
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
