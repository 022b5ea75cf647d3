//! The concurrency limit and the accounting of each admitted request.
//!
//! Overload is a 429 from a semaphore, never a queue: a load test must see
//! the engine's limit, not a latency that grows with the backlog.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::openai::ApiError;
use crate::stats::Stats;

/// Admits requests up to `max_concurrency`.
#[derive(Debug)]
pub struct Limiter {
    limit: Option<(usize, Arc<Semaphore>)>,
}

impl Limiter {
    /// A limiter for `max_concurrency` requests at once (`None`: no limit).
    pub fn new(max_concurrency: Option<usize>) -> Self {
        Self {
            limit: max_concurrency.map(|limit| (limit, Arc::new(Semaphore::new(limit)))),
        }
    }

    /// Admits a request now or refuses it with [`ApiError::AtCapacity`].
    pub fn admit(&self, stats: Arc<Stats>) -> Result<InFlight, ApiError> {
        let permit = match &self.limit {
            None => None,
            Some((limit, semaphore)) => match semaphore.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    stats.rejected();
                    return Err(ApiError::AtCapacity { limit: *limit });
                }
            },
        };
        stats.started();
        Ok(InFlight {
            stats,
            _permit: permit,
            completed: false,
        })
    }
}

/// An admitted request. Dropping it before [`complete`](Self::complete)
/// counts it as cancelled: the client went away and its handler or stream
/// was dropped, which also stops its generation.
#[derive(Debug)]
pub struct InFlight {
    stats: Arc<Stats>,
    _permit: Option<OwnedSemaphorePermit>,
    completed: bool,
}

impl InFlight {
    /// The request was answered in full.
    pub fn complete(mut self) {
        self.completed = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.stats.finished(self.completed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_beyond_the_limit_and_frees_on_drop() {
        let stats = Arc::new(Stats::default());
        let limiter = Limiter::new(Some(1));
        let first = limiter.admit(stats.clone()).unwrap();
        assert!(matches!(
            limiter.admit(stats.clone()),
            Err(ApiError::AtCapacity { limit: 1 })
        ));
        drop(first);
        limiter.admit(stats.clone()).unwrap().complete();
        let snapshot = stats.snapshot();
        assert_eq!(
            (
                snapshot.in_flight,
                snapshot.completed,
                snapshot.cancelled,
                snapshot.rejected
            ),
            (0, 1, 1, 1)
        );
    }
}
