//! The text of a pgbus notification: one line of space-separated fields,
//! version 1, either a whole message or the marker of a spilled one.
//!
//! ```text
//! m <subject> <reply-to> <headers> <payload>
//! s <id> <subject> <reply-to> <headers>
//! ```
//!
//! - `m` carries the message inline; `s` names the row `<id>` (decimal) of
//!   `switchyard_carrier_spill` that holds the payload. Any other first field
//!   is a later format (or not ours) and is counted and skipped.
//! - `<subject>` and `<reply-to>` are the subjects as published; subject rules
//!   forbid whitespace, so a space always ends a field. `<reply-to>` is empty
//!   when there is none.
//! - `<headers>` is empty when there are none, otherwise `name:value` pairs
//!   joined by `,`, name and value each in base64 (standard alphabet, no
//!   padding, so neither `:` nor `,` can occur inside). The queue table keeps
//!   a unit's headers in this form too ([`encode_headers`]).
//! - `<payload>` is base64 (standard alphabet, padded); empty for an empty
//!   payload. It is the last field, so a spilled payload is simply absent.
//!
//! Everything is ASCII apart from the subjects (UTF-8 without control
//! characters), so the text is valid in any server encoding and has no NUL.

use data_encoding::{BASE64, BASE64_NOPAD};

use crate::action::Header;

/// PostgreSQL refuses a notification payload of this many bytes or more
/// (`NOTIFY_PAYLOAD_MAX_LENGTH`: BLCKSZ - NAMEDATALEN - 128 with the default
/// 8 KiB pages).
pub const PG_NOTIFY_LIMIT: usize = 8000;

/// Digits of the largest spill row id (`bigserial`, at most `i64::MAX`).
const MAX_ID_DIGITS: usize = 19;

/// The first field of an inline message.
const INLINE: &str = "m";
/// The first field of a spill marker.
const SPILLED: &str = "s";

/// A message as it travels: subjects and headers, and the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The subject it was published to.
    pub subject: String,
    /// Where an answer should go.
    pub reply_to: Option<String>,
    /// Its headers, in order.
    pub headers: Vec<Header>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A decoded notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A whole message.
    Inline(Message),
    /// A message whose payload waits in spill row `id`; `payload` is empty.
    Spilled {
        /// The spill row.
        id: i64,
        /// Everything but the payload.
        message: Message,
    },
}

/// Why a notification could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The first field is not one this version writes.
    #[error("unknown notification kind `{0}`")]
    UnknownKind(String),
    /// Too few fields, or an empty subject.
    #[error("a `{0}` notification needs 5 space-separated fields and a subject")]
    Fields(&'static str),
    /// The spill row id is not a positive decimal number.
    #[error("spill row id `{0}` is not a positive number")]
    Id(String),
    /// A header or the payload is not valid base64, or a header not UTF-8.
    #[error("{0} is not valid base64 (or not UTF-8)")]
    Encoding(&'static str),
}

/// The fields a message shares between its inline form and its spill
/// marker, with the headers already encoded.
#[derive(Debug)]
pub struct Envelope<'a> {
    subject: &'a str,
    reply_to: &'a str,
    headers: String,
}

impl<'a> Envelope<'a> {
    /// Encodes the headers once; the subjects must already be valid.
    pub fn new(subject: &'a str, reply_to: Option<&'a str>, headers: &[Header]) -> Self {
        Self {
            subject,
            reply_to: reply_to.unwrap_or(""),
            headers: encode_headers(headers),
        }
    }

    /// Bytes of the inline notification for a payload of `payload_len`
    /// bytes, without building it.
    pub fn inline_len(&self, payload_len: usize) -> usize {
        INLINE.len() + 2 + self.tail_len() + BASE64.encode_len(payload_len)
    }

    /// The inline notification.
    pub fn inline(&self, payload: &[u8]) -> String {
        let mut text = String::with_capacity(self.inline_len(payload.len()));
        text.push_str(INLINE);
        text.push(' ');
        self.push_tail(&mut text);
        text.push(' ');
        BASE64.encode_append(payload, &mut text);
        text
    }

