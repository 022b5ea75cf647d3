//! What another replica of this cluster changed that this one must act on
//! at once: a revoked grant's operations in flight end, a forgotten peer's
//! links close. Announced at commit on the store's changes channel; after
//! the listening connection is (re)made, the operations in flight are
//! checked against the grants as stored, so a revocation made while this
//! replica was not listening still ends them.

use std::sync::Arc;
use std::time::Duration;

use switchyard_protocol::federation::GrantState;
use switchyard_store::federation::{CHANGES_CHANNEL, Change};
use tokio::sync::watch;

use crate::Federation;

/// The wait before listening again after the connection failed.
const RELISTEN: Duration = Duration::from_secs(1);

/// Follows the changes channel until `stop` turns true.
pub(crate) async fn follow(federation: Arc<Federation>, mut stop: watch::Receiver<bool>) {
    loop {
        match federation.store.listen(CHANGES_CHANNEL).await {
            Ok((_client, mut changes)) => {
                federation.end_revoked().await;
                loop {
                    tokio::select! {
                        _ = stop.changed() => return,
                        change = changes.recv() => match change {
                            Some(payload) => federation.apply(&payload),
                            None => break,
                        },
                    }
                }
                tracing::warn!("federation: the changes listener lost its connection");
            }
            Err(e) => tracing::warn!(error = %e, "federation: not listening for changes"),
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(RELISTEN) => {}
        }
    }
}

impl Federation {
    /// Acts on one announced change.
    fn apply(&self, payload: &str) {
        match Change::from_payload(payload) {
            Some(Change::Grant(grant)) => {
                let ended = self.inflight.end_grant(&grant);
                if ended > 0 {
                    tracing::info!(
                        grant,
                        ended,
                        "federation: a revoked grant's operations ended"
                    );
                }
            }
            Some(Change::Peer(peer)) => self.links.close_peer(&peer),
            None => tracing::debug!(payload, "federation: an unknown change"),
        }
        self.changed();
    }

    /// Ends the operations in flight under grants no longer stored active
    /// (revoked, or gone with their peer) while no notification could come.
    async fn end_revoked(&self) {
        let held = self.inflight.grants();
        if held.is_empty() {
            return;
        }
        let stored = match self.store.grants().await {
            Ok(grants) => grants,
            Err(e) => {
                tracing::warn!(error = %e, "federation: grants not read after relistening");
                return;
            }
        };
        for grant in held {
            let live = stored
                .iter()
                .any(|g| g.id == grant && g.state != GrantState::Revoked);
            if !live {
                self.inflight.end_grant(&grant);
            }
        }
        self.changed();
    }
}
