//! Follows the newest generations: woken early by a NOTIFY hint, and polling
//! anyway so that a lost notification or a dropped listener costs at most
//! one poll interval. Every slot bound with generations follows them with
//! this one loop.

use std::future::Future;
use std::time::Duration;

use switchyard_store::{ADMISSION_CHANNEL, Store};
use tokio::sync::watch;

/// Calls `sync` at start, on every hint on [`ADMISSION_CHANNEL`] and every
/// `poll`, until shutdown; `what` names the follower in logs.
pub async fn follow_generations<F, Fut>(
    store: Store,
    what: &'static str,
    poll: Duration,
    mut shutdown: watch::Receiver<bool>,
    mut sync: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut listener = None;
    loop {
        if listener.is_none() {
            match store.listen(ADMISSION_CHANNEL).await {
                Ok(l) => listener = Some(l),
                Err(e) => {
                    tracing::warn!(error = %e, what, "cannot LISTEN for generation changes; polling only")
                }
            }
        }
        sync().await;
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
