//! Reading server operations out of a byte buffer, one frame at a time.
//!
//! [`parse_frame`] looks at the start of a buffer and either returns one
//! complete operation and how many bytes it used, or says it needs more bytes.
//! It never copies: payloads are slices of the buffer, so the caller decides
//! what to own.

use crate::error::Error;
use crate::info::ServerInfo;

/// The longest protocol line accepted from the server. Larger than the
/// server's own 4 KiB `max_control_line` because INFO lists every cluster
/// URL and can outgrow it on a big cluster.
pub const MAX_SERVER_LINE: usize = 64 * 1024;

#[cfg(test)]
thread_local! {
    /// Calls of [`parse_frame`] on this thread, for the tests that check
    /// how often a slow sender's bytes are parsed.
    pub(crate) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One operation from the server, borrowing from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerOp<'a> {
    Info(Box<ServerInfo>),
    Msg(MsgFrame<'a>),
    /// MSG or HMSG whose payload is claimed: everything up to the payload
    /// was read; the payload and its CRLF follow.
    MsgHead(MsgHead<'a>),
    Ping,
    Pong,
    Ok,
    Err(String),
}

/// MSG or HMSG; `header` is `Some` for HMSG.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MsgFrame<'a> {
    pub subject: &'a [u8],
    pub sid: u64,
    pub reply_to: Option<&'a [u8]>,
    pub header: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

/// MSG or HMSG up to its payload: the payload is `payload_len` bytes after
/// what was read, then CRLF.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MsgHead<'a> {
    pub subject: &'a [u8],
    pub sid: u64,
    pub reply_to: Option<&'a [u8]>,
    pub header: Option<&'a [u8]>,
    pub payload_len: usize,
}

/// Parses the frame at the start of `buf`: `Ok(None)` when it is not complete
/// yet, `Ok(Some((op, used)))` when it is. A message larger than
/// `max_payload` is an error as soon as its line is read, so the caller never
/// buffers it.
#[cfg(test)]
pub(crate) fn parse_frame(
    buf: &[u8],
    max_payload: usize,
) -> Result<Option<(ServerOp<'_>, usize)>, Error> {
    parse_frame_claiming(buf, max_payload, None)
}

/// [`parse_frame`], except that a MSG or HMSG whose payload has at least
/// `claim_from` bytes is a [`ServerOp::MsgHead`] as soon as its line and
/// header block are read.
pub(crate) fn parse_frame_claiming(
    buf: &[u8],
    max_payload: usize,
    claim_from: Option<usize>,
) -> Result<Option<(ServerOp<'_>, usize)>, Error> {
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_SERVER_LINE {
            return Err(Error::Protocol(format!(
                "protocol line longer than {MAX_SERVER_LINE} bytes"
            )));
        }
        return Ok(None);
    };
    if nl > MAX_SERVER_LINE {
        return Err(Error::Protocol(format!(
            "protocol line longer than {MAX_SERVER_LINE} bytes"
        )));
    }
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let body = nl + 1;
    let (op, rest) = split_op(line);
    let limits = Limits {
        max_payload,
        claim_from,
    };
    let op = if op.eq_ignore_ascii_case(b"MSG") {
        return msg(buf, rest, body, false, limits);
    } else if op.eq_ignore_ascii_case(b"HMSG") {
        return msg(buf, rest, body, true, limits);
    } else if op.eq_ignore_ascii_case(b"PING") {
        ServerOp::Ping
    } else if op.eq_ignore_ascii_case(b"PONG") {
        ServerOp::Pong
    } else if op.eq_ignore_ascii_case(b"+OK") {
        ServerOp::Ok
    } else if op.eq_ignore_ascii_case(b"-ERR") {
        let text = String::from_utf8_lossy(rest);
        let text = text.trim();
        let text = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .unwrap_or(text);
        ServerOp::Err(text.to_owned())
    } else if op.eq_ignore_ascii_case(b"INFO") {
        let info = ServerInfo::parse(rest)
            .map_err(|e| Error::Protocol(format!("INFO is not valid JSON: {e}")))?;
        ServerOp::Info(Box::new(info))
    } else {
        return Err(Error::Protocol(format!(
            "unknown operation `{}`",
            String::from_utf8_lossy(&op[..op.len().min(32)])
        )));
    };
    Ok(Some((op, body)))
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// The operation name and the rest of the line, leading blanks removed.
pub(crate) fn split_op(line: &[u8]) -> (&[u8], &[u8]) {
    let start = line
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(line.len());
    let line = &line[start..];
    let end = line.iter().position(|&b| is_space(b)).unwrap_or(line.len());
    let rest = &line[end..];
    let rest_start = rest
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(rest.len());
    (&line[..end], &rest[rest_start..])
}

/// What a message may be: its largest size, and from what payload size on
/// it is claimed.
#[derive(Clone, Copy)]
struct Limits {
    max_payload: usize,
    claim_from: Option<usize>,
}

/// `MSG <subject> <sid> [reply-to] <#bytes>` or
/// `HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>`.
fn msg<'a>(
    buf: &'a [u8],
    args: &'a [u8],
    body: usize,
    headers: bool,
    limits: Limits,
) -> Result<Option<(ServerOp<'a>, usize)>, Error> {
    let max_payload = limits.max_payload;
    let name = if headers { "HMSG" } else { "MSG" };
    let mut fields = [&b""[..]; 5];
    let mut count = 0;
    for field in args.split(|&b| is_space(b)).filter(|f| !f.is_empty()) {
        if count == fields.len() {
            return Err(Error::Protocol(format!("{name} has too many arguments")));
        }
        fields[count] = field;
        count += 1;
    }
    let sizes = if headers { 2 } else { 1 };
    let reply_to = match count.checked_sub(sizes) {
        Some(2) => None,
        Some(3) => Some(fields[2]),
        _ => return Err(Error::Protocol(format!("{name} has {count} arguments"))),
    };
    let sid = number(fields[1], name, "sid")?;
    let total = number(fields[count - 1], name, "size")?;
    let header_len = if headers {
        let h = number(fields[count - 2], name, "header size")?;
        if h > total {
            return Err(Error::Protocol(format!(
                "HMSG header size {h} exceeds its total size {total}"
            )));
        }
        usize::try_from(h).ok()
    } else {
        None
    };
    let total = usize::try_from(total).unwrap_or(usize::MAX);
    if total > max_payload {
        return Err(Error::Protocol(format!(
            "{name} of {total} bytes exceeds max_payload of {max_payload} bytes"
        )));
    }
    let header_bytes = header_len.unwrap_or(0);
    let payload_len = total - header_bytes;
    if limits
        .claim_from
        .is_some_and(|from| payload_len >= from.max(1))
    {
        let payload_start = body + header_bytes;
        if buf.len() < payload_start {
            return Ok(None);
        }
        return Ok(Some((
            ServerOp::MsgHead(MsgHead {
                subject: fields[0],
                sid,
                reply_to,
                header: header_len.map(|_| &buf[body..payload_start]),
                payload_len,
            }),
            payload_start,
        )));
    }
    // Saturating: a huge size must read as "not complete", never wrap.
    let end = body.saturating_add(total);
    if buf.len() < end.saturating_add(2) {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(Error::Protocol(format!(
            "{name} payload is not followed by CRLF (size {total} is wrong)"
        )));
    }
    let data = &buf[body..end];
    let (header, payload) = match header_len {
        Some(h) => (Some(&data[..h]), &data[h..]),
        None => (None, data),
    };
    Ok(Some((
        ServerOp::Msg(MsgFrame {
            subject: fields[0],
            sid,
            reply_to,
            header,
            payload,
        }),
        end + 2,
    )))
}

