//! Time, read from the host.
//!
//! In a component these call the `switchyard:plugin/clock` import; natively
//! they read the system clock, so that tests of time-based policies run
//! without a host.

/// Wall-clock time in milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::switchyard::plugin::clock::now_unix_ms();
    #[cfg(not(target_arch = "wasm32"))]
    return native::now_unix_ms();
}

/// A monotonic reading in nanoseconds; only differences are meaningful.
pub fn monotonic_ns() -> u64 {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::switchyard::plugin::clock::monotonic_ns();
    #[cfg(not(target_arch = "wasm32"))]
    return native::monotonic_ns();
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::sync::OnceLock;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    pub(super) fn now_unix_ms() -> u64 {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn monotonic_ns() -> u64 {
        // Measured from the first reading, like the host's clock: only
        // differences mean anything.
        static START: OnceLock<Instant> = OnceLock::new();
        let elapsed = START.get_or_init(Instant::now).elapsed();
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_is_after_2024() {
        // 2024-01-01T00:00:00Z
        assert!(now_unix_ms() > 1_704_067_200_000);
    }

    #[test]
    fn monotonic_does_not_go_back() {
        let first = monotonic_ns();
        let second = monotonic_ns();
        assert!(second >= first);
    }
}
