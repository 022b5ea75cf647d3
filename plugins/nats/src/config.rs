//! How a connection is set up: credentials, timers, limits and the seed.

use crate::auth::Auth;
use crate::subject::SubjectPolicy;

/// How often to PING a quiet or busy server alike; matches async-nats.
pub const DEFAULT_PING_INTERVAL_MS: u64 = 60_000;
/// Unanswered PINGs after which the connection counts as stale (nats.go's default).
pub const DEFAULT_MAX_PINGS_OUTSTANDING: u32 = 2;
/// How long INFO, CONNECT and the first PONG may take together.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;

/// The configuration of a [`crate::Connection`].
#[derive(Debug, Clone)]
pub struct Config {
    /// The `name` in CONNECT, shown by the server's monitoring.
    pub name: Option<String>,
    /// The credentials.
    pub auth: Auth,
    /// Whether the host's transport is already TLS; a server that requires
    /// TLS is refused otherwise (this engine does not upgrade a connection).
    pub tls: bool,
    /// Whether the server sends our own publications back to our
    /// subscriptions.
    pub echo: bool,
    /// Milliseconds between PINGs.
    pub ping_interval_ms: u64,
    /// PINGs without a PONG after which the connection is stale.
    pub max_pings_outstanding: u32,
    /// Milliseconds from `on_connected` until the handshake must be done.
    pub handshake_timeout_ms: u64,
    /// A cap below the server's max_payload (the carrier's shared maximum);
    /// `None` leaves the server's.
    pub max_payload: Option<usize>,
    /// The roots this connection may publish and subscribe under.
    pub subject_policy: SubjectPolicy,
    /// Seeds the inbox token and the reconnect jitter: give each connection
    /// a different random value.
    pub seed: u64,
    /// Payloads of at least this many bytes are claimed, not read: the
    /// engine parses a message's line and headers and answers a [`crate::Claim`]
    /// from [`crate::Connection::on_read`], and the host takes the payload
    /// beside it. `None` (the default) reads every payload.
    pub claim_bodies_from: Option<usize>,
    /// Messages wholly inside the bytes handed to one
    /// [`crate::Connection::on_read`] are answered as
    /// [`crate::Action::DeliverSpans`], ranges of those bytes, instead of
    /// owned copies: the host slices them out of the read it holds.
    /// `false` (the default) answers every message owned.
    pub deliver_spans: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: None,
            auth: Auth::None,
            tls: false,
            echo: true,
            ping_interval_ms: DEFAULT_PING_INTERVAL_MS,
            max_pings_outstanding: DEFAULT_MAX_PINGS_OUTSTANDING,
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            max_payload: None,
            subject_policy: SubjectPolicy::allow_all(),
            seed: 0,
            claim_bodies_from: None,
            deliver_spans: false,
        }
    }
}
