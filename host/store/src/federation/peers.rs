//! Peers: the clusters this one is paired with, and the state of each link.

use switchyard_protocol::federation::{LinkState, LinkStatus, Peer};

use super::{Bounded, Insert, has_room, time};
use crate::{Store, StoreError, state_column};

fn columns() -> String {
    format!(
        "id, label, url, cluster_id, public_key, link_state, link_error, {}, {}",
        time("link_changed_at"),
        time("verified_at")
    )
}

fn peer(row: &tokio_postgres::Row) -> Peer {
    let state: LinkState = state_column(row, 5);
    Peer {
        id: row.get(0),
        label: row.get(1),
        url: row.get(2),
        cluster_id: row.get(3),
        public_key: row.get(4),
        link: LinkStatus {
            state,
            last_error: row.get(6),
            since: row.get(7),
        },
        last_verified_at: row.get(8),
    }
}

/// The advisory lock of the replica that dials the cluster's links.
const DIALLER_LOCK: i64 = 0x0073_7966_6564_6961;

/// The link dialler lock, held while this lives.
pub struct DiallerLock(tokio_postgres::Client);

impl std::fmt::Debug for DiallerLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiallerLock").finish_non_exhaustive()
    }
}

impl DiallerLock {
    /// Whether the lock is still held (its connection is open).
    pub fn is_held(&self) -> bool {
        !self.0.is_closed()
    }
}

/// A new peer.
#[derive(Debug, Clone)]
pub struct NewPeer<'a> {
    /// Its label here.
    pub label: &'a str,
    /// Where this cluster dials it, if it does.
    pub url: Option<&'a str>,
    /// Its cluster id.
    pub cluster_id: &'a str,
    /// Its public key.
    pub public_key: &'a str,
}

impl Store {
    /// Registers a peer whose key was just proved, unless the bound is
    /// reached or its label, URL or cluster id is taken.
    pub async fn insert_peer(&self, new: NewPeer<'_>) -> Result<Insert<Peer>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !has_room(&tx, Bounded::Peers).await? {
            return Ok(Insert::Full(Bounded::Peers));
        }
        let id = crate::keys::random_id("peer");
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO federation_peers (id, label, url, cluster_id, public_key, verified_at) \
                     VALUES ($1, $2, $3, $4, $5, now()) ON CONFLICT DO NOTHING RETURNING {}",
                    columns()
                ),
                &[&id, &new.label, &new.url, &new.cluster_id, &new.public_key],
            )
            .await?;
        tx.commit().await?;
        Ok(match row {
            Some(row) => Insert::Done(peer(&row)),
            None => Insert::Exists,
        })
    }

    /// Every peer, by label.
    pub async fn peers(&self) -> Result<Vec<Peer>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {} FROM federation_peers ORDER BY label", columns()),
                &[],
            )
            .await?;
        Ok(rows.iter().map(peer).collect())
    }

    /// The peer with this id or label.
    pub async fn peer(&self, id_or_label: &str) -> Result<Option<Peer>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {} FROM federation_peers WHERE id = $1 OR label = $1 \
                     ORDER BY (id = $1) DESC LIMIT 1",
                    columns()
                ),
                &[&id_or_label],
            )
            .await?;
        Ok(row.as_ref().map(peer))
    }

    /// Peers that share this label, URL or cluster id (at most three).
    pub async fn peers_matching(
        &self,
        label: &str,
        url: Option<&str>,
        cluster_id: &str,
    ) -> Result<Vec<Peer>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {} FROM federation_peers \
                     WHERE label = $1 OR url = $2 OR cluster_id = $3",
                    columns()
                ),
                &[&label, &url, &cluster_id],
            )
            .await?;
        Ok(rows.iter().map(peer).collect())
    }

    /// The peer whose key this is.
    pub async fn peer_by_key(&self, public_key: &str) -> Result<Option<Peer>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {} FROM federation_peers WHERE public_key = $1",
                    columns()
                ),
                &[&public_key],
            )
            .await?;
        Ok(row.as_ref().map(peer))
    }

    /// Records the link's state as `instance` sees it; `up` also records
    /// that the peer's key was proved now.
    pub async fn set_link_state(
        &self,
        peer_id: &str,
        state: LinkState,
        error: Option<&str>,
        instance: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE federation_peers SET link_state = $2, link_error = $3, \
                   link_instance = CASE WHEN $2 = 'up' THEN $4 ELSE link_instance END, \
                   link_changed_at = CASE WHEN link_state = $2 THEN link_changed_at ELSE now() END, \
                   verified_at = CASE WHEN $2 = 'up' THEN now() ELSE verified_at END \
                 WHERE id = $1",
                &[&peer_id, &state.as_str(), &error, &instance],
            )
            .await?;
        Ok(())
    }

    /// The replica holding a peer's link, and its address, if the link is up.
    pub async fn link_holder(
        &self,
        peer_id: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT p.link_instance, i.address FROM federation_peers p \
                 JOIN instances i ON i.id = p.link_instance \
                 WHERE p.id = $1 AND p.link_state = 'up'",
                &[&peer_id],
            )
            .await?;
        Ok(row.map(|row| (row.get(0), row.get(1))))
    }

    /// Takes the cluster's link dialler lock on a connection of its own,
    /// if no other replica holds it: one replica dials each peer, so two
    /// clusters share one link; the others relay through it. The lock
    /// ends with the connection (the replica died): another takes it.
    pub async fn try_dialler_lock(&self) -> Result<Option<DiallerLock>, StoreError> {
        let client = self.dedicated().await?;
        let row = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&DIALLER_LOCK])
            .await?;
        Ok(row.get::<_, bool>(0).then_some(DiallerLock(client)))
    }

    /// Forgets a peer: its requests, grants (and their slots), operation
    /// receipts go with it. Managed services it created stay.
    ///
    /// Every replica hears of it at commit ([`super::CHANGES_CHANNEL`]):
    /// each closes its link to the peer and ends the operations in flight
    /// under its grants.
    pub async fn delete_peer(&self, peer_id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let grants = tx
            .query(
                "SELECT id FROM federation_grants WHERE peer_id = $1",
                &[&peer_id],
            )
            .await?;
        let n = tx
            .execute("DELETE FROM federation_peers WHERE id = $1", &[&peer_id])
            .await?;
        let changes = grants
            .iter()
            .map(|row| super::Change::Grant(row.get(0)))
            .chain([super::Change::Peer(peer_id.to_string())]);
        for change in changes {
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&super::CHANGES_CHANNEL, &change.to_payload()],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }
}
