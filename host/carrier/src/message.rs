//! What a carrier carries, and what can go wrong.

use bytes::Bytes;
use switchyard_runtime::carrier::CarrierError;

/// A message handed to a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The subject it was published on.
    pub subject: String,
    /// Where a reply goes, for requests.
    pub reply_to: Option<String>,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// The payload.
    pub payload: Bytes,
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The subject is malformed or outside the allowed roots.
    #[error("invalid subject: {0}")]
    InvalidSubject(String),
    /// The payload is above the carrier's maximum.
    #[error("payload of {0} bytes is above the maximum of {1}")]
    PayloadTooLarge(u64, u64),
    /// The carrier is not connected (fan-out is at most once; nothing is queued).
    #[error("not connected")]
    NotConnected,
    /// No reply in time.
    #[error("timed out")]
    Timeout,
    /// Nobody serves the subject.
    #[error("no responders")]
    NoResponders,
    /// The server refused.
    #[error("refused: {0}")]
    Refused(String),
    /// The carrier stopped, or its plugin failed.
    #[error("carrier unavailable: {0}")]
    Unavailable(String),
}

impl From<CarrierError> for SendError {
    fn from(e: CarrierError) -> Self {
        match e {
            CarrierError::InvalidSubject(s) => SendError::InvalidSubject(s),
            CarrierError::PayloadTooLarge((size, max)) => SendError::PayloadTooLarge(size, max),
            CarrierError::NotConnected => SendError::NotConnected,
            CarrierError::Timeout => SendError::Timeout,
            CarrierError::NoResponders => SendError::NoResponders,
            CarrierError::Refused(s) => SendError::Refused(s),
        }
    }
}

/// Counters of one carrier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CarrierStats {
    /// Messages published.
    pub published: u64,
    /// Publishes the plugin refused, or could not take while it was down;
    /// for queued publishes (`Carrier::publish_queued`) this is the only
    /// trace of a refusal besides a debug log line.
    pub refused: u64,
    /// Messages delivered to subscriptions.
    pub delivered: u64,
    /// Messages a 0.4.0 plugin answered as spans of the bytes it read:
    /// their bodies are views of the read, not copies through the guest.
    pub delivered_in_place: u64,
    /// Messages dropped because a subscription's queue was full.
    pub dropped: u64,
    /// Times the carrier became ready again after losing its connection.
    pub reconnects: u64,
    /// Bytes handed to the plugin's `received`, in all.
    pub received_bytes: u64,
    /// The most bytes handed to one `received` call (a 0.3.0 plugin's
    /// `peek` bounds it).
    pub largest_received: u64,
    /// Incoming payload bytes the host took beside the plugin (claimed bodies).
    pub claimed_bytes: u64,
    /// Outgoing payload bytes handed into the plugin inline; a plugin that
    /// takes payloads held never sees them.
    pub inline_payload_bytes: u64,
    /// Query result bytes handed into the plugin; a query's `hold-column`
    /// cells stay in the host and are not counted.
    pub cell_bytes: u64,
}
