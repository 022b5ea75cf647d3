//! The database connections: one publisher (notifies, spills, deletes
//! expired rows, and runs the claim queue's statements), one listener
//! (LISTENs on the channel, and on the wake channel for consumers), and the
//! spill readers. Each is opened at start and reopened after a backoff
//! whenever it closes; the carrier is ready while the publisher (with its
//! tables) and the listener (with its LISTEN in force) are both usable.

use crate::action::{Action, Handle, LogLevel, Param, Row};
use crate::backoff::Backoff;
use crate::sql;

use super::{Engine, Pending};

/// The link of the publisher connection.
pub(super) const PUBLISHER: usize = 0;
/// The link of the listener connection; readers follow it.
pub(super) const LISTENER: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Closed; `reopen_at` says when it opens again.
    Waiting,
    /// `Open` asked, not answered yet.
    Opening,
    /// Open, its setup query (table, LISTEN check) not answered yet.
    Preparing,
    /// Open and set up.
    Usable,
}

/// One connection slot; its handle changes with every reopen.
#[derive(Debug)]
pub(super) struct Link {
    handle: Option<Handle>,
    state: State,
    backoff: Backoff,
    reopen_at: Option<u64>,
    /// A reader with a read in flight.
    pub(super) busy: bool,
}

impl Link {
    pub(super) fn new(seed: u64) -> Self {
        Self {
            handle: None,
            state: State::Waiting,
            backoff: Backoff::new(seed),
            reopen_at: None,
            busy: false,
        }
    }

    pub(super) fn reopen_at(&self) -> Option<u64> {
        self.reopen_at
    }

    pub(super) fn is_usable(&self) -> bool {
        self.state == State::Usable
    }

    pub(super) fn handle(&self) -> Option<Handle> {
        self.handle
    }
}

fn role(link: usize) -> &'static str {
    match link {
        PUBLISHER => "publisher",
        LISTENER => "listener",
        _ => "spill reader",
    }
}

impl Engine {
    /// Opens `link` under a new handle.
    pub(super) fn open(&mut self, link: usize, out: &mut Vec<Action>) {
        let handle = self.next_handle;
        self.next_handle += 1;
        let slot = &mut self.links[link];
        slot.handle = Some(handle);
        slot.state = State::Opening;
        slot.reopen_at = None;
        self.by_handle.insert(handle, link);
        out.push(Action::Open(handle));
    }

    /// Reopens the links whose backoff has passed.
    pub(super) fn reopen_due(&mut self, now: u64, out: &mut Vec<Action>) {
        for link in 0..self.links.len() {
            if self.links[link].reopen_at.is_some_and(|at| at <= now) {
                self.open(link, out);
            }
        }
    }

    /// The host opened `handle`: set it up.
    pub(super) fn link_opened(&mut self, handle: Handle, out: &mut Vec<Action>) {
        let Some(&link) = self.by_handle.get(&handle) else {
            // Not ours (any more): nobody would use it.
            out.push(Action::Close(handle));
            return;
        };
        if self.links[link].state != State::Opening {
            return;
        }
        match link {
            PUBLISHER => {
                self.links[link].state = State::Preparing;
                let query = self.query(
                    Pending::Setup { link, handle },
                    self.statements.create_tables.clone(),
                    Vec::new(),
                );
                out.push(query);
            }
            LISTENER => {
                self.links[link].state = State::Preparing;
                let channel = self.config.channel.clone();
                out.push(Action::Listen(handle, channel.clone()));
                let query = self.query(
                    Pending::Setup { link, handle },
                    sql::CHECK_LISTENING,
                    vec![Param::Text(channel)],
                );
                out.push(query);
            }
            _ => {
                let slot = &mut self.links[link];
                slot.state = State::Usable;
                slot.backoff.reset();
                self.issue_reads(out);
            }
        }
    }

