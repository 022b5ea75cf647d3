//! What waits on the publisher while a publish query is in flight: inline
//! notifications ([`Batch`]) or spilled messages ([`Spills`]), never both
//! (a message of the other kind sends the waiting ones first, so that one
//! publisher's messages keep their order). Each goes out as one statement,
//! one transaction, which takes PostgreSQL's global notify lock once for all
//! of its messages: under load, messages wait one round trip at most and the
//! database commits far fewer times.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::action::{Action, Param};
#[cfg(doc)]
use crate::sql;

/// Most notifications in one batch query.
pub const MAX_BATCH_NOTIFICATIONS: u64 = 256;
/// Most bytes of notification text in one batch query.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// Most spilled messages in one statement: enough to commit a burst's
/// spills a few at a time (16 publishers' worth of 64 KiB in a profiled
/// burst), few enough that one failed statement loses little.
pub const MAX_SPILL_BATCH: u64 = 16;
/// Most payload bytes in one spill statement (one `bytea` parameter, held
/// whole by the host and by PostgreSQL): four of the largest payloads.
pub const MAX_SPILL_BATCH_BYTES: usize = 4 << 20;

/// Inline notification texts waiting.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The texts, joined by newlines.
    texts: String,
    count: u64,
    /// Hashes of the texts: PostgreSQL delivers identical notifications of
    /// one transaction once, so a repeat starts a new batch.
    seen: HashSet<u64>,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Drops the batch; answers how many messages it held.
    pub(super) fn discard(&mut self) -> u64 {
        std::mem::take(self).count
    }

    /// Whether `text` may join; otherwise the batch goes out first.
    pub(super) fn fits(&self, text: &str) -> bool {
        self.texts.len() + 1 + text.len() <= MAX_BATCH_BYTES && !self.seen.contains(&hash(text))
    }

    pub(super) fn push(&mut self, text: &str) {
        if self.count > 0 {
            self.texts.push('\n');
        }
        self.texts.push_str(text);
        self.count += 1;
        self.seen.insert(hash(text));
    }

    pub(super) fn is_full(&self) -> bool {
        self.count >= MAX_BATCH_NOTIFICATIONS
    }

    /// How many texts, and the texts joined by newlines.
    pub(super) fn take(&mut self) -> (u64, String) {
        let batch = std::mem::take(self);
        (batch.count, batch.texts)
    }
}

fn hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Spilled messages waiting: their marker tails and payloads, in publish
/// order, as the parameters of [`sql::spill_batch`] take them.
#[derive(Debug, Default)]
pub(super) struct Spills {
    /// The marker tails (`<subject> <reply-to> <headers>`), joined by
    /// newlines (which no tail contains: subjects have no control characters).
    tails: String,
    /// The payloads, each its own parameter (never copied together): bytes,
    /// or a payload the host holds, kept across calls while it waits here.
    payloads: Vec<Param>,
    /// Their bytes in all.
    bytes: usize,
}

impl Spills {
    pub(super) fn is_empty(&self) -> bool {
        self.payloads.is_empty()
    }

    fn count(&self) -> u64 {
        self.payloads.len() as u64
    }

    /// Drops the waiting messages, releasing the held payloads among them
    /// (each was kept when it joined); answers how many there were.
    pub(super) fn discard(&mut self, out: &mut Vec<Action>) -> u64 {
        let spills = std::mem::take(self);
        for param in &spills.payloads {
            if let Param::Payload(id) = param {
                out.push(Action::Release(*id));
            }
        }
        spills.count()
    }

    /// Whether a payload of `len` bytes may join; otherwise the waiting
    /// messages go out first. An empty batch takes any payload (publish
    /// already bounds it by `MAX_PAYLOAD`).
    pub(super) fn fits(&self, len: usize) -> bool {
        self.is_empty()
            || (self.count() < MAX_SPILL_BATCH && self.bytes + len <= MAX_SPILL_BATCH_BYTES)
    }

