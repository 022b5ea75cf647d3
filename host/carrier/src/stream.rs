//! [`Stream`]: an ordered, half-closable byte stream to a service on a
//! worker (the streams seam). The same type whatever carries it: a tunnel
//! session's stream, a relay through another replica, or a TCP connection
//! dialled to the worker's address.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Why a read or write failed after the stream was open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The stream was reset (by either side, or the session ended).
    #[error("stream reset: {0}")]
    Reset(String),
    /// This side already finished writing.
    #[error("the stream is finished on this side")]
    Finished,
}

/// One open stream: read what the worker sends, write what it reads.
#[derive(Debug)]
pub struct Stream {
    /// The incoming direction.
    pub reader: StreamReader,
    /// The outgoing direction.
    pub writer: StreamWriter,
}

/// What a transport does with the outgoing direction.
pub(crate) trait WriteSink: Send + Sync {
    /// Sends `data`; `done` answers once the transport took all of it.
    fn write(&self, data: Bytes, done: oneshot::Sender<Result<(), StreamError>>);
    /// Half-close after what was written.
    fn finish(&self);
    /// Abandons both directions.
    fn reset(&self);
}

/// Reports bytes the reader took, so the transport can return credit.
pub(crate) trait ConsumeSink: Send + Sync {
    fn consumed(&self, n: usize);
    /// The reader was dropped before the end: the peer's sending is
    /// pointless (a client went away), so the transport may reset the stream.
    fn abandoned(&self) {}
}

/// Chunks arrive on a channel: an error means reset, the end means the peer finished.
pub(crate) type Chunks = mpsc::UnboundedReceiver<Result<Bytes, StreamError>>;

/// Credit is returned in batches of this size, or earlier when the reader
/// would wait.
const CONSUME_BATCH: usize = 256 * 1024;

/// The incoming direction of a [`Stream`].
pub struct StreamReader {
    chunks: Chunks,
    consumer: Option<Arc<dyn ConsumeSink>>,
    unreported: usize,
    ended: bool,
}

impl std::fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader").finish_non_exhaustive()
    }
}

impl StreamReader {
    pub(crate) fn new(chunks: Chunks, consumer: Option<Arc<dyn ConsumeSink>>) -> Self {
        Self {
            chunks,
            consumer,
            unreported: 0,
            ended: false,
        }
    }

    /// The next chunk, `None` once the peer finished, an error if the
    /// stream was reset.
    pub async fn read(&mut self) -> Option<Result<Bytes, StreamError>> {
        let next = match self.chunks.try_recv() {
            Ok(next) => Some(next),
            Err(mpsc::error::TryRecvError::Empty) => {
                // About to wait: return the credit taken so far first, or
                // the peer could wait for it too.
                self.report();
                self.chunks.recv().await
            }
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        };
        match &next {
            Some(Ok(chunk)) => {
                self.unreported += chunk.len();
                if self.unreported >= CONSUME_BATCH {
                    self.report();
                }
            }
            Some(Err(_)) | None => self.ended = true,
        }
        next
    }

