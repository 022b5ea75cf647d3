//! Workers: registration tokens (which only register), nodes with their own
//! credentials (SHA-256 only; every registration mints a new one), and the
//! claims on each worker's connection.

use std::collections::BTreeMap;

use switchyard_protocol::carrier::Attachment;
use switchyard_protocol::node::Inventory;
pub use switchyard_protocol::nodes::{Node, RegistrationToken};
use switchyard_protocol::state::NodeState;
use tokio_postgres::types::Json;

use crate::keys::{mint_token, random_id, token_digest};
use crate::{Store, StoreError, state_column};

/// What limits a new registration token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenLimits {
    /// Seconds it lives; `None`: until revoked.
    pub ttl_seconds: Option<i64>,
    /// Registrations it may make; `None`: no limit.
    pub max_uses: Option<i32>,
}

/// Why a registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationRefused {
    /// No live registration token has this digest (unknown, revoked,
    /// expired or used up).
    Token,
    /// The name belongs to a node, and neither its credential was shown
    /// nor an admin released it.
    NameTaken,
}

fn token_columns() -> String {
    format!(
        "id, name, to_char(created_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(revoked_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(expires_at AT TIME ZONE 'UTC', {TIME}), max_uses, uses, \
         to_char(last_used_at AT TIME ZONE 'UTC', {TIME})"
    )
}

fn registration_token(row: &tokio_postgres::Row) -> RegistrationToken {
    RegistrationToken {
        id: row.get(0),
        name: row.get(1),
        created_at: row.get(2),
        revoked_at: row.get(3),
        expires_at: row.get(4),
        max_uses: row.get(5),
        uses: row.get(6),
        last_used_at: row.get(7),
    }
}

/// What the connect endpoint needs to authenticate a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCredential {
    /// The node's state.
    pub state: NodeState,
    /// SHA-256 of its current credential.
    pub credential_sha256: Vec<u8>,
}

const TIME: &str = "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'";

fn node_columns() -> String {
    format!(
        "id, name, state, address, inventory, \
         to_char(registered_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(approved_at AT TIME ZONE 'UTC', {TIME}), \
         to_char(last_heartbeat_at AT TIME ZONE 'UTC', {TIME}), maintenance, labels, files_held"
    )
}

fn node(row: &tokio_postgres::Row) -> Node {
    Node {
        id: row.get(0),
        name: row.get(1),
        state: state_column(row, 2),
        address: row.get(3),
        // Written only from a parsed inventory; one that no longer parses
        // (an older worker's) reads as empty rather than failing the list.
        inventory: row
            .try_get::<_, Json<Inventory>>(4)
            .map(|inventory| inventory.0)
            .unwrap_or_default(),
        registered_at: row.get(5),
        approved_at: row.get(6),
        last_heartbeat_at: row.get(7),
        maintenance: row.get(8),
        labels: row.get::<_, Json<BTreeMap<String, String>>>(9).0,
        files_held: row.get(10),
    }
}

/// What a worker sends when it registers.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    /// Its name.
    pub name: &'a str,
    /// A routable address, if any.
    pub address: Option<&'a str>,
    /// Its inventory.
    pub inventory: &'a Inventory,
    /// Its labels (already validated).
    pub labels: &'a BTreeMap<String, String>,
    /// Approve at once (the frontend's `--auto-approve`).
    pub auto_approve: bool,
    /// The credential of the node of this name, when it registers again.
    pub credential: Option<&'a str>,
}

/// What a heartbeat reports; `None` leaves the stored value as it is
/// (workers send their files only when the set changed).
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatReport<'a> {
    /// The machine and its engines now.
    pub inventory: &'a Inventory,
    /// Its labels (already validated).
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// SHA-256s of the complete files in its placement cache.
    pub files_held: Option<&'a [String]>,
    /// Its carriers (absent: kept as they were).
    pub carriers: Option<&'a Attachment>,
}

