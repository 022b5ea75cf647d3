//! What the engine asks of the host, and the values that cross with it: plain
//! Rust mirrors of the `switchyard:carrier/types` WIT types, so that the
//! engine and its tests need no bindings. The component maps them one to one.

use std::borrow::Cow;

/// A database connection, numbered by the engine; a number is never reused.
pub type Handle = u64;

/// One result row: each column's bytes, or `None` for NULL.
pub type Row = Vec<Option<Vec<u8>>>;

/// A payload the host holds (carrier world 0.3.0): the engine names it by
/// id and knows its length, never its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The host's id; used once (a query parameter or a delivery takes it).
    pub id: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// An outgoing payload: the bytes, or a payload the host holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Inline bytes (shorter than [`crate::Engine::hold_from`]).
    Bytes(Vec<u8>),
    /// Held by the host; always spilled.
    Held(Held),
}

impl Payload {
    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Bytes(bytes) => bytes.len() as u64,
            Payload::Held(held) => held.len,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One result cell of a query that names a `hold_column`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// The column's bytes.
    Bytes(Vec<u8>),
    /// A cell of the hold column, kept by the host.
    Held(Held),
}

/// One result row as cells.
pub type CellRow = Vec<Option<Cell>>;

/// A query parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// SQL NULL.
    Null,
    /// A `text` value.
    Text(String),
    /// A `bytea` value.
    Bytes(Vec<u8>),
    /// A `bigint` value.
    Int(i64),
    /// A payload the host holds, bound as `bytea`; takes it.
    Payload(u64),
}

/// A query for one database connection. Every result column is cast to
/// `text` or `bytea` in the SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The engine's id for the answer.
    pub id: u64,
    /// The connection that runs it.
    pub connection: Handle,
    /// One statement (see [`crate::sql`]): a constant, or one built for the
    /// configured queue table.
    pub sql: Cow<'static, str>,
    /// `$1`, `$2`, ...
    pub params: Vec<Param>,
    /// A column whose cells the host keeps (they come back as [`Cell::Held`]).
    pub hold_column: Option<u32>,
}

/// One message header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header's name.
    pub name: String,
    /// The header's value.
    pub value: String,
}

impl Header {
    /// A header from anything string-like.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A notification heard on the listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The channel it was sent on.
    pub channel: String,
    /// Its text (see [`crate::notification`]).
    pub payload: String,
}

/// A message for one of the host's subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The host's subscription id; 0 in a request's reply.
    pub subscription: u64,
    /// The subject it was published to.
    pub subject: String,
    /// Where an answer should go, if the publisher wants one.
    pub reply_to: Option<String>,
    /// The message's headers.
    pub headers: Vec<Header>,
    /// The message's payload (empty when `held` names it).
    pub payload: Vec<u8>,
    /// The payload is the host's held payload of this id, not `payload`.
    pub held: Option<u64>,
}

/// Why an operation was refused or a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CarrierError {
    /// The subject is malformed or outside the allowed roots.
    #[error("invalid subject: {0}")]
    InvalidSubject(String),
    /// The payload is larger than the carrier's maximum.
    #[error("payload of {0} bytes exceeds the maximum of {1} bytes")]
    PayloadTooLarge(u64, u64),
    /// The carrier is not connected; fan-out is at most once, nothing is queued.
    #[error("not connected to the database; the message was not sent")]
    NotConnected,
    /// No reply came within the deadline.
    #[error("no reply within the request's timeout")]
    Timeout,
    /// Nobody serves the subject (pgbus never answers this: it cannot know).
    #[error("no responders are subscribed to the subject")]
    NoResponders,
    /// The operation is refused.
    #[error("{0}")]
    Refused(String),
}

/// The outcome of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The host's request id.
    pub request: u64,
    /// The reply, or why there is none.
    pub outcome: Result<Delivery, CarrierError>,
}

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Routine detail.
    Debug,
    /// Worth an operator's eye: counters, reconnects.
    Info,
    /// Something was lost or failed and the engine goes on.
    Warn,
    /// Something the operator must fix (permissions, a broken database).
    Error,
}

/// One thing for the host to do; a call's actions are performed in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a connection to the cluster's database under this handle.
    Open(Handle),
    /// Close a connection; the host does not report it back.
    Close(Handle),
    /// LISTEN on a channel of a connection.
    Listen(Handle, String),
    /// Run a query; the answer comes back to `answered` under its id.
    Query(Query),
    /// Call `timer` once, this many milliseconds from now (replaces the previous timer).
    SetTimer(u64),
    /// Hand a message to a subscription's handler.
    Deliver(Delivery),
    /// Complete a request.
    Reply(Reply),
    /// Connected and ready (again): the host runs its reconnect hooks.
    Ready,
    /// The carrier lost an essential connection and is reopening it.
    Lost(String),
    /// Write a line to the host's log (the component does it in place).
    Log(LogLevel, String),
    /// Hold a payload of this call for later calls, until used or released.
    Keep(u64),
    /// Drop a kept payload unused.
    Release(u64),
}
