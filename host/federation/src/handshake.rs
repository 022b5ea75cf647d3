//! The link's opening exchange, both sides: each cluster proves its key by
//! signing the other's fresh nonce within the handshake's transcript
//! ([`crate::proof`]), and nothing else crosses the link until both keys
//! are proved and both callers agreed (a wrong or unknown key is refused
//! before any stream opens).
//!
//! The exchange runs over any channel of text messages: a `Sink<String>`
//! to send and a `Stream<Item = String>` to read, whose end means the
//! connection closed. The server adapts a websocket's text frames to them.
//! Both are borrowed, so the caller keeps the connection for the link's
//! streams once the handshake is done.
//!
//! Every send and read is bounded by [`HANDSHAKE_TIMEOUT`]; a side that
//! refuses tells the other with `Refused` (code and message) and closes.
//!
//! The handshake authenticates the two frontends; the connection's
//! confidentiality and integrity afterwards are the transport's (TLS for a
//! link that leaves the machine), as with an SSH key proved inside a
//! channel that is already encrypted.

use std::future::Future;
use std::time::Duration;

use futures::{Sink, SinkExt, Stream, StreamExt};
use switchyard_protocol::link::{LINK_VERSION, LinkMessage, LinkPurpose, MAX_LINK_MESSAGE, code};
use tokio::time::timeout;

use crate::identity::{self, ClusterKey, VerifyError, decode_hex};
use crate::proof::{Party, Role, Session, new_nonce, transcript};

/// How long each step may wait for the peer: one round trip between two
/// frontends and a signature take milliseconds; ten seconds leaves room
/// for a loaded peer and still frees the connection of one that is stuck.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a listener waits for the dialer's first message (its
/// `hello`, sent as soon as the websocket opens): a dialer that sends
/// nothing holds a handshake slot this long at most, not a full
/// [`HANDSHAKE_TIMEOUT`].
pub const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a refusal is offered to the peer before the connection is
/// left: telling it why is a courtesy, not a step to wait on.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// This cluster, as it presents itself.
#[derive(Debug, Clone, Copy)]
pub struct Local<'a> {
    /// The cluster key.
    pub key: &'a ClusterKey,
    /// The cluster id.
    pub cluster_id: &'a str,
    /// The cluster's label.
    pub label: &'a str,
    /// Where the peer can reach this cluster; sent by the dialer only.
    pub url: Option<&'a str>,
}

/// The other cluster, its key proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    /// Its cluster id.
    pub cluster_id: String,
    /// Its label.
    pub label: String,
    /// Its public key, hex.
    pub public_key: String,
    /// Where it can be reached: what the dialer said; `None` on the
    /// dialer's side (it knows the URL it dialed).
    pub url: Option<String>,
}

/// What a dialer asked for, as the listener's callbacks see it.
#[derive(Clone, PartialEq, Eq)]
pub struct Incoming {
    /// Who dials. When `admit` runs its key is well-formed but not yet
    /// proved; when `register` runs it is.
    pub peer: PeerIdentity,
    /// Join or link.
    pub purpose: LinkPurpose,
    /// The lane the link is to carry.
    pub lane: String,
    /// The join token (a secret: never logged), with purpose join.
    pub join_token: Option<String>,
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("peer", &self.peer)
            .field("purpose", &self.purpose)
            .field("lane", &self.lane)
            .field(
                "join_token",
                &self.join_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A handshake that did not succeed: this side's refusal, the peer's, a
/// timeout or a closed connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A stable code: one of [`code`]'s or a caller's (`invalid_join_token`).
    pub code: String,
    /// For the operator; never a secret.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Refusal {
        Refusal {
            code: code.into(),
            message: message.into(),
        }
    }

