//! The connection state machine: the host reports events (connected, bytes,
//! closed, tick) and operations; the engine answers with [`Output`] batches.
//!
//! Lifecycle: `Idle` → `on_connected` → handshake (wait for INFO, write
//! CONNECT with the subscriptions and a PING, wait for the PONG) →
//! `Connected` → on trouble, [`Action::Close`] and `Closing` → `on_closed` →
//! `Disconnected` with an [`Action::Reconnect`] → `on_connected` again.
//! `close()` ends it for good.
//!
//! The reading side is in `connection/read.rs`, the operations in
//! `connection/ops.rs`.

mod ops;
mod read;

use crate::action::{Action, Batch, Output};
use crate::auth::Credentials;
use crate::backoff::Backoff;
use crate::config::Config;
use crate::encode;
use crate::error::Error;
use crate::info::{DEFAULT_MAX_PAYLOAD, ServerInfo};
use crate::parser::MAX_SERVER_LINE;
use crate::request::{RequestError, Requests};
use crate::subscription::Subscriptions;

/// The largest max_payload a NATS server can be configured with (64 MiB);
/// a larger figure in INFO is not believed, so the read buffer stays bounded.
pub const MAX_PAYLOAD_CEILING: usize = 64 * 1024 * 1024;

/// Room in the read buffer beyond max_payload: one protocol line and the
/// CRLF after the payload.
pub const READ_ROOM: usize = MAX_SERVER_LINE + 2;

/// Where a connection is, as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Never connected; the host should dial.
    Idle,
    /// A transport is up and the handshake is running.
    Handshaking,
    /// Operations run.
    Connected,
    /// The engine asked for [`Action::Close`] and waits for `on_closed`.
    Closing,
    /// No transport; the host dials again after the [`Action::Reconnect`] delay.
    Disconnected,
    /// `close()` was called; nothing more happens.
    Closed,
}

/// Why the host's transport closed, as passed to [`Connection::on_closed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The engine asked for it with [`Action::Close`].
    Requested,
    /// The server closed the connection (end of stream).
    PeerClosed,
    /// A dial or I/O error, in the host's words.
    Failed(String),
}

#[derive(Debug)]
enum Phase {
    Idle,
    AwaitInfo {
        deadline: u64,
    },
    // CONNECT is written: subscriptions go straight to the wire from here on.
    AwaitPong {
        deadline: u64,
        resubscribed: Vec<u64>,
    },
    Connected,
    Closing,
    Disconnected,
    Closed,
}

/// A sans-IO NATS client connection. See the crate docs for the calls.
#[derive(Debug)]
pub struct Connection {
    config: Config,
    credentials: Credentials,
    phase: Phase,
    info: Option<ServerInfo>,
    /// The unfinished frame at the end of the last read.
    read_buf: Vec<u8>,
    /// Whether `read_buf` is the start of a protocol line with no newline
    /// yet: the next read is then searched for the newline on its own.
    awaiting_newline: bool,
    /// Bytes of the CRLF after a claimed payload not read yet.
    after_claim: usize,
    subs: Subscriptions,
    requests: Requests,
    backoff: Backoff,
    has_connected: bool,
    pings_out: u32,
    next_ping_at: u64,
    dropped: u64,
    last_close: Option<CloseReason>,
}

impl Connection {
    /// A connection that has not dialed yet. Fails if the credentials
    /// cannot be used (a bad seed, an empty JWT).
    pub fn new(config: Config) -> Result<Self, Error> {
        let credentials = Credentials::new(&config.auth)?;
        // Separate streams for the inbox and the jitter, from one seed.
        let requests = Requests::new(config.seed);
        let backoff = Backoff::new(config.seed ^ 0x5DEE_CE66_D1CE_5EED);
        Ok(Self {
            config,
            credentials,
            phase: Phase::Idle,
            info: None,
            read_buf: Vec::new(),
            awaiting_newline: false,
            after_claim: 0,
            subs: Subscriptions::default(),
            requests,
            backoff,
            has_connected: false,
            pings_out: 0,
            next_ping_at: 0,
            dropped: 0,
            last_close: None,
        })
    }

    /// The host's transport is up (TCP, or TLS when `Config::tls`): the
    /// handshake starts and waits for the server's INFO.
    pub fn on_connected(&mut self, now_ms: u64) -> Output {
        let mut batch = Batch::default();
        if matches!(self.phase, Phase::Closed) {
            return batch.finish();
        }
        if self.has_transport() {
            // A new transport replaced the old one without `on_closed`:
            // replies on the old one cannot arrive.
            self.lose_requests(&mut batch);
        }
        self.phase = Phase::AwaitInfo {
            deadline: now_ms.saturating_add(self.config.handshake_timeout_ms),
        };
        self.read_buf.clear();
        self.after_claim = 0;
        self.pings_out = 0;
        batch.finish()
    }

    /// The host's transport closed, or a dial failed. Waiting requests fail
    /// and an [`Action::Reconnect`] says when to dial again (nothing after
    /// `close()`).
    pub fn on_closed(&mut self, reason: CloseReason, _now_ms: u64) -> Output {
        let mut batch = Batch::default();
        self.last_close = Some(reason);
        if matches!(self.phase, Phase::Closed) {
            return batch.finish();
        }
        self.lose_requests(&mut batch);
        self.phase = Phase::Disconnected;
        self.read_buf.clear();
        self.after_claim = 0;
        batch.push(Action::Reconnect {
            after_ms: self.backoff.next_delay(),
        });
        batch.finish()
    }

