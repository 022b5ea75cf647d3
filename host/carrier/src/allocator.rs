//! The allocator policy that a tunnel's read buffers need, set once at the
//! start of a process that carries streams.
//!
//! A websocket reader hands each message on as a slice of its 256 KiB read
//! buffer ([`crate::tunnel::websocket::frames`]); a bulk stream may hold up
//! to its window (32 MiB) of them while its consumer catches up, so
//! buffers are freed in the order they were filled, often at the top of
//! the heap. With glibc's defaults (a dynamic threshold that trims the heap
//! once its free top passes about 512 KiB) each such free gives the pages
//! back to the kernel and the next buffer faults them in again: over a
//! quarter of an upload's time went to page faults (`docs/benchmarks.md`, "The
//! tunnel's own websocket"). Keeping up to 64 MiB of freed heap per arena
//! for reuse, and taking buffers under 1 MiB from the heap rather than
//! from `mmap`, removes that; an idle server's resident memory is the same
//! (71.8 against 72.4 MiB in the bench's `idle-memory` section).

/// Buffers under this come from the heap, not a mapping of their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1 << 20;
/// Free memory at the top of a heap kept for reuse, up to this much.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 64 << 20;

/// Sets glibc's malloc thresholds (a no-op elsewhere). Call it first in
/// `main`, before any thread starts.
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets malloc's parameters; it is called before
    // any other thread exists, with parameters and values glibc documents.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
