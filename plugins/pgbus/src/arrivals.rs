//! Messages heard, in arrival order, until they can be delivered. A spilled
//! message waits for its row to be read; every message heard after it waits
//! too, so that subscribers see the order the database committed in even
//! when several reads run at once and answer out of order.

use std::collections::VecDeque;

use crate::action::Held;
use crate::notification::Message;

/// A read spill row's payload: its bytes, or the host's held cell.
#[derive(Debug)]
pub(crate) enum Body {
    Bytes(Vec<u8>),
    Held(Held),
}

/// How long a spilled message may hold up the messages behind it: well
/// above a loaded reader's lag (0.2-0.3 s p50 with one reader in the
/// baselines), and an answer that never comes (a connection that died
/// silently) costs at most this much fan-out.
pub const SPILL_READ_TIMEOUT_MS: u64 = 15_000;

/// Most messages waiting behind unanswered spill reads; more are lost and
/// counted. The host's own notification queue holds as many.
pub const MAX_WAITING: usize = 65_536;

#[derive(Debug)]
enum Entry {
    /// Deliverable; `held` names the payload when the host holds it.
    Ready(Message, Option<Held>),
    Reading {
        id: i64,
        message: Message,
        deadline: u64,
        issued: bool,
    },
    /// Lost (not found, failed, timed out): nothing to deliver.
    Gone,
}

/// The queue, numbered by sequence: entry `seq` sits at `seq - first`.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    entries: VecDeque<Entry>,
    first: u64,
    /// Spilled entries that still need a read, oldest first (may hold stale
    /// sequences, skipped when taken).
    unissued: VecDeque<u64>,
}

