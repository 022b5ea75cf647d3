//! What `serve` is configured with (merged by the CLI from flags, environment and a TOML file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use switchyard_runtime::RuntimeConfig;

/// A replica's configuration.
#[derive(Clone)]
pub struct ServeConfig {
    /// Address of the HTTP API.
    pub listen: SocketAddr,
    /// PostgreSQL; `None` starts the embedded default under `data_dir`.
    pub database_url: Option<String>,
    /// Private state: the embedded PostgreSQL and the compile cache.
    pub data_dir: PathBuf,
    /// Chosen admin token at first start (otherwise one is minted and printed).
    pub admin_token: Option<String>,
    /// Plugin limits.
    pub runtime: RuntimeConfig,
    /// How often the replica checks for new generations without a hint.
    pub poll_interval: Duration,
    /// Approve registering workers at once instead of leaving them pending.
    pub auto_approve: bool,
    /// The NATS server of the `nats` carrier set (seeds `nats` on a new
    /// cluster; may hold credentials, never shown).
    pub nats_url: Option<String>,
    /// A folder of carrier components (`nats.wasm`, `pgbus.wasm`,
    /// `tunnel.wasm`) seeded into the plugin registry at start
    /// (`--carrier-plugins`); the set then runs from the registry.
    pub carrier_plugins: Option<PathBuf>,
    /// Carrier components seeded into the plugin registry at start beside
    /// the folder's (the ones built into the binary); with neither, the
    /// replica runs what the registry already holds, if anything.
    pub seed_components: Vec<switchyard_carrier_set::seed::SeedComponent>,
    /// Where other replicas reach this one (default `http://<listen>`).
    pub advertise: Option<String>,
    /// How long a node may be silent before it is offline and its replicas
    /// are placed again (a short disconnect moves nothing).
    pub node_grace: Duration,
    /// How long a streamed answer may be silent before the frontend sends
    /// an SSE comment, so that proxies and clients keep the connection.
    pub sse_keepalive: Duration,
    /// Hosts a model fetch may reach though they are (or resolve to)
    /// loopback or private addresses (`--fetch-allow-host`).
    pub fetch_allow: switchyard_library::fetch::AllowList,
    /// The connection limit and the header and body timeouts of the HTTP API.
    pub edge: crate::edge::EdgeLimits,
    /// The largest blob the library takes (an upload or a fetch).
    pub max_blob_bytes: u64,
    /// The bytes of batch files one key may keep (`--batch-storage-quota-bytes`).
    pub batch_storage_quota: u64,
    /// The model library's folder, when it is shared storage every replica
    /// mounts (`--library-dir`); `None`: `<data_dir>/library`, and a replica
    /// fetches a blob it lacks from another replica.
    pub library_dir: Option<PathBuf>,
    /// `/metrics` asks for a key with the `metrics:read` scope
    /// (`--metrics-auth`). Off by default: Prometheus scrapes without
    /// credentials unless told, and the exposition's labels are bounded
    /// (served models, states, points).
    pub metrics_auth: bool,
    /// The cluster's federation key file (`--federation-key`; every replica
    /// of a cluster is given the same one) [default:
    /// `<data_dir>/federation/cluster.key`, made at the first start].
    pub federation_key: Option<PathBuf>,
    /// The label peers see, set at the first start (`--federation-label`)
    /// [default: the host name].
    pub federation_label: Option<String>,
    /// Retention of the admission decision log (`--decisions-keep`,
    /// `--decisions-max-age-hours`).
    pub decision_log: switchyard_binding::admission::decisions::DecisionLogConfig,
    /// Audit records older than this are deleted (`--audit-max-age-days`)
    /// [default: 365 days].
    pub audit_max_age: Duration,
    /// Usage rolled up by hour older than this is deleted
    /// (`--usage-max-age-days`): the reports' horizon by hour and day
    /// [default: 400 days, a year and its month-on-month comparison].
    pub usage_max_age: Duration,
    /// Usage events (each answer's row) older than this are deleted
    /// (`--usage-events-max-age-days`): the horizon of reports by minute
    /// [default: 35 days].
    pub usage_events_max_age: Duration,
    /// Meter every answer's usage (`--no-usage-metering` turns it off).
    pub usage_metering: bool,
    /// An OTLP/HTTP collector that gets the `/v1` spans (`--otlp-endpoint`).
    pub otlp_endpoint: Option<String>,
    /// The pages served beside the API: the web console, which the binary
    /// mounts (`switchyard_console::router`); `None` serves the API alone.
    pub pages: Option<crate::routes::Pages>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            data_dir: PathBuf::from("./switchyard-data"),
            admin_token: None,
            runtime: RuntimeConfig::default(),
            poll_interval: Duration::from_secs(1),
            auto_approve: false,
            nats_url: None,
            carrier_plugins: None,
            seed_components: Vec::new(),
            advertise: None,
            node_grace: switchyard_scheduler::reconcile::DEFAULT_GRACE,
            sse_keepalive: Duration::from_secs(15),
            fetch_allow: Default::default(),
            edge: Default::default(),
            max_blob_bytes: switchyard_library::MAX_BLOB_BYTES,
            batch_storage_quota: switchyard_batches::DEFAULT_QUOTA,
            library_dir: None,
            metrics_auth: false,
            federation_key: None,
            federation_label: None,
            decision_log: Default::default(),
            audit_max_age: DEFAULT_AUDIT_MAX_AGE,
            usage_max_age: DEFAULT_USAGE_MAX_AGE,
            usage_events_max_age: DEFAULT_USAGE_EVENTS_MAX_AGE,
            usage_metering: true,
            otlp_endpoint: None,
            pages: None,
        }
    }
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The database URL may hold a password and the token is a secret.
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field(
                "database_url",
                &self.database_url.as_ref().map(|u| mask_password(u)),
            )
            .field("data_dir", &self.data_dir)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<set>"))
            .field("runtime", &self.runtime)
            .field("poll_interval", &self.poll_interval)
            .field("auto_approve", &self.auto_approve)
            .field(
                "nats_url",
                &self.nats_url.as_ref().map(|u| mask_password(u)),
            )
            .field("carrier_plugins", &self.carrier_plugins)
            .field("seed_components", &self.seed_components)
            .field("advertise", &self.advertise)
            .field("node_grace", &self.node_grace)
            .field("fetch_allow", &self.fetch_allow)
            .field("edge", &self.edge)
            .field("max_blob_bytes", &self.max_blob_bytes)
            .field("batch_storage_quota", &self.batch_storage_quota)
            .field("library_dir", &self.library_dir)
            .field("metrics_auth", &self.metrics_auth)
            .field("federation_key", &self.federation_key)
            .field("federation_label", &self.federation_label)
            .field("decision_log", &self.decision_log)
            .field("audit_max_age", &self.audit_max_age)
            .field("usage_max_age", &self.usage_max_age)
            .field("usage_events_max_age", &self.usage_events_max_age)
            .field("usage_metering", &self.usage_metering)
            .field("otlp_endpoint", &self.otlp_endpoint)
            .finish()
    }
}

