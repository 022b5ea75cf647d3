//! The cluster's carrier row, replica addresses and the relay secret, and
//! who holds each worker's session.

use switchyard_protocol::carrier::{Phase, Pins, SetKey};
use switchyard_protocol::state::CarrierRowState;
use tokio_postgres::types::Json;

use crate::{Store, StoreError, state_column};

/// The `cluster_carrier` row: the active set, the epoch and where a change
/// is. The row's parallel columns (`target`, `target_plugins`, `draining`,
/// `draining_plugins`, `forced`) are read into one [`Phase`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCarrier {
    /// The active carrier set (`nats`, `tunnel`) and its components (no
    /// pins on a row from before pins).
    pub active: SetKey,
    /// Grows with every move of a change.
    pub epoch: i64,
    /// Where a change is, with the set it moves to or drains.
    pub phase: Phase,
    /// Milliseconds until the prepare times out or the drain ends, by the
    /// database clock (negative: passed).
    pub deadline_in_ms: Option<i64>,
    /// The change under way (`carrier_changes.id`).
    pub change_id: Option<i64>,
}

impl ClusterCarrier {
    /// The row's state (`stable`, `prepare`, `commit`).
    pub fn state(&self) -> CarrierRowState {
        self.phase.state()
    }

    /// Whether the prepare's timeout or the drain's window has passed.
    pub fn deadline_passed(&self) -> bool {
        self.deadline_in_ms.is_some_and(|left| left <= 0)
    }
}

pub(crate) const ROW_COLUMNS: &str = "carrier, plugins, epoch, state, target, target_plugins, \
    draining, draining_plugins, \
    (extract(epoch FROM deadline - now()) * 1000)::bigint, forced, change_id";

pub(crate) fn cluster_carrier(row: &tokio_postgres::Row) -> ClusterCarrier {
    let set = |name: usize, pins: usize| {
        SetKey::new(
            row.get::<_, Option<String>>(name).unwrap_or_default(),
            row.get::<_, Option<Json<Pins>>>(pins)
                .map(|j| j.0)
                .unwrap_or_default(),
        )
    };
    // A phase missing its set's column reads as a set of no name, which
    // no build runs: the leader aborts such a prepare.
    let phase = match state_column::<CarrierRowState>(row, 3) {
        CarrierRowState::Stable => Phase::Stable,
        CarrierRowState::Prepare => Phase::Prepare {
            target: set(4, 5),
            forced: row.get(9),
        },
        CarrierRowState::Commit => Phase::Commit {
            draining: set(6, 7),
        },
    };
    ClusterCarrier {
        active: SetKey::new(row.get::<_, String>(0), row.get::<_, Json<Pins>>(1).0),
        epoch: row.get(2),
        phase,
        deadline_in_ms: row.get(8),
        change_id: row.get(10),
    }
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
    /// The carrier row, seeded with `default` and its components when
    /// absent (once: a concurrent seed by another replica wins and is
    /// returned).
    pub async fn ensure_cluster_carrier(
        &self,
        default: &str,
        plugins: &Pins,
    ) -> Result<ClusterCarrier, StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO cluster_carrier (carrier, plugins) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&default, &Json(plugins)],
            )
            .await?;
        self.cluster_carrier()
            .await?
            .ok_or_else(|| StoreError::NotFound("cluster_carrier row".into()))
    }

    /// Pins the active set's components on a row from before pins (its
    /// `plugins` empty); returns the row as it is after.
    pub async fn pin_cluster_plugins(&self, plugins: &Pins) -> Result<ClusterCarrier, StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE cluster_carrier SET plugins = $1 WHERE plugins = '{}'",
                &[&Json(plugins)],
            )
            .await?;
        self.cluster_carrier()
            .await?
            .ok_or_else(|| StoreError::NotFound("cluster_carrier row".into()))
    }

    /// Adds pins for the components the active set `carrier` runs but its
    /// row does not pin (a set that came to run another component: the
    /// `nats` set's streams now ride `tunnel` sessions); a pin the row has
    /// is kept. Nothing changes if another set became active meanwhile.
    /// Returns the row as it is after.
    pub async fn pin_missing_cluster_plugins(
        &self,
        carrier: &str,
        missing: &Pins,
    ) -> Result<ClusterCarrier, StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE cluster_carrier SET plugins = $2::jsonb || plugins WHERE carrier = $1",
                &[&carrier, &Json(missing)],
            )
            .await?;
        self.cluster_carrier()
            .await?
            .ok_or_else(|| StoreError::NotFound("cluster_carrier row".into()))
    }

    /// The carrier row, if seeded.
    pub async fn cluster_carrier(&self) -> Result<Option<ClusterCarrier>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(&format!("SELECT {ROW_COLUMNS} FROM cluster_carrier"), &[])
            .await?;
        Ok(row.as_ref().map(cluster_carrier))
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
