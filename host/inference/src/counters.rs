//! The host's usage counters, per subject (`key:<id>`, `team:<name>`,
//! `peer:<label>`): requests and tokens over the last minute (one bucket
//! per second), tokens of the UTC day and month, requests in flight.
//! Admission policies read them through `switchyard:policy/usage`; the
//! host counts, a policy decides.
//!
//! A request is counted when the chain admits it: one request, and its
//! estimate (prompt tokens and `max_tokens`) as tokens, so that requests
//! in flight already weigh on the next decision. When its answer ends the
//! estimate is replaced by the tokens the engine reported ([`Charge`]).
//! Every change also goes to an outbox that the server's sync task sends
//! to the other replicas as soon as it can ([`CountsMessage`]), and their
//! changes come back in through [`UsageCounters::apply`]: a replica sees
//! another's counts at most one sync interval (10 ms) and a notification's
//! delivery late.

mod calendar;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use switchyard_protocol::keys::Caller;
use switchyard_protocol::usage::{CountsDelta, CountsMessage};
use switchyard_runtime::usage::Counters;

/// The sliding window's length, in one-second buckets.
const WINDOW: usize = 60;

/// How long another replica's requests in flight are believed without a
/// message from it (it sends every sync while it has any).
const REMOTE_IN_FLIGHT_TTL: Duration = Duration::from_secs(3);

/// The subjects a caller's requests count under: a key and its team, or a peer.
pub fn subjects(caller: &Caller) -> Vec<String> {
    if caller.key_id.starts_with("peer:") {
        return vec![caller.key_id.clone()];
    }
    let mut subjects = vec![format!("key:{}", caller.key_id)];
    if let Some(team) = &caller.team {
        subjects.push(format!("team:{team}"));
    }
    subjects
}

/// One subject's counts.
#[derive(Debug)]
struct Subject {
    /// `(unix second, requests, tokens)`, indexed by the second modulo 60.
    seconds: [(u64, i64, i64); WINDOW],
    /// `(unix day, tokens)`.
    day: (u64, i64),
    /// `(months since year 0, tokens)`.
    month: (u64, i64),
    in_flight: u32,
    /// Other replicas' requests in flight, and when each said so.
    remote_in_flight: HashMap<String, (u32, Instant)>,
}

impl Default for Subject {
    fn default() -> Self {
        Self {
            seconds: [(0, 0, 0); WINDOW],
            day: (0, 0),
            month: (0, 0),
            in_flight: 0,
            remote_in_flight: HashMap::new(),
        }
    }
}

impl Subject {
    fn add(&mut self, now: Now, requests: i64, tokens: i64) {
        let bucket = &mut self.seconds[(now.second % WINDOW as u64) as usize];
        if bucket.0 != now.second {
            *bucket = (now.second, 0, 0);
        }
        bucket.1 += requests;
        bucket.2 += tokens;
        if self.day.0 != now.day {
            self.day = (now.day, 0);
        }
        self.day.1 += tokens;
        if self.month.0 != now.month {
            self.month = (now.month, 0);
        }
        self.month.1 += tokens;
    }

    fn read(&self, now: Now, at: Instant) -> Counters {
        let live = self.seconds.iter().filter(|(second, _, _)| {
            *second + (WINDOW as u64) > now.second && *second <= now.second
        });
        let (mut requests, mut tokens, mut oldest) = (0i64, 0i64, None::<u64>);
        for (second, r, t) in live {
            requests += r;
            tokens += t;
            if *r != 0 || *t != 0 {
                oldest = Some(oldest.map_or(*second, |o| o.min(*second)));
            }
        }
        let remote: u32 = self
            .remote_in_flight
            .values()
            .filter(|(_, said)| at.duration_since(*said) < REMOTE_IN_FLIGHT_TTL)
            .map(|(n, _)| n)
            .sum();
        let positive = |n: i64| u64::try_from(n).unwrap_or(0);
        Counters {
            requests_last_minute: positive(requests),
            tokens_last_minute: positive(tokens),
            tokens_today: if self.day.0 == now.day {
                positive(self.day.1)
            } else {
                0
            },
            tokens_this_month: if self.month.0 == now.month {
                positive(self.month.1)
            } else {
                0
            },
            in_flight: self.in_flight.saturating_add(remote),
            minute_reset_ms: oldest
                .map_or(0, |o| ((o + WINDOW as u64) * 1000).saturating_sub(now.ms)),
            day_reset_ms: calendar::day_end_ms(now.day).saturating_sub(now.ms),
            month_reset_ms: calendar::month_end_ms(now.month).saturating_sub(now.ms),
        }
    }
}

/// The wall clock, read once per change.
#[derive(Debug, Clone, Copy)]
struct Now {
    ms: u64,
    second: u64,
    day: u64,
    month: u64,
}

impl Now {
    fn read() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let day = ms / 86_400_000;
        Self {
            ms,
            second: ms / 1000,
            day,
            month: calendar::month_of_day(day),
        }
    }
}

/// A subject's changes not yet sent to the other replicas.
#[derive(Debug, Default, Clone, Copy)]
struct Pending {
    requests: i64,
    tokens: i64,
}

