//! [`DialledSessions`]: the frontend's side of the `nats` set's streams.
//!
//! One session per node and lane, dialled when a stream first needs it.
//! Opens that come while it is dialled wait for that one dial (a shared
//! future), so a burst of requests to a fresh worker makes one connection.
//! A session that was lost (its connection ended: its streams were reset)
//! or a dial that failed is dialled again by the next open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use switchyard_runtime::Runtime;

use super::{pump, session_service};
use crate::Refusal;
use crate::component::ComponentSpec;
use crate::direct::{self, NodeAddress, Resolver};
use crate::stream::{Stream, StreamReader};
use crate::stream_seam::{Lane, StreamsSeam};
use crate::tunnel::{Side, TunnelSession, loopback};

/// How long a node's address and key are used without asking again.
const ADDRESS_TTL: Duration = Duration::from_secs(2);

type Dial = Shared<BoxFuture<'static, Result<TunnelSession, Refusal>>>;

/// The streams seam of the `nats` set.
pub struct DialledSessions {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<Runtime>,
    spec: ComponentSpec,
    resolve: Resolver,
    /// Node addresses found recently: a request does not wait for the
    /// database. An entry lives [`ADDRESS_TTL`], and a failed dial drops it
    /// (the worker may have moved or registered again).
    addresses: Mutex<HashMap<String, (Instant, NodeAddress)>>,
    sessions: Mutex<HashMap<(String, Lane), Dial>>,
}

impl DialledSessions {
    /// Dials the addresses `resolve` finds; the sessions run `spec`.
    pub fn new(runtime: Arc<Runtime>, spec: ComponentSpec, resolve: Resolver) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                spec,
                resolve,
                addresses: Mutex::new(HashMap::new()),
                sessions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The node's live session on `lane`, dialled if there is none.
    fn session(&self, node: &str, lane: Lane) -> Dial {
        let key = (node.to_string(), lane);
        let mut sessions = self.inner.sessions.lock().expect("sessions lock");
        if let Some(dial) = sessions.get(&key)
            && usable(dial)
        {
            return dial.clone();
        }
        // Forget the dead, so nodes that left are not held (a new dial is
        // rare: once per node and lane, and again after a loss).
        sessions.retain(|_, dial| usable(dial));
        // Weak: the map holds the dial, which must not hold the map's owner
        // (a dial nobody polls to its end would keep both forever).
        let inner = Arc::downgrade(&self.inner);
        let node = node.to_string();
        let dial = async move {
            let Some(inner) = inner.upgrade() else {
                return Err(Refusal::NotDelivered("the carrier set has ended".into()));
            };
            inner.dial(&node, lane).await
        }
        .boxed()
        .shared();
        sessions.insert(key, dial.clone());
        dial
    }
}

/// Whether a dial is under way or gave a session that still runs.
fn usable(dial: &Dial) -> bool {
    match dial.peek() {
        None => true,
        Some(Ok(session)) => !session.is_lost(),
        Some(Err(_)) => false,
    }
}

impl Inner {
    async fn dial(&self, node: &str, lane: Lane) -> Result<TunnelSession, Refusal> {
        let target = self.address(node).await?;
        let dialled = async {
            let service = session_service(lane);
            let connection =
                direct::dial(&target, &service)
                    .await
                    .map_err(|refusal| match refusal {
                        // Not the stream's service: the worker runs no sessions.
                        Refusal::UnknownService => Refusal::NotDelivered(format!(
                            "{}: the worker does not serve `{service}`",
                            target.address
                        )),
                        other => other,
                    })?;
            let (session, transport) = TunnelSession::start(
                self.runtime.clone(),
                self.spec.clone(),
                Side::Frontend,
                lane,
                // A frontend serves nothing on a session.
                loopback::refuse_all(),
            )
            .await
            .map_err(Refusal::NotDelivered)?;
            pump(transport, connection);
            Ok(session)
        }
        .await;
        if let Err(Refusal::NotDelivered(why)) = &dialled {
            tracing::debug!(%node, lane = lane.as_str(), error = %why, "dialling a node's session failed");
            self.addresses.lock().expect("addresses lock").remove(node);
        }
        dialled
    }

    async fn address(&self, node: &str) -> Result<NodeAddress, Refusal> {
        if let Some((at, found)) = self.addresses.lock().expect("addresses lock").get(node)
            && at.elapsed() < ADDRESS_TTL
        {
            return Ok(found.clone());
        }
        let found = (self.resolve)(node.to_string())
            .await
            .map_err(Refusal::NotDelivered)?;
        self.addresses
            .lock()
            .expect("addresses lock")
            .insert(node.to_string(), (Instant::now(), found.clone()));
        Ok(found)
    }
}

impl StreamsSeam for DialledSessions {
    fn open(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
    ) -> BoxFuture<'static, Result<Stream, Refusal>> {
        let dial = self.session(node, lane);
        let service = service.to_string();
        Box::pin(async move { dial.await?.open(&service).await })
    }

    fn call(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        let dial = self.session(node, lane);
        let service = service.to_string();
        Box::pin(async move { dial.await?.call(&service, request).await })
    }
}