    /// Adds a message: its payload is `Param::Bytes`, or `Param::Payload`
    /// of `len` bytes (the caller keeps it in the host while it waits).
    pub(super) fn push(&mut self, tail: &str, payload: Param, len: usize) {
        if !self.is_empty() {
            self.tails.push('\n');
        }
        self.tails.push_str(tail);
        self.bytes += len;
        self.payloads.push(payload);
    }

    /// Full: nothing more would fit, so it goes out now.
    pub(super) fn is_full(&self) -> bool {
        self.count() >= MAX_SPILL_BATCH || self.bytes >= MAX_SPILL_BATCH_BYTES
    }

    /// How many messages, and the parameters of [`sql::spill_batch`] after
    /// the channel: the tails, then each payload.
    pub(super) fn take(&mut self) -> (u64, Vec<Param>) {
        let spills = std::mem::take(self);
        let count = spills.count();
        let params = std::iter::once(Param::Text(spills.tails))
            .chain(spills.payloads)
            .collect();
        (count, params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_batch_holds_at_most_sixteen_messages() {
        let mut spills = Spills::default();
        for i in 0..MAX_SPILL_BATCH {
            assert!(spills.fits(10), "message {i} fits");
            assert!(!spills.is_full());
            spills.push("jobs.a  ", Param::Bytes(vec![1; 10]), 10);
        }
        assert!(spills.is_full());
        assert!(!spills.fits(0));
    }

    #[test]
    fn a_spill_batch_holds_at_most_four_mib_of_payload() {
        let mib = vec![0u8; 1 << 20];
        let mut spills = Spills::default();
        for _ in 0..3 {
            spills.push("jobs.a  ", Param::Bytes(mib.clone()), mib.len());
        }
        assert!(spills.fits(1 << 20), "exactly 4 MiB fits");
        assert!(!spills.fits((1 << 20) + 1));
        spills.push("jobs.a  ", Param::Payload(9), mib.len());
        assert!(spills.is_full());
        // An empty batch takes even an oversized payload: publish bounds it.
        assert!(Spills::default().fits(MAX_SPILL_BATCH_BYTES + 1));
    }

    #[test]
    fn spill_parameters_keep_publish_order() {
        let mut spills = Spills::default();
        spills.push("jobs.a  ", Param::Bytes(b"one".to_vec()), 3);
        spills.push("jobs.b r.1 ", Param::Payload(7), 0);
        spills.push("jobs.c  ", Param::Bytes(b"three".to_vec()), 5);
        let (count, params) = spills.take();
        assert_eq!(count, 3);
        assert_eq!(
            params,
            [
                Param::Text("jobs.a  \njobs.b r.1 \njobs.c  ".into()),
                Param::Bytes(b"one".to_vec()),
                Param::Payload(7),
                Param::Bytes(b"three".to_vec()),
            ]
        );
        assert!(spills.is_empty(), "taken");
        spills.push("jobs.a  ", Param::Payload(8), 100);
        spills.push("jobs.b  ", Param::Bytes(vec![1]), 1);
        let mut out = Vec::new();
        assert_eq!(spills.discard(&mut out), 2);
        assert_eq!(out, [Action::Release(8)], "a held payload is released");
    }

    #[test]
    fn an_inline_batch_starts_anew_on_a_repeat_or_when_full() {
        let mut batch = Batch::default();
        batch.push("m a   MQ==");
        assert!(
            !batch.fits("m a   MQ=="),
            "PostgreSQL would fold the repeat"
        );
        assert!(batch.fits("m a   Mg=="));
        for i in 1..MAX_BATCH_NOTIFICATIONS {
            batch.push(&format!("m a{i}  "));
        }
        assert!(batch.is_full());
        assert_eq!(batch.discard(), MAX_BATCH_NOTIFICATIONS);
        assert!(batch.is_empty());
    }
}
