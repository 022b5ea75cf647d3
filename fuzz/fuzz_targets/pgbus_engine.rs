//! The pgbus engine (`plugins/pgbus/src/engine.rs` and `engine/`) hearing
//! whatever arrives on its channels and from its database: notifications on
//! the shared channel and the wake channel (anyone with access to the
//! database may NOTIFY), rows that answer its spill reads and claims, lost
//! connections and the clock, mixed with the application's calls.
//!
//! Input: a list of operations (see the match below). The host here opens
//! every connection at once and keeps queries until an operation answers
//! one, so answers come late, out of order or after their connection is gone.
//! Invariants: no panic; every query goes to a connection that is open;
//! deliveries go only to subscription ids the application used.

#![no_main]

use std::collections::{BTreeSet, VecDeque};

use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::Input;
use switchyard_plugin_pgbus::{Action, Config, Engine, Handle, Header, Notification, Query, Row};

const SUBJECTS: &[&str] = &[
    "jobs.1",
    "jobs.1.progress",
    "cache.x",
    "work.render",
    "_claim.1",
    "other",
];
const PATTERNS: &[&str] = &["jobs.*", "jobs.>", "cache.x", "work.render", "work.*"];

struct Host {
    engine: Engine,
    now: u64,
    open: BTreeSet<Handle>,
    listener: Option<Handle>,
    queries: Vec<Query>,
    subscribed: BTreeSet<u64>,
}

impl Host {
    fn take(&mut self, actions: Vec<Action>) {
        let mut todo = VecDeque::from(actions);
        while let Some(action) = todo.pop_front() {
            match action {
                Action::Open(handle) => {
                    assert!(self.open.insert(handle), "handle {handle} opened twice");
                    todo.extend(self.engine.opened(handle, self.now));
                }
                Action::Close(handle) => {
                    self.open.remove(&handle);
                }
                Action::Listen(handle, channel) => {
                    assert!(self.open.contains(&handle));
                    if channel == self.engine.config().channel {
                        self.listener = Some(handle);
                    }
                }
                Action::Query(query) => {
                    assert!(
                        self.open.contains(&query.connection),
                        "query on a closed connection"
                    );
                    self.queries.push(query);
                }
                Action::Deliver(delivery) => {
                    assert!(self.subscribed.contains(&delivery.subscription));
                }
                _ => {}
            }
        }
    }

    fn rows(input: &mut Input<'_>) -> Vec<Row> {
        (0..input.byte() % 4)
            .map(|_| {
                (0..input.byte() % 6)
                    .map(|_| match input.byte() {
                        0 => None,
                        _ => Some(input.chunk().to_vec()),
                    })
                    .collect()
            })
            .collect()
    }
}

fn text(input: &mut Input<'_>) -> String {
    String::from_utf8_lossy(input.chunk()).into_owned()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (engine, actions) = Engine::new(Config::default(), 7, 0);
    let mut host = Host {
        engine,
        now: 0,
        open: BTreeSet::new(),
        listener: None,
        queries: Vec::new(),
        subscribed: BTreeSet::new(),
    };
    host.take(actions);
    while !input.is_empty() {
        let now = host.now;
        let out = match input.byte() % 12 {
            // A notification on the shared channel (the usual case).
            0..=2 => {
                let payload = text(&mut input);
                let channel = host.engine.config().channel.clone();
                let handle = host.listener.unwrap_or(0);
                host.engine
                    .notified(handle, vec![Notification { channel, payload }], 0, now)
            }
            3 => {
                let payload = text(&mut input);
                let channel = host.engine.config().wake_channel.clone();
                let handle = host.listener.unwrap_or(0);
                let dropped = u64::from(input.byte() % 2);
                host.engine.notified(
                    handle,
                    vec![Notification { channel, payload }],
                    dropped,
                    now,
                )
            }
            // The database answers a query, with rows or an error.
            4 | 5 => {
                if host.queries.is_empty() {
                    continue;
                }
                let query = host
                    .queries
                    .remove(usize::from(input.byte()) % host.queries.len());
                let outcome = match input.byte() % 4 {
                    0 => Err(text(&mut input)),
                    _ => Ok(Host::rows(&mut input)),
                };
                host.engine.answered(query.id, outcome, now)
            }
            6 => {
                host.now += u64::from(input.u16()) * 8;
                host.engine.timer(host.now)
            }
            7 => {
                let id = u64::from(input.byte() % 4) + 1;
                let pattern = PATTERNS[usize::from(input.byte()) % PATTERNS.len()];
                let group = (input.byte() & 1 == 0).then_some("g");
                match host.engine.subscribe(id, pattern, group, now) {
                    Ok(out) => {
                        host.subscribed.insert(id);
                        out
                    }
                    Err(_) => continue,
                }
            }
            8 => {
                let subject = SUBJECTS[usize::from(input.byte()) % SUBJECTS.len()];
                let headers = match input.byte() % 3 {
                    0 => vec![],
                    1 => vec![Header::new("switchyard-unit-id", text(&mut input))],
                    _ => vec![Header::new(text(&mut input), text(&mut input))],
                };
                let size = usize::from(input.u16()) % 12_000;
                host.engine
                    .publish(subject, None, &headers, vec![b'x'; size], now)
                    .unwrap_or_default()
            }
            9 => {
                let subject = SUBJECTS[usize::from(input.byte()) % SUBJECTS.len()];
                let id = u64::from(input.byte());
                let timeout = u64::from(input.u16());
                host.engine
                    .request(id, subject, &[], b"q".to_vec(), timeout, now)
                    .unwrap_or_default()
            }
            10 => {
                let Some(&handle) = host
                    .open
                    .iter()
                    .nth(usize::from(input.byte()) % host.open.len().max(1))
                else {
                    continue;
                };
                host.open.remove(&handle);
                host.engine.closed(handle, "connection lost", now)
            }
            _ => {
                let id = u64::from(input.byte() % 4) + 1;
                host.engine.unsubscribe(id, now)
            }
        };
        host.take(out);
    }
});