/// The counters of every subject seen, and the outbox of their changes.
#[derive(Debug, Default)]
pub struct UsageCounters {
    subjects: Mutex<HashMap<String, Subject>>,
    outbox: Mutex<HashMap<String, Pending>>,
    /// Wakes the sync task when the outbox got something.
    changed: tokio::sync::Notify,
}

impl UsageCounters {
    /// Counts an admitted request under `subjects`, its tokens estimated;
    /// the [`Charge`] corrects them when the answer ends.
    pub fn charge(self: &Arc<Self>, subjects: Vec<String>, estimate: u64) -> Charge {
        let estimate = i64::try_from(estimate).unwrap_or(i64::MAX);
        self.change(&subjects, 1, estimate, 1);
        Charge {
            counters: self.clone(),
            subjects,
            estimate,
            open: true,
        }
    }

    /// Adds to each subject's counts and to the outbox; `in_flight` is +1
    /// (admitted), -1 (ended) or 0.
    fn change(&self, subjects: &[String], requests: i64, tokens: i64, in_flight: i32) {
        let now = Now::read();
        {
            let mut all = self.subjects.lock().expect("usage counters lock");
            for subject in subjects {
                let counts = all.entry(subject.clone()).or_default();
                counts.add(now, requests, tokens);
                counts.in_flight = counts.in_flight.saturating_add_signed(in_flight);
            }
        }
        let mut outbox = self.outbox.lock().expect("usage outbox lock");
        for subject in subjects {
            let pending = outbox.entry(subject.clone()).or_default();
            pending.requests += requests;
            pending.tokens += tokens;
        }
        // A permit is kept while nobody waits: changes coalesce.
        self.changed.notify_one();
    }

    /// Resolves when a change is waiting in the outbox.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// The changes since the last call, as the message for the other
    /// replicas; `None` when nothing changed and nothing is in flight.
    pub fn take_outbox(&self, replica: &str) -> Option<CountsMessage> {
        let pending = std::mem::take(&mut *self.outbox.lock().expect("usage outbox lock"));
        let all = self.subjects.lock().expect("usage counters lock");
        let mut counts: Vec<CountsDelta> = pending
            .into_iter()
            .map(|(subject, p)| CountsDelta {
                in_flight: all.get(&subject).map_or(0, |s| s.in_flight),
                subject,
                requests: p.requests,
                tokens: p.tokens,
            })
            .collect();
        // Requests in flight are said again every sync, or others forget them.
        for (subject, s) in all.iter().filter(|(_, s)| s.in_flight > 0) {
            if !counts.iter().any(|c| &c.subject == subject) {
                counts.push(CountsDelta {
                    subject: subject.clone(),
                    requests: 0,
                    tokens: 0,
                    in_flight: s.in_flight,
                });
            }
        }
        (!counts.is_empty()).then(|| CountsMessage {
            replica: replica.to_string(),
            counts,
        })
    }

    /// Adds another replica's changes (never this replica's own).
    pub fn apply(&self, message: &CountsMessage) {
        let now = Now::read();
        let at = Instant::now();
        let mut all = self.subjects.lock().expect("usage counters lock");
        for delta in &message.counts {
            let counts = all.entry(delta.subject.clone()).or_default();
            counts.add(now, delta.requests, delta.tokens);
            counts
                .remote_in_flight
                .insert(message.replica.clone(), (delta.in_flight, at));
        }
    }

    /// Starts a subject's day and month from what the database holds
    /// (at start-up, before any request here).
    pub fn seed(&self, subject: &str, tokens_today: i64, tokens_this_month: i64) {
        let now = Now::read();
        let mut all = self.subjects.lock().expect("usage counters lock");
        let counts = all.entry(subject.to_string()).or_default();
        counts.day = (now.day, counts.day.1.max(0) + tokens_today);
        counts.month = (now.month, counts.month.1.max(0) + tokens_this_month);
    }

    /// The counters of one subject now.
    pub fn read(&self, subject: &str) -> Counters {
        let now = Now::read();
        let all = self.subjects.lock().expect("usage counters lock");
        match all.get(subject) {
            Some(counts) => counts.read(now, Instant::now()),
            None => Subject::default().read(now, Instant::now()),
        }
    }
}

impl switchyard_runtime::usage::UsageCounters for UsageCounters {
    fn counters(&self, subject: &str) -> Counters {
        self.read(subject)
    }
}

/// An admitted request's place in the counters: in flight until it is
/// settled (or dropped), its tokens the estimate until then.
#[derive(Debug)]
pub struct Charge {
    counters: Arc<UsageCounters>,
    subjects: Vec<String>,
    estimate: i64,
    open: bool,
}

impl Charge {
    /// The answer ended with the tokens the engine reported: they replace
    /// the estimate.
    pub fn settle(mut self, tokens: u64) {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        self.close(tokens - self.estimate);
    }

    /// No engine answered (a refusal, a broken stream before the head):
    /// the request counts, its tokens do not.
    pub fn refund(mut self) {
        self.close(-self.estimate);
    }

    fn close(&mut self, correction: i64) {
        if std::mem::take(&mut self.open) {
            self.counters.change(&self.subjects, 0, correction, -1);
        }
    }
}

impl Drop for Charge {
    /// Ended without a count (metering off, or the engine reported none):
    /// the estimate stays.
    fn drop(&mut self) {
        self.close(0);
    }
}

#[cfg(test)]
mod tests;
