//! The host's subscriptions on this frontend. pgbus subscribes nothing on the
//! database (every frontend hears the whole channel), so a subscription is a
//! local pattern and matching happens here, on every message heard.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::subject::subject_matches;

/// Subscriptions by id, with literal patterns indexed by subject so that the
/// common case (`jobs.<id>.progress`) costs one lookup, not a scan.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    patterns: HashMap<u64, String>,
    literal: HashMap<String, BTreeSet<u64>>,
    wildcard: BTreeMap<u64, String>,
}

impl Subscriptions {
    /// Adds `id`; false if it is already subscribed.
    pub(crate) fn insert(&mut self, id: u64, pattern: &str) -> bool {
        if self.patterns.contains_key(&id) {
            return false;
        }
        self.patterns.insert(id, pattern.to_owned());
        if is_literal(pattern) {
            self.literal
                .entry(pattern.to_owned())
                .or_default()
                .insert(id);
        } else {
            self.wildcard.insert(id, pattern.to_owned());
        }
        true
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.patterns.contains_key(&id)
    }

    /// Removes `id`; false if it was not subscribed.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let Some(pattern) = self.patterns.remove(&id) else {
            return false;
        };
        if is_literal(&pattern) {
            if let Some(ids) = self.literal.get_mut(&pattern) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.literal.remove(&pattern);
                }
            }
        } else {
            self.wildcard.remove(&id);
        }
        true
    }

    /// Whether any subscription matches `subject`.
    pub(crate) fn wants(&self, subject: &str) -> bool {
        self.literal.contains_key(subject)
            || self
                .wildcard
                .values()
                .any(|pattern| subject_matches(pattern, subject))
    }

    /// The ids whose pattern matches `subject`, in increasing order.
    pub(crate) fn matching(&self, subject: &str) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .literal
            .get(subject)
            .into_iter()
            .flatten()
            .copied()
            .chain(
                self.wildcard
                    .iter()
                    .filter(|(_, pattern)| subject_matches(pattern, subject))
                    .map(|(&id, _)| id),
            )
            .collect();
        ids.sort_unstable();
        ids
    }
}

fn is_literal(pattern: &str) -> bool {
    !pattern.split('.').any(|token| token == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_wildcard_matches() {
        let mut s = Subscriptions::default();
        assert!(s.insert(3, "jobs.7.progress"));
        assert!(s.insert(1, "jobs.*.progress"));
        assert!(s.insert(2, "jobs.*"));
        assert!(s.insert(4, "jobs.7.progress"));
        assert!(!s.insert(4, "cache.x"), "an id subscribes once");
        assert_eq!(s.matching("jobs.7.progress"), vec![1, 3, 4]);
        assert_eq!(s.matching("jobs.8.progress"), vec![1]);
        assert_eq!(s.matching("jobs.7"), vec![2]);
        assert_eq!(s.matching("jobs"), Vec::<u64>::new());
        assert_eq!(s.matching("jobs.7.x.progress"), Vec::<u64>::new());
        assert!(s.wants("jobs.9"));
        assert!(!s.wants("cache.x"));

        assert!(s.remove(3));
        assert!(!s.remove(3));
        assert_eq!(s.matching("jobs.7.progress"), vec![1, 4]);
        assert!(s.remove(4));
        assert!(s.remove(1));
        assert!(!s.wants("jobs.7.progress"));
        assert!(s.wants("jobs.7"));
    }
}
