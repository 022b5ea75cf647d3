//! Streams over a TCP connection dialled to the worker's address (the
//! `nats` set's streams seam): one connection per stream, TCP's own flow
//! control and half-close.
//!
//! The handshake is a challenge and a response, so that what crosses the
//! wire in clear proves nothing a second time:
//!
//! 1. the worker, on accepting, sends `SWY2 <nonce>\n` (32 fresh random
//!    bytes, hex);
//! 2. the dialler sends `SWY2 <service> <proof>\n`, where the proof is
//!    HMAC-SHA256(stream key, [`PROOF_CONTEXT`] ‖ nonce ‖ service) in hex;
//! 3. the worker answers with one line: `OK`, `UNKNOWN`, `OVERLOADED` or
//!    `REFUSED <message>`, then bytes flow.
//!
//! The stream key ([`stream_key`]) is derived from the SHA-256 of the node's
//! credential, the value every frontend holds and the worker can compute,
//! but it is not that digest, which stays a lookup value only. (TLS 1.3
//! PSK binders and SSH's public-key user auth work alike: the secret never
//! crosses the wire, and the signed transcript includes a fresh value.)
//! A request-and-answer [`call`] writes its whole request right behind the
//! proof line and half-closes, without waiting for the answer line; a
//! refused stream's request is read and dropped.
//!
//! Every step before bytes flow is bounded: [`CONNECT_TIMEOUT`] to connect,
//! [`HANDSHAKE_TIMEOUT`] for each side's lines, [`MAX_HELLO`] bytes a line.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::Refusal;
use crate::handshake::{self as hello, Hello, MAX_HELLO, NONCE_BYTES};
use crate::stream::{Stream, StreamError, StreamReader, TransportEnds, WriteOp, channel_stream};
use crate::stream_seam::{Acceptor, Lane, StreamsSeam};

/// How much a reader may have read ahead of its consumer.
const READ_AHEAD: usize = 4 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;
/// How long a dial may take to connect: a node that does not answer SYNs
/// must fail the request, not hold it for the kernel's minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long each side waits for the other's handshake line: the lines are
/// written at once, so this only ends peers that connect and stay silent.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// What the proof's MAC covers before the nonce: the protocol and its use.
pub const PROOF_CONTEXT: &[u8] = b"switchyard direct stream v2\n";
/// What the stream key is derived with, from the credential's digest.
const KEY_CONTEXT: &[u8] = b"switchyard stream proof v1";
/// How long a refused stream's early request is read before closing.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Where a node's streams are dialled, and the key its proofs are made with.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// `host:port`.
    pub address: String,
    /// The node's [`stream_key`].
    pub key: [u8; 32],
}

impl std::fmt::Debug for NodeAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret.
        f.debug_struct("NodeAddress")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// HMAC-SHA256 (RFC 2104), over `parts` in order.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    for part in parts {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The key a node's stream proofs are made with, from the SHA-256 of its
/// credential (what the frontends store): HMAC(digest, [`KEY_CONTEXT`]).
pub fn stream_key(credential_sha256: &[u8]) -> [u8; 32] {
    hmac_sha256(credential_sha256, &[KEY_CONTEXT])
}

/// The proof for `service` answering `nonce`.
fn proof(key: &[u8; 32], nonce: &[u8], service: &str) -> [u8; 32] {
    hmac_sha256(key, &[PROOF_CONTEXT, nonce, b"\n", service.as_bytes()])
}

/// One handshake line as read, its newline included, at most [`MAX_HELLO`]
/// bytes and [`HANDSHAKE_TIMEOUT`]; the `hello` parsers check the rest.
async fn read_hello<R>(socket: &mut R) -> std::io::Result<Vec<u8>>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut line = Vec::new();
    tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        (&mut *socket)
            .take(MAX_HELLO as u64)
            .read_until(b'\n', &mut line),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "no handshake line in time")
    })??;
    Ok(line)
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
    let socket = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.address))
        .await
        .map_err(|_| {
            not_delivered(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect timed out",
            ))
        })?
        .map_err(not_delivered)?;
    tune(&socket);
    let mut socket = BufReader::new(socket);
    let challenge = read_hello(&mut socket).await.map_err(not_delivered)?;
    let nonce = hello::parse_challenge(&challenge)
        .map_err(|e| Refusal::NotDelivered(format!("{}: {e}", target.address)))?;
    let line = hello::format_hello(&Hello {
        service,
        proof: proof(&target.key, &nonce, service),
    });
    let mut hello = BytesMut::from(line.as_bytes());
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
    let line = read_hello(&mut socket)
        .await
        .map_err(|e| Refusal::NotDelivered(e.to_string()))?;
    hello::read_answer(&line).map(|()| wrap(socket))
}

/// Serves streams dialled to `listener`, for the node whose proofs are made
/// with `key` (its [`stream_key`]), until the listener fails.
pub async fn serve(listener: TcpListener, key: [u8; 32], acceptor: Acceptor) {
    loop {
        let Ok((socket, peer)) = listener.accept().await else {
            return;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(socket, &key, &acceptor).await {
                tracing::debug!(%peer, error = %e, "a stream dial was refused");
            }
        });
    }
}