    /// Time passed: request timeouts, the handshake deadline, and the PING
    /// that detects a stale connection. Call it at [`Connection::next_deadline`]
    /// or on any regular beat.
    pub fn on_tick(&mut self, now_ms: u64) -> Output {
        let mut batch = Batch::default();
        // Timeouts first: a request past its deadline timed out even if the
        // connection fails in this same tick.
        for request_id in self.requests.expire(now_ms) {
            batch.push(Action::Reply {
                request_id,
                result: Err(RequestError::TimedOut),
            });
        }
        match self.phase {
            Phase::AwaitInfo { deadline } | Phase::AwaitPong { deadline, .. }
                if now_ms >= deadline =>
            {
                self.fail(
                    Error::HandshakeTimeout(self.config.handshake_timeout_ms),
                    &mut batch,
                );
            }
            Phase::Connected if now_ms >= self.next_ping_at => {
                if self.pings_out >= self.config.max_pings_outstanding {
                    self.fail(Error::StaleConnection(self.pings_out), &mut batch);
                } else {
                    batch.write.extend_from_slice(encode::PING);
                    self.pings_out += 1;
                    self.next_ping_at = now_ms.saturating_add(self.config.ping_interval_ms);
                }
            }
            _ => {}
        }
        batch.finish()
    }

    /// Ends the connection for good: waiting requests fail, the transport
    /// (if any) is closed, and nothing reconnects.
    pub fn close(&mut self) -> Output {
        let mut batch = Batch::default();
        if matches!(self.phase, Phase::Closed) {
            return batch.finish();
        }
        self.lose_requests(&mut batch);
        if self.has_transport() {
            batch.push(Action::Close);
        }
        self.phase = Phase::Closed;
        self.read_buf.clear();
        self.after_claim = 0;
        batch.finish()
    }

    /// When [`Connection::on_tick`] next has work: the handshake deadline,
    /// the next PING, or the earliest request deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        let phase = match self.phase {
            Phase::AwaitInfo { deadline } | Phase::AwaitPong { deadline, .. } => Some(deadline),
            Phase::Connected => Some(self.next_ping_at),
            _ => None,
        };
        match (phase, self.requests.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Where the connection is.
    pub fn state(&self) -> ConnectionState {
        match self.phase {
            Phase::Idle => ConnectionState::Idle,
            Phase::AwaitInfo { .. } | Phase::AwaitPong { .. } => ConnectionState::Handshaking,
            Phase::Connected => ConnectionState::Connected,
            Phase::Closing => ConnectionState::Closing,
            Phase::Disconnected => ConnectionState::Disconnected,
            Phase::Closed => ConnectionState::Closed,
        }
    }

    /// The last INFO from the current (or last) server.
    pub fn server_info(&self) -> Option<&ServerInfo> {
        self.info.as_ref()
    }

    /// The largest message (headers and payload) this connection will send:
    /// the smallest of the server's max_payload, `Config::max_payload` and
    /// [`MAX_PAYLOAD_CEILING`].
    pub fn max_payload(&self) -> usize {
        let server = self
            .info
            .as_ref()
            .map_or(DEFAULT_MAX_PAYLOAD, |i| i.max_payload);
        let cap = self.config.max_payload.unwrap_or(usize::MAX);
        server.min(cap).min(MAX_PAYLOAD_CEILING)
    }

    /// `_INBOX.<token>.`: the prefix of every reply subject of `request`.
    pub fn inbox_prefix(&self) -> &str {
        self.requests.prefix()
    }

    /// Messages that arrived for a sid no longer subscribed, or as late
    /// replies: counted, since at-most-once loss must not be silent.
    pub fn dropped_messages(&self) -> u64 {
        self.dropped
    }

    /// The number of live subscriptions (the inbox not included).
    pub fn subscription_count(&self) -> usize {
        self.subs.len()
    }

    /// The number of requests waiting for a reply.
    pub fn pending_requests(&self) -> usize {
        self.requests.waiting()
    }

    /// What the host said when the transport last closed.
    pub fn last_close_reason(&self) -> Option<&CloseReason> {
        self.last_close.as_ref()
    }

    /// The connection cannot go on: report, ask the host to close, and fail
    /// what waits on it. `on_closed` then schedules the reconnect.
    fn fail(&mut self, error: Error, batch: &mut Batch) {
        batch.push(Action::Error(error));
        batch.push(Action::Close);
        self.lose_requests(batch);
        self.phase = Phase::Closing;
        self.read_buf.clear();
        self.after_claim = 0;
    }

    fn lose_requests(&mut self, batch: &mut Batch) {
        for request_id in self.requests.drain() {
            batch.push(Action::Reply {
                request_id,
                result: Err(RequestError::ConnectionLost),
            });
        }
    }

    /// Whether the host holds a transport for this connection.
    fn has_transport(&self) -> bool {
        matches!(
            self.phase,
            Phase::AwaitInfo { .. } | Phase::AwaitPong { .. } | Phase::Connected
        )
    }

    /// Whether CONNECT went out on the current transport, so that SUB and
    /// UNSUB can be written now rather than at the next handshake.
    fn connect_sent(&self) -> bool {
        matches!(self.phase, Phase::AwaitPong { .. } | Phase::Connected)
    }

    fn ensure_connected(&self) -> Result<(), Error> {
        match self.phase {
            Phase::Connected => Ok(()),
            Phase::Closed => Err(Error::Closed),
            _ => Err(Error::NotConnected),
        }
    }
}