fn number(field: &[u8], op: &str, what: &str) -> Result<u64, Error> {
    let bad = || {
        Error::Protocol(format!(
            "{op} {what} `{}` is not a number",
            String::from_utf8_lossy(&field[..field.len().min(32)])
        ))
    };
    if field.is_empty() || field.len() > 19 || !field.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    // At most 19 ASCII digits: fits in u64 without overflow.
    Ok(field.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> (ServerOp<'_>, usize) {
        parse_frame(buf, 1 << 20).unwrap().expect("complete frame")
    }

    #[test]
    fn simple_ops() {
        assert_eq!(one(b"PING\r\n"), (ServerOp::Ping, 6));
        assert_eq!(one(b"pong\r\n"), (ServerOp::Pong, 6));
        assert_eq!(one(b"+OK\r\nPING\r\n"), (ServerOp::Ok, 5));
        assert_eq!(
            one(b"-ERR 'Authorization Violation'\r\n").0,
            ServerOp::Err("Authorization Violation".into())
        );
        // A bare LF is accepted too.
        assert_eq!(one(b"PING\n"), (ServerOp::Ping, 5));
    }

    #[test]
    fn msg_and_hmsg() {
        let (op, used) = one(b"MSG a.b 9 5\r\nhello\r\n");
        assert_eq!(used, 20);
        assert_eq!(
            op,
            ServerOp::Msg(MsgFrame {
                subject: b"a.b",
                sid: 9,
                reply_to: None,
                header: None,
                payload: b"hello"
            })
        );
        let (op, _) = one(b"MSG a.b\t9  r.1 0\r\n\r\n");
        assert_eq!(
            op,
            ServerOp::Msg(MsgFrame {
                subject: b"a.b",
                sid: 9,
                reply_to: Some(b"r.1"),
                header: None,
                payload: b""
            })
        );
        let frame = b"HMSG a 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n";
        let (op, used) = one(frame);
        assert_eq!(used, frame.len());
        assert_eq!(
            op,
            ServerOp::Msg(MsgFrame {
                subject: b"a",
                sid: 1,
                reply_to: Some(b"r"),
                header: Some(b"NATS/1.0\r\n\r\n"),
                payload: b"hi"
            })
        );
    }

    #[test]
    fn incomplete() {
        let frame = b"MSG a.b 9 5\r\nhello\r\n";
        for cut in 0..frame.len() {
            assert_eq!(
                parse_frame(&frame[..cut], 1 << 20).unwrap(),
                None,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn refusals() {
        let err = |b: &[u8]| parse_frame(b, 100).unwrap_err();
        assert!(matches!(err(b"MSG a 1 101\r\n"), Error::Protocol(m) if m.contains("max_payload")));
        assert!(matches!(err(b"MSG a 1 2\r\nabc\r\n"), Error::Protocol(m) if m.contains("CRLF")));
        assert!(matches!(err(b"MSG a x 2\r\n"), Error::Protocol(m) if m.contains("sid")));
        assert!(matches!(err(b"MSG a 1\r\n"), Error::Protocol(_)));
        assert!(matches!(err(b"MSG a 1 b c d e\r\n"), Error::Protocol(_)));
        assert!(
            matches!(err(b"HMSG a 1 5 2\r\n"), Error::Protocol(m) if m.contains("header size"))
        );
        assert!(matches!(
            err(b"MSG a 1 99999999999999999999\r\n"),
            Error::Protocol(_)
        ));
        assert!(matches!(err(b"HELLO\r\n"), Error::Protocol(m) if m.contains("HELLO")));
        assert!(matches!(err(b"INFO {\r\n"), Error::Protocol(m) if m.contains("INFO")));
        let long = vec![b'x'; MAX_SERVER_LINE + 1];
        assert!(matches!(err(&long), Error::Protocol(m) if m.contains("line")));
    }
}
