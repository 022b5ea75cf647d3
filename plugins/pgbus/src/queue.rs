//! The claim queue's rules and its consumers on this frontend.
//!
//! A work unit is published on a subject under a queue root with the
//! [`UNIT_ID_HEADER`] header; the database keeps it in the queue table until
//! a consumer acknowledges it. A subscription with a queue group on a queued
//! subject makes this frontend a consumer: it claims units (a lease of
//! `lease_seconds`), hands each to one of the subject's subscriptions with
//! the reply-to `_claim.<row id>`, and deletes the row when the host
//! publishes to that reply-to. A unit not acknowledged within its lease is
//! claimed again, here or elsewhere: delivery is at least once.
//!
//! [`Consumers`] decides when to claim: a claim is wanted after a wake, a
//! full batch, a subscription, a reconnect and every [`CLAIM_INTERVAL_MS`];
//! it is sent when none runs for the subject and a whole batch fits under
//! [`MAX_UNACKED`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::action::{CarrierError, Header};

/// The header that names a unit; the table keeps one row per name, so a
/// producer that retries with the same name queues the unit once.
pub const UNIT_ID_HEADER: &str = "switchyard-unit-id";
/// Longest unit id: a key, not a document.
pub const MAX_UNIT_ID_LEN: usize = 128;
/// Reply-tos of claimed units: `_claim.<row id>`.
pub const CLAIM_PREFIX: &str = "_claim.";
/// Most units one claim takes.
pub const CLAIM_BATCH: u64 = 64;
/// Most units of one subject claimed here and not acknowledged: more stay in
/// the table for other consumers instead of waiting in this host's queue
/// while their leases run out. A claim waits until a whole batch fits, so a
/// busy consumer claims a batch per [`CLAIM_BATCH`] acknowledgements, not a
/// unit per acknowledgement.
pub const MAX_UNACKED: usize = 256;
const _: () = assert!(
    MAX_UNACKED >= CLAIM_BATCH as usize,
    "a whole batch must fit"
);
/// How often consumers claim without a wake: picks up expired leases and
/// wakes lost while the listener was away.
pub const CLAIM_INTERVAL_MS: u64 = 1_000;

/// Where a subject goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `_claim.<id>`: acknowledges the claimed unit in row `id`.
    Ack(i64),
    /// Under a queue root: a work unit.
    Queued,
    /// Anything else: fan-out.
    FanOut,
}

/// The row an acknowledgement subject names; `None` when `subject` is not one.
pub(crate) fn ack_row(subject: &str) -> Option<Result<i64, CarrierError>> {
    let id = subject.strip_prefix(CLAIM_PREFIX)?;
    Some(match id.parse::<i64>() {
        Ok(n) if n > 0 && !id.starts_with('+') => Ok(n),
        _ => Err(CarrierError::InvalidSubject(format!(
            "`{subject}` names no claimed unit: acknowledgements go to `{CLAIM_PREFIX}<row id>`"
        ))),
    })
}

/// The unit id among the headers (the first such header).
pub(crate) fn unit_id(headers: &[Header]) -> Result<&str, CarrierError> {
    let Some(header) = headers.iter().find(|h| h.name == UNIT_ID_HEADER) else {
        return Err(CarrierError::Refused(format!(
            "a work unit needs the `{UNIT_ID_HEADER}` header"
        )));
    };
    let id = header.value.as_str();
    if id.is_empty() || id.len() > MAX_UNIT_ID_LEN || id.chars().any(char::is_control) {
        return Err(CarrierError::Refused(format!(
            "`{UNIT_ID_HEADER}` must be 1 to {MAX_UNIT_ID_LEN} bytes without control characters, got {} bytes",
            id.len()
        )));
    }
    Ok(id)
}

/// One queued subject this frontend consumes; kept without subscriptions
/// until its claim in flight ends, so that a claim never runs twice.
#[derive(Debug, Default)]
struct Consumer {
    /// The host's subscriptions on it; units go round robin.
    subscriptions: BTreeSet<u64>,
    /// Where the round robin goes next: the first id at or after it.
    next: u64,
    /// The claim in flight (its query id).
    claiming: Option<u64>,
    /// Units may wait that no claim has asked for since.
    wanted: bool,
    /// Units delivered here and not acknowledged: row id, and when (engine
    /// clock) its lease ends.
    unacked: HashMap<i64, u64>,
}

