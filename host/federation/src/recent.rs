//! What was read from the database lately, kept for [`FRESH`]: the hot
//! path of a federated call reads its peers, grants and service offers
//! from here instead of asking PostgreSQL on every call. The owner's
//! counters and a grant's state are never read from here: they decide.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a value read is used.
pub const FRESH: Duration = Duration::from_secs(1);

/// Values by key, each used for [`FRESH`] after it was read.
#[derive(Debug)]
pub struct Recent<K, V>(Mutex<HashMap<K, (Instant, V)>>);

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: Eq + Hash, V: Clone> Recent<K, V> {
    /// The value read for `key` less than [`FRESH`] ago.
    pub fn get(&self, key: &K) -> Option<V> {
        let held = self.0.lock().expect("recent lock");
        held.get(key)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, value)| value.clone())
    }

    /// Keeps `value`, read now, for `key`.
    pub fn put(&self, key: K, value: V) {
        let mut held = self.0.lock().expect("recent lock");
        // Bounded by the metadata bounds; stale entries go at each write.
        held.retain(|_, (at, _)| at.elapsed() < FRESH);
        held.insert(key, (Instant::now(), value));
    }

    /// Forgets everything (this replica changed what it holds).
    pub fn clear(&self) {
        self.0.lock().expect("recent lock").clear();
    }
}
