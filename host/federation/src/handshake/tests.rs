//! Both sides of the handshake over in-memory channels, and impostors,
//! replays and malformed peers written message by message.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::channel::mpsc::{self, Receiver, Sender};
use futures::{SinkExt, StreamExt};
use switchyard_protocol::link::{LINK_VERSION, LinkMessage, LinkPurpose, MAX_LINK_MESSAGE, code};

use super::*;

const TOKEN: &str = "jt_secret";
const LANE: &str = "inference";

struct Cluster {
    key: ClusterKey,
    id: &'static str,
    label: &'static str,
    url: Option<&'static str>,
}

impl Cluster {
    fn new(id: &'static str, label: &'static str, url: Option<&'static str>) -> Cluster {
        Cluster {
            key: ClusterKey::generate(),
            id,
            label,
            url,
        }
    }

    fn local(&self) -> Local<'_> {
        Local {
            key: &self.key,
            cluster_id: self.id,
            label: self.label,
            url: self.url,
        }
    }

    /// How the other side sees it: the dialer's URL travels, the
    /// listener's does not.
    fn seen(&self, as_dialer: bool) -> PeerIdentity {
        PeerIdentity {
            cluster_id: self.id.into(),
            label: self.label.into(),
            public_key: self.key.public_key(),
            url: self.url.filter(|_| as_dialer).map(Into::into),
        }
    }

    fn hello(&self, purpose: LinkPurpose, join_token: Option<&str>) -> LinkMessage {
        LinkMessage::Hello {
            version: LINK_VERSION,
            purpose,
            lane: LANE.into(),
            cluster_id: self.id.into(),
            label: self.label.into(),
            public_key: self.key.public_key(),
            url: self.url.map(Into::into),
            nonce: new_nonce(),
            join_token: join_token.map(Into::into),
        }
    }
}

type End = (Sender<String>, Receiver<String>);

/// Two connected ends: what one sends, the other reads.
fn ends() -> (End, End) {
    let (a_tx, b_rx) = mpsc::channel(8);
    let (b_tx, a_rx) = mpsc::channel(8);
    ((a_tx, a_rx), (b_tx, b_rx))
}

fn text(message: &LinkMessage) -> String {
    serde_json::to_string(message).unwrap()
}

fn parse(text: &str) -> LinkMessage {
    serde_json::from_str(text).unwrap()
}

fn refused(code: &str) -> impl Fn(&String) -> bool + '_ {
    move |text| matches!(parse(text), LinkMessage::Refused { code: c, .. } if c == code)
}

/// The dialer's check: the listener must show the stored key.
fn expect_key(
    stored: String,
) -> impl FnOnce(PeerIdentity) -> std::future::Ready<Result<(), Refusal>> {
    move |peer| {
        std::future::ready(match peer.public_key == stored {
            true => Ok(()),
            false => Err(Refusal::new("unknown_peer", "not the stored key")),
        })
    }
}

/// The listener's check: a join needs the token, a link none.
async fn admit_token(incoming: Incoming) -> Result<(), Refusal> {
    match (incoming.purpose, incoming.join_token.as_deref()) {
        (LinkPurpose::Join, Some(TOKEN)) | (LinkPurpose::Link, None) => Ok(()),
        _ => Err(Refusal::new(
            "invalid_join_token",
            "the join token is not valid",
        )),
    }
}

async fn register_ok(_: Incoming) -> Result<(), Refusal> {
    Ok(())
}

