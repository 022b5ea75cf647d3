//! Versioned schema changes, embedded in the binary and applied in order at
//! start. A session-level advisory lock makes two replicas starting at once safe.

use crate::{Store, StoreError};

/// Every migration, in order. A released migration is never edited.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "platform",
        include_str!("../migrations/0001_platform.sql"),
    ),
    (2, "nodes", include_str!("../migrations/0002_nodes.sql")),
    (3, "cluster", include_str!("../migrations/0003_cluster.sql")),
    (4, "models", include_str!("../migrations/0004_models.sql")),
    (
        5,
        "deployments",
        include_str!("../migrations/0005_deployments.sql"),
    ),
    (
        6,
        "placement",
        include_str!("../migrations/0006_placement.sql"),
    ),
    (
        7,
        "replica_leases",
        include_str!("../migrations/0007_replica_leases.sql"),
    ),
    (
        8,
        "api_keys",
        include_str!("../migrations/0008_api_keys.sql"),
    ),
    (
        9,
        "registration_tokens",
        include_str!("../migrations/0009_registration_tokens.sql"),
    ),
    (
        10,
        "carrier_switch",
        include_str!("../migrations/0010_carrier_switch.sql"),
    ),
    (
        11,
        "federation",
        include_str!("../migrations/0011_federation.sql"),
    ),
    (
        12,
        "evaluator",
        include_str!("../migrations/0012_evaluator.sql"),
    ),
    (
        13,
        "federation_copies",
        include_str!("../migrations/0013_federation_copies.sql"),
    ),
    (
        14,
        "batches",
        include_str!("../migrations/0014_batches.sql"),
    ),
    (
        15,
        "federation_jobs",
        include_str!("../migrations/0015_federation_jobs.sql"),
    ),
    (
        16,
        "admission_decisions",
        include_str!("../migrations/0016_admission_decisions.sql"),
    ),
    (
        17,
        "plugin_signing",
        include_str!("../migrations/0017_plugin_signing.sql"),
    ),
    (
        18,
        "console_sessions",
        include_str!("../migrations/0018_console_sessions.sql"),
    ),
    (
        19,
        "batch_owners",
        include_str!("../migrations/0019_batch_owners.sql"),
    ),
    (
        20,
        "join_token_limits",
        include_str!("../migrations/0020_join_token_limits.sql"),
    ),
    (21, "audit", include_str!("../migrations/0021_audit.sql")),
    (22, "teams", include_str!("../migrations/0022_teams.sql")),
    (23, "usage", include_str!("../migrations/0023_usage.sql")),
    (
        24,
        "decision_throttle_flag",
        include_str!("../migrations/0024_decision_throttle_flag.sql"),
    ),
    (
        25,
        "usage_hourly",
        include_str!("../migrations/0025_usage_hourly.sql"),
    ),
];

/// The advisory lock key that serialises migrations across replicas ("swyd-mig").
const MIGRATION_LOCK: i64 = 0x0073_7779_646d_6967;

/// Applies every migration this database lacks.
pub async fn apply(store: &Store) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    conn.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let result = apply_locked(&mut conn).await;
    conn.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await?;
    result
}

async fn apply_locked(conn: &mut deadpool_postgres::Object) -> Result<(), StoreError> {
    conn.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    integer PRIMARY KEY,
            name       text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let applied: Vec<i32> = conn
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let tx = conn.transaction().await?;
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version, name, "applied migration");
    }
    Ok(())
}
