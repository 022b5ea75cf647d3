//! One range on a fresh bulk-lane stream: the [`RangeRequest`] line out,
//! the owner's [`RangeHead`] back, then exactly the bytes asked for,
//! appended to the partial file as they come.

use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::stream_seam::Lane;
use switchyard_protocol::copies::{RANGE_SERVICE, RangeHead, RangeRequest};
use switchyard_protocol::limits::MAX_HEAD;

use super::partial::Partial;
use crate::Federation;

/// How long a range's answer may stall before the link counts as lost.
const STALL: Duration = Duration::from_secs(20);

/// Why a range did not arrive whole.
#[derive(Debug)]
pub(crate) enum RangeError {
    /// The link or the stream broke, or stalled: a reconnect may mend it.
    Lost(String),
    /// The owner refused it: a stable code a reconnect does not mend
    /// (unless the owner said 503).
    Refused {
        /// The owner's status.
        status: u16,
        /// Its code.
        code: String,
        /// Its message.
        message: String,
    },
    /// This side's disk.
    Local(std::io::Error),
}

impl Federation {
    /// Fetches `request`'s bytes from `peer_id` into `partial` (whose held
    /// offset is `request.offset`). On an error, what arrived before it is
    /// appended already.
    pub(crate) async fn fetch_range(
        &self,
        peer_id: &str,
        request: &RangeRequest,
        partial: &mut Partial,
    ) -> Result<(), RangeError> {
        let mut line = serde_json::to_vec(request).map_err(|e| RangeError::Lost(e.to_string()))?;
        line.push(b'\n');
        let opened = tokio::time::timeout(
            STALL,
            self.open_call(peer_id, Lane::Bulk, RANGE_SERVICE, Bytes::from(line)),
        )
        .await
        .map_err(|_| RangeError::Lost("the owner did not take the range in time".into()))?;
        let mut reader = opened.map_err(|e| RangeError::Lost(e.message))?;
        let (head, first) = tokio::time::timeout(STALL, reader.read_line(MAX_HEAD))
            .await
            .map_err(|_| RangeError::Lost("the owner did not answer the range in time".into()))?
            .map_err(|e| RangeError::Lost(e.to_string()))?;
        let head: RangeHead = serde_json::from_slice(&head)
            .map_err(|e| RangeError::Lost(format!("the owner's answer: {e}")))?;
        if head.status != 200 {
            return Err(RangeError::Refused {
                status: head.status,
                code: head.code.unwrap_or_else(|| "peer_error".into()),
                message: head.message.unwrap_or_default(),
            });
        }
        let end = request.offset + request.length;
        let check = |chunk: Bytes, partial: &Partial| {
            if partial.held() + chunk.len() as u64 > end {
                return Err(RangeError::Lost(
                    "the owner sent more bytes than the range holds".into(),
                ));
            }
            Ok(chunk)
        };
        if !first.is_empty() {
            let chunk = check(first, partial)?;
            partial.append(&chunk).await.map_err(RangeError::Local)?;
        }
        while partial.held() < end {
            let next = tokio::time::timeout(STALL, reader.read())
                .await
                .map_err(|_| RangeError::Lost("the range stalled".into()))?;
            match next {
                Some(Ok(chunk)) => {
                    let chunk = check(chunk, partial)?;
                    partial.append(&chunk).await.map_err(RangeError::Local)?;
                }
                Some(Err(e)) => return Err(RangeError::Lost(e.to_string())),
                None => {
                    return Err(RangeError::Lost(
                        "the range ended before all its bytes came".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}
