//! Reads cut anywhere: frames, the handshake, deliveries and replies.

use std::cell::Cell;

use crate::parser::PARSES;
use crate::{Action, Config, Connection, MAX_SERVER_LINE};

/// A long line sent a byte at a time is parsed once it is complete, not
/// once per byte: each parse rescans everything held.
#[test]
fn a_line_trickling_in_is_not_parsed_again_on_every_read() {
    let mut line = b"INFO {\"server_id\":\"".to_vec();
    line.resize(MAX_SERVER_LINE - 8, b'a');
    line.extend_from_slice(b"\"}\r\n");
    let mut conn = Connection::new(Config::default()).unwrap();
    conn.on_connected(0);
    let before = PARSES.with(Cell::get);
    let mut out = Vec::new();
    for byte in line.chunks(1) {
        out.extend(conn.on_bytes(byte, 1));
    }
    let parses = PARSES.with(Cell::get) - before;
    // The first byte, then the line (read alone once its newline
    // comes), and the empty rests after it.
    assert!(parses <= 4, "{parses} parses for {} reads", line.len());
    assert!(
        matches!(&out[..], [Action::Write(w)] if w.starts_with(b"CONNECT ")),
        "{out:?}"
    );
    assert_eq!(conn.server_info().unwrap().server_id.len(), line.len() - 23);
}

/// The same bytes in pieces of any size still give one read's result,
/// and a line past the limit still fails when its bytes come singly.
#[test]
fn pieces_around_a_partial_line_read_as_one() {
    let stream = b"PING\r\nPO\r\nINFO {}\r\n";
    let whole = {
        let mut conn = Connection::new(Config::default()).unwrap();
        conn.on_connected(0);
        conn.on_bytes(b"INFO {}\r\nPONG\r\n", 1);
        conn.on_bytes(stream, 1)
    };
    for size in 1..stream.len() {
        let mut conn = Connection::new(Config::default()).unwrap();
        conn.on_connected(0);
        conn.on_bytes(b"INFO {}\r\nPONG\r\n", 1);
        let mut out = Vec::new();
        for piece in stream.chunks(size) {
            out.extend(conn.on_bytes(piece, 1));
        }
        let writes: Vec<u8> = out
            .iter()
            .filter_map(|a| match a {
                Action::Write(w) => Some(w.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(writes, b"PONG\r\n", "pieces of {size}");
        let rest: Vec<&Action> = out
            .iter()
            .filter(|a| !matches!(a, Action::Write(_)))
            .collect();
        let whole_rest: Vec<&Action> = whole
            .iter()
            .filter(|a| !matches!(a, Action::Write(_)))
            .collect();
        assert_eq!(rest, whole_rest, "pieces of {size}");
    }

    let mut conn = Connection::new(Config::default()).unwrap();
    conn.on_connected(0);
    let mut out = Vec::new();
    for _ in 0..=MAX_SERVER_LINE {
        out.extend(conn.on_bytes(b"x", 1));
    }
    assert!(
        out.contains(&Action::Close),
        "a line past the limit is refused"
    );
}

/// An engine answering spans, connected to a server that takes headers,
/// with sid 5 on `a.*`.
fn spanning() -> Connection {
    let mut conn = Connection::new(Config {
        deliver_spans: true,
        ..Config::default()
    })
    .unwrap();
    conn.on_connected(0);
    conn.on_bytes(b"INFO {\"headers\":true}\r\nPONG\r\n", 1);
    conn.subscribe(5, "a.*", None).unwrap();
    conn
}

/// Messages read in two pieces, split anywhere, arrive as they do in
/// one read: the same subjects, reply subjects, headers and payloads,
/// in order, whether answered as spans or owned.
#[test]
fn messages_split_anywhere_between_two_reads_arrive_whole_and_in_order() {
    let stream: &[u8] = b"MSG a.b 5 2\r\nhi\r\nPING\r\nMSG a.c 5 r.1 3\r\nyou\r\n\
        HMSG a.d 5 18 21\r\nNATS/1.0\r\nK: v\r\n\r\nabc\r\nMSG a.e 5 0\r\n\r\n";
    let read = |pieces: &[&[u8]]| -> Vec<Action> {
        let mut conn = spanning();
        let mut seen = Vec::new();
        for data in pieces {
            let answered = conn.on_bytes(data, 2).into_iter();
            seen.extend(
                answered
                    .map(|a| a.owned(data))
                    .filter(|a| matches!(a, Action::Deliver { .. })),
            );
        }
        seen
    };
    let whole = read(&[stream]);
    assert_eq!(whole.len(), 4, "{whole:?}");
    for at in 1..stream.len() {
        let (first, second) = stream.split_at(at);
        assert_eq!(read(&[first, second]), whole, "split at {at}");
    }
}

/// With `deliver_spans`, a message read whole is answered as ranges of
/// the data handed to that call; one that began in an earlier read is
/// answered owned, first.
#[test]
fn messages_read_whole_are_answered_as_spans_of_the_call_s_data() {
    let mut conn = spanning();
    let first = conn.on_bytes(b"MSG a.b 5 2\r\nhi\r\nMSG a.c 5 r.1 3\r\nyo", 2);
    let data = b"u\r\nMSG a.d 5 0\r\n\r\n";
    let second = conn.on_bytes(data, 3);
    assert_eq!(
        first,
        [Action::DeliverSpans {
            sid: 5,
            subject: 4..7,
            reply_to: None,
            headers: None,
            payload: 13..15,
        }]
    );
    assert!(
        matches!(&second[0], Action::Deliver { subject, reply_to: Some(r), payload, .. }
            if subject == "a.c" && r == "r.1" && payload == b"you"),
        "{second:?}"
    );
    let Action::DeliverSpans {
        subject, payload, ..
    } = &second[1]
    else {
        panic!("{second:?}")
    };
    assert_eq!(&data[subject.clone()], b"a.d");
    assert!(payload.is_empty() && payload.start == data.len() - 2);
    assert_eq!(second.len(), 2);
}
