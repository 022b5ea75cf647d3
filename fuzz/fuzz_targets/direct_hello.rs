//! The stream handshake lines (`host/carrier/src/handshake.rs`, protocol
//! `SWY2`): the worker's challenge `SWY2 <nonce>`, which a frontend reads
//! from whatever answers at a node's address; the dialler's hello
//! `SWY2 <service> <proof>`, which a worker reads from anyone who
//! connects; and the answer line, which a dialler reads from the worker and
//! a replica from the replica it relays through.
//!
//! The module is compiled here from its source file (with `refusal.rs`,
//! the one type it uses), not through the `switchyard-carrier` crate, which
//! links wasmtime; it needs only std.
//!
//! Input: the bytes of a connection; the line is what comes up to and with
//! the first newline (as `read_until(b'\n')` cuts it, here without the
//! byte limit the reader puts on it, so that the parsers' own check of
//! `MAX_HELLO` is exercised). The whole input, as lossy UTF-8, is also a
//! refusal message to be put in an answer line.
//! Invariants: no panic; nothing over `MAX_HELLO` bytes or without its
//! newline is accepted; an accepted line written out again parses to the
//! same value (and a hello to exactly the same bytes, a challenge to the
//! same bytes but for the hex digits' case); an accepted service has no space; the
//! challenge and hello parsers allocate nothing, the answer parser at most
//! the line; a refusal message is at most `MAX_REFUSAL` bytes with no line
//! break, and its answer line fits in `MAX_HELLO` and parses back to it;
//! the outcome any line stands for (`read_answer`: a `Refusal`, or none) is
//! written by `answer_line` in at most `MAX_HELLO` bytes and reads back as
//! the same outcome when its message fits (at most `MAX_REFUSAL` bytes, no
//! carriage return), otherwise as the message made to fit, a fixed point.

#![no_main]

#[allow(dead_code, unreachable_pub)]
#[path = "../../host/carrier/src/handshake.rs"]
mod hello;
#[allow(dead_code, unreachable_pub)]
#[path = "../../host/carrier/src/refusal.rs"]
mod refusal;

use hello::{Answer, HelloError, MAX_HELLO, MAX_REFUSAL};
use libfuzzer_sys::fuzz_target;
use refusal::Refusal;
use switchyard_fuzz::peak_during;

/// What formatting an error's text or a line may allocate beyond its bytes.
const SLACK: usize = 64;

fn accepted(line: &[u8]) {
    assert!(line.len() <= MAX_HELLO, "{} bytes accepted", line.len());
    assert_eq!(line.last(), Some(&b'\n'));
}

/// The outcome a line stands for is written as a line of at most
/// `MAX_HELLO` bytes that reads back as the same outcome when its message
/// fits the line (at most `MAX_REFUSAL` bytes, no carriage return), and
/// otherwise as the message made to fit, which then round-trips.
fn outcome_round_trips(line: &[u8]) {
    let outcome = hello::read_answer(line);
    let written = hello::answer_line(outcome.as_ref().map(|_| ()));
    assert!(
        written.len() <= MAX_HELLO,
        "{} bytes written",
        written.len()
    );
    let read = hello::read_answer(written.as_bytes());
    match &outcome {
        Err(Refusal::ServiceRefused(m) | Refusal::NotDelivered(m))
            if m.len() > MAX_REFUSAL || m.contains('\r') =>
        {
            let again = hello::answer_line(read.as_ref().map(|_| ()));
            assert_eq!(again, written);
        }
        _ => assert_eq!(read, outcome),
    }
}

fuzz_target!(|data: &[u8]| {
    let line = match data.iter().position(|&b| b == b'\n') {
        Some(end) => &data[..=end],
        None => data,
    };

    let (challenge, peak) = peak_during(|| hello::parse_challenge(line));
    assert_eq!(peak, 0, "parse_challenge allocated");
    if let Ok(nonce) = challenge {
        accepted(line);
        let again = hello::format_challenge(&nonce);
        assert!(again.starts_with("SWY2 ") && again.as_bytes().eq_ignore_ascii_case(line));
        assert_eq!(hello::parse_challenge(again.as_bytes()), Ok(nonce));
    }

    let (parsed, peak) = peak_during(|| hello::parse_hello(line));
    assert_eq!(peak, 0, "parse_hello allocated");
    if let Ok(hello) = parsed {
        accepted(line);
        assert!(!hello.service.contains([' ', '\n']), "{:?}", hello.service);
        let again = hello::format_hello(&hello);
        assert_eq!(again.as_bytes(), line);
        assert_eq!(hello::parse_hello(again.as_bytes()), Ok(hello));
    }

    let (answer, peak) = peak_during(|| hello::parse_answer(line));
    assert!(peak <= line.len() + SLACK, "parse_answer held {peak} bytes");
    match answer {
        Ok(answer) => {
            accepted(line);
            if let Answer::Refused(message) | Answer::Undelivered(message) = answer {
                assert!(!message.is_empty() && message.trim_end() == message);
            }
            let again = hello::format_answer(&answer);
            assert!(again.len() <= line.len());
            assert_eq!(hello::parse_answer(again.as_bytes()), Ok(answer));
        }
        Err(HelloError::NotAnswer(text)) => {
            accepted(line);
            assert!(text.len() < line.len());
        }
        Err(_) => {}
    }
    outcome_round_trips(line);

    let text = String::from_utf8_lossy(data);
    let (message, peak) = peak_during(|| hello::refusal_message(&text));
    // `replace` grows its buffer by doubling up to the text's length.
    assert!(
        peak <= 2 * text.len() + SLACK,
        "refusal_message held {peak} bytes"
    );
    assert!(message.len() <= MAX_REFUSAL);
    assert!(!message.contains(['\n', '\r']));
    assert!(text.replace(['\n', '\r'], " ").starts_with(&message));
    let line = hello::format_answer(&Answer::Refused(&message));
    assert!(line.len() <= MAX_HELLO);
    match hello::parse_answer(line.as_bytes()) {
        Ok(Answer::Refused(parsed)) => assert_eq!(parsed, message.trim_end()),
        // A message of whitespace alone: the dialler reads no refusal, and
        // fails the stream as not delivered.
        Err(HelloError::NotAnswer(_)) => assert!(message.trim().is_empty()),
        other => panic!("{message:?} came back as {other:?}"),
    }
});