    fn bad_handshake(message: impl Into<String>) -> Refusal {
        Refusal::new(code::BAD_HANDSHAKE, message)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Refusal {}

/// Dials: sends `Hello`, checks the listener's `Challenge` against the key
/// it claims, lets `expect` judge that identity (the caller checks it is
/// the peer it meant, e.g. the stored public key, and a join registers it
/// there, before the listener registers anything; an `Err` is sent to the
/// listener as the refusal), proves this side's key and waits for
/// `Accepted`. `join_token` goes with [`LinkPurpose::Join`] only (a
/// listener refuses it on a plain link).
pub async fn dial<Si, St, E>(
    local: Local<'_>,
    purpose: LinkPurpose,
    lane: &str,
    join_token: Option<&str>,
    expect: impl FnOnce(PeerIdentity) -> E,
    sink: &mut Si,
    stream: &mut St,
) -> Result<PeerIdentity, Refusal>
where
    Si: Sink<String> + Unpin,
    St: Stream<Item = String> + Unpin,
    E: Future<Output = Result<(), Refusal>>,
{
    let mut wire = Wire { sink, stream };
    let public_key = local.key.public_key();
    let nonce = new_nonce();
    wire.send(&LinkMessage::Hello {
        version: LINK_VERSION,
        purpose,
        lane: lane.to_string(),
        cluster_id: local.cluster_id.to_string(),
        label: local.label.to_string(),
        public_key: public_key.clone(),
        url: local.url.map(str::to_string),
        nonce: nonce.clone(),
        join_token: join_token.map(str::to_string),
    })
    .await?;
    let LinkMessage::Challenge {
        cluster_id,
        label,
        public_key: peer_key,
        nonce: peer_nonce,
        signature,
    } = wire.recv("challenge").await?
    else {
        return Err(wire
            .refuse(Refusal::bad_handshake("expected a challenge"))
            .await);
    };
    let peer = PeerIdentity {
        cluster_id,
        label,
        public_key: peer_key,
        url: None,
    };
    if decode_hex::<32>(&peer_nonce).is_none() {
        return Err(wire.refuse(Refusal::bad_handshake("malformed nonce")).await);
    }
    let session = Session {
        purpose,
        lane,
        dialer: Party {
            cluster_id: local.cluster_id,
            label: local.label,
            public_key: &public_key,
            url: local.url,
            nonce: &nonce,
        },
        listener: Party {
            cluster_id: &peer.cluster_id,
            label: &peer.label,
            public_key: &peer.public_key,
            url: None,
            nonce: &peer_nonce,
        },
    };
    let signed = transcript(Role::Listener, &session);
    if let Err(refusal) = check(&peer.public_key, &signed, &signature) {
        return Err(wire.refuse(refusal).await);
    }
    if let Err(refusal) = expect(peer.clone()).await {
        return Err(wire.refuse(refusal).await);
    }
    let signature = local.key.sign(&transcript(Role::Dialer, &session));
    wire.send(&LinkMessage::Proof { signature }).await?;
    match wire.recv("accepted").await? {
        LinkMessage::Accepted {} => Ok(peer),
        _ => Err(wire
            .refuse(Refusal::bad_handshake("expected accepted"))
            .await),
    }
}

/// Answers a dialer: reads its `Hello` and lets `admit` judge it before
/// anything is answered (the caller checks the join token, or that the key
/// is a known peer's); sends `Challenge`, checks the dialer's `Proof`, lets
/// `register` act on the proved identity (the caller registers a joining
/// peer, binds the session to the peer record) and sends `Accepted`.
///
/// Both callbacks take the [`Incoming`] by value (clone what the future
/// needs: no borrow crosses the await) and answer `Ok(())` or the
/// [`Refusal`] sent to the dialer. They are not bounded by the handshake's
/// timeout. Returns the dialer's identity, the purpose and the lane.
pub async fn accept<Si, St, A, R>(
    local: Local<'_>,
    admit: impl FnOnce(Incoming) -> A,
    register: impl FnOnce(Incoming) -> R,
    sink: &mut Si,
    stream: &mut St,
) -> Result<(PeerIdentity, LinkPurpose, String), Refusal>
where
    Si: Sink<String> + Unpin,
    St: Stream<Item = String> + Unpin,
    A: Future<Output = Result<(), Refusal>>,
    R: Future<Output = Result<(), Refusal>>,
{
    let mut wire = Wire { sink, stream };
    let hello = wire.recv_within("hello", FIRST_MESSAGE_TIMEOUT).await?;
    let (incoming, peer_nonce) = match read_hello(hello) {
        Ok(hello) => hello,
        Err(refusal) => return Err(wire.refuse(refusal).await),
    };
    if let Err(refusal) = admit(incoming.clone()).await {
        return Err(wire.refuse(refusal).await);
    }
    let public_key = local.key.public_key();
    let nonce = new_nonce();
    let session = Session {
        purpose: incoming.purpose,
        lane: &incoming.lane,
        dialer: Party {
            cluster_id: &incoming.peer.cluster_id,
            label: &incoming.peer.label,
            public_key: &incoming.peer.public_key,
            url: incoming.peer.url.as_deref(),
            nonce: &peer_nonce,
        },
        listener: Party {
            cluster_id: local.cluster_id,
            label: local.label,
            public_key: &public_key,
            url: None,
            nonce: &nonce,
        },
    };
    let signed = transcript(Role::Dialer, &session);
    wire.send(&LinkMessage::Challenge {
        cluster_id: local.cluster_id.to_string(),
        label: local.label.to_string(),
        signature: local.key.sign(&transcript(Role::Listener, &session)),
        public_key,
        nonce,
    })
    .await?;
    let LinkMessage::Proof { signature } = wire.recv("proof").await? else {
        return Err(wire
            .refuse(Refusal::bad_handshake("expected a proof"))
            .await);
    };
    if let Err(refusal) = check(&incoming.peer.public_key, &signed, &signature) {
        return Err(wire.refuse(refusal).await);
    }
    if let Err(refusal) = register(incoming.clone()).await {
        return Err(wire.refuse(refusal).await);
    }
    wire.send(&LinkMessage::Accepted {}).await?;
    Ok((incoming.peer, incoming.purpose, incoming.lane))
}

/// A `Hello` checked for form: the dialer's request and its nonce.
fn read_hello(message: LinkMessage) -> Result<(Incoming, String), Refusal> {
    let LinkMessage::Hello {
        version,
        purpose,
        lane,
        cluster_id,
        label,
        public_key,
        url,
        nonce,
        join_token,
    } = message
    else {
        return Err(Refusal::bad_handshake("expected a hello"));
    };
    if version != LINK_VERSION {
        return Err(Refusal::bad_handshake(format!(
            "handshake version {version}; this cluster speaks {LINK_VERSION}"
        )));
    }
    if identity::parse_public_key(&public_key).is_err() {
        return Err(Refusal::bad_handshake("malformed public key"));
    }
    if decode_hex::<32>(&nonce).is_none() {
        return Err(Refusal::bad_handshake("malformed nonce"));
    }
    if purpose != LinkPurpose::Join && join_token.is_some() {
        return Err(Refusal::bad_handshake(
            "a join token only goes with purpose join",
        ));
    }
    let peer = PeerIdentity {
        cluster_id,
        label,
        public_key,
        url,
    };
    let incoming = Incoming {
        peer,
        purpose,
        lane,
        join_token,
    };
    Ok((incoming, nonce))
}

/// Verifies the peer's signature of `signed`, as a refusal.
fn check(public_key: &str, signed: &[u8], signature: &str) -> Result<(), Refusal> {
    identity::verify(public_key, signed, signature).map_err(|e| match e {
        VerifyError::BadSignature => Refusal::new(
            code::BAD_SIGNATURE,
            "the signature does not verify against the claimed key",
        ),
        malformed => Refusal::bad_handshake(malformed.to_string()),
    })
}

/// The two halves of the connection, each step bounded.
struct Wire<'s, Si, St> {
    sink: &'s mut Si,
    stream: &'s mut St,
}

impl<Si, St> Wire<'_, Si, St>
where
    Si: Sink<String> + Unpin,
    St: Stream<Item = String> + Unpin,
{
    async fn send(&mut self, message: &LinkMessage) -> Result<(), Refusal> {
        let text = serde_json::to_string(message).expect("a link message serializes");
        match timeout(HANDSHAKE_TIMEOUT, self.sink.send(text)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(closed()),
            Err(_) => Err(Refusal::new(
                code::HANDSHAKE_TIMEOUT,
                format!(
                    "the peer took no message for {}s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// The next message; the peer's `Refused` as an `Err`. A timeout or a
    /// malformed message is refused to the peer first.
    async fn recv(&mut self, expected: &str) -> Result<LinkMessage, Refusal> {
        self.recv_within(expected, HANDSHAKE_TIMEOUT).await
    }

    /// [`Wire::recv`], waiting at most `within`.
    async fn recv_within(
        &mut self,
        expected: &str,
        within: Duration,
    ) -> Result<LinkMessage, Refusal> {
        let text = match timeout(within, self.stream.next()).await {
            Ok(Some(text)) => text,
            Ok(None) => return Err(closed()),
            Err(_) => {
                let refusal = Refusal::new(
                    code::HANDSHAKE_TIMEOUT,
                    format!("no {expected} within {} ms", within.as_millis()),
                );
                return Err(self.refuse(refusal).await);
            }
        };
        if text.len() > MAX_LINK_MESSAGE {
            let refusal =
                Refusal::bad_handshake(format!("a message over {MAX_LINK_MESSAGE} bytes"));
            return Err(self.refuse(refusal).await);
        }
        match serde_json::from_str(&text) {
            Ok(LinkMessage::Refused { code, message }) => Err(Refusal { code, message }),
            Ok(message) => Ok(message),
            Err(_) => {
                let refusal = Refusal::bad_handshake(format!("expected a {expected} message"));
                Err(self.refuse(refusal).await)
            }
        }
    }

    /// Tells the peer, closes, and hands the refusal back.
    async fn refuse(&mut self, refusal: Refusal) -> Refusal {
        let text = serde_json::to_string(&LinkMessage::Refused {
            code: refusal.code.clone(),
            message: refusal.message.clone(),
        })
        .expect("a link message serializes");
        let tell = async {
            if self.sink.send(text).await.is_ok() {
                let _ = self.sink.close().await;
            }
        };
        let _ = timeout(REFUSAL_GRACE, tell).await;
        refusal
    }
}

fn closed() -> Refusal {
    Refusal::new(
        code::LINK_CLOSED,
        "the connection closed during the handshake",
    )
}

#[cfg(test)]
mod tests;