impl Store {
    /// Creates a registration token; the token is returned once.
    pub async fn create_registration_token(
        &self,
        name: &str,
        created_by: &str,
        limits: TokenLimits,
    ) -> Result<(RegistrationToken, String), StoreError> {
        let token = mint_token();
        let row = self
            .conn()
            .await?
            .query_one(
                &format!(
                    "INSERT INTO registration_tokens (id, name, token_sha256, created_by, expires_at, max_uses)
                     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::bigint), $6)
                     RETURNING {}",
                    token_columns()
                ),
                &[
                    &random_id("reg"),
                    &name,
                    &token_digest(&token),
                    &created_by,
                    &limits.ttl_seconds,
                    &limits.max_uses,
                ],
            )
            .await?;
        Ok((registration_token(&row), token))
    }

    /// Every registration token, newest first (never the tokens themselves).
    pub async fn registration_tokens(&self) -> Result<Vec<RegistrationToken>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {} FROM registration_tokens ORDER BY created_at DESC, id",
                    token_columns()
                ),
                &[],
            )
            .await?;
        Ok(rows.iter().map(registration_token).collect())
    }

    /// Revokes a registration token (again: no change); `None` for an unknown id.
    pub async fn revoke_registration_token(
        &self,
        id: &str,
    ) -> Result<Option<RegistrationToken>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "UPDATE registration_tokens SET revoked_at = coalesce(revoked_at, now())
                     WHERE id = $1 RETURNING {}",
                    token_columns()
                ),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(registration_token))
    }

    /// Whether a registration token may register now (live, not expired,
    /// uses left). Read only: [`Store::register_node`] counts the use.
    pub async fn registration_token_usable(&self, token_sha256: &[u8]) -> Result<bool, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT 1 FROM registration_tokens
                 WHERE token_sha256 = $1 AND revoked_at IS NULL
                   AND (expires_at IS NULL OR expires_at > now())
                   AND (max_uses IS NULL OR uses < max_uses)",
                &[&token_sha256],
            )
            .await?;
        Ok(row.is_some())
    }

    /// Registers (or re-registers) a worker by name with a fresh credential,
    /// returned once, if the registration token with digest `token_sha256`
    /// is live (not revoked, not expired, not used up; this use is counted).
    ///
    /// A name that is taken is registered again only with that node's
    /// current credential (`registration.credential`) or after an admin
    /// released it ([`Store::release_node`]): the registration token alone
    /// must not lock out, or take over, a node that exists. A
    /// re-registration replaces the old credential and waits for approval
    /// again unless `auto_approve`.
    pub async fn register_node(
        &self,
        token_sha256: &[u8],
        registration: Registration<'_>,
    ) -> Result<Result<(Node, String), RegistrationRefused>, StoreError> {
        let credential = mint_token();
        let state = if registration.auto_approve {
            NodeState::Healthy
        } else {
            NodeState::Pending
        };
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // Counted in the same transaction: a refused registration uses nothing,
        // and two registrations racing for the last use cannot both have it.
        let token = tx
            .query_opt(
                "UPDATE registration_tokens SET uses = uses + 1, last_used_at = now()
                 WHERE token_sha256 = $1 AND revoked_at IS NULL
                   AND (expires_at IS NULL OR expires_at > now())
                   AND (max_uses IS NULL OR uses < max_uses)
                 RETURNING id",
                &[&token_sha256],
            )
            .await?;
        if token.is_none() {
            return Ok(Err(RegistrationRefused::Token));
        }
        let shown = registration.credential.map(token_digest);
        // The conflict's WHERE makes taking a name and checking the right
        // to it one statement: no window between the check and the write.
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO nodes (id, name, state, credential_sha256, address, inventory, approved_at, approved_by, labels)
                     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7 THEN now() END, CASE WHEN $7 THEN 'auto-approve' END, $8)
                     ON CONFLICT (name) DO UPDATE SET
                        state = EXCLUDED.state, credential_sha256 = EXCLUDED.credential_sha256,
                        address = EXCLUDED.address, inventory = EXCLUDED.inventory,
                        labels = EXCLUDED.labels, files_held = '{{}}',
                        registered_at = now(), approved_at = EXCLUDED.approved_at,
                        approved_by = EXCLUDED.approved_by, registration_open = false
                     WHERE nodes.registration_open OR nodes.credential_sha256 = $9
                     RETURNING {}",
                    node_columns()
                ),
                &[
                    &random_id("node"),
                    &registration.name,
                    &state.as_str(),
                    &token_digest(&credential),
                    &registration.address,
                    &Json(registration.inventory),
                    &registration.auto_approve,
                    &Json(registration.labels),
                    &shown,
                ],
            )
            .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(Err(RegistrationRefused::NameTaken));
        };
        tx.commit().await?;
        Ok(Ok((node(&row), credential)))
    }

    /// Lets the next registration of a node's name take it over (a worker
    /// that lost its identity): its current credential is revoked at once.
    /// `None` for an unknown node.
    pub async fn release_node(&self, id: &str) -> Result<Option<Node>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "UPDATE nodes SET registration_open = true, credential_sha256 = $2
                     WHERE id = $1 RETURNING {}",
                    node_columns()
                ),
                // The digest of a token nobody holds.
                &[&id, &token_digest(&mint_token())],
            )
            .await?;
        Ok(row.as_ref().map(node))
    }

    /// What authenticating a node needs; `None` for an unknown node.
    pub async fn node_credential(&self, id: &str) -> Result<Option<NodeCredential>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT state, credential_sha256 FROM nodes WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(row.map(|r| NodeCredential {
            state: state_column(&r, 0),
            credential_sha256: r.get(1),
        }))
    }

    /// Records a heartbeat. An approved node that was unhealthy or offline is healthy again.
    pub async fn heartbeat_node(
        &self,
        id: &str,
        beat: HeartbeatReport<'_>,
    ) -> Result<Node, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "UPDATE nodes SET last_heartbeat_at = now(), inventory = $2,
                        labels = coalesce($3, labels), files_held = coalesce($4, files_held),
                        attached = CASE WHEN $5 THEN $6 ELSE attached END,
                        epoch_seen = CASE WHEN $5 THEN $7 ELSE epoch_seen END,
                        cannot_follow = CASE WHEN $5 THEN $8 ELSE cannot_follow END,
                        -- A node demoted for its carriers is promoted by the
                        -- health monitor once it reports the active set.
                        state = CASE WHEN state IN ('unhealthy', 'offline') AND demoted_reason IS NULL
                            THEN 'healthy' ELSE state END
                     WHERE id = $1 RETURNING {}",
                    node_columns()
                ),
                &[
                    &id,
                    &Json(beat.inventory),
                    &beat.labels.map(Json),
                    &beat.files_held,
                    &beat.carriers.is_some(),
                    &beat.carriers.map(|c| c.attached.clone()),
                    &beat.carriers.and_then(|c| c.epoch_seen),
                    &Json(beat.carriers.map(|c| c.cannot_follow.clone()).unwrap_or_default()),
                ],
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("node {id}")))?;
        Ok(node(&row))
    }

    /// Approves a pending node; `None` when there is no such node.
    pub async fn approve_node(&self, id: &str, by: &str) -> Result<Option<Node>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "UPDATE nodes SET
                        state = CASE WHEN state = 'pending' THEN 'healthy' ELSE state END,
                        approved_at = coalesce(approved_at, now()), approved_by = coalesce(approved_by, $2)
                     WHERE id = $1 RETURNING {}",
                    node_columns()
                ),
                &[&id, &by],
            )
            .await?;
        Ok(row.as_ref().map(node))
    }

    /// Every node, by name.
    pub async fn nodes(&self) -> Result<Vec<Node>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {} FROM nodes ORDER BY name", node_columns()),
                &[],
            )
            .await?;
        Ok(rows.iter().map(node).collect())
    }

    /// One node.
    pub async fn node(&self, id: &str) -> Result<Option<Node>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {} FROM nodes WHERE id = $1", node_columns()),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(node))
    }

    /// Claims a node's lane for a replica; returns the claim's epoch.
    pub async fn claim_connection(
        &self,
        node: &str,
        lane: &str,
        instance: &str,
    ) -> Result<i64, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "INSERT INTO node_connections (node_id, lane, instance_id, epoch)
                 VALUES ($1, $2, $3, nextval('node_connection_epochs'))
                 ON CONFLICT (node_id, lane) DO UPDATE SET instance_id = EXCLUDED.instance_id,
                    epoch = EXCLUDED.epoch, claimed_at = now(), released_at = NULL
                 RETURNING epoch",
                &[&node, &lane, &instance],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Releases a claim, only if this replica still holds it at this epoch.
    pub async fn release_connection(
        &self,
        node: &str,
        lane: &str,
        instance: &str,
        epoch: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE node_connections SET released_at = now()
                 WHERE node_id = $1 AND lane = $2 AND instance_id = $3 AND epoch = $4 AND released_at IS NULL",
                &[&node, &lane, &instance, &epoch],
            )
            .await?;
        Ok(n == 1)
    }
}

