//! Writing client operations: PUB, HPUB, SUB, UNSUB, PING, PONG.
//!
//! Callers check subjects and sizes first; these functions only check the
//! line length, which the server would otherwise punish by closing the
//! connection.

use crate::error::Error;
use crate::headers;

/// The server's default `max_control_line`: a longer PUB or SUB line makes
/// it close the connection with `Maximum Control Line Exceeded`.
pub const MAX_CLIENT_LINE: usize = 4096;

/// `PING\r\n`.
pub(crate) const PING: &[u8] = b"PING\r\n";
/// `PONG\r\n`.
pub(crate) const PONG: &[u8] = b"PONG\r\n";

/// Appends `PUB` (no headers) or `HPUB` (headers, even an empty list).
pub(crate) fn publish(
    out: &mut Vec<u8>,
    subject: &str,
    reply_to: Option<&str>,
    headers: Option<(&[(String, String)], usize)>,
    payload: &[u8],
) -> Result<(), Error> {
    publish_head(out, subject, reply_to, headers, payload.len())?;
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends what [`publish`] writes before the payload: the line and the
/// header block. The payload of `payload_len` bytes and `\r\n` must follow.
pub(crate) fn publish_head(
    out: &mut Vec<u8>,
    subject: &str,
    reply_to: Option<&str>,
    headers: Option<(&[(String, String)], usize)>,
    payload_len: usize,
) -> Result<(), Error> {
    let start = out.len();
    out.extend_from_slice(if headers.is_some() { b"HPUB " } else { b"PUB " });
    out.extend_from_slice(subject.as_bytes());
    if let Some(reply) = reply_to {
        out.push(b' ');
        out.extend_from_slice(reply.as_bytes());
    }
    let header_len = headers.map_or(0, |(_, len)| len);
    if headers.is_some() {
        out.push(b' ');
        push_number(out, header_len as u64);
    }
    out.push(b' ');
    push_number(out, (header_len + payload_len) as u64);
    check_line(out, start)?;
    out.extend_from_slice(b"\r\n");
    if let Some((entries, _)) = headers {
        headers::encode(out, entries);
    }
    Ok(())
}

/// Appends `SUB <subject> [queue] <sid>`.
pub(crate) fn subscribe(
    out: &mut Vec<u8>,
    subject: &str,
    queue: Option<&str>,
    sid: u64,
) -> Result<(), Error> {
    let start = out.len();
    out.extend_from_slice(b"SUB ");
    out.extend_from_slice(subject.as_bytes());
    if let Some(queue) = queue {
        out.push(b' ');
        out.extend_from_slice(queue.as_bytes());
    }
    out.push(b' ');
    push_number(out, sid);
    check_line(out, start)?;
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends `UNSUB <sid> [max]`.
pub(crate) fn unsubscribe(out: &mut Vec<u8>, sid: u64, max_msgs: Option<u64>) {
    out.extend_from_slice(b"UNSUB ");
    push_number(out, sid);
    if let Some(max) = max_msgs {
        out.push(b' ');
        push_number(out, max);
    }
    out.extend_from_slice(b"\r\n");
}

/// Refuses a line that grew past the server's limit, taking it back out of
/// `out` so that nothing of the refused operation is written.
fn check_line(out: &mut Vec<u8>, start: usize) -> Result<(), Error> {
    let len = out.len() - start;
    if len > MAX_CLIENT_LINE {
        out.truncate(start);
        return Err(Error::ControlLineTooLong {
            len,
            max: MAX_CLIENT_LINE,
        });
    }
    Ok(())
}

fn push_number(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations() {
        let mut out = Vec::new();
        publish(&mut out, "a.b", None, None, b"hi").unwrap();
        publish(&mut out, "a.b", Some("r.1"), None, b"").unwrap();
        let h = vec![("K".to_string(), "v".to_string())];
        publish(&mut out, "a", None, Some((&h, 18)), b"xy").unwrap();
        subscribe(&mut out, "a.*", Some("workers"), 3).unwrap();
        subscribe(&mut out, "a", None, 0).unwrap();
        unsubscribe(&mut out, 3, Some(10));
        unsubscribe(&mut out, u64::MAX, None);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "PUB a.b 2\r\nhi\r\nPUB a.b r.1 0\r\n\r\nHPUB a 18 20\r\nNATS/1.0\r\nK: v\r\n\r\nxy\r\n\
             SUB a.* workers 3\r\nSUB a 0\r\nUNSUB 3 10\r\nUNSUB 18446744073709551615\r\n"
        );
    }

    #[test]
    fn long_lines_are_refused_without_a_trace() {
        let mut out = b"PING\r\n".to_vec();
        let subject = "a".repeat(MAX_CLIENT_LINE);
        assert!(matches!(
            publish(&mut out, &subject, None, None, b"x"),
            Err(Error::ControlLineTooLong { .. })
        ));
        assert!(matches!(
            subscribe(&mut out, &subject, None, 1),
            Err(Error::ControlLineTooLong { .. })
        ));
        assert_eq!(out, b"PING\r\n");
    }
}
