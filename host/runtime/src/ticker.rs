//! The epoch ticker: advances an engine's epoch every [`EPOCH_TICK`] while
//! a call may be running, and sleeps once none has started for longer than
//! any call may last.
//!
//! Ticking without pause cost an idle server about 2 % of a core per
//! runtime (three runtimes between the frontend and its worker: 90 % of
//! their idle CPU). A call's deadline counts ticks from when it is armed,
//! so every call wakes the ticker before it is armed ([`Ticker::wake`]:
//! one relaxed load while the ticker runs), and the ticker sleeps only
//! after `idle_limit` ticks without a new call, more than the longest
//! deadline: a call that started has met its deadline by then.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;

use wasmtime::Engine;

use crate::engine::EPOCH_TICK;

/// Ticks past the longest deadline before the ticker sleeps.
pub(crate) const IDLE_GRACE_TICKS: u64 = 1_000;

/// One engine's ticker thread; dropping it stops the thread.
pub(crate) struct Ticker {
    shared: Arc<Shared>,
    thread: Thread,
}

struct Shared {
    stop: AtomicBool,
    /// A call started since the ticker last looked.
    active: AtomicBool,
    /// The ticker sleeps (or is about to): a waking call unparks it.
    parked: AtomicBool,
}

impl Ticker {
    /// Starts ticking `engine`; it sleeps after `idle_limit` ticks without a call.
    pub(crate) fn start(engine: Engine, idle_limit: u64) -> Self {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            active: AtomicBool::new(true),
            parked: AtomicBool::new(false),
        });
        let running = shared.clone();
        let handle = std::thread::Builder::new()
            .name("switchyard-epoch".into())
            .spawn(move || tick(&engine, &running, idle_limit))
            .expect("spawning the epoch ticker thread");
        Self {
            shared,
            thread: handle.thread().clone(),
        }
    }

    /// Keeps the epoch advancing for a call about to be armed.
    pub(crate) fn wake(&self) {
        let shared = &self.shared;
        if shared.active.load(Ordering::Relaxed) {
            // Not yet seen by the ticker, which therefore cannot sleep
            // before it has ticked through this call's deadline.
            return;
        }
        shared.active.store(true, Ordering::SeqCst);
        if shared.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
    }

    /// Whether the ticker sleeps now (no call for longer than any deadline).
    pub(crate) fn is_asleep(&self) -> bool {
        self.shared.parked.load(Ordering::SeqCst)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn tick(engine: &Engine, shared: &Shared, idle_limit: u64) {
    let mut idle = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(EPOCH_TICK);
        engine.increment_epoch();
        if shared.active.swap(false, Ordering::SeqCst) {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < idle_limit {
            continue;
        }
        // Announce the sleep, then look once more: a call that set
        // `active` before this store is seen here; one after it sees
        // `parked` and unparks.
        shared.parked.store(true, Ordering::SeqCst);
        while !shared.active.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
            std::thread::park();
        }
        shared.parked.store(false, Ordering::SeqCst);
        idle = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_ticker_sleeps_when_idle_and_a_call_wakes_it() {
        let ticker = Ticker::start(Engine::default(), 100);
        until("the ticker never slept", || ticker.is_asleep());
        ticker.wake();
        until("the call did not wake the ticker", || !ticker.is_asleep());
        until("the ticker never slept again", || ticker.is_asleep());
    }
}
