//! [`Holder`]: the atomic pointer behind the control and streams seams.
//! Host code calls through the holder; a carrier change swaps what it names
//! and calls already running finish on the set they started on.

use std::sync::Arc;

use arc_swap::ArcSwap;

/// Names the active implementation of one seam.
pub struct Holder<T: ?Sized> {
    active: ArcSwap<Arc<T>>,
}

impl<T: ?Sized> std::fmt::Debug for Holder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holder").finish_non_exhaustive()
    }
}

impl<T: ?Sized> Holder<T> {
    /// A holder naming `active`.
    pub fn new(active: Arc<T>) -> Self {
        Self {
            active: ArcSwap::from_pointee(active),
        }
    }

    /// What calls go to now (one atomic load).
    pub fn active(&self) -> Arc<T> {
        Arc::clone(&self.active.load())
    }

    /// Points new calls at `next`.
    pub fn swap(&self, next: Arc<T>) {
        self.active.store(Arc::new(next));
    }
}