    /// The publisher's table creation or the listener's LISTEN check answered.
    pub(super) fn setup_answered(
        &mut self,
        link: usize,
        handle: Handle,
        outcome: Result<Vec<Row>, String>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let slot = &self.links[link];
        if slot.handle != Some(handle) || slot.state != State::Preparing {
            return;
        }
        let result = match (link, outcome) {
            (_, Err(e)) => Err(e),
            (LISTENER, Ok(rows)) => match rows.first().and_then(|row| row.first()) {
                Some(Some(count)) if count.as_slice() == b"1" => Ok(()),
                _ => Err(format!(
                    "LISTEN {} is not in force after it ran",
                    self.config.channel
                )),
            },
            (_, Ok(_)) => Ok(()),
        };
        match result {
            Ok(()) => {
                let slot = &mut self.links[link];
                slot.state = State::Usable;
                slot.backoff.reset();
                self.update_ready(out);
            }
            Err(e) => {
                let what = match link {
                    PUBLISHER => "creating the spill and queue tables",
                    _ => "listening on the channel",
                };
                out.push(Action::Log(
                    LogLevel::Error,
                    format!("pgbus: {what} failed: {e}"),
                ));
                out.push(Action::Close(handle));
                self.lose(link, &format!("{what} failed"), now, out);
            }
        }
    }

    /// `link`'s connection is gone (closed by the host, or by us with a
    /// `Close` already in `out`): forget what ran on it, and reopen it.
    pub(super) fn lose(&mut self, link: usize, reason: &str, now: u64, out: &mut Vec<Action>) {
        let Some(handle) = self.links[link].handle.take() else {
            return;
        };
        self.by_handle.remove(&handle);
        self.links[link].state = State::Waiting;
        self.links[link].busy = false;

        // The host never answers the queries of a closed connection.
        let dead: Vec<u64> = self
            .queries
            .iter()
            .filter(|(_, pending)| pending.handle() == handle)
            .map(|(&id, _)| id)
            .collect();
        let mut unconfirmed = 0;
        let mut reread = Vec::new();
        for id in dead {
            match self.queries.remove(&id) {
                Some(Pending::Read { seq, .. }) => reread.push(seq),
                Some(Pending::Publish { messages, .. }) => unconfirmed += messages,
                Some(Pending::Enqueue { request: None, .. }) => unconfirmed += 1,
                Some(Pending::Retention { .. }) => self.retention_in_flight = false,
                Some(pending @ (Pending::Enqueue { .. } | Pending::Claim { .. })) => {
                    self.queue_query_lost(id, pending, out)
                }
                // An acknowledgement that never ran leaves its unit to come
                // back when its lease ends.
                Some(Pending::Ack { .. } | Pending::Setup { .. }) | None => {}
            }
        }
        // Oldest first at the front of the read queue.
        reread.sort_unstable_by(|a, b| b.cmp(a));
        for seq in reread {
            self.arrivals.requeue(seq);
        }
        if link == PUBLISHER {
            self.publishes_in_flight = 0;
            let unsent = self.batch.discard() + self.spills.discard(out);
            self.counters.failed_publishes += unsent;
            if unsent + unconfirmed > 0 {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!(
                        "pgbus: the publisher closed with {unsent} message(s) unsent (lost) and {unconfirmed} unconfirmed (may or may not have been sent)"
                    ),
                ));
            }
        }

        let delay = self.links[link].backoff.next_delay();
        out.push(Action::Log(
            LogLevel::Warn,
            format!(
                "pgbus: {} connection {handle} closed: {reason}; reopening in {delay} ms",
                role(link)
            ),
        ));
        if link <= LISTENER && self.ready {
            self.ready = false;
            out.push(Action::Lost(format!(
                "the pgbus {} connection closed ({reason}); reopening in {delay} ms",
                role(link)
            )));
        }
        if delay == 0 {
            self.open(link, out);
        } else {
            self.links[link].reopen_at = Some(now.saturating_add(delay));
        }
        if link > LISTENER {
            self.issue_reads(out);
        }
    }

    /// Announces readiness once publisher and listener are both usable.
    fn update_ready(&mut self, out: &mut Vec<Action>) {
        if self.ready || !self.links[PUBLISHER].is_usable() || !self.links[LISTENER].is_usable() {
            return;
        }
        self.ready = true;
        if self.ever_ready {
            self.counters.reconnects += 1;
            out.push(Action::Log(
                LogLevel::Info,
                format!("pgbus: connected again; {}", self.counters),
            ));
        }
        self.ever_ready = true;
        out.push(Action::Ready);
        self.queue_ready(out);
    }
}
