//! The handshake lines of stream opens, parsed and written by pure
//! functions: one codec for every transport that answers an open with a
//! line before the stream's bytes.
//!
//! - The `nats` set's dialled sessions (protocol `SWY2`, [`crate::direct`]):
//!   the worker's challenge `SWY2 <nonce>`, the dialler's hello
//!   `SWY2 session:<lane> <proof>`, then the worker's answer line.
//! - The relay between replicas (`GET /api/cluster/relay`): the holding
//!   replica's first websocket message is the same answer line.
//!
//! The answer line is a [`Refusal`] or its absence ([`answer_line`],
//! [`read_answer`]): `OK`, `UNKNOWN`, `OVERLOADED`, `REFUSED <message>` or
//! `UNDELIVERED <message>`.
//!
//! The parsers take a line as `read_until(b'\n')` under a [`MAX_HELLO`]
//! byte limit gives it (newline included) and check that limit again, so a
//! caller cannot forget it. This file depends on std and `refusal.rs`
//! alone: the fuzz target `direct_hello` compiles both by path, without
//! `switchyard-carrier` (which links wasmtime).

use std::fmt;

use crate::refusal::Refusal;

/// The longest handshake line either side reads, its newline included: a
/// service name, 64 hex digits and a refusal's message fit many times over.
pub(crate) const MAX_HELLO: usize = 1024;
/// The longest refusal message sent in the answer line.
pub(crate) const MAX_REFUSAL: usize = 512;
/// The size of a handshake's nonce.
pub(crate) const NONCE_BYTES: usize = 32;
/// The size of a proof (an HMAC-SHA256).
pub(crate) const PROOF_BYTES: usize = 32;

/// The worker's fresh value, which the dialler's proof covers.
pub(crate) type Nonce = [u8; NONCE_BYTES];
/// HMAC-SHA256(stream key, context ‖ nonce ‖ service).
pub(crate) type Proof = [u8; PROOF_BYTES];

/// The dialler's line: the service it wants and its proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello<'a> {
    /// Any text without a space (the worker's acceptor judges it).
    pub(crate) service: &'a str,
    pub(crate) proof: Proof,
}

/// The answer line: the outcome of an open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer<'a> {
    Ok,
    Unknown,
    Overloaded,
    /// The service's message: one line, never empty nor ending in
    /// whitespace once parsed.
    Refused(&'a str),
    /// Why the answering side could not deliver the open (a relay whose
    /// session ended); the same rules as `Refused`'s message.
    Undelivered(&'a str),
}

/// Why a handshake line was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HelloError {
    /// Over [`MAX_HELLO`] bytes, or no newline (the peer closed mid-line).
    TooLong,
    NotUtf8,
    NotChallenge,
    NotHello,
    /// An answer line that is none of the four; the line (without its
    /// trailing whitespace), at most [`MAX_HELLO`] bytes.
    NotAnswer(String),
}

impl fmt::Display for HelloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong => f.write_str("handshake line too long or cut"),
            Self::NotUtf8 => f.write_str("handshake line not UTF-8"),
            Self::NotChallenge => f.write_str("not a stream challenge"),
            Self::NotHello => f.write_str("not a stream hello"),
            Self::NotAnswer(line) => write!(f, "the peer answered `{line}`"),
        }
    }
}

impl std::error::Error for HelloError {}

/// One handshake line as read (newline included) to its text, newline
/// removed: at most [`MAX_HELLO`] bytes in all, ending in `\n`, UTF-8.
pub(crate) fn line(raw: &[u8]) -> Result<&str, HelloError> {
    if raw.len() > MAX_HELLO {
        return Err(HelloError::TooLong);
    }
    let Some(text) = raw.strip_suffix(b"\n") else {
        return Err(HelloError::TooLong);
    };
    std::str::from_utf8(text).map_err(|_| HelloError::NotUtf8)
}

/// `SWY2 <nonce>`: 64 hex digits (either case).
pub(crate) fn parse_challenge(raw: &[u8]) -> Result<Nonce, HelloError> {
    line(raw)?
        .strip_prefix("SWY2 ")
        .and_then(|digits| decode_hex::<NONCE_BYTES>(digits, true))
        .ok_or(HelloError::NotChallenge)
}

