//! Where a session's driver runs: on whichever task hands it work, not on
//! a thread of its own. A request used to cross four thread wake-ups on
//! its way through the two drivers; now the task that reads the websocket
//! or writes a stream runs the plugin call itself.
//!
//! Commands queue in a [`Combining`]: the first caller to find the driver
//! free runs every queued command. Plugin calls are short and bounded by
//! the plugin's deadline, so running them on an async worker is cheap; a
//! host panic in a call (a guest writing to stdio enters WASI's blocking
//! path) ends the session instead of poisoning it.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, TryLockError, Weak};
use std::time::Duration;

use super::driver::{Command, Driver};
use crate::combining::Combining;

/// The longest a session sleeps between keepalive ticks; the plugin's own
/// timers (15 s idle, 10 s for a pong) are far longer.
const MAX_TICK_WAIT: Duration = Duration::from_secs(1);

/// One session's driver (`None` once the session has ended) and its
/// queue of commands.
pub(crate) struct Core(Combining<Option<Driver>, Command>);

impl Core {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self(Combining::new(None)))
    }

    /// Installs the driver and runs its first step.
    pub(crate) fn install(&self, driver: Driver, first: switchyard_runtime::tunnel::Step) {
        if let Some(mut slot) = self.0.lock() {
            *slot = Some(driver);
            let ended = match slot.as_mut().map(|d| d.apply(first)) {
                Some(Err(reason)) => Some(reason),
                _ => None,
            };
            if let Some(reason) = ended {
                end(&mut slot, &reason);
            }
        }
        self.drain();
    }

    /// Whether the session still runs.
    pub(crate) fn is_running(&self) -> bool {
        match self.0.try_lock() {
            Ok(driver) => driver.is_some(),
            // Busy: running.
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Poisoned(_)) => false,
        }
    }

    /// Queues `command` and runs the queue if the driver is free.
    pub(crate) fn submit(&self, command: Command) {
        self.0.defer(command);
        self.drain();
    }

    fn drain(&self) {
        self.0.drain(|driver, batch| {
            for command in batch {
                let Some(running) = driver.as_mut() else {
                    // Ended: dropping the command answers its waiters.
                    continue;
                };
                let outcome =
                    std::panic::catch_unwind(AssertUnwindSafe(|| running.handle(command)));
                let ended = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(reason)) => Some(reason),
                    Err(_) => Some("tunnel plugin failed: a host call panicked".to_string()),
                };
                if let Some(reason) = ended {
                    end(driver, &reason);
                }
            }
        });
    }

    /// How long until the plugin wants a tick; `None` once ended.
    fn tick_wait(&self) -> Option<Duration> {
        let mut driver = self.0.lock()?;
        let wait = driver.as_mut()?.tick_wait();
        match wait {
            Ok(wait) => Some(wait.min(MAX_TICK_WAIT)),
            Err(reason) => {
                end(&mut driver, &reason);
                None
            }
        }
    }
}

/// Ends the session: fails its streams, tells who waits, drops the plugin
/// (the websocket writer sees its channel close).
fn end(driver: &mut Option<Driver>, reason: &str) {
    if let Some(mut ended) = driver.take() {
        tracing::debug!(reason, "tunnel session ended");
        ended.end(reason);
    }
}

/// Ticks the session's keepalive until the session is gone or ended.
pub(crate) async fn keepalive(core: Weak<Core>) {
    loop {
        let Some(wait) = core.upgrade().and_then(|core| core.tick_wait()) else {
            return;
        };
        tokio::time::sleep(wait).await;
        let Some(core) = core.upgrade() else { return };
        core.submit(Command::Tick);
    }
}
