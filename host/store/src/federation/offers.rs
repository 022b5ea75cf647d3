//! Offers: the resources this cluster publishes to its peers.

use switchyard_protocol::federation::{Offer, Resource};
use tokio_postgres::types::Json;

use super::{Bounded, Insert, has_room, time};
use crate::{Store, StoreError};

fn offer(row: &tokio_postgres::Row) -> Result<Offer, StoreError> {
    let Json(resource): Json<Resource> = row.get(1);
    Ok(Offer {
        id: row.get(0),
        resource,
        created_at: row.get(2),
    })
}

fn columns() -> String {
    format!("id, resource, {}", time("created_at"))
}

impl Store {
    /// Publishes an offer, unless the bound is reached or the id is taken.
    pub async fn insert_offer(
        &self,
        id: &str,
        resource: &Resource,
    ) -> Result<Insert<Offer>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !has_room(&tx, Bounded::Offers).await? {
            return Ok(Insert::Full(Bounded::Offers));
        }
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO federation_offers (id, kind, resource) VALUES ($1, $2, $3) \
                     ON CONFLICT DO NOTHING RETURNING {}",
                    columns()
                ),
                &[&id, &resource.kind().as_str(), &Json(resource)],
            )
            .await?;
        tx.commit().await?;
        match row {
            Some(row) => Ok(Insert::Done(offer(&row)?)),
            None => Ok(Insert::Exists),
        }
    }

    /// Every offer, by id.
    pub async fn offers(&self) -> Result<Vec<Offer>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {} FROM federation_offers ORDER BY id", columns()),
                &[],
            )
            .await?;
        rows.iter().map(offer).collect()
    }

    /// One offer.
    pub async fn offer(&self, id: &str) -> Result<Option<Offer>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {} FROM federation_offers WHERE id = $1", columns()),
                &[&id],
            )
            .await?;
        row.as_ref().map(offer).transpose()
    }

    /// Withdraws an offer (grants naming it stop matching it).
    pub async fn delete_offer(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute("DELETE FROM federation_offers WHERE id = $1", &[&id])
            .await?;
        Ok(n == 1)
    }
}
