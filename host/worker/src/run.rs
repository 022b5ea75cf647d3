//! Registration and the heartbeat loop.

use std::future::Future;

use crate::client::{FrontendClient, HeartbeatAnswer};
use crate::config::WorkerConfig;
use crate::identity::{self, Identity};
use crate::{WorkerError, inventory};

/// Registers if this machine has no identity yet (or its credential was
/// refused), then heartbeats until `shutdown` resolves.
pub async fn run(
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let client = FrontendClient::new(&config.frontend);
    let mut identity = match identity::load(&config.data_dir)? {
        Some(identity) if identity.frontend == config.frontend.trim_end_matches('/') => identity,
        _ => register(&client, &config).await?,
    };
    tokio::pin!(shutdown);
    let mut state = String::new();
    loop {
        match client.heartbeat(&identity, &inventory::collect()).await {
            Ok(HeartbeatAnswer::Ok { state: now, .. }) => {
                if now != state {
                    tracing::info!(node = %identity.node_id, state = %now, "node state");
                    if now == "pending" {
                        println!(
                            "node {} is pending: approve it with `switchyard node approve {}`",
                            identity.node_id, identity.node_id
                        );
                    }
                    state = now;
                }
            }
            Ok(HeartbeatAnswer::CredentialRefused) => {
                tracing::warn!(node = %identity.node_id, "the frontend refused this node's credential; registering again");
                identity = register(&client, &config).await?;
                continue;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying"),
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(config.heartbeat_interval) => {}
        }
    }
}

async fn register(client: &FrontendClient, config: &WorkerConfig) -> Result<Identity, WorkerError> {
    let token = config
        .registration_token
        .as_deref()
        .ok_or(WorkerError::RegistrationRefused)?;
    let (identity, state) = client
        .register(
            token,
            &config.name,
            config.address.as_deref(),
            &inventory::collect(),
        )
        .await?;
    identity::store(&config.data_dir, &identity)?;
    println!("registered as {} ({state})", identity.node_id);
    Ok(identity)
}
