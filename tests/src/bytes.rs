//! Test payloads.

use bytes::Bytes;

/// `len` bytes that show any shift, cut or repeat and that PostgreSQL
/// cannot compress, different for each `seed` (xorshift).
pub fn pattern(len: usize, seed: u64) -> Bytes {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