/// The challenge line, newline included.
pub(crate) fn format_challenge(nonce: &Nonce) -> String {
    format!("SWY2 {}\n", encode_hex(nonce))
}

/// `SWY2 <service> <proof>`: three words split by single spaces, the proof
/// 64 lowercase hex digits (the only form a dialler writes; the worker
/// compared it as text with its own lowercase encoding before).
pub(crate) fn parse_hello(raw: &[u8]) -> Result<Hello<'_>, HelloError> {
    let mut words = line(raw)?.split(' ');
    let (Some("SWY2"), Some(service), Some(proof), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(HelloError::NotHello);
    };
    let proof = decode_hex::<PROOF_BYTES>(proof, false).ok_or(HelloError::NotHello)?;
    Ok(Hello { service, proof })
}

/// The hello line, newline included. A service with a space or a newline
/// makes a line the worker refuses (as it should: no service is named so).
pub(crate) fn format_hello(hello: &Hello<'_>) -> String {
    format!("SWY2 {} {}\n", hello.service, encode_hex(&hello.proof))
}

/// `OK`, `UNKNOWN`, `OVERLOADED`, `REFUSED <message>` or `UNDELIVERED
/// <message>`, trailing whitespace ignored.
pub(crate) fn parse_answer(raw: &[u8]) -> Result<Answer<'_>, HelloError> {
    match line(raw)?.trim_end() {
        "OK" => Ok(Answer::Ok),
        "UNKNOWN" => Ok(Answer::Unknown),
        "OVERLOADED" => Ok(Answer::Overloaded),
        other => {
            if let Some(message) = other.strip_prefix("REFUSED ") {
                Ok(Answer::Refused(message))
            } else if let Some(message) = other.strip_prefix("UNDELIVERED ") {
                Ok(Answer::Undelivered(message))
            } else {
                Err(HelloError::NotAnswer(other.to_string()))
            }
        }
    }
}

/// The answer line, newline included. A refusal's message should come from
/// [`refusal_message`], which keeps the line whole and short.
pub(crate) fn format_answer(answer: &Answer<'_>) -> String {
    match answer {
        Answer::Ok => "OK\n".to_string(),
        Answer::Unknown => "UNKNOWN\n".to_string(),
        Answer::Overloaded => "OVERLOADED\n".to_string(),
        Answer::Refused(message) => format!("REFUSED {message}\n"),
        Answer::Undelivered(message) => format!("UNDELIVERED {message}\n"),
    }
}

/// What a message-less refusal says on the line, which needs a message.
const NO_MESSAGE: &str = "no reason given";

/// The answer line for an open's outcome, newline included: whole, at most
/// [`MAX_HELLO`] bytes, and read back by [`read_answer`] as the same
/// outcome (a message cut to [`MAX_REFUSAL`] bytes on one line).
pub fn answer_line(outcome: Result<(), &Refusal>) -> String {
    let fit = |message: &str| {
        let message = refusal_message(message);
        match message.trim() {
            "" => NO_MESSAGE.to_string(),
            _ => message.trim_end().to_string(),
        }
    };
    match outcome {
        Ok(()) => format_answer(&Answer::Ok),
        Err(Refusal::UnknownService) => format_answer(&Answer::Unknown),
        Err(Refusal::Overloaded) => format_answer(&Answer::Overloaded),
        Err(Refusal::ServiceRefused(message)) => format_answer(&Answer::Refused(&fit(message))),
        // Another replica's window found no route: to this caller, the
        // worker was not reached.
        Err(Refusal::NotDelivered(why) | Refusal::NoRoute(why)) => {
            format_answer(&Answer::Undelivered(&fit(why)))
        }
    }
}

