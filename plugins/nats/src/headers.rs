//! NATS/1.0 header blocks, as carried by HPUB and HMSG.
//!
//! A block is `NATS/1.0[ <status>[ <description>]]\r\n`, then `Name: value\r\n`
//! lines, then an empty line. The status is how the server speaks inside a
//! message: `NATS/1.0 503` on a request reply means "no responders".

/// The version line every header block starts with.
pub const HEADER_VERSION: &str = "NATS/1.0";

/// The status a server puts on a reply when nobody listens on the subject.
pub const STATUS_NO_RESPONDERS: u16 = 503;

/// A parsed header block: an optional status line and the entries in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    /// The status code of the version line (`503` in `NATS/1.0 503`), if any.
    pub status: Option<u16>,
    /// The text after the status code, if any.
    pub description: Option<String>,
    /// Name and value pairs, in wire order; a name may repeat.
    pub entries: Vec<(String, String)>,
}

impl Headers {
    /// The first value of `name`, compared without regard to ASCII case.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is the server's "no responders" status.
    pub fn is_no_responders(&self) -> bool {
        self.status == Some(STATUS_NO_RESPONDERS)
    }
}

/// Why a header block could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The block does not start with `NATS/1.0`.
    #[error("header block does not start with `NATS/1.0`")]
    Version,
    /// The block is not UTF-8 text.
    #[error("header block is not UTF-8")]
    NotUtf8,
    /// The status after `NATS/1.0` is not a three-digit code.
    #[error("header status `{0}` is not a three-digit code")]
    Status(String),
    /// A line has no `:` separating name and value.
    #[error("header line `{0}` has no `:`")]
    Line(String),
    /// A name that is empty or has whitespace, `:` or control characters.
    #[error("header name `{0}` is empty or has whitespace, `:` or control characters")]
    Name(String),
    /// A value with a CR or LF, which would end the line early.
    #[error("header `{0}` has a CR or LF in its value")]
    Value(String),
}

/// Parses a header block (the first `hdr_len` bytes of an HMSG payload).
pub fn parse_headers(block: &[u8]) -> Result<Headers, HeaderError> {
    let text = std::str::from_utf8(block).map_err(|_| HeaderError::NotUtf8)?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let rest = first
        .strip_prefix(HEADER_VERSION)
        .ok_or(HeaderError::Version)?;
    let mut headers = Headers::default();
    let rest = rest.trim();
    if !rest.is_empty() {
        let (code, description) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HeaderError::Status(code.to_owned()));
        }
        headers.status = code.parse().ok();
        let description = description.trim();
        if !description.is_empty() {
            headers.description = Some(description.to_owned());
        }
    }
    for line in lines {
        // The block ends with an empty line; anything after it is not headers.
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| HeaderError::Line(line.to_owned()))?;
        check_name(name)?;
        headers
            .entries
            .push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(headers)
}

/// The encoded length of a header block with these entries, after checking
/// them; HPUB needs the length before the bytes.
pub(crate) fn encoded_len(entries: &[(String, String)]) -> Result<usize, HeaderError> {
    let mut len = HEADER_VERSION.len() + 2 + 2;
    for (name, value) in entries {
        check_name(name)?;
        if value.contains(['\r', '\n']) {
            return Err(HeaderError::Value(name.clone()));
        }
        len += name.len() + 2 + value.len() + 2;
    }
    Ok(len)
}

/// Appends the block; the entries must have passed [`encoded_len`].
pub(crate) fn encode(out: &mut Vec<u8>, entries: &[(String, String)]) {
    out.extend_from_slice(HEADER_VERSION.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in entries {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn check_name(name: &str) -> Result<(), HeaderError> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(HeaderError::Name(name.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn round_trip() {
        let entries = pairs(&[("Trace-Id", "abc"), ("X", "1"), ("X", "2")]);
        let len = encoded_len(&entries).unwrap();
        let mut out = Vec::new();
        encode(&mut out, &entries);
        assert_eq!(out, b"NATS/1.0\r\nTrace-Id: abc\r\nX: 1\r\nX: 2\r\n\r\n");
        assert_eq!(len, out.len());
        let parsed = parse_headers(&out).unwrap();
        assert_eq!(parsed.entries, entries);
        assert_eq!(parsed.status, None);
        assert_eq!(parsed.get("trace-id"), Some("abc"));
        assert_eq!(parsed.get("x"), Some("1"));
        assert_eq!(parsed.get("missing"), None);
    }

    #[test]
    fn empty_block() {
        assert_eq!(encoded_len(&[]).unwrap(), 12);
        assert_eq!(
            parse_headers(b"NATS/1.0\r\n\r\n").unwrap(),
            Headers::default()
        );
    }

    #[test]
    fn status_lines() {
        let h = parse_headers(b"NATS/1.0 503\r\n\r\n").unwrap();
        assert!(h.is_no_responders());
        assert_eq!(h.description, None);
        let h = parse_headers(b"NATS/1.0 408 Request Timeout\r\nNats-Pending: 1\r\n\r\n").unwrap();
        assert_eq!(h.status, Some(408));
        assert_eq!(h.description.as_deref(), Some("Request Timeout"));
        assert_eq!(h.get("Nats-Pending"), Some("1"));
        assert_eq!(
            parse_headers(b"NATS/1.0 5x3\r\n\r\n"),
            Err(HeaderError::Status("5x3".into()))
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(
            parse_headers(b"HTTP/1.1\r\n\r\n"),
            Err(HeaderError::Version)
        );
        assert_eq!(
            parse_headers(b"NATS/1.0\r\nnocolon\r\n\r\n"),
            Err(HeaderError::Line("nocolon".into()))
        );
        assert_eq!(
            parse_headers(b"NATS/1.0\r\n\xff: x\r\n\r\n"),
            Err(HeaderError::NotUtf8)
        );
        assert_eq!(
            encoded_len(&pairs(&[("a b", "x")])),
            Err(HeaderError::Name("a b".into()))
        );
        assert_eq!(
            encoded_len(&pairs(&[("", "x")])),
            Err(HeaderError::Name(String::new()))
        );
        assert_eq!(
            encoded_len(&pairs(&[("a", "x\r\nEvil: 1")])),
            Err(HeaderError::Value("a".into()))
        );
    }
}
