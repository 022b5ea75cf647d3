//! The cluster's carrier row, replica addresses and the relay secret, and
//! who holds each worker's session.

use switchyard_protocol::state::CarrierRowState;

use crate::{Store, StoreError, state_column};

/// The `cluster_carrier` row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterCarrier {
    /// The carrier set: `nats` or `tunnel`.
    pub carrier: String,
    /// Bumped by every switch.
    pub epoch: i64,
    /// `active`, or `switching` during a change.
    pub state: CarrierRowState,
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
            state: state_column(&row, 2),
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
            state: state_column(&row, 2),
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

/// A login of the database for carriers that ride on it (pgbus).
#[derive(Clone, PartialEq, Eq)]
pub struct CarrierLogin {
    /// The role's name (one per database: roles are cluster-wide).
    pub user: String,
    /// Its password, from `cluster_secrets`.
    pub password: String,
}

impl std::fmt::Debug for CarrierLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarrierLogin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl CarrierLogin {
    /// `database_url` with this login's user and password in place of the
    /// server's (a `postgres://` URL or a `key=value` string).
    pub fn url(&self, database_url: &str) -> String {
        let url = database_url.trim();
        if let Some((scheme, rest)) = url.split_once("://") {
            // The authority ends at the first '/' or '?'; credentials end at its last '@'.
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{}:{}@{host}{tail}", self.user, self.password)
        } else {
            // In a key=value string a later key overrides an earlier one.
            format!("{url} user='{}' password='{}'", self.user, self.password)
        }
    }
}

/// Serialises the replicas' creation of the carrier role and its schema.
const CARRIER_ROLE_LOCK: &str = "switchyard:carrier-role";

impl Store {
    /// Creates (or updates) the least-privilege login carriers use: a role
    /// that owns one schema named after it (PostgreSQL's default
    /// `search_path` starts with `"$user"`, so pgbus's unqualified tables land
    /// there) and is granted nothing else: it cannot read the platform's
    /// tables (API keys, node credentials, secrets). `Ok(None)` when the
    /// server's own role may not create roles (managed PostgreSQL often
    /// withholds CREATEROLE): the caller then falls back to the server's login.
    ///
    /// This is what trusted systems do for a component that only needs a
    /// queue: a login scoped to its own objects (e.g. a Graphile Worker or
    /// pgmq schema with its own role), never the application's owner role.
    pub async fn ensure_carrier_login(&self) -> Result<Option<CarrierLogin>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1))",
            &[&CARRIER_ROLE_LOCK],
        )
        .await?;
        // Roles are shared by every database of the PostgreSQL cluster:
        // one per database, so that two Switchyard clusters (or test
        // databases) on one server do not overwrite each other's password.
        let user: String = tx
            .query_one(
                "SELECT 'switchyard_carrier_' || left(md5(current_database()), 12)",
                &[],
            )
            .await?
            .get(0);
        tx.execute(
            "INSERT INTO cluster_secrets (name, secret) VALUES ('carrier_login', \
             encode(sha256(gen_random_uuid()::text::bytea || clock_timestamp()::text::bytea), 'hex')) \
             ON CONFLICT DO NOTHING",
            &[],
        )
        .await?;
        let password: String = tx
            .query_one(
                "SELECT secret FROM cluster_secrets WHERE name = 'carrier_login'",
                &[],
            )
            .await?
            .get(0);
        let exists = tx
            .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&user])
            .await?
            .is_some();
        // DDL takes no parameters: `user` is `switchyard_carrier_` and hex,
        // `password` is hex (both made above), so quoting them is safe.
        // A new role has no attributes beyond LOGIN (no superuser, no
        // CREATEDB, no CREATEROLE: PostgreSQL's defaults); only its password
        // is kept in step, since changing attributes needs more than CREATEROLE.
        let role = match exists {
            true => format!("ALTER ROLE {user} WITH LOGIN PASSWORD '{password}'"),
            false => format!("CREATE ROLE {user} WITH LOGIN PASSWORD '{password}'"),
        };
        // A role that may not create roles, or (PostgreSQL 16+) may create
        // one but not act as it to own its schema, answers
        // insufficient_privilege: the caller warns and falls back.
        let schema = format!("CREATE SCHEMA IF NOT EXISTS {user} AUTHORIZATION {user}");
        for statement in [role, schema] {
            if let Err(e) = tx.batch_execute(&statement).await {
                let e = StoreError::from(e);
                if e.sqlstate() == Some("42501") {
                    return Ok(None);
                }
                return Err(e);
            }
        }
        tx.commit().await?;
        Ok(Some(CarrierLogin { user, password }))
    }
}

#[cfg(test)]
mod carrier_login_tests {
    use super::CarrierLogin;

    #[test]
    fn the_login_replaces_the_servers_credentials_in_both_url_forms() {
        let login = CarrierLogin {
            user: "switchyard_carrier_abc".into(),
            password: "f00d".into(),
        };
        assert_eq!(
            login.url("postgres://owner:secret@db.example:5432/switchyard?sslmode=disable"),
            "postgres://switchyard_carrier_abc:f00d@db.example:5432/switchyard?sslmode=disable"
        );
        assert_eq!(
            login.url("postgresql://db.example/switchyard"),
            "postgresql://switchyard_carrier_abc:f00d@db.example/switchyard"
        );
        assert_eq!(
            login.url("host=/tmp/pg user=postgres dbname=app"),
            "host=/tmp/pg user=postgres dbname=app user='switchyard_carrier_abc' password='f00d'"
        );
        assert!(!format!("{login:?}").contains("f00d"));
    }
}