    /// What follows `s <id> ` in a spill marker (the SQL adds the id).
    pub fn marker_tail(&self) -> String {
        let mut text = String::with_capacity(self.tail_len());
        self.push_tail(&mut text);
        text
    }

    /// Bytes of the spill marker with the longest possible id.
    pub fn marker_len(&self) -> usize {
        SPILLED.len() + 2 + MAX_ID_DIGITS + self.tail_len()
    }

    /// `<subject> <reply-to> <headers>`
    fn tail_len(&self) -> usize {
        self.subject.len() + 1 + self.reply_to.len() + 1 + self.headers.len()
    }

    fn push_tail(&self, text: &mut String) {
        text.push_str(self.subject);
        text.push(' ');
        text.push_str(self.reply_to);
        text.push(' ');
        text.push_str(&self.headers);
    }
}

/// The spill marker for row `id`, exactly as the spill query builds it
/// (`'s ' || id || ' ' || tail`).
pub fn marker(id: i64, tail: &str) -> String {
    format!("{SPILLED} {id} {tail}")
}

/// Reads a notification's text.
pub fn decode(text: &str) -> Result<Notice, DecodeError> {
    let mut fields = text.splitn(5, ' ');
    let kind = fields.next().unwrap_or_default();
    let kind: &'static str = match kind {
        INLINE => INLINE,
        SPILLED => SPILLED,
        other => return Err(DecodeError::UnknownKind(other.chars().take(16).collect())),
    };
    let fields: Vec<&str> = fields.collect();
    let [a, b, c, d] = fields[..] else {
        return Err(DecodeError::Fields(kind));
    };
    let (id, subject, reply_to, headers, payload) = match kind {
        INLINE => (None, a, b, c, d),
        _ => (Some(a), b, c, d, ""),
    };
    if subject.is_empty() {
        return Err(DecodeError::Fields(kind));
    }
    let message = Message {
        subject: subject.to_owned(),
        reply_to: (!reply_to.is_empty()).then(|| reply_to.to_owned()),
        headers: decode_headers(headers)?,
        payload: BASE64
            .decode(payload.as_bytes())
            .map_err(|_| DecodeError::Encoding("the payload"))?,
    };
    match id {
        None => Ok(Notice::Inline(message)),
        Some(id) => match id.parse::<i64>() {
            Ok(n) if n > 0 && !id.starts_with('+') => Ok(Notice::Spilled { id: n, message }),
            _ => Err(DecodeError::Id(id.chars().take(24).collect())),
        },
    }
}

/// The `<headers>` field of `headers`.
pub fn encode_headers(headers: &[Header]) -> String {
    let mut field = String::new();
    for (i, h) in headers.iter().enumerate() {
        if i > 0 {
            field.push(',');
        }
        BASE64_NOPAD.encode_append(h.name.as_bytes(), &mut field);
        field.push(':');
        BASE64_NOPAD.encode_append(h.value.as_bytes(), &mut field);
    }
    field
}

