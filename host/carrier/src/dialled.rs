//! The `nats` set's streams: tunnel sessions over TCP connections the
//! frontend dials to the worker's stream address, one per worker and lane,
//! every stream to that worker and lane multiplexed on it by the tunnel
//! component (flow control, refusals, keepalive pings, half-close, early
//! data for a call), as on the `tunnel` set's websockets.
//!
//! The connection opens with the hello of [`crate::direct`], whose service
//! names the session: `session:inference` or `session:bulk`. Then each side
//! runs a [`TunnelSession`] over it (the frontend opens streams, the worker
//! accepts them), each message framed by [`crate::tunnel::tcp`].
//!
//! # Layout
//! - `sessions`: [`DialledSessions`], the frontend's streams seam: one
//!   session per node and lane, dialled on first use and again once lost.
//! - `server`: [`SessionServer`], the worker's listener.

mod server;
mod sessions;

pub use server::SessionServer;
pub use sessions::DialledSessions;

use crate::direct::Connection;
use crate::stream_seam::Lane;
use crate::tunnel::{Transport, tcp};

/// What the hello asks for: a session on `lane`.
pub fn session_service(lane: Lane) -> String {
    format!("{SESSION_PREFIX}{}", lane.as_str())
}

/// The lane a hello's service asks a session on, if it asks for one.
pub fn session_lane(service: &str) -> Option<Lane> {
    service.strip_prefix(SESSION_PREFIX).and_then(Lane::parse)
}

const SESSION_PREFIX: &str = "session:";

/// Pumps a session's messages over `connection`, on a task of its own,
/// until either end closes.
fn pump(transport: Transport, connection: Connection) {
    // Bytes read past the answer line are the peer's first messages.
    let early = bytes::Bytes::copy_from_slice(connection.buffer());
    let (read, write) = connection.into_inner().into_split();
    let read = tokio::io::AsyncReadExt::chain(std::io::Cursor::new(early), read);
    // A message is two reads (length, body): buffered, most are one call.
    let read = tokio::io::BufReader::with_capacity(tcp::MAX_MESSAGE, read);
    tokio::spawn(tcp::pump(read, write, transport));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_services_name_their_lane() {
        for lane in [Lane::Inference, Lane::Bulk] {
            assert_eq!(session_lane(&session_service(lane)), Some(lane));
        }
        assert_eq!(session_service(Lane::Bulk), "session:bulk");
        for other in ["inference", "session:", "session:files", "session:bulk "] {
            assert_eq!(session_lane(other), None, "{other:?}");
        }
    }
}