    /// Reads to the end (at most `limit` bytes).
    pub async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, StreamError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.read().await {
            let chunk = chunk?;
            if all.len() + chunk.len() > limit {
                return Err(StreamError::Reset(format!(
                    "more than {limit} bytes arrived"
                )));
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }

    /// The first line (without its newline, at most `limit` bytes) and what
    /// followed it in the same chunk: a stream's request or answer head.
    pub async fn read_line(&mut self, limit: usize) -> Result<(Vec<u8>, Bytes), StreamError> {
        let mut line = Vec::new();
        while let Some(chunk) = self.read().await {
            let chunk = chunk?;
            if let Some(end) = chunk.iter().position(|b| *b == b'\n') {
                line.extend_from_slice(&chunk[..end]);
                return Ok((line, chunk.slice(end + 1..)));
            }
            line.extend_from_slice(&chunk);
            if line.len() > limit {
                return Err(StreamError::Reset(format!(
                    "the first line is longer than {limit} bytes"
                )));
            }
        }
        Err(StreamError::Reset(
            "the stream ended before its first line".into(),
        ))
    }

    fn report(&mut self) {
        if self.unreported > 0 {
            if let Some(consumer) = &self.consumer {
                consumer.consumed(self.unreported);
            }
            self.unreported = 0;
        }
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        self.report();
        if !self.ended
            && let Some(consumer) = &self.consumer
        {
            consumer.abandoned();
        }
    }
}

/// The outgoing direction of a [`Stream`]. Dropping it finishes the
/// direction (half-close).
pub struct StreamWriter {
    sink: Arc<dyn WriteSink>,
    finished: bool,
}

impl std::fmt::Debug for StreamWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamWriter")
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl StreamWriter {
    pub(crate) fn new(sink: Arc<dyn WriteSink>) -> Self {
        Self {
            sink,
            finished: false,
        }
    }

    /// Writes `data`; returns once the transport took it (flow control
    /// makes this wait while the peer is slow).
    pub async fn write(&mut self, data: Bytes) -> Result<(), StreamError> {
        if self.finished {
            return Err(StreamError::Finished);
        }
        if data.is_empty() {
            return Ok(());
        }
        let (done, taken) = oneshot::channel();
        self.sink.write(data, done);
        taken
            .await
            .unwrap_or_else(|_| Err(StreamError::Reset("the transport has ended".into())))
    }

    /// For a writer whose finish the transport already has: dropping it
    /// sends nothing.
    pub(crate) fn finished_already(mut self) {
        self.finished = true;
    }

    /// Half-close: the peer reads to the end; its direction goes on.
    pub fn finish(mut self) {
        self.finished = true;
        self.sink.finish();
    }

    /// Abandons both directions.
    pub fn reset(mut self) {
        self.finished = true;
        self.sink.reset();
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        if !self.finished {
            self.sink.finish();
        }
    }
}

/// What a transport task hears from the writer of a [`channel_stream`].
pub(crate) enum WriteOp {
    /// Bytes to send; answer once the transport took them.
    Data(Bytes, oneshot::Sender<Result<(), StreamError>>),
    /// Half-close after what was written.
    Finish,
    /// Abandon both directions.
    Reset,
}

/// The transport's side of a [`channel_stream`].
pub(crate) struct TransportEnds {
    /// Where incoming chunks go (an error resets the reader; dropping it ends the stream).
    pub chunks: mpsc::UnboundedSender<Result<Bytes, StreamError>>,
    /// The writer's operations, in order.
    pub ops: mpsc::UnboundedReceiver<WriteOp>,
    /// Bytes the transport may read ahead of the consumer: acquire before
    /// handing a chunk over; the reader returns them as it consumes.
    pub credit: Arc<Semaphore>,
}

/// A stream served by a transport task (a TCP connection, a relay
/// websocket) through channels, reading at most `read_ahead` bytes ahead.
pub(crate) fn channel_stream(read_ahead: usize) -> (Stream, TransportEnds) {
    let (chunks_tx, chunks) = mpsc::unbounded_channel();
    let (ops_tx, ops) = mpsc::unbounded_channel();
    let credit = Arc::new(Semaphore::new(read_ahead));
    let stream = Stream {
        reader: StreamReader::new(chunks, Some(Arc::new(Credit(credit.clone())))),
        writer: StreamWriter::new(Arc::new(Ops(ops_tx))),
    };
    (
        stream,
        TransportEnds {
            chunks: chunks_tx,
            ops,
            credit,
        },
    )
}

struct Credit(Arc<Semaphore>);

impl ConsumeSink for Credit {
    fn consumed(&self, n: usize) {
        self.0.add_permits(n);
    }
}

struct Ops(mpsc::UnboundedSender<WriteOp>);

impl WriteSink for Ops {
    fn write(&self, data: Bytes, done: oneshot::Sender<Result<(), StreamError>>) {
        if let Err(mpsc::error::SendError(WriteOp::Data(_, done))) =
            self.0.send(WriteOp::Data(data, done))
        {
            let _ = done.send(Err(StreamError::Reset("the transport has ended".into())));
        }
    }

    fn finish(&self) {
        let _ = self.0.send(WriteOp::Finish);
    }

    fn reset(&self) {
        let _ = self.0.send(WriteOp::Reset);
    }
}
