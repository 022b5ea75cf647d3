//! Streams to a worker whose session another replica holds. The replica
//! that was asked dials the holder's `GET /api/cluster/relay` over a
//! websocket with the cluster's relay secret; the holder opens the stream
//! on its own session and pipes it.
//!
//! On the relay websocket: the holder's first message is text, the answer
//! line of an open (`switchyard_carrier::handshake`, the direct streams'
//! codec: `OK`, `UNKNOWN`, `OVERLOADED`, `REFUSED <message>` or
//! `UNDELIVERED <message>`); then binary messages carry data both ways, the
//! text message `fin` ends one direction, and a close ends both.
//!
//! A call's request does not wait for that answer: the asker sends it right
//! behind the upgrade, finished (early data, as the direct streams send it
//! behind their hello), and a holder that refuses reads it to its end and
//! drops it. The asker remembers each node's holder for a short while
//! (`HOLDER_TTL`), as the direct streams remember node addresses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::tunnel::Relay;
use switchyard_carrier::{Refusal, Stream};
use switchyard_store::Store;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use switchyard_carrier::tunnel::{WEBSOCKET_BUFFER, websocket};
use switchyard_carrier::{framed, handshake};

use switchyard_protocol::carrier::RELAY_HEADER;

/// How long a node's session holder is used without asking the database
/// again: the bound the direct streams keep node addresses for. A holder
/// that disowns the session or cannot be reached is forgotten at once.
const HOLDER_TTL: Duration = Duration::from_secs(2);

/// Which replica holds each node's lanes, as found recently, so a relayed
/// request does not wait for the database.
struct Holders {
    /// How long an entry is used ([`HOLDER_TTL`]).
    ttl: Duration,
    inference: Mutex<HashMap<String, (Instant, Arc<str>)>>,
    bulk: Mutex<HashMap<String, (Instant, Arc<str>)>>,
}

impl Holders {
    fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            inference: Mutex::default(),
            bulk: Mutex::default(),
        }
    }

    fn lane(&self, lane: Lane) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Arc<str>)>> {
        match lane {
            Lane::Inference => &self.inference,
            Lane::Bulk => &self.bulk,
        }
        .lock()
        .expect("holders lock")
    }

    /// The holder's address found less than the TTL ago.
    fn fresh(&self, node: &str, lane: Lane) -> Option<Arc<str>> {
        self.lane(lane)
            .get(node)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, address)| address.clone())
    }

    fn remember(&self, node: &str, lane: Lane, address: Arc<str>) {
        self.lane(lane)
            .insert(node.to_owned(), (Instant::now(), address));
    }

    /// Forgets `address` as the node's holder, unless a newer one replaced it.
    fn forget(&self, node: &str, lane: Lane, address: &str) {
        let mut found = self.lane(lane);
        if found.get(node).is_some_and(|(_, held)| &**held == address) {
            found.remove(node);
        }
    }

    /// Opens a stream through the node's holder: the one remembered, else
    /// the one `lookup` finds. A holder that did not deliver is forgotten;
    /// when a remembered one could not be reached or disowns the session
    /// (it moved), the database is asked and the stream dialled once more,
    /// so a session that moved costs one more dial, not a failed request.
    /// A stream that may have reached the worker is never dialled again.
    async fn open<L, D, F, T>(
        &self,
        node: &str,
        lane: Lane,
        lookup: L,
        dial: D,
    ) -> Result<T, Refusal>
    where
        L: Future<Output = Result<Arc<str>, Refusal>>,
        D: Fn(Arc<str>) -> F,
        F: Future<Output = Result<T, Missed>>,
    {
        let dial = async |address: Arc<str>| {
            let dialled = dial(address.clone()).await;
            if let Err(Missed {
                refusal: Refusal::NotDelivered(_),
                ..
            }) = &dialled
            {
                self.forget(node, lane, &address);
            }
            dialled
        };
        if let Some(address) = self.fresh(node, lane) {
            match dial(address).await {
                Err(Missed {
                    untouched: true, ..
                }) => {}
                done => return done.map_err(|missed| missed.refusal),
            }
        }
        let address = lookup.await?;
        self.remember(node, lane, address.clone());
        dial(address).await.map_err(|missed| missed.refusal)
    }
}