/// The consumers, by subject.
#[derive(Debug, Default)]
pub(crate) struct Consumers {
    by_subject: BTreeMap<String, Consumer>,
    subjects: HashMap<u64, String>,
}

impl Consumers {
    pub(crate) fn is_empty(&self) -> bool {
        self.subjects.is_empty()
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.subjects.contains_key(&id)
    }

    /// Adds subscription `id` to `subject`'s consumer, which wants a claim.
    pub(crate) fn insert(&mut self, id: u64, subject: &str) {
        self.subjects.insert(id, subject.to_owned());
        let consumer = self.by_subject.entry(subject.to_owned()).or_default();
        consumer.subscriptions.insert(id);
        consumer.wanted = true;
    }

    /// Removes subscription `id`; its subject stops being claimed with its
    /// last subscription. False if `id` is no consumer.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let Some(subject) = self.subjects.remove(&id) else {
            return false;
        };
        if let Some(consumer) = self.by_subject.get_mut(&subject) {
            consumer.subscriptions.remove(&id);
            if consumer.subscriptions.is_empty() {
                consumer.unacked.clear();
                if consumer.claiming.is_none() {
                    self.by_subject.remove(&subject);
                }
            }
        }
        true
    }

    /// A wake named `subject`: true if it is consumed here.
    pub(crate) fn wake(&mut self, subject: &str) -> bool {
        match self.by_subject.get_mut(subject) {
            Some(consumer) if !consumer.subscriptions.is_empty() => {
                consumer.wanted = true;
                true
            }
            _ => false,
        }
    }

    /// Every subject wants a claim (a tick, a reconnect, lost wakes).
    pub(crate) fn wake_all(&mut self) {
        for consumer in self.by_subject.values_mut() {
            consumer.wanted = true;
        }
    }

    /// Forgets units whose lease ended by `now`: the table offers them again.
    pub(crate) fn expire(&mut self, now: u64) {
        for consumer in self.by_subject.values_mut() {
            consumer.unacked.retain(|_, until| *until > now);
        }
    }

    /// The subjects to claim now; the engine marks each claim it sends
    /// with [`Consumers::claiming`].
    pub(crate) fn due(&self) -> Vec<String> {
        self.by_subject
            .iter()
            .filter(|(_, c)| {
                c.wanted
                    && c.claiming.is_none()
                    && c.unacked.len() + CLAIM_BATCH as usize <= MAX_UNACKED
            })
            .map(|(subject, _)| subject.clone())
            .collect()
    }

    /// The claim `query` for `subject` was sent.
    pub(crate) fn claiming(&mut self, subject: &str, query: u64) {
        if let Some(consumer) = self.by_subject.get_mut(subject) {
            consumer.claiming = Some(query);
            consumer.wanted = false;
        }
    }

    /// The claim `query` ended (answered or lost); `more` when it took a
    /// whole batch (or was lost), so more may wait.
    pub(crate) fn claimed(&mut self, subject: &str, query: u64, more: bool) {
        let Some(consumer) = self.by_subject.get_mut(subject) else {
            return;
        };
        if consumer.claiming == Some(query) {
            consumer.claiming = None;
        }
        consumer.wanted |= more;
        if consumer.subscriptions.is_empty() && consumer.claiming.is_none() {
            self.by_subject.remove(subject);
        }
    }

    /// The subscription that takes the next unit of `subject`, which is
    /// then unacknowledged until `until`; `None` when nobody consumes it.
    pub(crate) fn take(&mut self, subject: &str, row: i64, until: u64) -> Option<u64> {
        let consumer = self.by_subject.get_mut(subject)?;
        let id = consumer
            .subscriptions
            .range(consumer.next..)
            .chain(&consumer.subscriptions)
            .copied()
            .next()?;
        consumer.next = id.wrapping_add(1);
        consumer.unacked.insert(row, until);
        Some(id)
    }

    /// Row `row` was acknowledged: its subject has room again.
    pub(crate) fn acknowledged(&mut self, row: i64) {
        for consumer in self.by_subject.values_mut() {
            if consumer.unacked.remove(&row).is_some() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_subjects() {
        assert_eq!(ack_row("_claim.17"), Some(Ok(17)));
        assert_eq!(ack_row("jobs.17"), None);
        for bad in [
            "_claim.",
            "_claim.0",
            "_claim.-1",
            "_claim.+1",
            "_claim.x",
            "_claim.1.2",
        ] {
            assert!(
                matches!(ack_row(bad), Some(Err(CarrierError::InvalidSubject(_)))),
                "{bad}"
            );
        }
    }

    #[test]
    fn unit_ids() {
        let header = |v: &str| [Header::new("a", "b"), Header::new(UNIT_ID_HEADER, v)];
        assert_eq!(unit_id(&header("u-1")), Ok("u-1"));
        assert_eq!(unit_id(&header(&"x".repeat(128))).map(str::len), Ok(128));
        for bad in ["", "a\u{0}b", &"x".repeat(129)] {
            assert!(matches!(
                unit_id(&header(bad)),
                Err(CarrierError::Refused(_))
            ));
        }
        assert!(
            matches!(unit_id(&[]), Err(CarrierError::Refused(m)) if m.contains(UNIT_ID_HEADER))
        );
    }

    #[test]
    fn claims_wait_for_the_one_in_flight_and_for_room() {
        let a = || vec!["work.a".to_owned()];
        let mut c = Consumers::default();
        c.insert(1, "work.a");
        assert_eq!(c.due(), a());
        c.claiming("work.a", 10);
        assert_eq!(c.due(), Vec::<String>::new());
        assert!(c.wake("work.a"));
        assert!(!c.wake("work.b"));
        assert_eq!(c.due(), Vec::<String>::new(), "one claim at a time");
        c.claimed("work.a", 10, false);
        assert_eq!(c.due(), a(), "the wake heard meanwhile");
        c.claiming("work.a", 11);
        c.claimed("work.a", 11, false);
        assert_eq!(c.due(), Vec::<String>::new(), "nothing more waits");

        // Room for one more batch, then none.
        let batches = (MAX_UNACKED as u64 / CLAIM_BATCH) as i64;
        for row in 0..(batches - 1) * CLAIM_BATCH as i64 {
            assert_eq!(c.take("work.a", row, 100), Some(1));
        }
        c.wake_all();
        assert_eq!(c.due(), a());
        c.claiming("work.a", 12);
        for row in 1000..1000 + CLAIM_BATCH as i64 {
            c.take("work.a", row, 200);
        }
        c.claimed("work.a", 12, true);
        assert_eq!(c.due(), Vec::<String>::new(), "no room");
        c.acknowledged(1000);
        assert_eq!(
            c.due(),
            Vec::<String>::new(),
            "room for one unit is no room"
        );
        c.expire(100);
        assert_eq!(c.due(), a(), "expired leases make room");
    }

    #[test]
    fn units_go_round_robin_and_the_last_subscription_ends_the_consumer() {
        let mut c = Consumers::default();
        c.insert(3, "work.a");
        c.insert(5, "work.a");
        let ids: Vec<_> = (0..4)
            .map(|row| c.take("work.a", row, 1).unwrap())
            .collect();
        assert_eq!(ids, [3, 5, 3, 5]);
        assert!(c.remove(3));
        assert!(!c.remove(3));
        assert_eq!(c.take("work.a", 9, 1), Some(5));
        assert!(c.remove(5));
        assert!(c.is_empty());
        assert_eq!(c.take("work.a", 10, 1), None);
    }

    #[test]
    fn a_claim_outlives_its_last_subscription() {
        let mut c = Consumers::default();
        c.insert(1, "work.a");
        c.claiming("work.a", 7);
        c.remove(1);
        assert!(c.is_empty());
        assert!(!c.wake("work.a"));
        assert_eq!(c.take("work.a", 1, 1), None, "nobody takes its units");
        // Subscribed again at once: still one claim at a time.
        c.insert(2, "work.a");
        assert_eq!(c.due(), Vec::<String>::new());
        c.claimed("work.a", 7, false);
        assert_eq!(c.due(), vec!["work.a".to_owned()]);

        c.claiming("work.a", 8);
        c.remove(2);
        c.claimed("work.a", 8, true);
        c.insert(3, "work.a");
        assert_eq!(c.due(), vec!["work.a".to_owned()], "the entry was dropped");
    }
}
