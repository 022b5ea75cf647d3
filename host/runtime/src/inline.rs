//! Calls of stateless plugins (admission chains, the grant evaluator) on the
//! caller's async task.
//!
//! A warm policy call costs about a microsecond; handing it to tokio's
//! blocking pool and back costs two thread wake-ups, which on the routing
//! path were a quarter of the frontend's CPU per request. So a chain runs
//! where it is asked until it shows that it should not, and from then on,
//! for as long as it is bound, on the blocking pool:
//! - a call that ran longer than [`RUNAWAY`] (a policy that loops to its
//!   deadline would otherwise hold an async worker for that long each time),
//!   or [`SLOW_IN_A_ROW`] calls in a row longer than [`SLOW`];
//! - a WASI host call that waits (a write to stdio, a sleep): wasmtime-wasi
//!   runs those by blocking on tokio, which panics on an async worker. The
//!   panic unwinds out of the plugin (the instance is dropped, never reused)
//!   and is caught here, silenced, and the caller runs the call again on a
//!   blocking thread, where the wait is allowed. Policies are pure functions
//!   of their request, so the second run answers what the first would have.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A call this long moves its chain off the async workers at once.
pub const RUNAWAY: Duration = Duration::from_millis(20);
/// A call this long counts as slow: a few in a row move the chain.
pub const SLOW: Duration = Duration::from_millis(1);
/// Slow calls in a row that move the chain (one may be a preemption).
pub const SLOW_IN_A_ROW: u32 = 3;

/// Whether one chain's calls still run on the caller's task. Clones share
/// the state: they are the same chain.
#[derive(Debug, Clone, Default)]
pub struct InlineGate(Arc<GateState>);

#[derive(Debug, Default)]
struct GateState {
    /// Set for good once the chain has shown it must not run inline.
    threaded: AtomicBool,
    slow_in_a_row: AtomicU32,
}

/// Why a call that ran here should not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Runaway,
    Slow,
    WaitingHostCall,
}

impl InlineGate {
    /// Whether calls still run on the caller's task.
    pub fn is_open(&self) -> bool {
        !self.0.threaded.load(Ordering::Relaxed)
    }

    /// Runs `call` here, unless the gate has closed. `None` means the caller
    /// must run it on a blocking thread: the gate was closed, or the call
    /// reached a WASI call that waits (which closes it). A call that
    /// answered is never run again, even when its time closes the gate.
    pub fn run<T>(&self, what: &str, call: impl FnOnce() -> T) -> Option<T> {
        if !self.is_open() {
            return None;
        }
        install_quiet_hook();
        let started = Instant::now();
        INLINE.set(true);
        let answer = std::panic::catch_unwind(AssertUnwindSafe(call));
        INLINE.set(false);
        let elapsed = started.elapsed();
        let Ok(answer) = answer else {
            self.close(what, Reason::WaitingHostCall, elapsed);
            return None;
        };
        if elapsed >= RUNAWAY {
            self.close(what, Reason::Runaway, elapsed);
        } else if elapsed >= SLOW {
            if self.0.slow_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= SLOW_IN_A_ROW {
                self.close(what, Reason::Slow, elapsed);
            }
        } else {
            self.0.slow_in_a_row.store(0, Ordering::Relaxed);
        }
        Some(answer)
    }

    fn close(&self, what: &str, reason: Reason, elapsed: Duration) {
        if self.0.threaded.swap(true, Ordering::Relaxed) {
            return;
        }
        let why = match reason {
            Reason::Runaway => "a call ran long",
            Reason::Slow => "its calls are slow",
            Reason::WaitingHostCall => "a plugin called a WASI function that waits",
        };
        tracing::info!(
            chain = what,
            elapsed_us = elapsed.as_micros() as u64,
            "{why}: this chain runs on the blocking pool from now on"
        );
    }
}

thread_local! {
    /// Set while this thread runs a call through [`InlineGate::run`].
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the panic hook quiet for the panics [`InlineGate::run`] catches
/// (they are its signal, not a fault); every other panic reaches the hook
/// that was installed before.
fn install_quiet_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !INLINE.get() {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_calls_run_here_and_keep_the_gate_open() {
        let gate = InlineGate::default();
        for n in 0..10 {
            assert_eq!(gate.run("test", || n * 2), Some(n * 2));
        }
        assert!(gate.is_open());
    }

    #[test]
    fn a_panicking_call_is_handed_back_and_closes_the_gate_for_every_clone() {
        let gate = InlineGate::default();
        let clone = gate.clone();
        let answer: Option<()> = gate.run("test", || panic!("a waiting host call"));
        assert_eq!(answer, None);
        assert!(!clone.is_open());
        let mut ran = false;
        assert_eq!(clone.run("test", || ran = true), None);
        assert!(!ran, "a closed gate runs nothing");
        // The thread is not left marked: its next panic reaches the hook.
        assert!(!INLINE.get());
    }

    #[test]
    fn a_runaway_call_answers_but_closes_the_gate() {
        let gate = InlineGate::default();
        assert_eq!(gate.run("test", || std::thread::sleep(RUNAWAY)), Some(()));
        assert!(!gate.is_open());
    }

    #[test]
    fn slow_calls_close_the_gate_only_in_a_row() {
        let gate = InlineGate::default();
        let slow = || std::thread::sleep(SLOW);
        for _ in 0..SLOW_IN_A_ROW - 1 {
            gate.run("test", slow);
        }
        gate.run("test", || ());
        assert!(gate.is_open(), "a quick call resets the count");
        for _ in 0..SLOW_IN_A_ROW {
            gate.run("test", slow);
        }
        assert!(!gate.is_open());
    }
}