impl Arrivals {
    pub(crate) fn is_full(&self) -> bool {
        self.entries.len() >= MAX_WAITING
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Queues a whole message.
    pub(crate) fn push_ready(&mut self, message: Message) {
        self.entries.push_back(Entry::Ready(message, None));
    }

    /// Queues a spilled message whose row must be read before `now + timeout`.
    pub(crate) fn push_spilled(&mut self, id: i64, message: Message, now: u64) {
        let seq = self.first + self.entries.len() as u64;
        self.entries.push_back(Entry::Reading {
            id,
            message,
            deadline: now.saturating_add(SPILL_READ_TIMEOUT_MS),
            issued: false,
        });
        self.unissued.push_back(seq);
    }

    /// The oldest spilled entry without a read in flight, now marked as read:
    /// its sequence and row id.
    pub(crate) fn take_unissued(&mut self) -> Option<(u64, i64)> {
        while let Some(seq) = self.unissued.pop_front() {
            if let Some(Entry::Reading { id, issued, .. }) = self.get_mut(seq)
                && !*issued
            {
                *issued = true;
                return Some((seq, *id));
            }
        }
        None
    }

    /// The subject of the spilled entry `seq`, while it waits for its read.
    pub(crate) fn subject_of(&self, seq: u64) -> Option<&str> {
        let index = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        match self.entries.get(index)? {
            Entry::Reading { message, .. } => Some(&message.subject),
            _ => None,
        }
    }

    /// Whether the entry `seq` is still queued (not yet delivered).
    pub(crate) fn is_queued(&self, seq: u64) -> bool {
        seq >= self.first && seq - self.first < self.entries.len() as u64
    }

    /// The read of `seq` will not be answered (its connection closed): it
    /// needs a read again, before younger ones.
    pub(crate) fn requeue(&mut self, seq: u64) {
        if let Some(Entry::Reading { issued, .. }) = self.get_mut(seq) {
            *issued = false;
            self.unissued.push_front(seq);
        }
    }

    /// The read of `seq` answered: the payload, or `None` when the row is
    /// gone or the read failed. False if the entry no longer waited (it timed
    /// out), so that nothing is counted twice.
    pub(crate) fn complete(&mut self, seq: u64, payload: Option<Body>) -> bool {
        let Some(entry) = self.get_mut(seq) else {
            return false;
        };
        if !matches!(entry, Entry::Reading { .. }) {
            return false;
        }
        let Entry::Reading { message, .. } = std::mem::replace(entry, Entry::Gone) else {
            unreachable!("checked above");
        };
        *entry = match payload {
            Some(Body::Bytes(payload)) => Entry::Ready(Message { payload, ..message }, None),
            Some(Body::Held(held)) => Entry::Ready(message, Some(held)),
            None => Entry::Gone,
        };
        true
    }

    /// Gives up the reads due at or before `now`; answers how many.
    pub(crate) fn expire(&mut self, now: u64) -> usize {
        let mut expired = 0;
        for entry in self.entries.iter_mut() {
            match entry {
                Entry::Reading { deadline, .. } if *deadline <= now => {
                    *entry = Entry::Gone;
                    expired += 1;
                }
                // Deadlines grow with arrival: nothing later is due.
                Entry::Reading { .. } => break,
                _ => {}
            }
        }
        expired
    }

    /// The messages at the front that no read holds up, in arrival order,
    /// each with its held payload if the host holds it.
    pub(crate) fn pop_ready(&mut self) -> Vec<(Message, Option<Held>)> {
        let mut ready = Vec::new();
        while let Some(entry) = self.entries.front() {
            if matches!(entry, Entry::Reading { .. }) {
                break;
            }
            self.first += 1;
            if let Some(Entry::Ready(message, held)) = self.entries.pop_front() {
                ready.push((message, held));
            }
        }
        ready
    }

    /// When the oldest waiting read times out.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.entries.iter().find_map(|entry| match entry {
            Entry::Reading { deadline, .. } => Some(*deadline),
            _ => None,
        })
    }

    fn get_mut(&mut self, seq: u64) -> Option<&mut Entry> {
        let index = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        self.entries.get_mut(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(subject: &str, payload: &[u8]) -> Message {
        Message {
            subject: subject.into(),
            reply_to: None,
            headers: Vec::new(),
            payload: payload.to_vec(),
        }
    }

    fn subjects(messages: Vec<(Message, Option<Held>)>) -> Vec<String> {
        messages.into_iter().map(|(m, _)| m.subject).collect()
    }

    fn bytes(payload: &[u8]) -> Option<Body> {
        Some(Body::Bytes(payload.to_vec()))
    }

    #[test]
    fn reads_answered_out_of_order_deliver_in_arrival_order() {
        let mut a = Arrivals::default();
        a.push_ready(message("a", b""));
        a.push_spilled(10, message("b", b""), 0);
        a.push_ready(message("c", b""));
        a.push_spilled(11, message("d", b""), 0);
        a.push_ready(message("e", b""));
        assert_eq!(subjects(a.pop_ready()), ["a"]);
        assert_eq!(a.take_unissued(), Some((1, 10)));
        assert_eq!(a.take_unissued(), Some((3, 11)));
        assert_eq!(a.take_unissued(), None);

        assert!(a.complete(3, bytes(b"D")));
        assert!(a.pop_ready().is_empty(), "b still holds the queue");
        assert!(a.complete(1, Some(Body::Held(Held { id: 5, len: 1 }))));
        let ready = a.pop_ready();
        assert_eq!(ready[0].1, Some(Held { id: 5, len: 1 }), "held by the host");
        assert_eq!(ready[2].0.payload, b"D");
        assert_eq!(subjects(ready), ["b", "c", "d", "e"]);
        assert_eq!(a.len(), 0);
        assert!(!a.complete(3, None), "already delivered");
    }

    #[test]
    fn missing_rows_timeouts_and_requeues() {
        let mut a = Arrivals::default();
        a.push_spilled(1, message("a", b""), 0);
        a.push_spilled(2, message("b", b""), 10);
        a.push_ready(message("c", b""));
        assert_eq!(a.next_deadline(), Some(SPILL_READ_TIMEOUT_MS));
        assert_eq!(a.take_unissued(), Some((0, 1)));
        assert_eq!(a.take_unissued(), Some((1, 2)));
        // The second read's connection closed: it is read again.
        a.requeue(1);
        assert_eq!(a.take_unissued(), Some((1, 2)));
        assert_eq!(a.take_unissued(), None);

        assert!(a.complete(0, None), "row gone: lost");
        assert!(a.pop_ready().is_empty());
        assert_eq!(a.expire(SPILL_READ_TIMEOUT_MS + 9), 0);
        assert_eq!(a.expire(SPILL_READ_TIMEOUT_MS + 10), 1);
        assert!(!a.complete(1, bytes(b"late")), "timed out already");
        assert_eq!(subjects(a.pop_ready()), ["c"]);
        assert_eq!(a.next_deadline(), None);
    }
}
