//! How often the sign-in form may be tried: failures per client address,
//! and sign-ins per key. Past a free allowance each further attempt waits
//! a backoff that doubles (up to a cap) and is answered 429
//! `too_many_sign_in_attempts` until then; a quiet spell forgets it all.
//! Guessing a 64-hex-digit key is hopeless anyway: the limit is there so a
//! script cannot make every guess a database lookup, nor open sessions in
//! a loop. The counts are this replica's own, in memory: a client spread
//! over replicas gets each one's allowance, which bounds it as well.
//!
//! The address is the TCP peer's: behind a reverse proxy every browser
//! shares the proxy's, so the allowance is generous enough for a team.
//! `X-Forwarded-For` is not read: any client could write it.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use std::time::Instant;

/// Failed sign-ins one address gets before it must wait: a person
/// mistyping or pasting the wrong key a few times never meets the limit.
pub const FREE_FAILURES_PER_ADDRESS: u32 = 10;
/// Sign-ins one key gets before it must wait: a person signs in from a few
/// browsers a day; dozens within the quiet spell is a script in a loop.
pub const FREE_SIGN_INS_PER_KEY: u32 = 30;
/// The wait after the first attempt past the allowance; each further one
/// doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait: long enough that guessing is slow, short enough that a
/// locked-out person is back within minutes.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A client with no attempt for this long starts afresh.
pub const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// The most clients each count remembers: beyond it the quietest are
/// forgotten, so many addresses cannot grow the map without bound.
pub const MAX_TRACKED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Record {
    count: u32,
    last: Instant,
}

/// Attempts by one kind of client (an address, a key).
#[derive(Debug)]
pub struct Throttle<K> {
    free: u32,
    records: Mutex<HashMap<K, Record>>,
}

impl<K: Hash + Eq + Clone> Throttle<K> {
    /// A throttle that lets `free` attempts through before the backoff.
    pub fn new(free: u32) -> Self {
        Self {
            free,
            records: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Record>> {
        self.records.lock().expect("sign-in throttle lock")
    }

    /// `Err(wait)` while `client` must wait before its next attempt.
    pub fn check(&self, client: &K) -> Result<(), Duration> {
        self.check_at(client, Instant::now())
    }

    fn check_at(&self, client: &K, now: Instant) -> Result<(), Duration> {
        let records = self.lock();
        let Some(record) = records.get(client) else {
            return Ok(());
        };
        let since = now.saturating_duration_since(record.last);
        if since >= FORGET_AFTER || record.count < self.free {
            return Ok(());
        }
        let doublings = (record.count - self.free).min(16);
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF);
        match wait.checked_sub(since) {
            Some(left) if !left.is_zero() => Err(left),
            _ => Ok(()),
        }
    }

    /// Counts an attempt of `client`.
    pub fn record(&self, client: K) {
        self.record_at(client, Instant::now());
    }

    fn record_at(&self, client: K, now: Instant) {
        let mut records = self.lock();
        if records.len() >= MAX_TRACKED && !records.contains_key(&client) {
            records.retain(|_, r| now.saturating_duration_since(r.last) < FORGET_AFTER);
            if records.len() >= MAX_TRACKED {
                let quietest = records
                    .iter()
                    .min_by_key(|(_, r)| r.last)
                    .map(|(k, _)| k.clone());
                if let Some(quietest) = quietest {
                    records.remove(&quietest);
                }
            }
        }
        let record = records.entry(client).or_insert(Record {
            count: 0,
            last: now,
        });
        if now.saturating_duration_since(record.last) >= FORGET_AFTER {
            record.count = 0;
        }
        record.count = record.count.saturating_add(1);
        record.last = now;
    }

    /// Forgets `client`'s attempts (an address that just signed in).
    pub fn forget(&self, client: &K) {
        self.lock().remove(client);
    }
}

/// Both counts of the sign-in form.
#[derive(Debug)]
pub struct SignIns {
    /// Failed sign-ins by client address.
    pub addresses: Throttle<IpAddr>,
    /// Sign-ins by key id.
    pub keys: Throttle<String>,
}

impl Default for SignIns {
    fn default() -> Self {
        Self {
            addresses: Throttle::new(FREE_FAILURES_PER_ADDRESS),
            keys: Throttle::new(FREE_SIGN_INS_PER_KEY),
        }
    }
}

/// The address a client is counted by: an IPv6 client's /64, since one
/// host is commonly given a whole /64 and could otherwise pick a fresh
/// address for every guess.
pub fn client_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_allowance_each_attempt_waits_twice_as_long() {
        let throttle = Throttle::new(3);
        let client = "a".to_string();
        let mut now = Instant::now();
        for _ in 0..3 {
            assert_eq!(throttle.check_at(&client, now), Ok(()));
            throttle.record_at(client.clone(), now);
        }
        assert_eq!(throttle.check_at(&client, now), Err(FIRST_BACKOFF));
        now += FIRST_BACKOFF;
        assert_eq!(throttle.check_at(&client, now), Ok(()));
        throttle.record_at(client.clone(), now);
        assert_eq!(throttle.check_at(&client, now), Err(FIRST_BACKOFF * 2));
        // Another client is not held up.
        assert_eq!(throttle.check_at(&"b".to_string(), now), Ok(()));
        // The cap holds however many attempts came.
        for _ in 0..40 {
            throttle.record_at(client.clone(), now);
        }
        assert_eq!(throttle.check_at(&client, now), Err(MAX_BACKOFF));
        // A quiet spell forgets them; so does a success.
        now += FORGET_AFTER;
        assert_eq!(throttle.check_at(&client, now), Ok(()));
        throttle.record_at(client.clone(), now);
        assert_eq!(throttle.check_at(&client, now), Ok(()));
        for _ in 0..5 {
            throttle.record_at(client.clone(), now);
        }
        throttle.forget(&client);
        assert_eq!(throttle.check_at(&client, now), Ok(()));
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_slash_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_of(a), client_of(b));
        assert_ne!(client_of(a), client_of(other));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(client_of(v4), v4);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(client_of(mapped), v4);
    }
}
