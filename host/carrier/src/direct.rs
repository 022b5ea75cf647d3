//! The TCP connection a frontend dials to a worker's stream address (the
//! `nats` set's streams), and the hello that opens it. One connection per
//! worker and lane carries a tunnel session ([`crate::dialled`]); this file
//! only dials, proves and answers.
//!
//! The hello is a challenge and a response, so that what crosses the wire
//! in clear proves nothing a second time:
//!
//! 1. the worker, on accepting, sends `SWY2 <nonce>\n` (32 fresh random
//!    bytes, hex);
//! 2. the dialler sends `SWY2 <service> <proof>\n`, where the proof is
//!    HMAC-SHA256(stream key, [`PROOF_CONTEXT`] ‖ nonce ‖ service) in hex
//!    (the service names what the connection carries: `session:inference`);
//! 3. the worker answers with one line: `OK`, `UNKNOWN`, `OVERLOADED` or
//!    `REFUSED <message>`, then the connection carries what was asked.
//!
//! The stream key ([`stream_key`]) is derived from the SHA-256 of the node's
//! credential, the value every frontend holds and the worker can compute,
//! but it is not that digest, which stays a lookup value only. (TLS 1.3
//! PSK binders and SSH's public-key user auth work alike: the secret never
//! crosses the wire, and the signed transcript includes a fresh value.)
//!
//! Every step of the hello is bounded: [`CONNECT_TIMEOUT`] to connect,
//! [`HANDSHAKE_TIMEOUT`] for each side's lines, [`MAX_HELLO`] bytes a line.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::Refusal;
use crate::handshake::{self as hello, Hello, MAX_HELLO, NONCE_BYTES};

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

/// A connection after the hello: the bytes read past the answer line stay
/// in its buffer.
pub type Connection = BufReader<TcpStream>;

/// Dials `target`, proves this side for `service` and reads the answer:
/// the connection once the worker said `OK`, else its refusal (a
/// connection that fails or a peer that breaks the hello is
/// [`Refusal::NotDelivered`]).
pub async fn dial(target: &NodeAddress, service: &str) -> Result<Connection, Refusal> {
    let not_delivered =
        |e: &dyn std::fmt::Display| Refusal::NotDelivered(format!("{}: {e}", target.address));
    let socket = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.address))
        .await
        .map_err(|_| not_delivered(&"connect timed out"))?
        .map_err(|e| not_delivered(&e))?;
    tune(&socket);
    let mut socket = BufReader::new(socket);
    let challenge = read_hello(&mut socket)
        .await
        .map_err(|e| not_delivered(&e))?;
    let nonce = hello::parse_challenge(&challenge).map_err(|e| not_delivered(&e))?;
    let line = hello::format_hello(&Hello {
        service,
        proof: proof(&target.key, &nonce, service),
    });
    socket
        .get_mut()
        .write_all(line.as_bytes())
        .await
        .map_err(|e| not_delivered(&e))?;
    let line = read_hello(&mut socket)
        .await
        .map_err(|e| not_delivered(&e))?;
    hello::read_answer(&line).map(|()| socket)
}

/// The worker's side of the hello on an accepted `socket`: sends the
/// challenge and checks the dialler's proof with `key` (the node's
/// [`stream_key`]); gives back the connection and the service it asks for,
/// to be answered with [`answer`]. A wrong proof or a broken hello is an
/// error (the connection is then dropped without an answer).
pub async fn accept(socket: TcpStream, key: &[u8; 32]) -> std::io::Result<(Connection, String)> {
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
    let service = service.to_string();
    Ok((socket, service))
}

/// Writes the answer line for `outcome`; a refused connection is then
/// finished (the dialler reads the line, then the end).
pub async fn answer(socket: &mut Connection, outcome: Result<(), &Refusal>) -> std::io::Result<()> {
    // One line the dialler reads whole: well under MAX_HELLO.
    let line = hello::answer_line(outcome);
    socket.get_mut().write_all(line.as_bytes()).await?;
    if outcome.is_err() {
        socket.get_mut().shutdown().await?;
    }
    Ok(())
}

/// No delayed ACKs for small messages; and keepalive, so that a connection
/// to a machine that died (no FIN, no RST) fails in about a minute even
/// where nothing is sent on it.
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

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn connections_keep_alive_and_send_at_once() {
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

    /// A worker that serves `echo` (the connection's bytes come back) and
    /// knows nothing else; the accepted connections are counted.
    async fn worker(key: [u8; 32]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok((mut connection, service)) = accept(socket, &key).await else {
                        return;
                    };
                    if service != "echo" {
                        let _ = answer(&mut connection, Err(&Refusal::UnknownService)).await;
                        return;
                    }
                    if answer(&mut connection, Ok(())).await.is_ok() {
                        let (mut read, mut write) = tokio::io::split(connection);
                        let _ = tokio::io::copy(&mut read, &mut write).await;
                    }
                });
            }
        });
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
        let mut connection = dial(&target, "echo").await.expect("served");
        connection.get_mut().write_all(b"hello\n").await.unwrap();
        let mut echoed = String::new();
        connection.read_line(&mut echoed).await.unwrap();
        assert_eq!(echoed, "hello\n");
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
    async fn a_recorded_proof_does_not_open_a_second_connection() {
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
    async fn a_worker_that_floods_the_handshake_fails_the_dial() {
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
            panic!("a flooded handshake opened a connection");
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