async fn answer(socket: TcpStream, key: &[u8; 32], acceptor: &Acceptor) -> std::io::Result<()> {
    tune(&socket);
    let mut socket = BufReader::new(socket);
    let nonce: [u8; NONCE_BYTES] = rand::random();
    socket
        .get_mut()
        .write_all(hello::format_challenge(&nonce).as_bytes())
        .await?;
    let line = read_hello(&mut socket).await?;
    let Hello {
        service,
        proof: given,
    } = hello::parse_hello(&line).map_err(std::io::Error::other)?;
    let expected = proof(key, &nonce, service);
    if !bool::from(given.ct_eq(&expected)) {
        return Err(std::io::Error::other("wrong proof"));
    }
    let (stream, start) = pending(socket);
    // One line the dialler reads whole: well under MAX_HELLO.
    let verdict = hello::answer_line(acceptor(service, stream).as_ref().map(|_| ()));
    let _ = start.send(verdict);
    Ok(())
}

/// A stream over a connection whose answer line (newline included) is
/// written, then its pumps start, once the acceptor decided (so the answer
/// precedes any data).
fn pending(socket: BufReader<TcpStream>) -> (Stream, oneshot::Sender<String>) {
    let (start, verdict) = oneshot::channel::<String>();
    let (stream, pumps) = parts();
    tokio::spawn(async move {
        let Ok(verdict) = verdict.await else { return };
        let mut socket = socket;
        let accepted = hello::read_answer(verdict.as_bytes()).is_ok();
        if socket
            .get_mut()
            .write_all(verdict.as_bytes())
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

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2, and test case 6 (a key longer than the block).
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let mac = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    fn echo_acceptor() -> Acceptor {
        Arc::new(|service: &str, stream: Stream| {
            if service != "echo" {
                return Err(Refusal::UnknownService);
            }
            tokio::spawn(async move {
                let Stream {
                    mut reader,
                    mut writer,
                } = stream;
                while let Some(Ok(chunk)) = reader.read().await {
                    let _ = writer.write(chunk).await;
                }
                writer.finish();
            });
            Ok(())
        })
    }

    async fn worker(key: [u8; 32]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(serve(listener, key, echo_acceptor()));
        address
    }

    /// Sends `line` after reading the challenge; true if the worker said OK.
    async fn raw_hello(address: &str, line: impl FnOnce(&[u8]) -> String) -> bool {
        let mut socket = BufReader::new(TcpStream::connect(address).await.unwrap());
        let challenge = read_hello(&mut socket).await.unwrap();
        let nonce = hello::parse_challenge(&challenge).unwrap();
        let hello = line(&nonce);
        socket.get_mut().write_all(hello.as_bytes()).await.unwrap();
        let mut answer = String::new();
        let _ = socket.read_line(&mut answer).await;
        answer == "OK\n"
    }

    #[tokio::test]
    async fn a_dial_with_the_key_is_served_and_one_without_is_not() {
        let digest = [9u8; 32];
        let key = stream_key(&digest);
        let address = worker(key).await;
        let target = NodeAddress {
            address: address.clone(),
            key,
        };
        let mut reader = call(&target, "echo", Bytes::from_static(b"hello"))
            .await
            .expect("served");
        assert_eq!(reader.read_to_end(1024).await.unwrap(), b"hello");
        assert!(matches!(
            dial(&target, "nothing").await,
            Err(Refusal::UnknownService)
        ));

        let wrong = NodeAddress {
            address: address.clone(),
            key: stream_key(&[8u8; 32]),
        };
        assert!(matches!(
            dial(&wrong, "echo").await,
            Err(Refusal::NotDelivered(_))
        ));
        // The old clear proof (the digest itself) is dead, and the digest is
        // not the key.
        assert!(!raw_hello(&address, |_| format!("SWY1 echo {}\n", hex::encode(digest))).await);
        assert!(
            !raw_hello(&address, |nonce| format!(
                "SWY2 echo {}\n",
                hex::encode(proof(&digest, nonce, "echo"))
            ))
            .await
        );
    }

    #[tokio::test]
    async fn a_recorded_proof_does_not_open_a_second_stream() {
        let key = stream_key(&[7u8; 32]);
        let address = worker(key).await;
        let mut recorded = String::new();
        assert!(
            raw_hello(&address, |nonce| {
                recorded = format!("SWY2 echo {}\n", hex::encode(proof(&key, nonce, "echo")));
                recorded.clone()
            })
            .await,
            "the honest proof is accepted"
        );
        assert!(
            !raw_hello(&address, |_| recorded.clone()).await,
            "the replayed proof is refused"
        );
        // A proof is bound to its service too.
        assert!(
            !raw_hello(&address, |nonce| format!(
                "SWY2 sink {}\n",
                hex::encode(proof(&key, nonce, "echo"))
            ))
            .await
        );
    }

    #[tokio::test]
    async fn a_worker_that_floods_or_stalls_the_handshake_fails_the_dial() {
        // A line with no end: the dialler stops at MAX_HELLO.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let flood = vec![b'A'; 16 * MAX_HELLO];
            let _ = socket.write_all(&flood).await;
            std::future::pending::<()>().await;
        });
        let target = NodeAddress {
            address,
            key: [0; 32],
        };
        let Err(Refusal::NotDelivered(why)) = dial(&target, "echo").await else {
            panic!("a flooded handshake opened a stream");
        };
        assert!(why.contains("too long"), "{why}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_is_given_up_after_the_handshake_timeout() {
        let (_silent, ours) = tokio::io::duplex(64);
        let mut ours = BufReader::new(ours);
        let started = tokio::time::Instant::now();
        let error = read_hello(&mut ours).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), HANDSHAKE_TIMEOUT);
    }
}
