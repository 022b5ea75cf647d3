//! The cluster's carrier row, replica addresses and the relay secret, and
//! who holds each worker's session.

use crate::{Store, StoreError};

/// The `cluster_carrier` row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterCarrier {
    /// The carrier set: `nats` or `tunnel`.
    pub carrier: String,
    /// Bumped by every switch.
    pub epoch: i64,
    /// `active`, or `switching` during a change.
    pub state: String,
}

/// The replica that holds a worker's lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionOwner {
    /// The replica's id.
    pub instance_id: String,
    /// The claim's epoch.
    pub epoch: i64,
    /// Where the replica is reached, if it said.
    pub address: Option<String>,
}

impl Store {
    /// The carrier row, seeded with `default` when absent (once: a
    /// concurrent seed by another replica wins and is returned).
    pub async fn ensure_cluster_carrier(
        &self,
        default: &str,
    ) -> Result<ClusterCarrier, StoreError> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO cluster_carrier (carrier) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&default],
        )
        .await?;
        let row = conn
            .query_one("SELECT carrier, epoch, state FROM cluster_carrier", &[])
            .await?;
        Ok(ClusterCarrier {
            carrier: row.get(0),
            epoch: row.get(1),
            state: row.get(2),
        })
    }

    /// The carrier row, if seeded.
    pub async fn cluster_carrier(&self) -> Result<Option<ClusterCarrier>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt("SELECT carrier, epoch, state FROM cluster_carrier", &[])
            .await?;
        Ok(row.map(|row| ClusterCarrier {
            carrier: row.get(0),
            epoch: row.get(1),
            state: row.get(2),
        }))
    }

    /// The secret replicas present to each other to relay streams.
    pub async fn relay_secret(&self) -> Result<String, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "SELECT secret FROM cluster_secrets WHERE name = 'relay'",
                &[],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Records where other replicas reach this one.
    pub async fn set_instance_address(&self, id: &str, address: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE instances SET address = $2 WHERE id = $1",
                &[&id, &address],
            )
            .await?;
        Ok(())
    }

    /// Who holds a node's lane now, if anyone.
    pub async fn connection_owner(
        &self,
        node: &str,
        lane: &str,
    ) -> Result<Option<ConnectionOwner>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT c.instance_id, c.epoch, i.address FROM node_connections c
                 LEFT JOIN instances i ON i.id = c.instance_id
                 WHERE c.node_id = $1 AND c.lane = $2 AND c.released_at IS NULL",
                &[&node, &lane],
            )
            .await?;
        Ok(row.map(|row| ConnectionOwner {
            instance_id: row.get(0),
            epoch: row.get(1),
            address: row.get(2),
        }))
    }
}
