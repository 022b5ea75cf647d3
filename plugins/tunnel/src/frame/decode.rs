//! The steps of [`Frame::decode_split`] that are more than a line or two:
//! the header's checks, and the HELLO and REPLY payloads.

use super::{
    BODY_RULE, Frame, FrameError, HEADER_LEN, Kind, Lane, MAX_FRAME_LEN, MAX_REFUSAL_MESSAGE,
    PROTOCOL_VERSION, Refusal, Side, StreamId, bad,
};

/// The checks every frame passes before its kind's: the split, the length
/// and a stream id that fits the kind. Gives the stream, the kind and the
/// payload after the header.
#[inline]
pub(super) fn split_header(
    header: &[u8],
    body_len: usize,
) -> Result<(StreamId, Kind, &[u8]), FrameError> {
    if !BODY_RULE.is_split(header, body_len) {
        return Err(FrameError::BadSplit {
            header_len: header.len(),
            body_len,
        });
    }
    if header.len() < HEADER_LEN {
        return Err(FrameError::Truncated(header.len()));
    }
    let len = header.len().saturating_add(body_len);
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong(len));
    }
    let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let kind = Kind::from_code(header[4]).ok_or(FrameError::UnknownKind(header[4]))?;
    let session_frame = matches!(kind, Kind::Hello | Kind::Ping | Kind::Pong);
    if session_frame != (id == 0) {
        return Err(FrameError::BadStreamId { kind, stream: id });
    }
    Ok((StreamId(id), kind, &header[HEADER_LEN..]))
}

/// A HELLO's payload: version, side and lane.
#[inline]
pub(super) fn decode_hello(payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let kind = Kind::Hello;
    let Some(&version) = payload.first() else {
        return Err(bad(kind, "missing version"));
    };
    // The version is checked before the rest, so a newer peer
    // is told apart from a garbled one.
    if version != PROTOCOL_VERSION {
        return Err(FrameError::UnsupportedVersion(version));
    }
    let [_, side, lane] = payload else {
        return Err(bad(kind, "expected version, side and lane"));
    };
    let side = match side {
        1 => Side::Frontend,
        2 => Side::Worker,
        _ => return Err(bad(kind, "unknown side")),
    };
    let lane = match lane {
        1 => Lane::Inference,
        2 => Lane::Bulk,
        _ => return Err(bad(kind, "unknown lane")),
    };
    Ok(Frame::Hello { side, lane })
}

/// A REPLY's payload: the status byte, then a service refusal's message.
#[inline]
pub(super) fn decode_reply(payload: &[u8]) -> Result<Result<(), Refusal>, FrameError> {
    let kind = Kind::Reply;
    let Some((&status, message)) = payload.split_first() else {
        return Err(bad(kind, "missing status"));
    };
    if status != 2 && !message.is_empty() {
        return Err(bad(kind, "only a service refusal carries a message"));
    }
    Ok(match status {
        0 => Ok(()),
        1 => Err(Refusal::UnknownService),
        2 => {
            if message.len() > MAX_REFUSAL_MESSAGE {
                return Err(bad(kind, "refusal message too long"));
            }
            let text = std::str::from_utf8(message)
                .map_err(|_| bad(kind, "refusal message is not UTF-8"))?;
            Err(Refusal::ServiceRefused(text.to_owned()))
        }
        3 => Err(Refusal::Overloaded),
        _ => return Err(bad(kind, "unknown status")),
    })
}