/// Reads a `<headers>` field.
pub fn decode_headers(field: &str) -> Result<Vec<Header>, DecodeError> {
    if field.is_empty() {
        return Ok(Vec::new());
    }
    let text = |b64: &str| {
        BASE64_NOPAD
            .decode(b64.as_bytes())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or(DecodeError::Encoding("a header"))
    };
    field
        .split(',')
        .map(|pair| {
            let (name, value) = pair
                .split_once(':')
                .ok_or(DecodeError::Encoding("a header"))?;
            Ok(Header {
                name: text(name)?,
                value: text(value)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(subject: &str, reply_to: Option<&str>, headers: &[Header], payload: &[u8]) {
        let envelope = Envelope::new(subject, reply_to, headers);
        let text = envelope.inline(payload);
        assert_eq!(text.len(), envelope.inline_len(payload.len()));
        assert!(!text.contains(['\n', '\0']), "{text:?}");
        let expected = Message {
            subject: subject.into(),
            reply_to: reply_to.map(String::from),
            headers: headers.to_vec(),
            payload: payload.to_vec(),
        };
        assert_eq!(
            decode(&text),
            Ok(Notice::Inline(expected.clone())),
            "{text}"
        );

        let marker = marker(42, &envelope.marker_tail());
        assert!(marker.len() <= envelope.marker_len());
        let spilled = Message {
            payload: Vec::new(),
            ..expected
        };
        assert_eq!(
            decode(&marker),
            Ok(Notice::Spilled {
                id: 42,
                message: spilled
            })
        );
    }

    #[test]
    fn inline_round_trips() {
        round_trip("jobs.7.progress", None, &[], b"50%");
        round_trip("jobs.7.progress", None, &[], b"");
        let every_byte: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        round_trip("cache.invalidate", Some("_INBOX.abc.9"), &[], &every_byte);
        let headers = [
            Header::new("Content-Type", "application/json"),
            Header::new("x-odd", "a b,c:d\r\n\u{0}é"),
            Header::new("", ""),
            Header::new("dup", "1"),
            Header::new("dup", "2"),
        ];
        round_trip(
            "jobs.é.ü",
            Some("_INBOX.x.1"),
            &headers,
            &[0, 0, 255, 10, 13, 32],
        );
    }

    #[test]
    fn exact_texts() {
        let envelope = Envelope::new("jobs.1", None, &[]);
        assert_eq!(envelope.inline(b"hi"), "m jobs.1   aGk=");
        let envelope = Envelope::new("jobs.1", Some("_INBOX.t.3"), &[Header::new("a", "b")]);
        assert_eq!(envelope.inline(b""), "m jobs.1 _INBOX.t.3 YQ:Yg ");
        assert_eq!(
            marker(7, &envelope.marker_tail()),
            "s 7 jobs.1 _INBOX.t.3 YQ:Yg"
        );
        let longest = marker(i64::MAX, &envelope.marker_tail());
        assert_eq!(longest.len(), envelope.marker_len());
    }

    #[test]
    fn inline_length_steps_with_base64() {
        // 5 fixed bytes (kind, four spaces), the subject, then 4 per 3 payload bytes.
        let envelope = Envelope::new("ab", None, &[]);
        assert_eq!(envelope.inline_len(0), 7);
        assert_eq!(envelope.inline_len(1), 11);
        assert_eq!(envelope.inline_len(3), 11);
        assert_eq!(envelope.inline_len(5994), 7999);
        assert_eq!(Envelope::new("abc", None, &[]).inline_len(5994), 8000);
        assert_eq!(envelope.inline_len(65536), 7 + 87384);
    }

    #[test]
    fn malformed_texts_are_refused() {
        for (text, err) in [
            ("", DecodeError::UnknownKind(String::new())),
            ("x jobs.1   ", DecodeError::UnknownKind("x".into())),
            ("m2 jobs.1   ", DecodeError::UnknownKind("m2".into())),
            ("m jobs.1  ", DecodeError::Fields("m")),
            ("m    ", DecodeError::Fields("m")),
            ("s 1 jobs.1 ", DecodeError::Fields("s")),
            ("m jobs.1   !!!!", DecodeError::Encoding("the payload")),
            ("m jobs.1   aGk", DecodeError::Encoding("the payload")),
            ("m jobs.1  YQ ", DecodeError::Encoding("a header")),
            ("m jobs.1  YQ:Yg= ", DecodeError::Encoding("a header")),
            ("m jobs.1  /w:Yg ", DecodeError::Encoding("a header")),
            ("s 0 jobs.1  ", DecodeError::Id("0".into())),
            ("s -3 jobs.1  ", DecodeError::Id("-3".into())),
            ("s +3 jobs.1  ", DecodeError::Id("+3".into())),
            ("s x jobs.1  ", DecodeError::Id("x".into())),
            (
                "s 99999999999999999999 jobs.1  ",
                DecodeError::Id("99999999999999999999".into()),
            ),
        ] {
            assert_eq!(decode(text), Err(err), "{text:?}");
        }
    }
}
