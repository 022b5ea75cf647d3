//! `serve`'s configuration: flags and environment over a TOML file over defaults.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use switchyard_server::ServeConfig;

use crate::cli::ServeArgs;

/// The TOML file's keys (all optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    database_url: Option<String>,
    data_dir: Option<PathBuf>,
    memory_limit_mib: Option<usize>,
    call_deadline_ms: Option<u64>,
    fuel_per_call: Option<u64>,
    poll_interval_ms: Option<u64>,
}

/// Merges flags (and their environment variables), the file, and defaults.
pub fn serve_config(args: ServeArgs) -> anyhow::Result<ServeConfig> {
    let file: FileConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let mut config = ServeConfig::default();
    if let Some(listen) = args.listen.or(file.listen) {
        config.listen = listen
            .parse()
            .with_context(|| format!("listen address '{listen}'"))?;
    }
    config.database_url = args
        .database_url
        .or(file.database_url)
        .filter(|u| !u.is_empty());
    if let Some(dir) = args.data_dir.or(file.data_dir) {
        config.data_dir = dir;
    }
    if let Some(mib) = args.memory_limit_mib.or(file.memory_limit_mib) {
        config.runtime.memory_limit_bytes = mib << 20;
    }
    if let Some(ms) = args.call_deadline_ms.or(file.call_deadline_ms) {
        config.runtime.call_deadline = Duration::from_millis(ms);
    }
    config.runtime.fuel_per_call = args.fuel_per_call.or(file.fuel_per_call);
    if let Some(ms) = args.poll_interval_ms.or(file.poll_interval_ms) {
        config.poll_interval = Duration::from_millis(ms);
    }
    config.auto_approve = args.auto_approve;
    config.nats_url = args.nats_url.filter(|u| !u.is_empty());
    config.seed_components = crate::built_in::seeds(args.carrier_plugins.is_some());
    config.carrier_plugins = args.carrier_plugins;
    config.advertise = args.advertise;
    config.federation_key = args.federation_key;
    config.federation_label = args.federation_label;
    config.library_dir = args.library_dir;
    if let Some(ms) = args.node_grace_ms {
        config.node_grace = Duration::from_millis(ms);
    }
    if let Some(ms) = args.sse_keepalive_ms {
        config.sse_keepalive = Duration::from_millis(ms.max(1));
    }
    config.metrics_auth = args.metrics_auth;
    config.fetch_allow = switchyard_library::fetch::AllowList::parse(&args.fetch_allow_hosts)
        .context("--fetch-allow-host")?;
    if let Some(n) = args.max_connections {
        config.edge.max_connections = n.max(1);
        // The same share as the defaults: a quarter kept for proven callers.
        config.edge.max_unproven = (n / 4 * 3).max(1);
    }
    if let Some(ms) = args.header_read_timeout_ms {
        config.edge.header_read = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = args.body_idle_timeout_ms {
        config.edge.body_idle = Duration::from_millis(ms.max(1));
    }
    if let Some(bytes) = args.max_blob_bytes {
        config.max_blob_bytes = bytes;
    }
    if let Some(bytes) = args.batch_storage_quota_bytes {
        config.batch_storage_quota = bytes;
    }
    if let Some(n) = args.decisions_keep {
        config.decision_log.keep = n;
    }
    if let Some(hours) = args.decisions_max_age_hours {
        config.decision_log.max_age = Duration::from_secs(hours.saturating_mul(3600));
    }
    if let Some(ms) = args.decisions_prune_interval_ms {
        config.decision_log.prune_every = Duration::from_millis(ms.max(1));
    }
    if let Some(days) = args.audit_max_age_days {
        config.audit_max_age = Duration::from_secs(days.saturating_mul(24 * 3600));
    }
    config.usage_metering = !args.no_usage_metering;
    config.otlp_endpoint = args.otlp_endpoint.clone();
    if let Some(days) = args.usage_max_age_days {
        config.usage_max_age = Duration::from_secs(days.saturating_mul(24 * 3600));
    }
    if let Some(days) = args.usage_events_max_age_days {
        config.usage_events_max_age = Duration::from_secs(days.saturating_mul(24 * 3600));
    }
    config.admin_token = std::env::var("SWITCHYARD_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    Ok(config)
}
