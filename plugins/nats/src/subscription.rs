//! The live subscriptions, kept so that a reconnect can restore them.

use std::collections::BTreeMap;

use crate::encode;
use crate::error::Error;

/// One subscription as the caller made it.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    pub subject: String,
    pub queue: Option<String>,
    /// Total messages after which the subscription ends (NATS counts from
    /// the SUB, not from the UNSUB).
    pub max_msgs: Option<u64>,
    pub delivered: u64,
}

/// Subscriptions by sid. A `BTreeMap` so that a reconnect re-subscribes in
/// sid order: the bytes are the same every time, which tests can pin down.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    by_sid: BTreeMap<u64, Subscription>,
}

impl Subscriptions {
    pub(crate) fn contains(&self, sid: u64) -> bool {
        self.by_sid.contains_key(&sid)
    }

    pub(crate) fn insert(&mut self, sid: u64, subject: &str, queue: Option<&str>) {
        self.by_sid.insert(
            sid,
            Subscription {
                subject: subject.to_owned(),
                queue: queue.map(str::to_owned),
                max_msgs: None,
                delivered: 0,
            },
        );
    }

    /// Ends `sid` now (`None`) or after `max` messages in total; returns
    /// whether it was known.
    pub(crate) fn unsubscribe(&mut self, sid: u64, max: Option<u64>) -> bool {
        let Some(sub) = self.by_sid.get_mut(&sid) else {
            return false;
        };
        match max {
            Some(max) if sub.delivered < max => sub.max_msgs = Some(max),
            _ => {
                self.by_sid.remove(&sid);
            }
        }
        true
    }

    /// Counts one delivery to `sid`; false when `sid` is not (or no longer)
    /// subscribed, such as a message already in flight when UNSUB was sent.
    pub(crate) fn deliver(&mut self, sid: u64) -> bool {
        let Some(sub) = self.by_sid.get_mut(&sid) else {
            return false;
        };
        sub.delivered += 1;
        if sub.max_msgs.is_some_and(|max| sub.delivered >= max) {
            self.by_sid.remove(&sid);
        }
        true
    }

    /// Writes SUB (and UNSUB with the messages still to come) for every
    /// subscription, in sid order; returns the sids.
    pub(crate) fn write_all(&self, out: &mut Vec<u8>) -> Result<Vec<u64>, Error> {
        for (&sid, sub) in &self.by_sid {
            encode::subscribe(out, &sub.subject, sub.queue.as_deref(), sid)?;
            if let Some(max) = sub.max_msgs {
                // The new server counts from zero.
                encode::unsubscribe(out, sid, Some(max - sub.delivered));
            }
        }
        Ok(self.by_sid.keys().copied().collect())
    }

    pub(crate) fn len(&self) -> usize {
        self.by_sid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_unsubscribe_counts_from_the_sub() {
        let mut s = Subscriptions::default();
        s.insert(1, "a", None);
        assert!(s.deliver(1));
        assert!(s.unsubscribe(1, Some(3)));
        assert!(s.deliver(1));
        let mut out = Vec::new();
        s.write_all(&mut out).unwrap();
        assert_eq!(out, b"SUB a 1\r\nUNSUB 1 1\r\n");
        assert!(s.deliver(1));
        assert!(!s.contains(1), "third message ends it");
        assert!(!s.deliver(1));
        s.insert(2, "b", Some("q"));
        s.deliver(2);
        assert!(s.unsubscribe(2, Some(1)), "max already reached: gone now");
        assert_eq!(s.len(), 0);
        assert!(!s.unsubscribe(9, None));
    }
}