/// An open's outcome from its answer line (newline included). A line that
/// is cut, too long or no answer at all means the open was not delivered:
/// the other side may have seen it, but it started nothing.
pub fn read_answer(raw: &[u8]) -> Result<(), Refusal> {
    match parse_answer(raw) {
        Ok(Answer::Ok) => Ok(()),
        Ok(Answer::Unknown) => Err(Refusal::UnknownService),
        Ok(Answer::Overloaded) => Err(Refusal::Overloaded),
        Ok(Answer::Refused(message)) => Err(Refusal::ServiceRefused(message.to_string())),
        Ok(Answer::Undelivered(why)) => Err(Refusal::NotDelivered(why.to_string())),
        Err(e) => Err(Refusal::NotDelivered(e.to_string())),
    }
}

/// A refusal's message made fit for the answer line: newlines become
/// spaces, and it is cut to at most [`MAX_REFUSAL`] bytes on a character
/// boundary, so the line stays well under [`MAX_HELLO`].
pub(crate) fn refusal_message(message: &str) -> String {
    let mut message = message.replace(['\n', '\r'], " ");
    let mut cut = message.len().min(MAX_REFUSAL);
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message
}

/// Lowercase hex.
fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    text
}

/// Exactly `N` bytes as `2 × N` hex digits; uppercase digits only if
/// `any_case`.
fn decode_hex<const N: usize>(text: &str, any_case: bool) -> Option<[u8; N]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' if any_case => Some(c - b'A' + 10),
        _ => None,
    };
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: Nonce = [0xa5; NONCE_BYTES];

    #[test]
    fn lines_round_trip() {
        let line = format_challenge(&NONCE);
        assert_eq!(line, format!("SWY2 {}\n", "a5".repeat(32)));
        assert_eq!(parse_challenge(line.as_bytes()), Ok(NONCE));

        let hello = Hello {
            service: "inference",
            proof: [7; PROOF_BYTES],
        };
        let line = format_hello(&hello);
        assert_eq!(line, format!("SWY2 inference {}\n", "07".repeat(32)));
        assert_eq!(parse_hello(line.as_bytes()), Ok(hello));

        for answer in [
            Answer::Ok,
            Answer::Unknown,
            Answer::Overloaded,
            Answer::Refused("too busy é"),
            Answer::Undelivered("session ended"),
        ] {
            assert_eq!(parse_answer(format_answer(&answer).as_bytes()), Ok(answer));
        }
    }

    #[test]
    fn the_challenge_takes_either_case_and_nothing_else() {
        let upper = format!("SWY2 {}\n", "A5".repeat(32));
        assert_eq!(parse_challenge(upper.as_bytes()), Ok(NONCE));
        for bad in [
            format!("SWY2 {}\n", "a5".repeat(31)),
            format!("SWY2 {}\n", "a5".repeat(33)),
            format!("SWY2 {}a\n", "a5".repeat(31)),
            format!("SWY2 {}g5\n", "a5".repeat(31)),
            format!("SWY1 {}\n", "a5".repeat(32)),
            format!("SWY2  {}\n", "a5".repeat(32)),
            format!("SWY2 {} \n", "a5".repeat(32)),
            "SWY2 +5\n".to_string(),
        ] {
            assert_eq!(
                parse_challenge(bad.as_bytes()),
                Err(HelloError::NotChallenge),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_hello_needs_three_words_and_a_lowercase_proof() {
        let proof = "07".repeat(32);
        assert_eq!(
            parse_hello(format!("SWY2  {proof}\n").as_bytes()),
            Ok(Hello {
                service: "",
                proof: [7; PROOF_BYTES]
            }),
            "an empty service is the acceptor's to refuse"
        );
        for bad in [
            format!("SWY2 echo {}\n", proof.to_uppercase().replace('0', "A")),
            format!("SWY2 echo {proof} \n"),
            format!("SWY2 echo {proof}\r\n"),
            format!("SWY2 echo  {proof}\n"),
            format!("SWY2 e cho {proof}\n"),
            format!("SWY1 echo {proof}\n"),
            format!("SWY2 echo {}\n", &proof[1..]),
            "SWY2 echo\n".to_string(),
            "\n".to_string(),
        ] {
            assert_eq!(
                parse_hello(bad.as_bytes()),
                Err(HelloError::NotHello),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn lines_over_the_limit_cut_or_not_utf8_are_refused() {
        let mut long = format!("REFUSED {}\n", "x".repeat(MAX_HELLO - 9));
        assert_eq!(long.len(), MAX_HELLO);
        assert!(parse_answer(long.as_bytes()).is_ok());
        long.insert(8, 'x');
        assert_eq!(parse_answer(long.as_bytes()), Err(HelloError::TooLong));
        assert_eq!(parse_answer(b"OK"), Err(HelloError::TooLong));
        assert_eq!(parse_hello(b""), Err(HelloError::TooLong));
        assert_eq!(parse_challenge(b"SWY2 \xff\n"), Err(HelloError::NotUtf8));
        assert_eq!(
            HelloError::TooLong.to_string(),
            "handshake line too long or cut"
        );
    }

    #[test]
    fn answers_ignore_trailing_whitespace_and_name_what_they_do_not_know() {
        assert_eq!(parse_answer(b"OK \r\n"), Ok(Answer::Ok));
        assert_eq!(parse_answer(b"REFUSED  no \n"), Ok(Answer::Refused(" no")));
        assert_eq!(
            parse_answer(b"REFUSED \n"),
            Err(HelloError::NotAnswer("REFUSED".into()))
        );
        assert_eq!(
            parse_answer(b"ok\n").unwrap_err().to_string(),
            "the peer answered `ok`"
        );
    }

    #[test]
    fn refusal_messages_stay_one_short_line() {
        assert_eq!(refusal_message("a\nb\rc"), "a b c");
        let long = "é".repeat(MAX_REFUSAL);
        let cut = refusal_message(&long);
        assert_eq!(cut.len(), MAX_REFUSAL);
        let odd = format!("x{long}");
        assert_eq!(refusal_message(&odd).len(), MAX_REFUSAL - 1);
        let line = format_answer(&Answer::Refused(&cut));
        assert!(line.len() <= MAX_HELLO);
        assert_eq!(parse_answer(line.as_bytes()), Ok(Answer::Refused(&cut[..])));
    }

    #[test]
    fn every_outcome_has_one_line_that_reads_back_as_itself() {
        let cases = [
            (Ok(()), "OK\n"),
            (Err(Refusal::UnknownService), "UNKNOWN\n"),
            (Err(Refusal::Overloaded), "OVERLOADED\n"),
            (
                Err(Refusal::ServiceRefused("draining".into())),
                "REFUSED draining\n",
            ),
            (
                Err(Refusal::NotDelivered("the session ended".into())),
                "UNDELIVERED the session ended\n",
            ),
        ];
        for (outcome, line) in cases {
            assert_eq!(answer_line(outcome.as_ref().map(|_| ())), line);
            assert_eq!(read_answer(line.as_bytes()), outcome, "{line:?}");
        }
    }

    #[test]
    fn messages_are_made_to_fit_the_line() {
        let line = answer_line(Err(&Refusal::ServiceRefused("two\nlines ".into())));
        assert_eq!(line, "REFUSED two lines\n");
        let line = answer_line(Err(&Refusal::NotDelivered(" \n".into())));
        assert_eq!(line, "UNDELIVERED no reason given\n");
        assert_eq!(
            read_answer(line.as_bytes()),
            Err(Refusal::NotDelivered(NO_MESSAGE.into()))
        );
        let long = answer_line(Err(&Refusal::ServiceRefused("x".repeat(4 * MAX_HELLO))));
        assert!(long.len() <= MAX_HELLO);
        assert_eq!(
            read_answer(long.as_bytes()),
            Err(Refusal::ServiceRefused("x".repeat(MAX_REFUSAL)))
        );
    }

    #[test]
    fn a_line_that_is_no_answer_was_not_delivered() {
        assert_eq!(
            read_answer(b"ok\n"),
            Err(Refusal::NotDelivered("the peer answered `ok`".into()))
        );
        assert_eq!(
            read_answer(b"OK"),
            Err(Refusal::NotDelivered(
                "handshake line too long or cut".into()
            ))
        );
        assert_eq!(
            read_answer(b"UNDELIVERED \n"),
            Err(Refusal::NotDelivered(
                "the peer answered `UNDELIVERED`".into()
            ))
        );
    }
}
