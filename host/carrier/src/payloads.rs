//! Payloads the host holds for a `switchyard:carrier@0.3.0` plugin: the
//! plugin names them by id in its framing (a `write` segment, a query
//! param, a delivery body) and never sees their bytes.
//!
//! Lifetime, as the WIT states it: a payload handed to one call (an
//! operation's payload, a held query cell) lives until that call's actions
//! are performed, then is dropped unless the plugin kept it; a kept one lives
//! until it is used or released. Using an id takes the payload. What one
//! plugin keeps is bounded; going past the bound, or naming an id the host
//! does not hold, is the plugin's fault ([`PayloadError`]), which the reactor
//! treats as it treats a trap.

use std::collections::HashMap;

use bytes::Bytes;
use switchyard_runtime::carrier::PayloadRef;

/// The most payloads one plugin may keep across calls: a pgbus-style
/// plugin keeps spill payloads while it batches them, a handful at a time.
pub(crate) const MAX_KEPT_PAYLOADS: usize = 4096;

/// The most bytes one plugin may keep across calls: enough for a burst of
/// spilled 1 MiB payloads, small against the host's memory.
pub(crate) const MAX_KEPT_BYTES: usize = 64 << 20;

/// A plugin misused a payload id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PayloadError {
    /// The id names no payload the host holds (used already, dropped, or never handed).
    #[error("payload {0} is not held (used already, dropped after its call, or never handed over)")]
    Unknown(u64),
    /// A `keep` past the bound.
    #[error(
        "keeping payload {id} would hold {count} payloads of {bytes} bytes, past the bound of {MAX_KEPT_PAYLOADS} payloads or {MAX_KEPT_BYTES} bytes"
    )]
    TooMuchKept { id: u64, count: usize, bytes: usize },
}

/// The held payloads of one plugin instance.
#[derive(Debug, Default)]
pub(crate) struct Payloads {
    next: u64,
    /// Handed to the call under way; dropped when its actions are done.
    call: HashMap<u64, Bytes>,
    kept: HashMap<u64, Bytes>,
    kept_bytes: usize,
}

impl Payloads {
    /// Holds `bytes` for the call under way; the reference names it.
    pub(crate) fn hand(&mut self, bytes: Bytes) -> PayloadRef {
        self.next += 1;
        let payload = PayloadRef {
            id: self.next,
            len: bytes.len() as u64,
        };
        self.call.insert(payload.id, bytes);
        payload
    }

    /// Takes a payload for its one use.
    pub(crate) fn take(&mut self, id: u64) -> Result<Bytes, PayloadError> {
        if let Some(bytes) = self.call.remove(&id) {
            return Ok(bytes);
        }
        let bytes = self.kept.remove(&id).ok_or(PayloadError::Unknown(id))?;
        self.kept_bytes -= bytes.len();
        Ok(bytes)
    }

    /// Holds a payload of the call under way beyond it.
    pub(crate) fn keep(&mut self, id: u64) -> Result<(), PayloadError> {
        if self.kept.contains_key(&id) {
            return Ok(());
        }
        let bytes = self.call.remove(&id).ok_or(PayloadError::Unknown(id))?;
        let count = self.kept.len() + 1;
        let total = self.kept_bytes + bytes.len();
        if count > MAX_KEPT_PAYLOADS || total > MAX_KEPT_BYTES {
            return Err(PayloadError::TooMuchKept {
                id,
                count,
                bytes: total,
            });
        }
        self.kept_bytes = total;
        self.kept.insert(id, bytes);
        Ok(())
    }

    /// Drops a kept payload unused.
    pub(crate) fn release(&mut self, id: u64) -> Result<(), PayloadError> {
        self.take(id).map(drop)
    }

    /// The call's actions are done: what it did not use or keep goes.
    pub(crate) fn end_call(&mut self) {
        self.call.clear();
    }

    /// The plugin is gone: everything goes.
    pub(crate) fn clear(&mut self) {
        self.call.clear();
        self.kept.clear();
        self.kept_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_used_once() {
        let mut payloads = Payloads::default();
        let held = payloads.hand(Bytes::from_static(b"hello"));
        assert_eq!(held.len, 5);
        assert_eq!(payloads.take(held.id).unwrap(), &b"hello"[..]);
        assert_eq!(payloads.take(held.id), Err(PayloadError::Unknown(held.id)));
    }

    #[test]
    fn an_unkept_payload_goes_with_its_call_and_a_kept_one_stays_until_used() {
        let mut payloads = Payloads::default();
        let dropped = payloads.hand(Bytes::from_static(b"a"));
        let kept = payloads.hand(Bytes::from_static(b"bc"));
        payloads.keep(kept.id).unwrap();
        payloads.end_call();
        assert!(payloads.take(dropped.id).is_err());
        assert_eq!(payloads.take(kept.id).unwrap(), &b"bc"[..]);
        assert_eq!(payloads.kept_bytes, 0);

        let released = payloads.hand(Bytes::from_static(b"d"));
        payloads.keep(released.id).unwrap();
        payloads.release(released.id).unwrap();
        assert!(payloads.take(released.id).is_err());
    }

    #[test]
    fn keeping_past_the_bound_is_refused() {
        let mut payloads = Payloads::default();
        for _ in 0..MAX_KEPT_PAYLOADS {
            let held = payloads.hand(Bytes::from_static(b"x"));
            payloads.keep(held.id).unwrap();
        }
        let one_more = payloads.hand(Bytes::from_static(b"x"));
        assert!(matches!(
            payloads.keep(one_more.id),
            Err(PayloadError::TooMuchKept { .. })
        ));

        let mut payloads = Payloads::default();
        let big = payloads.hand(Bytes::from(vec![0; MAX_KEPT_BYTES + 1]));
        assert!(payloads.keep(big.id).is_err());
    }
}
