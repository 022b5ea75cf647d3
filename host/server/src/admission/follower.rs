//! Follows the newest generations: woken early by a NOTIFY hint, and polling
//! anyway so that a lost notification or a dropped listener costs at most
//! one poll interval.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchyard_store::ADMISSION_CHANNEL;
use tokio::sync::watch;

use crate::state::AppState;

/// Runs until shutdown.
pub async fn follow(state: Arc<AppState>, poll: Duration, mut shutdown: watch::Receiver<bool>) {
    let mut listener = None;
    loop {
        if listener.is_none() {
            match state.store.listen(ADMISSION_CHANNEL).await {
                Ok(l) => listener = Some(l),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot LISTEN for admission changes; polling only")
                }
            }
        }
        match state.admission.sync().await {
            Ok(()) => state.admission_synced.store(true, Ordering::Relaxed),
            Err(e) => tracing::warn!(error = %e, "admission sync failed"),
        }
        let hint = async {
            match listener.as_mut() {
                Some((_, rx)) => rx.recv().await.is_some(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(poll) => {}
            alive = hint => if !alive { listener = None },
        }
    }
}
