//! A [`Stream`] over any message transport that carries data, an end of
//! one direction and a close (the relay between replicas uses a websocket
//! this way): [`stream`] makes one from the transport's two halves,
//! [`serve`] pipes a local stream through them.

use bytes::Bytes;
use futures::{Sink, SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::stream::{Stream, StreamError, TransportEnds, WriteOp, channel_stream};

/// The largest data message.
const MAX_MESSAGE: usize = 64 * 1024;
/// How much may be read ahead of the consumer.
const READ_AHEAD: usize = 4 * 1024 * 1024;

/// One transport message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes of the stream.
    Data(Bytes),
    /// The sender's direction has ended.
    Fin,
    /// The transport ended (both directions).
    Closed,
}

/// A stream whose bytes travel as `incoming` and `outgoing` frames.
pub fn stream<I, O>(incoming: I, outgoing: O) -> Stream
where
    I: futures::Stream<Item = Frame> + Send + Unpin + 'static,
    O: Sink<Frame, Error = String> + Send + Unpin + 'static,
{
    let (stream, ends) = channel_stream(READ_AHEAD);
    let TransportEnds {
        chunks: chunks_tx,
        mut ops,
        credit: reader_credit,
    } = ends;
    let reader = tokio::spawn(async move {
        let mut incoming = incoming;
        while let Some(frame) = incoming.next().await {
            match frame {
                Frame::Data(data) => {
                    let n = data.len().min(READ_AHEAD) as u32;
                    let Ok(permit) = reader_credit.acquire_many(n).await else {
                        return;
                    };
                    permit.forget();
                    if chunks_tx.send(Ok(data)).is_err() {
                        return;
                    }
                }
                Frame::Fin => return,
                Frame::Closed => break,
            }
        }
        let _ = chunks_tx.send(Err(StreamError::Reset("the transport closed".into())));
    });
    tokio::spawn(async move {
        let mut outgoing = outgoing;
        while let Some(op) = ops.recv().await {
            match op {
                WriteOp::Data(data, done) => {
                    let mut result = Ok(());
                    for start in (0..data.len()).step_by(MAX_MESSAGE) {
                        let end = (start + MAX_MESSAGE).min(data.len());
                        if let Err(e) = outgoing.send(Frame::Data(data.slice(start..end))).await {
                            result = Err(StreamError::Reset(e));
                            break;
                        }
                    }
                    let failed = result.is_err();
                    let _ = done.send(result);
                    if failed {
                        return;
                    }
                }
                WriteOp::Finish => {
                    if outgoing.send(Frame::Fin).await.is_err() {
                        return;
                    }
                    // Close once the other direction has ended too.
                    let _ = reader.await;
                    let _ = outgoing.send(Frame::Closed).await;
                    return;
                }
                WriteOp::Reset => {
                    reader.abort();
                    let _ = outgoing.send(Frame::Closed).await;
                    return;
                }
            }
        }
    });
    stream
}

/// Pipes `stream` through a transport until both directions have ended.
pub async fn serve<I, O>(stream: Stream, incoming: I, outgoing: O)
where
    I: futures::Stream<Item = Frame> + Send + Unpin + 'static,
    O: Sink<Frame, Error = String> + Send + Unpin + 'static,
{
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    let (frames, mut to_send) = mpsc::channel::<Frame>(16);
    let sender = tokio::spawn(async move {
        let mut outgoing = outgoing;
        while let Some(frame) = to_send.recv().await {
            if outgoing.send(frame).await.is_err() {
                return;
            }
        }
        let _ = outgoing.send(Frame::Closed).await;
    });
    let local_to_remote = async move {
        loop {
            match reader.read().await {
                Some(Ok(data)) => {
                    if frames.send(Frame::Data(data)).await.is_err() {
                        return;
                    }
                }
                Some(Err(_)) => return,
                None => {
                    let _ = frames.send(Frame::Fin).await;
                    return;
                }
            }
        }
    };
    let remote_to_local = async move {
        let mut incoming = incoming;
        while let Some(frame) = incoming.next().await {
            match frame {
                Frame::Data(data) => {
                    if writer.write(data).await.is_err() {
                        return;
                    }
                }
                Frame::Fin => {
                    writer.finish();
                    return;
                }
                Frame::Closed => break,
            }
        }
        writer.reset();
    };
    tokio::join!(local_to_remote, remote_to_local);
    let _ = sender.await;
}
