//! The tunnel's own websocket framing against an independent
//! implementation (tungstenite), on real loopback sockets, in both roles:
//! its handshake, masked and unmasked frames, a session message written
//! as header and body apart, pings and the close.

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use switchyard_carrier::tunnel::Outbound;
use switchyard_carrier::tunnel::websocket::frame::Role;
use switchyard_carrier::tunnel::websocket::frames::Message;
use switchyard_carrier::tunnel::websocket::handshake::{self, DialError};
use switchyard_carrier::tunnel::websocket::wire::{Reader, Writer};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message as TMessage;

/// A session message: a 5-byte header and a body of `len` bytes.
fn message(len: usize) -> Outbound {
    Outbound {
        head: Bytes::from_static(b"\x00\x00\x00\x07\x03"),
        body: (0..len)
            .map(|i| (i % 253) as u8)
            .collect::<Vec<u8>>()
            .into(),
    }
}

#[tokio::test]
async fn our_server_and_a_tungstenite_client_agree() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "ws://{}/api/cluster/connect",
        listener.local_addr().unwrap()
    );
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let read_ahead = handshake::accept(&mut socket).await.unwrap();
        let (read, write) = socket.into_split();
        let (mut reader, mut writer) = (
            Reader::new(read, Role::Server, read_ahead),
            Writer::new(write, Role::Server),
        );
        // What the client sent comes back as our session messages.
        let Some(Message::Binary(first)) = reader.next().await.unwrap() else {
            panic!("a binary message first")
        };
        assert_eq!(first.len(), 60_000);
        writer
            .write(&[message(60_000), message(0), message(200)])
            .await
            .unwrap();
        let Some(Message::Ping(payload)) = reader.next().await.unwrap() else {
            panic!("a ping second")
        };
        writer.pong(&payload).await.unwrap();
        assert_eq!(reader.next().await.unwrap(), Some(Message::Close));
        writer.close().await.unwrap();
    });
    let (mut client, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    client
        .send(TMessage::Binary(vec![9u8; 60_000].into()))
        .await
        .unwrap();
    for expected in [message(60_000), message(0), message(200)] {
        let Some(Ok(TMessage::Binary(data))) = client.next().await else {
            panic!("binary messages back")
        };
        assert_eq!(data, expected.joined());
    }
    client
        .send(TMessage::Ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    let Some(Ok(TMessage::Pong(payload))) = client.next().await else {
        panic!("the pong")
    };
    assert_eq!(&payload[..], b"are you there");
    client.close(None).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn our_client_and_a_tungstenite_server_agree() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    // The server echoes binary messages until the close, and pings once.
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut server = tokio_tungstenite::accept_async(socket).await.unwrap();
        server
            .send(TMessage::Ping(Bytes::from_static(b"p")))
            .await
            .unwrap();
        let mut echoed = 0;
        while let Some(Ok(received)) = server.next().await {
            match received {
                TMessage::Binary(data) => {
                    server.send(TMessage::Binary(data)).await.unwrap();
                    echoed += 1;
                }
                TMessage::Close(_) => break,
                _ => {}
            }
        }
        echoed
    });
    let (socket, read_ahead) = handshake::dial(&url, &[("x-switchyard-node", "node_1")])
        .await
        .unwrap();
    let (read, write) = socket.into_split();
    let (mut reader, mut writer) = (
        Reader::new(read, Role::Client, read_ahead),
        Writer::new(write, Role::Client),
    );
    // Masked by us, checked and unmasked by tungstenite, echoed unmasked.
    let sent = [message(65_000), message(1), message(126)];
    writer.write(&sent).await.unwrap();
    assert!(matches!(
        reader.next().await.unwrap(),
        Some(Message::Ping(_))
    ));
    for expected in &sent {
        assert_eq!(
            reader.next().await.unwrap(),
            Some(Message::Binary(expected.clone().joined()))
        );
    }
    writer.close().await.unwrap();
    assert_eq!(server.await.unwrap(), 3);
}

#[tokio::test]
async fn a_dial_answered_without_an_upgrade_names_the_status() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // Not a websocket request's answer: a plain 401.
        let mut request = BytesMut::with_capacity(1024);
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            socket.read_buf(&mut request).await.unwrap();
        }
        socket
            .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
    });
    assert!(matches!(
        handshake::dial(&url, &[]).await,
        Err(DialError::Answered(401))
    ));
    assert!(matches!(
        handshake::dial("wss://127.0.0.1:1/", &[]).await,
        Err(DialError::Failed(_))
    ));
    assert!(matches!(
        handshake::dial("ws://127.0.0.1:1/", &[("bad", "a\r\nb")]).await,
        Err(DialError::Failed(_))
    ));
}
