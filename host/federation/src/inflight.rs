//! The operations in flight under each grant on this replica (remote
//! inference calls both sides, model ranges served, copies, jobs), so that
//! a revocation ends them at once rather than at their next check.
//!
//! An operation enters before it is admitted and holds a [`Revocation`]
//! until it ends; [`InFlight::end_grant`] wakes every holder of that grant.
//! A revocation made on another replica reaches this one as a database
//! notification (`federation_grants`), a peer's as its `RevokeGrant` call.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// The grants with operations in flight here, each with its end signal.
#[derive(Debug, Default)]
pub struct InFlight {
    grants: Mutex<HashMap<String, watch::Sender<bool>>>,
}

/// Held by one operation in flight: resolves [`Revocation::revoked`] when
/// its grant is revoked or its peer removed.
#[derive(Debug, Clone)]
pub struct Revocation {
    ended: watch::Receiver<bool>,
}

impl Revocation {
    /// Waits until the grant is revoked (forever if it never is).
    pub async fn revoked(&mut self) {
        if self.ended.wait_for(|ended| *ended).await.is_err() {
            // The registry forgot the grant without ending it: never.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the grant was revoked already.
    pub fn is_revoked(&self) -> bool {
        *self.ended.borrow()
    }
}

impl InFlight {
    /// An operation under `grant` starts.
    pub fn enter(&self, grant: &str) -> Revocation {
        let mut grants = self.grants.lock().expect("in-flight lock");
        // Grants whose operations all ended are forgotten as others enter.
        grants.retain(|_, sender| sender.receiver_count() > 0);
        let sender = grants
            .entry(grant.to_string())
            .or_insert_with(|| watch::channel(false).0);
        Revocation {
            ended: sender.subscribe(),
        }
    }

    /// Ends every operation in flight under `grant`; answers how many.
    pub fn end_grant(&self, grant: &str) -> usize {
        let sender = self.grants.lock().expect("in-flight lock").remove(grant);
        match sender {
            Some(sender) => {
                let ended = sender.receiver_count();
                sender.send_replace(true);
                ended
            }
            None => 0,
        }
    }

    /// The grants with operations in flight now.
    pub fn grants(&self) -> Vec<String> {
        let grants = self.grants.lock().expect("in-flight lock");
        grants
            .iter()
            .filter(|(_, sender)| sender.receiver_count() > 0)
            .map(|(grant, _)| grant.clone())
            .collect()
    }

    /// Operations in flight under `grant` now.
    pub fn count(&self, grant: &str) -> usize {
        self.grants
            .lock()
            .expect("in-flight lock")
            .get(grant)
            .map_or(0, watch::Sender::receiver_count)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn ending_a_grant_wakes_its_operations_only() {
        let inflight = InFlight::default();
        let mut first = inflight.enter("g1");
        let second = inflight.enter("g1");
        let mut other = inflight.enter("g2");
        assert_eq!(inflight.count("g1"), 2);
        assert_eq!(inflight.end_grant("g1"), 2);
        tokio::time::timeout(Duration::from_secs(1), first.revoked())
            .await
            .expect("woken");
        assert!(second.is_revoked());
        assert!(!other.is_revoked());
        assert!(
            tokio::time::timeout(Duration::from_millis(20), other.revoked())
                .await
                .is_err()
        );
        // A later operation under the revoked grant starts fresh (the
        // database refuses it at admission).
        assert!(!inflight.enter("g1").is_revoked());
    }

    #[test]
    fn ended_operations_are_forgotten() {
        let inflight = InFlight::default();
        drop(inflight.enter("g1"));
        let _kept = inflight.enter("g2");
        assert_eq!(inflight.count("g1"), 0);
        assert_eq!(inflight.end_grant("g1"), 0);
    }
}