/// What an admin does to a node's scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// No new placements; its replicas move away.
    Drain,
    /// Back to normal.
    Undrain,
    /// No new placements; its replicas stay.
    Maintenance,
}

impl Store {
    /// Changes a node's scheduling; `None` for an unknown node.
    pub async fn schedule_node(
        &self,
        id: &str,
        action: Schedule,
    ) -> Result<Option<Node>, StoreError> {
        let set = match action {
            Schedule::Drain => "state = CASE WHEN state = 'pending' THEN state ELSE 'draining' END",
            Schedule::Undrain => {
                "state = CASE WHEN state = 'draining' THEN 'healthy' ELSE state END, maintenance = false"
            }
            Schedule::Maintenance => "maintenance = true",
        };
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "UPDATE nodes SET {set} WHERE id = $1 RETURNING {}",
                    node_columns()
                ),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(node))
    }

    /// Marks late nodes unhealthy: not routed to, nothing placed, their
    /// replicas kept (a heartbeat makes them healthy again).
    pub async fn mark_unhealthy(&self, ids: &[String]) -> Result<u64, StoreError> {
        Ok(self
            .conn()
            .await?
            .execute(
                "UPDATE nodes SET state = 'unhealthy' WHERE id = ANY($1) AND state = 'healthy'",
                &[&ids],
            )
            .await?)
    }

    /// Marks silent nodes offline (a heartbeat makes them healthy again).
    pub async fn mark_offline(&self, ids: &[String]) -> Result<u64, StoreError> {
        Ok(self
            .conn()
            .await?
            .execute(
                "UPDATE nodes SET state = 'offline' WHERE id = ANY($1) AND state IN ('healthy', 'unhealthy')",
                &[&ids],
            )
            .await?)
    }
}