/// A dial through a holder that gave no stream.
#[derive(Debug)]
struct Missed {
    refusal: Refusal,
    /// Nothing reached the node's session: the holder could not be reached
    /// or no longer holds it, so another holder may be asked.
    untouched: bool,
}

impl Missed {
    /// The holder was not reached.
    fn unreached(message: String) -> Self {
        Self {
            refusal: Refusal::NotDelivered(message),
            untouched: true,
        }
    }
}

/// Finds the replica holding a session: its address, from the database.
type Lookup = for<'a> fn(
    &'a Store,
    &'a str,
    &'a str,
    Lane,
) -> futures::future::BoxFuture<'a, Result<Arc<str>, Refusal>>;

/// The relay this replica uses for nodes it does not hold.
pub async fn relay(store: Store, instance_id: String) -> anyhow::Result<Relay> {
    relay_through(store, instance_id, |store, me, node, lane| {
        Box::pin(holder(store, me, node, lane))
    })
    .await
}

/// The relay this replica uses for federation links another replica
/// holds, keyed by the peer's id (the holder serves them at the same
/// `GET /api/cluster/relay`).
pub async fn link_relay(store: Store, instance_id: String) -> anyhow::Result<Relay> {
    relay_through(store, instance_id, |store, me, peer, _lane| {
        Box::pin(link_holder(store, me, peer))
    })
    .await
}

async fn relay_through(store: Store, instance_id: String, lookup: Lookup) -> anyhow::Result<Relay> {
    let secret: Arc<str> = store.relay_secret().await?.into();
    let holders = Arc::new(Holders::new(HOLDER_TTL));
    Ok(Arc::new(
        move |node: String, lane: Lane, service: String, request: Option<Bytes>| {
            let (store, secret, instance_id) = (store.clone(), secret.clone(), instance_id.clone());
            let holders = holders.clone();
            Box::pin(async move {
                let lookup = lookup(&store, &instance_id, &node, lane);
                let (secret, node, service, request) = (&secret, &node, &service, &request);
                let dial = |address: Arc<str>| async move {
                    dial(&address, secret, node, lane, service, request.as_ref()).await
                };
                holders.open(node, lane, lookup, dial).await
            })
        },
    ))
}

/// The address of the replica holding the node's lane, from the database.
async fn holder(
    store: &Store,
    instance_id: &str,
    node: &str,
    lane: Lane,
) -> Result<Arc<str>, Refusal> {
    let owner = store
        .connection_owner(node, lane.as_str())
        .await
        .map_err(|e| Refusal::NotDelivered(format!("looking up the session holder: {e}")))?;
    let owner = owner.ok_or_else(|| {
        Refusal::NotDelivered(format!("node {node} has no {} session", lane.as_str()))
    })?;
    if owner.instance_id == instance_id {
        return Err(Refusal::NotDelivered(format!(
            "node {node}'s {} session was here and has ended",
            lane.as_str()
        )));
    }
    let address = owner.address.ok_or_else(|| {
        Refusal::NotDelivered(format!("replica {} has no address", owner.instance_id))
    })?;
    Ok(address.into())
}

/// The address of the replica holding a federation link, from the database.
async fn link_holder(store: &Store, instance_id: &str, peer: &str) -> Result<Arc<str>, Refusal> {
    let holder = store
        .link_holder(peer)
        .await
        .map_err(|e| Refusal::NotDelivered(format!("looking up the link's holder: {e}")))?
        .ok_or_else(|| Refusal::NotDelivered("no replica holds the link".into()))?;
    match holder {
        (held_by, _) if held_by == instance_id => Err(Refusal::NotDelivered(
            "the link was held here and has ended".into(),
        )),
        (held_by, None) => Err(Refusal::NotDelivered(format!(
            "replica {held_by} has no address"
        ))),
        (_, Some(address)) => Ok(address.into()),
    }
}

