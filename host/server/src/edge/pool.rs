//! Which connections the edge keeps when it is full. Every connection
//! starts *unproven*; a request on it that carries a valid credential
//! makes it *proven* (auth calls [`ThisConnection::prove`]), and a health
//! check makes an unproven one a *probe*. Unproven connections and probes
//! each have a pool of their own: one more than the pool holds closes the
//! pool's idle connection that waited longest, or, when none is idle, the
//! one busy longest. So anonymous clients, however many, only ever push
//! each other out: a health check on a new connection and a caller with a
//! credential are served (what nginx's `limit_conn` per class and HAProxy's
//! `maxconn` per frontend give, without a second listener).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// What a connection showed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Nothing yet: the pool a flood of anonymous connections fills.
    Unproven,
    /// Health checks only.
    Probe,
    /// A request on it carried a valid credential.
    Proven,
}

struct Entry {
    class: Class,
    /// Requests in flight on it (a request is in flight until its answer's
    /// head is written).
    busy: usize,
    /// Since when it is idle (no request in flight), or busy.
    since: Instant,
    /// Closes it.
    close: oneshot::Sender<()>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    entries: HashMap<u64, Entry>,
}

impl Inner {
    fn count(&self, class: Class) -> usize {
        self.entries.values().filter(|e| e.class == class).count()
    }

    /// The connection of `class` to close first (never `spare`): the idle
    /// one idle longest, else the one busy longest.
    fn victim(&self, class: Class, spare: Option<u64>) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(id, e)| e.class == class && Some(**id) != spare)
            .min_by_key(|(_, e)| (e.busy > 0, e.since))
            .map(|(id, _)| *id)
    }

    fn close(&mut self, id: u64) {
        // The entry goes now, so the count is right at once; its task
        // drops the socket when it sees the signal.
        if let Some(entry) = self.entries.remove(&id) {
            let _ = entry.close.send(());
        }
    }
}

/// The connections of one listener, by class.
pub(super) struct Pool {
    inner: Mutex<Inner>,
    /// Signalled when a connection goes.
    freed: Notify,
    max_connections: usize,
    max_unproven: usize,
    max_probes: usize,
}

impl Pool {
    pub(super) fn new(limits: &super::EdgeLimits) -> Arc<Self> {
        let max_connections = limits.max_connections.max(1);
        Arc::new(Self {
            inner: Mutex::default(),
            freed: Notify::new(),
            max_connections,
            max_unproven: limits.max_unproven.clamp(1, max_connections),
            max_probes: limits.max_probes.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("connection pool lock")
    }

    /// Resolves when one more connection may be accepted: below the hard
    /// cap, or one that is not proven can make room.
    pub(super) async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            {
                let inner = self.lock();
                if inner.entries.len() < self.max_connections
                    || inner.entries.values().any(|e| e.class != Class::Proven)
                {
                    return;
                }
            }
            freed.await;
        }
    }

    /// Registers a new connection as unproven, closing others to keep the
    /// pools within their limits; the receiver resolves when it is closed.
    /// `None` when every connection is proven and the cap is reached (they
    /// proved themselves after [`Pool::room`] let this one be accepted):
    /// the caller holds the socket unserved until there is room again.
    pub(super) fn admit(self: &Arc<Self>) -> Option<(Connection, oneshot::Receiver<()>)> {
        let mut inner = self.lock();
        while inner.count(Class::Unproven) + 1 > self.max_unproven
            || inner.entries.len() + 1 > self.max_connections
        {
            let victim = inner
                .victim(Class::Unproven, None)
                .or_else(|| inner.victim(Class::Probe, None))?;
            tracing::debug!(
                connection = victim,
                "closing an unproven connection to make room"
            );
            inner.close(victim);
        }
        let (close, closed) = oneshot::channel();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.entries.insert(
            id,
            Entry {
                class: Class::Unproven,
                busy: 0,
                since: Instant::now(),
                close,
            },
        );
        drop(inner);
        let connection = Connection {
            id,
            pool: self.clone(),
        };
        Some((connection, closed))
    }

    fn promote(&self, id: u64, to: Class) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(&id) else {
            return;
        };
        match (entry.class, to) {
            (Class::Unproven, _) | (Class::Probe, Class::Proven) => entry.class = to,
            _ => return,
        }
        if to == Class::Probe
            && inner.count(Class::Probe) > self.max_probes
            && let Some(victim) = inner.victim(Class::Probe, Some(id))
        {
            inner.close(victim);
        }
    }

    fn set_busy(&self, id: u64, starting: bool) {
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get_mut(&id) {
            let was_busy = entry.busy > 0;
            if starting {
                entry.busy += 1;
            } else {
                entry.busy = entry.busy.saturating_sub(1);
            }
            if was_busy != (entry.busy > 0) {
                entry.since = Instant::now();
            }
        }
    }

    fn remove(&self, id: u64) {
        self.lock().entries.remove(&id);
        self.freed.notify_one();
    }
}

/// One connection of the pool. The socket holds one (so an upgraded
/// websocket stays counted) and every request on it carries one as an
/// extension, for auth to prove it.
#[derive(Clone)]
pub struct Connection {
    id: u64,
    pool: Arc<Pool>,
}

impl Connection {
    /// Marks the connection as one a request with a valid credential came on.
    pub fn prove(&self) {
        self.pool.promote(self.id, Class::Proven);
    }

    /// Marks an unproven connection as a health checker's.
    pub(super) fn probe(&self) {
        self.pool.promote(self.id, Class::Probe);
    }

    /// Counts a request in flight until the guard drops.
    pub(super) fn busy(&self) -> Busy {
        self.pool.set_busy(self.id, true);
        Busy(self.clone())
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("id", &self.id).finish()
    }
}

/// A request in flight on a connection.
pub(super) struct Busy(Connection);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.pool.set_busy(self.0.id, false);
    }
}

/// Held by the socket: the connection leaves the pool when it closes.
pub(super) struct Registration(pub(super) Connection);

impl Drop for Registration {
    fn drop(&mut self) {
        self.0.pool.remove(self.0.id);
    }
}

/// The connection a request came on, for auth to mark it proven once the
/// request's credential checked out. In-process requests (the console's
/// calls to the API) and `oneshot` tests have none, and proving is then
/// nothing.
#[derive(Debug, Clone, Default)]
pub struct ThisConnection(Option<Connection>);

impl ThisConnection {
    /// Marks the connection as a credential holder's: the edge keeps it
    /// when anonymous connections fill their pool.
    pub fn prove(&self) {
        if let Some(connection) = &self.0 {
            connection.prove();
        }
    }

    /// The connection of a request's parts.
    pub fn of(parts: &Parts) -> Self {
        Self(parts.extensions.get::<Connection>().cloned())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ThisConnection {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Self::of(parts))
    }
}
