//! Streams over a TCP connection dialled to the worker's address (the
//! `nats` set's streams seam): one connection per stream, TCP's own flow
//! control and half-close.
//!
//! The dialler sends one line, `SWY1 <service> <proof>\n`, where the proof
//! is the SHA-256 (hex) of the node's credential, the value every frontend
//! holds and the worker can compute; the worker answers with one line:
//! `OK`, `UNKNOWN`, `OVERLOADED` or `REFUSED <message>`, then bytes flow.
//! A request-and-answer [`call`] writes its whole request right behind the
//! line and half-closes, without waiting for the answer line; a refused
//! stream's request is read and dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::stream::{
    Refusal, Stream, StreamError, StreamReader, TransportEnds, WriteOp, channel_stream,
};
use crate::streams::{Acceptor, Lane, StreamsSeam};

/// How much a reader may have read ahead of its consumer.
const READ_AHEAD: usize = 4 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;
const MAX_HELLO: usize = 1024;
/// How long a refused stream's early request is read before closing.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Where a node's streams are dialled, and the proof it expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// `host:port`.
    pub address: String,
    /// SHA-256 (hex) of the node's credential.
    pub proof: String,
}

/// Finds a node's address.
pub type Resolver =
    Arc<dyn Fn(String) -> BoxFuture<'static, Result<NodeAddress, String>> + Send + Sync>;

/// The streams seam of the `nats` set.
pub struct DirectStreams {
    addresses: Arc<Addresses>,
}

/// Node addresses found recently: a request does not wait for the
/// database. An entry lives [`ADDRESS_TTL`], and a failed dial drops it (the
/// worker may have moved or registered again).
struct Addresses {
    resolve: Resolver,
    found: Mutex<HashMap<String, (Instant, NodeAddress)>>,
}

/// How long a node's address and proof are used without asking again.
const ADDRESS_TTL: Duration = Duration::from_secs(2);

impl Addresses {
    async fn get(&self, node: &str) -> Result<NodeAddress, Refusal> {
        if let Some((at, found)) = self.found.lock().expect("addresses lock").get(node)
            && at.elapsed() < ADDRESS_TTL
        {
            return Ok(found.clone());
        }
        let found = (self.resolve)(node.to_string())
            .await
            .map_err(Refusal::NotDelivered)?;
        self.found
            .lock()
            .expect("addresses lock")
            .insert(node.to_string(), (Instant::now(), found.clone()));
        Ok(found)
    }

    fn failed<T>(&self, node: &str, result: Result<T, Refusal>) -> Result<T, Refusal> {
        if let Err(Refusal::NotDelivered(_)) = &result {
            self.found.lock().expect("addresses lock").remove(node);
        }
        result
    }
}

