//! Request/reply over the bus: a request is published with the reply subject
//! `_INBOX.<token>.<id>` (`id` the host's request id), and the reply is heard
//! on the channel like any message. The engine checks every message heard
//! against its own inbox, so no subscription is needed.
//!
//! pgbus cannot tell that nobody serves a subject (a notification has no
//! receipt), so a request nobody answers ends in a timeout, never in
//! no-responders.

use std::collections::{BTreeSet, HashMap};

use crate::rng::XorShift;

/// Characters of the inbox token: 22 base62 characters carry about 131 bits,
/// so two frontends do not share an inbox by accident.
const TOKEN_LEN: usize = 22;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The inbox and the requests waiting on it.
#[derive(Debug)]
pub(crate) struct Requests {
    /// `_INBOX.<token>.`
    prefix: String,
    deadlines: HashMap<u64, u64>,
    by_deadline: BTreeSet<(u64, u64)>,
}

impl Requests {
    pub(crate) fn new(rng: &mut XorShift) -> Self {
        let token: String = (0..TOKEN_LEN)
            .map(|_| char::from(BASE62[rng.below(BASE62.len() as u64) as usize]))
            .collect();
        Self {
            prefix: format!("_INBOX.{token}."),
            deadlines: HashMap::new(),
            by_deadline: BTreeSet::new(),
        }
    }

    /// The reply subject of request `id`.
    pub(crate) fn inbox(&self, id: u64) -> String {
        format!("{}{id}", self.prefix)
    }

    pub(crate) fn is_waiting(&self, id: u64) -> bool {
        self.deadlines.contains_key(&id)
    }

    /// Registers request `id` until `deadline`.
    pub(crate) fn start(&mut self, id: u64, deadline: u64) {
        self.deadlines.insert(id, deadline);
        self.by_deadline.insert((deadline, id));
    }

    /// The waiting request that `subject` answers, if any.
    pub(crate) fn answered_by(&self, subject: &str) -> Option<u64> {
        let id: u64 = subject.strip_prefix(&self.prefix)?.parse().ok()?;
        self.is_waiting(id).then_some(id)
    }

    /// Removes request `id` (answered); false if it was not waiting.
    pub(crate) fn finish(&mut self, id: u64) -> bool {
        match self.deadlines.remove(&id) {
            Some(deadline) => self.by_deadline.remove(&(deadline, id)),
            None => false,
        }
    }

    /// Removes and returns the requests due at or before `now`, earliest first.
    pub(crate) fn expire(&mut self, now: u64) -> Vec<u64> {
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = self.by_deadline.first() {
            if deadline > now {
                break;
            }
            self.by_deadline.pop_first();
            self.deadlines.remove(&id);
            expired.push(id);
        }
        expired
    }

    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.by_deadline.first().map(|&(deadline, _)| deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_answers_and_deadlines() {
        let mut r = Requests::new(&mut XorShift::new(1));
        let other = Requests::new(&mut XorShift::new(2));
        assert_ne!(r.inbox(1), other.inbox(1));
        assert!(r.inbox(5).starts_with("_INBOX."));
        assert_eq!(r.inbox(5).len(), "_INBOX.".len() + TOKEN_LEN + 2);

        r.start(5, 100);
        r.start(6, 50);
        assert_eq!(r.next_deadline(), Some(50));
        assert_eq!(r.answered_by(&r.inbox(5)), Some(5));
        assert_eq!(r.answered_by(&other.inbox(5)), None);
        assert_eq!(r.answered_by(&r.inbox(7)), None);
        assert_eq!(r.answered_by(&format!("{}x", r.inbox(5))), None);
        assert!(r.finish(5));
        assert!(!r.finish(5));
        assert_eq!(r.expire(49), Vec::<u64>::new());
        assert_eq!(r.expire(50), vec![6]);
        assert_eq!(r.next_deadline(), None);
    }
}
