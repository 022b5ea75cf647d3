//! A tunnel session over a plain TCP connection (the `nats` set's dialled
//! sessions): each message is a big-endian `u32` length and that many
//! bytes. A length over [`MAX_MESSAGE`] ends the connection, as an
//! oversized websocket message does.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};

use super::{Outbound, Transport, WEBSOCKET_BUFFER};

/// The largest message: the tunnel's frames are at most this big, as on a
/// websocket.
pub const MAX_MESSAGE: usize = WEBSOCKET_BUFFER;
/// The bytes in front of each message.
const LENGTH_BYTES: usize = 4;

/// Runs until either end closes: messages read from `read` go to the
/// session, the session's messages are written to `write`.
pub async fn pump<R, W>(read: R, write: W, transport: Transport)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let Transport {
        incoming,
        mut outgoing,
    } = transport;
    let writer = tokio::spawn(async move {
        let mut write = BufWriter::with_capacity(MAX_MESSAGE + LENGTH_BYTES, write);
        while let Some(message) = outgoing.recv().await {
            // Write what is already queued, flush once.
            if write_message(&mut write, &message).await.is_err() {
                return;
            }
            while let Ok(more) = outgoing.try_recv() {
                if write_message(&mut write, &more).await.is_err() {
                    return;
                }
            }
            if write.flush().await.is_err() {
                return;
            }
        }
        let _ = write.shutdown().await;
    });
    let mut read = read;
    let reason = loop {
        match read_message(&mut read).await {
            Ok(Some(message)) => {
                if !incoming.message(message) {
                    break "the session has ended".to_string();
                }
            }
            Ok(None) => break "the peer closed the connection".to_string(),
            Err(e) => break format!("connection error: {e}"),
        }
    };
    incoming.closed(&reason);
    let _ = writer.await;
}

async fn write_message<W: AsyncWrite + Unpin>(
    write: &mut W,
    message: &Outbound,
) -> std::io::Result<()> {
    let length = u32::try_from(message.len())
        .ok()
        .filter(|&n| n as usize <= MAX_MESSAGE)
        .ok_or_else(|| std::io::Error::other("a session message over the limit"))?;
    write.write_all(&length.to_be_bytes()).await?;
    write.write_all(&message.head).await?;
    write.write_all(&message.body).await
}

/// One message; `None` at a clean end (between messages).
pub async fn read_message<R: AsyncRead + Unpin>(read: &mut R) -> std::io::Result<Option<Bytes>> {
    let mut length = [0u8; LENGTH_BYTES];
    match read.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_be_bytes(length) as usize;
    if length > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a message of {length} bytes, over the {MAX_MESSAGE} limit"),
        ));
    }
    // Read into spare capacity: zeroing up to 64 KiB first, only to
    // overwrite it, was a pass over every message for nothing.
    let mut message = BytesMut::with_capacity(length);
    let mut rest = (&mut *read).take(length as u64);
    while message.len() < length {
        if rest.read_buf(&mut message).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(Some(message.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(message: &[u8]) -> Outbound {
        Outbound {
            head: Bytes::copy_from_slice(message),
            body: Bytes::new(),
        }
    }

    #[tokio::test]
    async fn messages_round_trip_and_a_long_one_ends_the_connection() {
        let (mut ours, mut theirs) = tokio::io::duplex(4 * MAX_MESSAGE);
        for message in [&b"hello"[..], b"", &vec![7u8; MAX_MESSAGE]] {
            write_message(&mut ours, &whole(message)).await.unwrap();
            let read = read_message(&mut theirs).await.unwrap().unwrap();
            assert_eq!(&read[..], message);
        }
        assert!(
            write_message(&mut ours, &whole(&vec![0u8; MAX_MESSAGE + 1]))
                .await
                .is_err()
        );

        let too_long = u32::try_from(MAX_MESSAGE + 1).unwrap().to_be_bytes();
        ours.write_all(&too_long).await.unwrap();
        let error = read_message(&mut theirs).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("over the"), "{error}");
    }

    #[tokio::test]
    async fn an_end_between_messages_is_clean_and_one_inside_is_not() {
        let (mut ours, mut theirs) = tokio::io::duplex(64);
        let split = Outbound {
            head: Bytes::from_static(b"wh"),
            body: Bytes::from_static(b"ole"),
        };
        write_message(&mut ours, &split).await.unwrap();
        ours.write_all(&[0, 0, 0, 9, b'c', b'u']).await.unwrap();
        drop(ours);
        assert_eq!(
            read_message(&mut theirs).await.unwrap().as_deref(),
            Some(&b"whole"[..])
        );
        let cut = read_message(&mut theirs).await.unwrap_err();
        assert_eq!(cut.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(read_message(&mut theirs).await.unwrap().is_none());
    }
}
