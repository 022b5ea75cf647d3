//! A call a peer opens a stream for: a JSON head line, then a body of
//! bounded size. Read the same way for remote inference and job calls;
//! what cannot be read is answered (or, when the stream broke, dropped).

use bytes::{Bytes, BytesMut};
use serde::de::DeserializeOwned;
use switchyard_carrier::StreamReader;
use switchyard_protocol::limits::MAX_HEAD;

use crate::Denied;

/// Why a call was not read.
pub(crate) enum Unread {
    /// Answer this refusal.
    Refused(Denied),
    /// The stream broke: nobody is left to answer.
    Broken,
}

/// Reads a head of type `T` and a body of at most `max_body` bytes;
/// `what` names the call in a refusal.
pub(crate) async fn read_call<T: DeserializeOwned>(
    reader: &mut StreamReader,
    max_body: usize,
    what: &str,
) -> Result<(T, Bytes), Unread> {
    let (head, first) = reader
        .read_line(MAX_HEAD)
        .await
        .map_err(|_| Unread::Broken)?;
    let head: T = serde_json::from_slice(&head).map_err(|e| {
        Unread::Refused(Denied {
            status: 400,
            code: "invalid_request".into(),
            message: format!("the {what}'s head: {e}"),
        })
    })?;
    let mut body = BytesMut::from(&first[..]);
    while let Some(chunk) = reader.read().await {
        let chunk = chunk.map_err(|_| Unread::Broken)?;
        if body.len() + chunk.len() > max_body {
            return Err(Unread::Refused(Denied {
                status: 413,
                code: "payload_too_large".into(),
                message: format!("a {what}'s body is at most {max_body} bytes"),
            }));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((head, body.freeze()))
}