/// How long audit records are kept unless told.
pub const DEFAULT_AUDIT_MAX_AGE: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long usage rolled up by hour is kept unless told.
pub const DEFAULT_USAGE_MAX_AGE: Duration = Duration::from_secs(400 * 24 * 3600);

/// How long usage events (one row an answer) are kept by default.
pub const DEFAULT_USAGE_EVENTS_MAX_AGE: Duration = Duration::from_secs(35 * 24 * 3600);

/// Shortest admin token accepted (`SWITCHYARD_ADMIN_TOKEN`): 32 characters,
/// the length of 128 bits in hex. The token is the cluster's master key and
/// is checked by digest, without rate limits, so it must not be guessable; a
/// minted one is `sy_` and 64 hex digits (256 bits).
pub const MIN_ADMIN_TOKEN_LEN: usize = 32;

/// Refuses a chosen admin token shorter than [`MIN_ADMIN_TOKEN_LEN`]
/// (the message names the length, never the token).
pub fn check_admin_token(token: &str) -> anyhow::Result<()> {
    let length = token.chars().count();
    if length < MIN_ADMIN_TOKEN_LEN {
        anyhow::bail!(
            "SWITCHYARD_ADMIN_TOKEN must be at least {MIN_ADMIN_TOKEN_LEN} characters, got {length}; \
             choose a random one (e.g. `openssl rand -hex 32`) or leave it unset to have one minted"
        );
    }
    Ok(())
}

/// A database URL with its password replaced by `***` (both URL and
/// keyword forms), for anything a person may read.
pub fn mask_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
    {
        return format!("{scheme}://{user}:***@{host}");
    }
    url.split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl ServeConfig {
    /// What the replica's carriers start from.
    pub fn carriers(&self) -> switchyard_carrier_set::start::CarrierConfig {
        switchyard_carrier_set::start::CarrierConfig {
            cache_dir: self.data_dir.join("cache"),
            nats_url: self.nats_url.clone(),
            carrier_plugins: self.carrier_plugins.clone(),
            seed_components: self.seed_components.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_admin_token_is_refused_without_being_shown() {
        let short = "sy_short_secret";
        let error = check_admin_token(short).unwrap_err().to_string();
        assert!(error.contains("at least 32"), "{error}");
        assert!(!error.contains(short), "{error}");
        assert!(check_admin_token(&"x".repeat(MIN_ADMIN_TOKEN_LEN)).is_ok());
    }

    #[test]
    fn passwords_are_masked_in_both_forms_and_in_debug() {
        assert_eq!(
            mask_password("postgres://app:s3cret@db:5432/sy"),
            "postgres://app:***@db:5432/sy"
        );
        assert_eq!(
            mask_password("host=/run user=app password=s3cret dbname=sy"),
            "host=/run user=app password=*** dbname=sy"
        );
        assert_eq!(mask_password("postgres://db/sy"), "postgres://db/sy");
        let config = ServeConfig {
            database_url: Some("postgres://app:s3cret@db/sy".into()),
            admin_token: Some("sy_token".into()),
            ..ServeConfig::default()
        };
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("s3cret") && !printed.contains("sy_token"),
            "{printed}"
        );
    }
}
