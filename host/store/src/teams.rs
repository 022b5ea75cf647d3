//! Teams: created, listed with their live keys, and deleted only when no
//! live key is in them.

use switchyard_protocol::teams::Team;

use crate::{Store, StoreError};

/// How a deletion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeamDeletion {
    /// The team is gone; its revoked keys no longer name it.
    Deleted,
    /// No such team.
    Missing,
    /// Live keys are still in it (this many).
    InUse(u64),
}

const COLUMNS: &str = "t.name, \
     to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
     (SELECT count(*) FROM api_keys k WHERE k.team = t.name AND k.revoked_at IS NULL)";

fn team(row: &tokio_postgres::Row) -> Team {
    Team {
        name: row.get(0),
        created_at: row.get(1),
        keys: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
    }
}

impl Store {
    /// Creates a team; `None` when one of that name exists.
    pub async fn create_team(&self, name: &str) -> Result<Option<Team>, StoreError> {
        let conn = self.conn().await?;
        let inserted = conn
            .execute(
                "INSERT INTO teams (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                &[&name],
            )
            .await?;
        if inserted == 0 {
            return Ok(None);
        }
        let row = conn
            .query_one(
                &format!("SELECT {COLUMNS} FROM teams t WHERE t.name = $1"),
                &[&name],
            )
            .await?;
        Ok(Some(team(&row)))
    }

    /// Every team, by name.
    pub async fn teams(&self) -> Result<Vec<Team>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM teams t ORDER BY t.name"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(team).collect())
    }

    /// Deletes a team unless a live key is in it. The team row is locked
    /// first, so a key being created in it either commits before (and is
    /// counted) or fails its foreign key check after.
    pub async fn delete_team(&self, name: &str) -> Result<TeamDeletion, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let found = tx
            .query_opt("SELECT 1 FROM teams WHERE name = $1 FOR UPDATE", &[&name])
            .await?;
        if found.is_none() {
            return Ok(TeamDeletion::Missing);
        }
        let live: i64 = tx
            .query_one(
                "SELECT count(*) FROM api_keys WHERE team = $1 AND revoked_at IS NULL",
                &[&name],
            )
            .await?
            .get(0);
        if live > 0 {
            return Ok(TeamDeletion::InUse(u64::try_from(live).unwrap_or(0)));
        }
        tx.execute("DELETE FROM teams WHERE name = $1", &[&name])
            .await?;
        tx.commit().await?;
        Ok(TeamDeletion::Deleted)
    }
}
