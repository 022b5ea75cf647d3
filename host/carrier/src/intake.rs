//! Incoming bytes of one connection of a carrier, between reads: what the
//! plugin has not parsed yet, and the body it claimed (a
//! `switchyard:carrier@0.3.0` `body-claim`), which the host gathers itself
//! so that its bytes never cross into the guest.

use bytes::{Buf, Bytes, BytesMut};
use switchyard_runtime::carrier::{BodyClaim, Delivery};

/// The largest body a plugin may claim: the largest payload any carrier
/// carries (NATS's ceiling is 64 MiB); a claim past it is the plugin's bug.
pub(crate) const MAX_CLAIMED_BODY: u64 = 64 << 20;

/// The most bytes the host keeps unparsed for a plugin that parses nothing
/// of them: past it the connection is closed (the plugin is told), so a
/// plugin that stalls cannot grow the host's memory without bound.
pub(crate) const MAX_UNPARSED: usize = 8 << 20;

/// Memory reserved up front for a claimed body; the rest grows as it comes,
/// so a claimed length is never an allocation the peer chose.
const BODY_RESERVE: usize = 1 << 20;

/// A claimed body being gathered.
pub(crate) struct Claimed {
    remaining: usize,
    bytes: BytesMut,
    /// Where the body goes once whole: its delivery (body ignored) and, for
    /// a reply, the request.
    pub(crate) delivery: Delivery,
    pub(crate) request: Option<u64>,
}

/// One connection's bytes between reads. They are shared, not owned:
/// the window handed to the plugin and the message bodies sliced out of it
/// (0.4.0 spans) are views of the read, not copies.
#[derive(Default)]
pub(crate) struct ReadState {
    pending: Bytes,
    body: Option<Claimed>,
}

impl ReadState {
    /// A read's bytes, after whatever is pending.
    pub(crate) fn push(&mut self, data: Vec<u8>) {
        if self.pending.is_empty() {
            // No copy: the read's own buffer becomes the pending one.
            self.pending = Bytes::from(data);
        } else {
            let mut joined = BytesMut::with_capacity(self.pending.len() + data.len());
            joined.extend_from_slice(&self.pending);
            joined.extend_from_slice(&data);
            self.pending = joined.freeze();
        }
    }

    /// Starts gathering a claimed body; refuses one past [`MAX_CLAIMED_BODY`].
    pub(crate) fn claim(&mut self, claim: BodyClaim) -> Result<(), String> {
        if claim.len > MAX_CLAIMED_BODY {
            return Err(format!(
                "a claimed body of {} bytes is larger than the host's limit of {MAX_CLAIMED_BODY}",
                claim.len
            ));
        }
        self.body = Some(Claimed {
            remaining: claim.len as usize,
            bytes: BytesMut::new(),
            delivery: claim.delivery,
            request: claim.request,
        });
        Ok(())
    }

    /// Moves pending bytes into the claimed body: the body and where it
    /// goes once it is whole, `None` while it is not (or none is claimed).
    pub(crate) fn gather(&mut self) -> Option<(Claimed, Bytes)> {
        let body = self.body.as_mut()?;
        if body.bytes.is_empty() && self.pending.len() >= body.remaining {
            // The whole body is in one read: a view of it, not a copy.
            let bytes = self.pending.split_to(body.remaining);
            let claimed = self.body.take()?;
            return Some((claimed, bytes));
        }
        let n = body.remaining.min(self.pending.len());
        if body.bytes.is_empty() {
            body.bytes.reserve(body.remaining.min(BODY_RESERVE));
        }
        body.bytes.extend_from_slice(&self.pending.split_to(n));
        body.remaining -= n;
        if body.remaining > 0 {
            return None;
        }
        let mut claimed = self.body.take()?;
        let bytes = std::mem::take(&mut claimed.bytes).freeze();
        Some((claimed, bytes))
    }

    /// Whether a claimed body is still being gathered.
    pub(crate) fn gathering(&self) -> bool {
        self.body.is_some()
    }

    /// The next bytes for the plugin, at most `peek` of them.
    pub(crate) fn window(&self, peek: u32) -> Bytes {
        let n = self.pending.len().min(peek as usize);
        self.pending.slice(..n)
    }

    /// The plugin parsed `n` bytes of the window.
    pub(crate) fn consume(&mut self, n: usize) {
        self.pending.advance(n.min(self.pending.len()));
    }

    /// Bytes held and not parsed.
    pub(crate) fn unparsed(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use switchyard_runtime::carrier::Body;

    use super::*;

    fn claim(len: u64) -> BodyClaim {
        BodyClaim {
            len,
            delivery: Delivery {
                subscription: 1,
                subject: "a".into(),
                reply_to: None,
                headers: Vec::new(),
                body: Body::Inline(Vec::new()),
            },
            request: None,
        }
    }

    #[test]
    fn a_body_in_one_read_is_taken_whole_and_the_rest_stays_pending() {
        let mut state = ReadState::default();
        state.push(b"hello\r\nPING\r\n".to_vec());
        state.claim(claim(5)).unwrap();
        let (_, body) = state.gather().expect("whole");
        assert_eq!(body, &b"hello"[..]);
        assert_eq!(state.window(64), &b"\r\nPING\r\n"[..]);
        assert_eq!(state.window(3), &b"\r\nP"[..]);
    }

    #[test]
    fn a_body_across_reads_is_gathered_byte_exact() {
        let mut state = ReadState::default();
        state.push(b"ab".to_vec());
        state.claim(claim(7)).unwrap();
        assert!(state.gather().is_none());
        for piece in [&b"c"[..], b"de", b"fgXY"] {
            state.push(piece.to_vec());
            if let Some((_, body)) = state.gather() {
                assert_eq!(body, &b"abcdefg"[..]);
                assert_eq!(state.window(64), &b"XY"[..]);
                return;
            }
        }
        panic!("the body was never whole");
    }

    #[test]
    fn a_claim_past_the_limit_is_refused() {
        let mut state = ReadState::default();
        assert!(state.claim(claim(MAX_CLAIMED_BODY + 1)).is_err());
        assert!(!state.gathering());
    }
}
