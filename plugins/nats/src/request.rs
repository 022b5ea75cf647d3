//! Request/reply over one wildcard inbox: every request's reply subject is
//! `_INBOX.<token>.<id>` under one `SUB _INBOX.<token>.*`, so a request costs
//! one PUB and no SUB/UNSUB round trip.

use std::collections::{BTreeMap, BTreeSet};

use crate::rng::XorShift;

/// The sid of the inbox subscription; callers' sids start at 1.
pub const INBOX_SID: u64 = 0;

/// Characters of the inbox token: 22 base62 characters carry about 131 bits,
/// like a NUID, so two clients do not share an inbox by accident.
const TOKEN_LEN: usize = 22;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Names one request until its [`crate::Action::Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Why a request got no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No reply came before the deadline.
    #[error("no reply within the request's timeout")]
    TimedOut,
    /// The server answered that nobody subscribes to the subject.
    #[error("no responders are subscribed to the subject")]
    NoResponders,
    /// The connection went away before the reply; the request may or may not
    /// have been handled.
    #[error("the connection was lost before the reply arrived")]
    ConnectionLost,
}

/// The inbox and the requests waiting on it.
#[derive(Debug)]
pub(crate) struct Requests {
    /// `_INBOX.<token>.`
    prefix: String,
    /// Whether the inbox SUB is part of the subscriptions (from the first
    /// request on, so that reconnects restore it).
    active: bool,
    next_id: u64,
    deadlines: BTreeMap<u64, u64>,
    by_deadline: BTreeSet<(u64, u64)>,
}

impl Requests {
    pub(crate) fn new(seed: u64) -> Self {
        let mut rng = XorShift::new(seed);
        let token: String = (0..TOKEN_LEN)
            .map(|_| char::from(BASE62[rng.below(BASE62.len() as u64) as usize]))
            .collect();
        Self {
            prefix: format!("_INBOX.{token}."),
            active: false,
            next_id: 1,
            deadlines: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
        }
    }

    /// `_INBOX.<token>.`
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `_INBOX.<token>.*`, the subject of the inbox SUB.
    pub(crate) fn pattern(&self) -> String {
        format!("{}*", self.prefix)
    }

    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// Marks the inbox as subscribed; true if this is the first time, when
    /// the caller must write its SUB.
    pub(crate) fn activate(&mut self) -> bool {
        !std::mem::replace(&mut self.active, true)
    }

    /// The id the next [`Requests::start`] will hand out, and its reply subject.
    pub(crate) fn peek(&self) -> (RequestId, String) {
        (
            RequestId(self.next_id),
            format!("{}{}", self.prefix, self.next_id),
        )
    }

    /// Registers the request [`Requests::peek`] named.
    pub(crate) fn start(&mut self, deadline: u64) -> RequestId {
        let id = self.next_id;
        self.next_id += 1;
        self.deadlines.insert(id, deadline);
        self.by_deadline.insert((deadline, id));
        RequestId(id)
    }

    /// The waiting request a reply subject names, removed from the waiting;
    /// `None` for a late, unknown or foreign reply.
    pub(crate) fn resolve(&mut self, subject: &[u8]) -> Option<RequestId> {
        let id = subject.strip_prefix(self.prefix.as_bytes())?;
        let id: u64 = std::str::from_utf8(id).ok()?.parse().ok()?;
        let deadline = self.deadlines.remove(&id)?;
        self.by_deadline.remove(&(deadline, id));
        Some(RequestId(id))
    }

    /// Removes and returns the requests whose deadline is at or before `now`,
    /// earliest first.
    pub(crate) fn expire(&mut self, now: u64) -> Vec<RequestId> {
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = self.by_deadline.first() {
            if deadline > now {
                break;
            }
            self.by_deadline.pop_first();
            self.deadlines.remove(&id);
            expired.push(RequestId(id));
        }
        expired
    }

    /// Removes and returns every waiting request, oldest first.
    pub(crate) fn drain(&mut self) -> Vec<RequestId> {
        self.by_deadline.clear();
        std::mem::take(&mut self.deadlines)
            .into_keys()
            .map(RequestId)
            .collect()
    }

    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.by_deadline.first().map(|&(deadline, _)| deadline)
    }

    pub(crate) fn waiting(&self) -> usize {
        self.deadlines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_depends_on_the_seed() {
        let a = Requests::new(1);
        assert!(a.prefix().starts_with("_INBOX."));
        assert_eq!(a.prefix().len(), "_INBOX.".len() + TOKEN_LEN + 1);
        assert_eq!(a.prefix(), Requests::new(1).prefix());
        assert_ne!(a.prefix(), Requests::new(2).prefix());
        assert_eq!(a.pattern(), format!("{}*", a.prefix()));
    }

    #[test]
    fn resolve_and_expire() {
        let mut r = Requests::new(7);
        let (id1, subject1) = r.peek();
        assert_eq!(r.start(100), id1);
        let (id2, _) = r.peek();
        r.start(50);
        let (id3, subject3) = r.peek();
        r.start(200);
        assert_eq!(r.next_deadline(), Some(50));
        assert_eq!(r.resolve(subject1.as_bytes()), Some(id1));
        assert_eq!(r.resolve(subject1.as_bytes()), None, "resolved once");
        assert_eq!(r.resolve(b"_INBOX.other.2"), None);
        assert_eq!(r.expire(49), vec![]);
        assert_eq!(r.expire(150), vec![id2]);
        assert_eq!(r.waiting(), 1);
        assert_eq!(r.drain(), vec![id3]);
        assert_eq!(r.resolve(subject3.as_bytes()), None);
        assert_eq!(r.next_deadline(), None);
    }
}