/// Dials the holder at `address` for a stream to the node's `service`.
/// A `request` rides with the open: it is sent behind the websocket's
/// handshake and finished without waiting for the verdict (the holder
/// reads it once it has opened the stream, and drops it with a refusal),
/// so a relayed call costs no round trip more than one to a session held
/// here.
async fn dial(
    address: &str,
    secret: &str,
    node: &str,
    lane: Lane,
    service: &str,
    request: Option<&Bytes>,
) -> Result<Stream, Missed> {
    let url = format!(
        "{}/api/cluster/relay?node={node}&lane={}&service={service}",
        address.replacen("http", "ws", 1),
        lane.as_str()
    );
    let mut upgrade = url
        .into_client_request()
        .map_err(|e| Missed::unreached(format!("relay request: {e}")))?;
    upgrade.headers_mut().insert(
        RELAY_HEADER,
        secret
            .parse()
            .map_err(|_| Missed::unreached("relay secret is not a header value".into()))?,
    );
    let (mut websocket, _) = tokio_tungstenite::connect_async_with_config(
        upgrade,
        Some(switchyard_carrier::tunnel::websocket::config()),
        true,
    )
    .await
    .map_err(|e| Missed::unreached(format!("relay to {address}: {e}")))?;
    // From here the holder may have passed the request on.
    let touched = |message: String| Missed {
        refusal: Refusal::NotDelivered(message),
        untouched: request.is_none(),
    };
    if let Some(request) = request {
        // The frames' encoding (`websocket::frames`): binary data, then the
        // text `fin`; no message over the websocket's limit.
        for chunk in request.chunks(WEBSOCKET_BUFFER) {
            websocket
                .feed(Message::Binary(request.slice_ref(chunk)))
                .await
                .map_err(|e| touched(format!("relay to {address}: {e}")))?;
        }
        websocket
            .send(Message::Text("fin".into()))
            .await
            .map_err(|e| touched(format!("relay to {address}: {e}")))?;
    }
    let verdict = match websocket.next().await {
        Some(Ok(Message::Text(text))) => text.to_string(),
        other => return Err(touched(format!("the holding replica answered {other:?}"))),
    };
    // A holder that refuses opened nothing: only `NotDelivered` (it no
    // longer holds the session) lets another holder be asked.
    handshake::read_answer(verdict.as_bytes()).map_err(|refusal| Missed {
        untouched: matches!(refusal, Refusal::NotDelivered(_)),
        refusal,
    })?;
    let (incoming, outgoing) = websocket::frames(websocket, websocket::tungstenite());
    Ok(framed::stream(incoming, outgoing))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// One open through `holders`: the lookup finds `found` (and is
    /// counted), each dial answers what `answer` says for its address.
    /// Gives the outcome and the addresses dialled.
    async fn open(
        holders: &Holders,
        lookups: &AtomicUsize,
        found: &str,
        answer: impl Fn(&str) -> Result<(), Missed>,
    ) -> (Result<(), Refusal>, Vec<String>) {
        let dialled = Mutex::new(Vec::new());
        let lookup = async {
            lookups.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::from(found))
        };
        let dial = |address: Arc<str>| {
            dialled.lock().unwrap().push(address.to_string());
            let outcome = answer(&address);
            async move { outcome }
        };
        let outcome = holders.open("n1", Lane::Inference, lookup, dial).await;
        (outcome, dialled.into_inner().unwrap())
    }

    /// The session moved from a to another holder: a disowns it.
    fn moved(address: &str) -> Result<(), Missed> {
        match address {
            "http://a" => Err(Missed {
                refusal: Refusal::NotDelivered("no longer held here".into()),
                untouched: true,
            }),
            _ => Ok(()),
        }
    }

    fn unreachable(_: &str) -> Result<(), Missed> {
        Err(Missed::unreached("connection refused".into()))
    }

    fn dialled(addresses: &[&str]) -> Vec<String> {
        addresses.iter().map(|a| a.to_string()).collect()
    }

    #[tokio::test]
    async fn a_holder_is_remembered_until_it_disowns_the_session() {
        let holders = Holders::new(HOLDER_TTL);
        let lookups = AtomicUsize::new(0);
        let count = || lookups.load(Ordering::SeqCst);

        let (outcome, tried) = open(&holders, &lookups, "http://a", |_| Ok(())).await;
        assert!(outcome.is_ok());
        assert_eq!((tried, count()), (dialled(&["http://a"]), 1));
        // Remembered: the next request does not ask the database.
        let (outcome, tried) = open(&holders, &lookups, "http://a", |_| Ok(())).await;
        assert!(outcome.is_ok());
        assert_eq!((tried, count()), (dialled(&["http://a"]), 1));
        // The worker's own refusal says nothing against the holder.
        let overloaded = |_: &str| {
            Err(Missed {
                refusal: Refusal::Overloaded,
                untouched: false,
            })
        };
        let (outcome, _) = open(&holders, &lookups, "http://a", overloaded).await;
        assert_eq!(outcome, Err(Refusal::Overloaded));
        assert_eq!(count(), 1);

        // The session moved to b: a disowns it, and the same request asks
        // the database and reaches b, which is remembered.
        let (outcome, tried) = open(&holders, &lookups, "http://b", moved).await;
        assert!(outcome.is_ok());
        assert_eq!((tried, count()), (dialled(&["http://a", "http://b"]), 2));
        let (_, tried) = open(&holders, &lookups, "http://b", moved).await;
        assert_eq!((tried, count()), (dialled(&["http://b"]), 2));

        // A holder found but unreachable is not remembered.
        let (outcome, tried) = open(&holders, &lookups, "http://c", unreachable).await;
        assert!(matches!(outcome, Err(Refusal::NotDelivered(_))));
        assert_eq!((tried, count()), (dialled(&["http://b", "http://c"]), 3));
        let (_, tried) = open(&holders, &lookups, "http://c", unreachable).await;
        assert_eq!((tried, count()), (dialled(&["http://c"]), 4));
    }

    #[tokio::test]
    async fn a_request_that_may_have_reached_the_worker_is_not_sent_again() {
        let holders = Holders::new(HOLDER_TTL);
        let lookups = AtomicUsize::new(0);
        assert!(
            open(&holders, &lookups, "http://a", |_| Ok(()))
                .await
                .0
                .is_ok()
        );
        // The connection broke after the request rode with the open.
        let broken = |_: &str| {
            Err(Missed {
                refusal: Refusal::NotDelivered("the holding replica answered None".into()),
                untouched: false,
            })
        };
        let (outcome, tried) = open(&holders, &lookups, "http://b", broken).await;
        assert!(matches!(outcome, Err(Refusal::NotDelivered(_))));
        assert_eq!(tried, dialled(&["http://a"]));
        assert_eq!(lookups.load(Ordering::SeqCst), 1);
        // But the holder is forgotten: the next request asks again.
        let (_, tried) = open(&holders, &lookups, "http://b", |_| Ok(())).await;
        assert_eq!(
            (tried, lookups.load(Ordering::SeqCst)),
            (dialled(&["http://b"]), 2)
        );
    }

    #[tokio::test]
    async fn a_stale_holder_is_asked_for_again() {
        // Every entry is stale at once with no TTL.
        let holders = Holders::new(Duration::ZERO);
        let lookups = AtomicUsize::new(0);
        for expected in 1..=2 {
            let (outcome, tried) = open(&holders, &lookups, "http://a", |_| Ok(())).await;
            assert!(outcome.is_ok());
            assert_eq!(tried, dialled(&["http://a"]));
            assert_eq!(lookups.load(Ordering::SeqCst), expected);
        }
    }
}