impl DirectStreams {
    /// Dials the addresses `resolve` finds.
    pub fn new(resolve: Resolver) -> Self {
        Self {
            addresses: Arc::new(Addresses {
                resolve,
                found: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl StreamsSeam for DirectStreams {
    fn open(
        &self,
        node: &str,
        _lane: Lane,
        service: &str,
    ) -> BoxFuture<'static, Result<Stream, Refusal>> {
        let addresses = self.addresses.clone();
        let (node, service) = (node.to_string(), service.to_string());
        Box::pin(async move {
            let target = addresses.get(&node).await?;
            addresses.failed(&node, dial(&target, &service).await)
        })
    }

    fn call(
        &self,
        node: &str,
        _lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        let addresses = self.addresses.clone();
        let (node, service) = (node.to_string(), service.to_string());
        Box::pin(async move {
            let target = addresses.get(&node).await?;
            addresses.failed(&node, call(&target, &service, request).await)
        })
    }
}

/// Dials one stream.
pub async fn dial(target: &NodeAddress, service: &str) -> Result<Stream, Refusal> {
    handshake(target, service, None).await
}

/// Dials one stream with all of `request` written behind the hello and this
/// side finished, so the request does not wait a round trip for the answer
/// line; gives back the answer's reader.
pub async fn call(
    target: &NodeAddress,
    service: &str,
    request: Bytes,
) -> Result<StreamReader, Refusal> {
    let Stream { reader, writer } = handshake(target, service, Some(request)).await?;
    writer.finished_already();
    Ok(reader)
}

async fn handshake(
    target: &NodeAddress,
    service: &str,
    request: Option<Bytes>,
) -> Result<Stream, Refusal> {
    let not_delivered =
        |e: std::io::Error| Refusal::NotDelivered(format!("{}: {e}", target.address));
    let socket = TcpStream::connect(&target.address)
        .await
        .map_err(not_delivered)?;
    tune(&socket);
    let mut socket = BufReader::new(socket);
    let mut hello = BytesMut::from(format!("SWY1 {service} {}\n", target.proof).as_bytes());
    if let Some(request) = &request {
        hello.extend_from_slice(request);
    }
    socket
        .get_mut()
        .write_all(&hello)
        .await
        .map_err(not_delivered)?;
    if request.is_some() {
        socket.get_mut().shutdown().await.map_err(not_delivered)?;
    }
    let mut line = String::new();
    socket
        .read_line(&mut line)
        .await
        .map_err(|e| Refusal::NotDelivered(e.to_string()))?;
    match line.trim_end() {
        "OK" => Ok(wrap(socket)),
        "UNKNOWN" => Err(Refusal::UnknownService),
        "OVERLOADED" => Err(Refusal::Overloaded),
        other => match other.strip_prefix("REFUSED ") {
            Some(message) => Err(Refusal::ServiceRefused(message.to_string())),
            // Closed before answering: the worker may have seen the line,
            // but it started nothing.
            None => Err(Refusal::NotDelivered(format!(
                "the worker answered `{other}`"
            ))),
        },
    }
}

/// Serves streams dialled to `listener`, for the node whose credential
/// hashes to `proof`, until the listener fails.
pub async fn serve(listener: TcpListener, proof: String, acceptor: Acceptor) {
    let proof = Arc::new(proof);
    loop {
        let Ok((socket, peer)) = listener.accept().await else {
            return;
        };
        let (proof, acceptor) = (proof.clone(), acceptor.clone());
        tokio::spawn(async move {
            if let Err(e) = answer(socket, &proof, &acceptor).await {
                tracing::debug!(%peer, error = %e, "a stream dial was refused");
            }
        });
    }
}

async fn answer(socket: TcpStream, proof: &str, acceptor: &Acceptor) -> std::io::Result<()> {
    tune(&socket);
    let mut socket = BufReader::new(socket);
    let mut line = Vec::new();
    (&mut socket)
        .take(MAX_HELLO as u64)
        .read_until(b'\n', &mut line)
        .await?;
    let line = String::from_utf8_lossy(&line);
    let mut words = line.trim_end().split(' ');
    let (Some("SWY1"), Some(service), Some(given), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(std::io::Error::other("not a stream hello"));
    };
    if !bool::from(given.as_bytes().ct_eq(proof.as_bytes())) {
        return Err(std::io::Error::other("wrong proof"));
    }
    let (stream, start) = pending(socket);
    let verdict = match acceptor(service, stream) {
        Ok(()) => "OK".to_string(),
        Err(Refusal::UnknownService) => "UNKNOWN".into(),
        Err(Refusal::Overloaded) => "OVERLOADED".into(),
        Err(Refusal::ServiceRefused(m) | Refusal::NotDelivered(m)) => {
            format!("REFUSED {}", m.replace('\n', " "))
        }
    };
    let _ = start.send(verdict);
    Ok(())
}

/// A stream over a connection whose answer line is written, then its pumps
/// start, once the acceptor decided (so the answer precedes any data).
fn pending(socket: BufReader<TcpStream>) -> (Stream, oneshot::Sender<String>) {
    let (start, verdict) = oneshot::channel::<String>();
    let (stream, pumps) = parts();
    tokio::spawn(async move {
        let Ok(verdict) = verdict.await else { return };
        let mut socket = socket;
        let accepted = verdict == "OK";
        if socket
            .get_mut()
            .write_all(format!("{verdict}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
        if !accepted {
            return drain(socket).await;
        }
        pumps.run(socket).await;
    });
    (stream, start)
}

/// No delayed ACKs for small requests; and keepalive, so that a stream to
/// a machine that died (no FIN, no RST) fails in about a minute instead of
/// waiting forever: an answer may take minutes, so there is no read timeout.
fn tune(socket: &TcpStream) {
    let _ = socket.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    let _ = socket2::SockRef::from(socket).set_tcp_keepalive(&keepalive);
}

/// Silence before the first keepalive probe, between probes, and how many
/// unanswered probes end the connection.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;

/// Reads a refused stream's early request to its end (bounded), so that
/// closing with it unread does not reset the connection before the dialler
/// read the refusal.
async fn drain(mut socket: BufReader<TcpStream>) {
    let _ = socket.get_mut().shutdown().await;
    let mut discard = vec![0u8; CHUNK];
    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
        while let Ok(1..) = socket.read(&mut discard).await {}
    })
    .await;
}

fn wrap(socket: BufReader<TcpStream>) -> Stream {
    let (stream, pumps) = parts();
    tokio::spawn(pumps.run(socket));
    stream
}

struct Pumps(TransportEnds);

fn parts() -> (Stream, Pumps) {
    let (stream, ends) = channel_stream(READ_AHEAD);
    (stream, Pumps(ends))
}

impl Pumps {
    async fn run(self, socket: BufReader<TcpStream>) {
        let TransportEnds {
            chunks,
            mut ops,
            credit,
        } = self.0;
        let buffered = Bytes::copy_from_slice(socket.buffer());
        let (mut read, mut write) = socket.into_inner().into_split();
        let reader = tokio::spawn(async move {
            if !buffered.is_empty() {
                let _ = chunks.send(Ok(buffered));
            }
            loop {
                // Read only as far ahead of the consumer as READ_AHEAD allows.
                let Ok(permit) = credit.acquire_many(CHUNK as u32).await else {
                    return;
                };
                permit.forget();
                let mut buffer = BytesMut::with_capacity(CHUNK);
                match read.read_buf(&mut buffer).await {
                    Ok(0) => return,
                    Ok(n) => {
                        credit.add_permits(CHUNK - n);
                        if chunks.send(Ok(buffer.freeze())).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = chunks.send(Err(StreamError::Reset(e.to_string())));
                        return;
                    }
                }
            }
        });
        while let Some(op) = ops.recv().await {
            match op {
                WriteOp::Data(data, done) => {
                    let result = write
                        .write_all(&data)
                        .await
                        .map_err(|e| StreamError::Reset(e.to_string()));
                    let failed = result.is_err();
                    let _ = done.send(result);
                    if failed {
                        break;
                    }
                }
                WriteOp::Finish => {
                    let _ = write.shutdown().await;
                    break;
                }
                WriteOp::Reset => {
                    reader.abort();
                    return;
                }
            }
        }
        // Keep the read half until the peer finishes too.
        let _ = reader.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stream_connections_keep_alive_and_send_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        tune(&socket);
        let tuned = socket2::SockRef::from(&socket);
        assert!(tuned.keepalive().unwrap());
        assert_eq!(tuned.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(tuned.tcp_keepalive_interval().unwrap(), KEEPALIVE_INTERVAL);
        assert_eq!(tuned.tcp_keepalive_retries().unwrap(), KEEPALIVE_PROBES);
        assert!(socket.nodelay().unwrap());
    }
}