#[tokio::test]
async fn both_sides_learn_each_others_proved_identity_either_way() {
    let a = Cluster::new("cl_a", "alpha", Some("http://a.example:8080"));
    let b = Cluster::new("cl_b", "beta", Some("http://b.example:8080"));
    for (dialer, listener, purpose, token) in [
        (&a, &b, LinkPurpose::Join, Some(TOKEN)),
        (&b, &a, LinkPurpose::Link, None),
    ] {
        let ((mut d_tx, mut d_rx), (mut l_tx, mut l_rx)) = ends();
        let registered = AtomicBool::new(false);
        let register = |incoming: Incoming| {
            assert_eq!(incoming.peer, dialer.seen(true));
            registered.store(true, Ordering::SeqCst);
            async { Ok(()) }
        };
        let expect = expect_key(listener.key.public_key());
        let (dialed, accepted) = tokio::join!(
            dial(
                dialer.local(),
                purpose,
                LANE,
                token,
                expect,
                &mut d_tx,
                &mut d_rx
            ),
            accept(
                listener.local(),
                admit_token,
                register,
                &mut l_tx,
                &mut l_rx
            ),
        );
        assert_eq!(dialed.unwrap(), listener.seen(false));
        assert_eq!(
            accepted.unwrap(),
            (dialer.seen(true), purpose, LANE.to_string())
        );
        assert!(registered.load(Ordering::SeqCst));
    }
}

#[tokio::test]
async fn a_challenge_signed_by_another_key_than_the_claimed_one_is_refused() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let impostor = ClusterKey::generate();
    let ((mut d_tx, mut d_rx), (mut l_tx, mut l_rx)) = ends();
    // Claims b's public key, which the dialer expects, but holds another.
    let fake_listener = async {
        let LinkMessage::Hello {
            public_key, nonce, ..
        } = parse(&l_rx.next().await.unwrap())
        else {
            panic!("expected a hello");
        };
        let (b_key, b_nonce) = (b.key.public_key(), new_nonce());
        let session = Session {
            purpose: LinkPurpose::Link,
            lane: LANE,
            dialer: Party {
                cluster_id: a.id,
                label: a.label,
                public_key: &public_key,
                url: None,
                nonce: &nonce,
            },
            listener: Party {
                cluster_id: b.id,
                label: b.label,
                public_key: &b_key,
                url: None,
                nonce: &b_nonce,
            },
        };
        let challenge = LinkMessage::Challenge {
            cluster_id: b.id.into(),
            label: b.label.into(),
            public_key: b_key.clone(),
            nonce: b_nonce.clone(),
            signature: impostor.sign(&transcript(Role::Listener, &session)),
        };
        l_tx.send(text(&challenge)).await.unwrap();
        l_rx.by_ref().collect::<Vec<_>>().await
    };
    let expect = expect_key(b.key.public_key());
    let (dialed, rest) = tokio::join!(
        dial(
            a.local(),
            LinkPurpose::Link,
            LANE,
            None,
            expect,
            &mut d_tx,
            &mut d_rx
        ),
        fake_listener,
    );
    assert_eq!(dialed.unwrap_err().code, code::BAD_SIGNATURE);
    assert!(
        rest.len() == 1 && refused(code::BAD_SIGNATURE)(&rest[0]),
        "no proof follows a bad challenge: {rest:?}"
    );
}

