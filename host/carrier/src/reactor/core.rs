//! Where a carrier's reactor runs: on whichever task hands it an event,
//! not on a thread of its own. A 64-byte publish used to wake three
//! threads on its way out (the caller's, the reactor's, the connection's)
//! and a delivery three on its way in; the context switches were the
//! largest entries of the profile. Now the connection task that read the
//! bytes, or the caller that published, runs the plugin call itself and
//! writes the socket itself.
//!
//! Events queue in a [`Combining`]: the first task to find the reactor
//! free handles every queued event. Plugin calls are short and bounded by
//! the plugin's deadline, so running them on an async worker is cheap; a
//! host panic in a call (a guest writing to stdio enters WASI's blocking
//! path) rebuilds the plugin instead of poisoning the reactor.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};

use switchyard_runtime::CallError;

use super::{Event, Reactor};
use crate::combining::Combining;

/// Events handled before the gathered publishes and writes go out, so
/// that a steady stream of events cannot hold writes back indefinitely.
const EVENTS_PER_FLUSH: usize = 256;

/// A carrier's reactor and its queue of events.
pub(crate) struct Core(Combining<Reactor, Event>);

/// What connection tasks, timers and subscriptions hold to hand the
/// reactor an event. It does not keep the carrier alive: once the carrier
/// is gone, sending fails and the task ends.
#[derive(Clone)]
pub(crate) struct Events(Weak<Core>);

/// The carrier this handle served has stopped.
#[derive(Debug)]
pub(crate) struct Stopped;

impl Events {
    /// Hands `event` to the reactor; runs it here when the reactor is free.
    pub(crate) fn send(&self, event: Event) -> Result<(), Stopped> {
        let core = self.0.upgrade().ok_or(Stopped)?;
        core.submit(event);
        Ok(())
    }
}

impl Core {
    /// A core around the reactor `build` makes with the core's own [`Events`].
    pub(super) fn new(build: impl FnOnce(Events) -> Reactor) -> Arc<Self> {
        Arc::new_cyclic(|core| Self(Combining::new(build(Events(core.clone())))))
    }

    /// A handle for tasks that must not keep the carrier alive.
    pub(crate) fn events(self: &Arc<Self>) -> Events {
        Events(Arc::downgrade(self))
    }

    /// Runs `f` on the reactor, waiting for whoever runs it now.
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Reactor) -> T) -> T {
        let result = f(&mut self.0.lock().expect("reactor lock"));
        self.drain();
        result
    }

    /// Queues `event` and runs the queue if the reactor is free.
    pub(crate) fn submit(&self, event: Event) {
        self.defer(event);
        self.drain();
    }

    /// Queues `event` without running the queue; how many events wait with
    /// it, 1 when the queue was empty, so that this caller should run it
    /// soon ([`Core::drain`]). Publishes use it: a caller that yields once
    /// before running the queue lets the other publishes of its burst join
    /// one plugin call and one write.
    pub(crate) fn defer(&self, event: Event) -> usize {
        self.0.defer(event)
    }

    /// Waits for whoever runs the reactor now, then runs the queue: a
    /// publisher far ahead of the plugin holds back until it caught up.
    pub(crate) fn drain_waiting(&self) {
        self.with(|_| ());
    }

    /// Handles every queued event, unless another task is at it; sends
    /// what each [`EVENTS_PER_FLUSH`] events gathered, and what the last
    /// ones did.
    pub(crate) fn drain(&self) {
        self.0.drain(|reactor, batch| {
            for (handled, event) in batch.into_iter().enumerate() {
                if handled > 0 && handled % EVENTS_PER_FLUSH == 0 {
                    guarded(reactor, Reactor::flush);
                }
                guarded(reactor, |r| r.handle(event));
            }
            guarded(reactor, Reactor::flush);
        });
    }
}

/// Runs `f`; a host panic inside it rebuilds the plugin, so the reactor
/// (and its lock) outlives it.
fn guarded(reactor: &mut Reactor, f: impl FnOnce(&mut Reactor)) {
    if std::panic::catch_unwind(AssertUnwindSafe(|| f(reactor))).is_err() {
        reactor.rebuild(CallError::Trap(
            "carrier plugin failed: a host call panicked (a guest that writes to stdio \
             blocks in WASI, which cannot run on an async worker; log with the `log` import)"
                .into(),
        ));
    }
}
