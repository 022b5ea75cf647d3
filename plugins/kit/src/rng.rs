//! A tiny deterministic generator for inbox tokens and reconnect jitter.
//!
//! The engine has no source of randomness of its own (it must run the same way
//! inside a component with no WASI random import), so the host hands it a seed
//! and this expands it.

/// xorshift64*: fast, small, and good enough for tokens and jitter; not for
/// secrets.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// Mixes the seed first (splitmix64) so that nearby seeds such as 1 and 2
    /// do not give nearby streams, and so that a zero seed still works.
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // Zero is the one state xorshift never leaves.
        Self(if z == 0 { 0x9E37_79B9_7F4A_7C15 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0). The modulo bias is irrelevant at
    /// the sizes used here.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift;

    #[test]
    fn same_seed_same_stream_and_zero_seed_works() {
        let (mut a, mut b) = (XorShift::new(0), XorShift::new(0));
        let first = a.next_u64();
        assert_ne!(first, 0);
        assert_eq!(first, b.next_u64());
        assert_ne!(XorShift::new(1).next_u64(), XorShift::new(2).next_u64());
        assert_eq!(a.below(0), 0);
        assert!(a.below(10) < 10);
    }
}