#[tokio::test]
async fn a_hello_altered_in_transit_is_refused_on_both_sides() {
    let a = Cluster::new("cl_a", "alpha", Some("http://a.example:8080"));
    let b = Cluster::new("cl_b", "beta", None);
    let ((mut d_tx, mut d_rx), (mut l_tx, l_rx)) = ends();
    // A man in the middle points the listener at another URL for the dialer.
    let mut l_rx = l_rx.map(|text| match parse(&text) {
        LinkMessage::Hello { .. } => text.replace("http://a.example:8080", "http://evil.example"),
        _ => text,
    });
    let registered = AtomicBool::new(false);
    let register = |_| {
        registered.store(true, Ordering::SeqCst);
        async { Ok(()) }
    };
    let expect = expect_key(b.key.public_key());
    let (dialed, accepted) = tokio::join!(
        dial(
            a.local(),
            LinkPurpose::Link,
            LANE,
            None,
            expect,
            &mut d_tx,
            &mut d_rx
        ),
        accept(b.local(), admit_token, register, &mut l_tx, &mut l_rx),
    );
    assert_eq!(dialed.unwrap_err().code, code::BAD_SIGNATURE);
    assert_eq!(accepted.unwrap_err().code, code::BAD_SIGNATURE);
    assert!(!registered.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_listener_that_is_not_the_stored_peer_is_refused_on_both_sides() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let stored = ClusterKey::generate().public_key();
    let ((mut d_tx, mut d_rx), (mut l_tx, mut l_rx)) = ends();
    let registered = AtomicBool::new(false);
    let register = |_| {
        registered.store(true, Ordering::SeqCst);
        async { Ok(()) }
    };
    let (dialed, accepted) = tokio::join!(
        dial(
            a.local(),
            LinkPurpose::Link,
            LANE,
            None,
            expect_key(stored),
            &mut d_tx,
            &mut d_rx
        ),
        accept(b.local(), admit_token, register, &mut l_tx, &mut l_rx),
    );
    assert_eq!(dialed.unwrap_err().code, "unknown_peer");
    assert_eq!(accepted.unwrap_err().code, "unknown_peer");
    assert!(!registered.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_wrong_join_token_is_refused_before_any_challenge() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let ((mut d_tx, d_rx), (mut l_tx, mut l_rx)) = ends();
    let seen = Mutex::new(Vec::new());
    let mut d_rx = d_rx.inspect(|m| seen.lock().unwrap().push(m.clone()));
    let expect = expect_key(b.key.public_key());
    let (dialed, accepted) = tokio::join!(
        dial(
            a.local(),
            LinkPurpose::Join,
            LANE,
            Some("jt_wrong"),
            expect,
            &mut d_tx,
            &mut d_rx
        ),
        accept(b.local(), admit_token, register_ok, &mut l_tx, &mut l_rx),
    );
    assert_eq!(dialed.unwrap_err().code, "invalid_join_token");
    assert_eq!(accepted.unwrap_err().code, "invalid_join_token");
    let seen = seen.lock().unwrap();
    assert!(
        seen.len() == 1 && refused("invalid_join_token")(&seen[0]),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_captured_proof_replayed_in_a_new_handshake_is_refused() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let captured = Mutex::new(Vec::new());
    {
        let ((mut d_tx, mut d_rx), (mut l_tx, l_rx)) = ends();
        let mut l_rx = l_rx.inspect(|m| captured.lock().unwrap().push(m.clone()));
        let expect = expect_key(b.key.public_key());
        let (dialed, accepted) = tokio::join!(
            dial(
                a.local(),
                LinkPurpose::Link,
                LANE,
                None,
                expect,
                &mut d_tx,
                &mut d_rx
            ),
            accept(b.local(), admit_token, register_ok, &mut l_tx, &mut l_rx),
        );
        dialed.unwrap();
        accepted.unwrap();
    }
    let captured = captured.into_inner().unwrap();
    assert!(matches!(parse(&captured[1]), LinkMessage::Proof { .. }));

    // Without a's key: the same hello (even its nonce) and the old proof.
    let ((mut r_tx, mut r_rx), (mut l_tx, mut l_rx)) = ends();
    let replayer = async {
        r_tx.send(captured[0].clone()).await.unwrap();
        let challenge = parse(&r_rx.next().await.unwrap());
        assert!(matches!(challenge, LinkMessage::Challenge { .. }));
        r_tx.send(captured[1].clone()).await.unwrap();
        r_rx.by_ref().collect::<Vec<_>>().await
    };
    let registered = AtomicBool::new(false);
    let register = |_| {
        registered.store(true, Ordering::SeqCst);
        async { Ok(()) }
    };
    let (accepted, answers) = tokio::join!(
        accept(b.local(), admit_token, register, &mut l_tx, &mut l_rx),
        replayer,
    );
    assert_eq!(accepted.unwrap_err().code, code::BAD_SIGNATURE);
    assert!(answers.len() == 1 && refused(code::BAD_SIGNATURE)(&answers[0]));
    assert!(!registered.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_times_out_on_either_side() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);

    let ((mut d_tx, mut d_rx), (_l_tx, mut l_rx)) = ends();
    let started = tokio::time::Instant::now();
    let expect = expect_key(b.key.public_key());
    let err = dial(
        a.local(),
        LinkPurpose::Link,
        LANE,
        None,
        expect,
        &mut d_tx,
        &mut d_rx,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, code::HANDSHAKE_TIMEOUT);
    assert!(started.elapsed() >= HANDSHAKE_TIMEOUT);
    let sent: Vec<_> = l_rx.by_ref().collect().await;
    assert!(sent.len() == 2 && refused(code::HANDSHAKE_TIMEOUT)(&sent[1]));

    let ((_d_tx, mut d_rx), (mut l_tx, mut l_rx)) = ends();
    let err = accept(b.local(), admit_token, register_ok, &mut l_tx, &mut l_rx)
        .await
        .unwrap_err();
    assert_eq!(err.code, code::HANDSHAKE_TIMEOUT);
    assert!(refused(code::HANDSHAKE_TIMEOUT)(
        &d_rx.next().await.unwrap()
    ));
}

#[tokio::test]
async fn a_closed_connection_is_link_closed() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let ((d_tx, _d_rx), (mut l_tx, mut l_rx)) = ends();
    drop(d_tx);
    let err = accept(b.local(), admit_token, register_ok, &mut l_tx, &mut l_rx)
        .await
        .unwrap_err();
    assert_eq!(err.code, code::LINK_CLOSED);

    let ((mut d_tx, mut d_rx), listener) = ends();
    drop(listener);
    let expect = expect_key(b.key.public_key());
    let err = dial(
        a.local(),
        LinkPurpose::Link,
        LANE,
        None,
        expect,
        &mut d_tx,
        &mut d_rx,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, code::LINK_CLOSED);
}

#[tokio::test]
async fn a_malformed_hello_is_refused_bad_handshake() {
    let a = Cluster::new("cl_a", "alpha", None);
    let b = Cluster::new("cl_b", "beta", None);
    let edit = |change: fn(&mut LinkMessage)| {
        let mut hello = a.hello(LinkPurpose::Link, None);
        change(&mut hello);
        text(&hello)
    };
    let cases = [
        ("not json", "{not json".to_string()),
        (
            "a proof first",
            text(&LinkMessage::Proof {
                signature: "00".repeat(64),
            }),
        ),
        ("too large", " ".repeat(MAX_LINK_MESSAGE + 1)),
        (
            "another version",
            edit(|m| {
                if let LinkMessage::Hello { version, .. } = m {
                    *version = LINK_VERSION + 1;
                }
            }),
        ),
        (
            "uppercase key",
            edit(|m| {
                if let LinkMessage::Hello { public_key, .. } = m {
                    *public_key = public_key.to_uppercase();
                }
            }),
        ),
        (
            "short nonce",
            edit(|m| {
                if let LinkMessage::Hello { nonce, .. } = m {
                    nonce.truncate(62);
                }
            }),
        ),
        (
            "a token on a plain link",
            text(&a.hello(LinkPurpose::Link, Some(TOKEN))),
        ),
    ];
    for (what, hello) in cases {
        let ((mut d_tx, mut d_rx), (mut l_tx, mut l_rx)) = ends();
        d_tx.send(hello).await.unwrap();
        let err = accept(b.local(), admit_token, register_ok, &mut l_tx, &mut l_rx)
            .await
            .unwrap_err();
        assert_eq!(err.code, code::BAD_HANDSHAKE, "{what}");
        assert!(
            refused(code::BAD_HANDSHAKE)(&d_rx.next().await.unwrap()),
            "{what}"
        );
    }
}

#[test]
fn an_incomings_debug_never_shows_the_join_token() {
    let a = Cluster::new("cl_a", "alpha", None);
    let incoming = Incoming {
        peer: a.seen(true),
        purpose: LinkPurpose::Join,
        lane: LANE.into(),
        join_token: Some(TOKEN.into()),
    };
    assert!(!format!("{incoming:?}").contains(TOKEN));
}
