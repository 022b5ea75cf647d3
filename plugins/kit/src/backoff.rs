//! Reconnect delays: at once the first time, then doubling from 250 ms up to
//! 8 s, each shortened by a random quarter so that many clients cut off by
//! the same server failure do not all come back in the same millisecond.

use crate::rng::XorShift;

/// The delay of the first retry after an immediate one.
pub const BACKOFF_START_MS: u64 = 250;
/// The longest delay: long enough to spare a struggling server, short enough
/// that a restarted one is found again quickly.
pub const BACKOFF_MAX_MS: u64 = 8_000;

/// The delays of successive reconnect attempts; [`Backoff::reset`] once a
/// handshake succeeds.
#[derive(Debug, Clone)]
pub struct Backoff {
    attempt: u32,
    rng: XorShift,
}

impl Backoff {
    /// A backoff whose jitter comes from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            attempt: 0,
            rng: XorShift::new(seed),
        }
    }

    /// The delay before the next attempt, in milliseconds: 0 for the first,
    /// then within `[3/4 d, d]` where `d` doubles from 250 to at most 8000.
    pub fn next_delay(&mut self) -> u64 {
        let attempt = self.attempt;
        self.attempt = self.attempt.saturating_add(1);
        if attempt == 0 {
            return 0;
        }
        // Shifting by at most 6 already passes the cap; no overflow.
        let base = (BACKOFF_START_MS << (attempt - 1).min(6)).min(BACKOFF_MAX_MS);
        // Jitter subtracts, so the cap stays a cap.
        base - self.rng.below(base / 4 + 1)
    }

    /// How many delays were handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Back to an immediate first retry; called once a connection is up.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_with_jitter_up_to_the_cap() {
        let mut b = Backoff::new(42);
        assert_eq!(b.next_delay(), 0);
        let bases = [250, 500, 1000, 2000, 4000, 8000, 8000, 8000, 8000];
        for base in bases {
            let d = b.next_delay();
            assert!(
                d <= base && d >= base * 3 / 4,
                "{d} not within 3/4 of {base}"
            );
        }
        b.reset();
        assert_eq!(b.attempt(), 0);
        assert_eq!(b.next_delay(), 0);
    }

    #[test]
    fn seeds_give_different_jitter() {
        let delays = |seed| {
            let mut b = Backoff::new(seed);
            (0..8).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(delays(1), delays(1));
        assert_ne!(delays(1), delays(2));
    }
}
