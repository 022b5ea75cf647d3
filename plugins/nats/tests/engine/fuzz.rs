//! Fuzz-style properties with a fixed seed: random splits of valid traffic
//! give the same actions as one read, and random bytes never panic.

use switchyard_plugin_nats::{Action, CloseReason, Connection};

use crate::support::*;

/// A stream of every frame kind a server sends after the handshake.
fn valid_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(b"PING\r\n+OK\r\nMSG jobs.1.progress 1 4\r\n50%!\r\n");
    s.extend_from_slice(
        b"HMSG cache.invalidate 2 reply.1 22 25\r\nNATS/1.0\r\nK: value\r\n\r\nabc\r\n",
    );
    s.extend_from_slice(b"HMSG jobs.2.progress 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n");
    s.extend_from_slice(
        b"INFO {\"server_id\":\"S2\",\"headers\":true,\"connect_urls\":[\"a:4222\"]}\r\n",
    );
    s.extend_from_slice(b"-ERR 'Permissions Violation for Subscription to \"x\"'\r\nPONG\r\n");
    let big: Vec<u8> = (0..9000u32).map(|i| b'a' + (i % 26) as u8).collect();
    s.extend_from_slice(format!("MSG jobs.3.progress 1 {}\r\n", big.len()).as_bytes());
    s.extend_from_slice(&big);
    s.extend_from_slice(b"\r\n");
    s
}

fn subscribed() -> Connection {
    let mut conn = connected();
    conn.subscribe(1, "jobs.*.progress", None).unwrap();
    conn.subscribe(2, "cache.invalidate", Some("q")).unwrap();
    conn
}

#[test]
fn random_splits_give_the_same_result_as_one_read() {
    let stream = valid_stream();
    let whole = normalise(subscribed().on_bytes(&stream, 1));
    assert_eq!(whole.0, b"PONG\r\n");
    assert_eq!(whole.1.len(), 5, "{:?}", whole.1);
    let mut rng = XorShift::seeded(0x9E37_79B9_7F4A_7C15);
    for round in 0..300 {
        let mut conn = subscribed();
        let mut out = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            // Mostly small pieces, sometimes a big one.
            let max = if rng.below(4) == 0 { 4096 } else { 16 };
            let len = (1 + rng.below(max)).min(stream.len() - at);
            let batch = conn.on_bytes(&stream[at..at + len], 1);
            writes(&batch);
            out.extend(batch);
            at += len;
        }
        assert_eq!(normalise(out), whole, "round {round}");
    }
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = XorShift::seeded(0xDEAD_BEEF_CAFE_F00D);
    let alphabet: &[u8] = b"MSGHPINOKERF+-\r\n 0123456789.*>_{}\"abc\t";
    let stream = valid_stream();
    for _ in 0..2000 {
        let mut conn = subscribed();
        let len = rng.below(300);
        let mut bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(3) == 0 {
                    rng.next() as u8
                } else {
                    alphabet[rng.below(alphabet.len())]
                }
            })
            .collect();
        // Sometimes valid traffic with a few bytes flipped.
        if rng.below(2) == 0 {
            bytes = stream.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(bytes.len());
                bytes[i] = rng.next() as u8;
            }
        }
        let mut at = 0;
        while at < bytes.len() {
            let len = (1 + rng.below(64)).min(bytes.len() - at);
            let out = conn.on_bytes(&bytes[at..at + len], at as u64);
            writes(&out);
            if out.contains(&Action::Close) {
                // What a host does next: close, reconnect, go on.
                conn.on_closed(CloseReason::Requested, at as u64);
                conn.on_connected(at as u64);
            }
            at += len;
            let _ = conn.on_tick(at as u64 * 1000);
        }
        // Operations in whatever state the garbage left it.
        let _ = conn.publish("jobs.1", None, None, b"x");
        let _ = conn.request("jobs.2", b"y", 10, 0);
        let _ = conn.subscribe(3, "jobs.*", None);
        let _ = conn.on_tick(u64::MAX);
    }
}

#[test]
fn random_bytes_during_the_handshake_never_panic() {
    let mut rng = XorShift::seeded(12345);
    for _ in 0..2000 {
        let mut conn = Connection::new(config()).unwrap();
        conn.on_connected(0);
        let mut bytes = INFO.to_vec();
        bytes.extend_from_slice(b"PONG\r\n");
        let i = rng.below(bytes.len());
        bytes[i] = rng.next() as u8;
        let cut = rng.below(bytes.len() + 1);
        let out = feed_split(&mut conn, &bytes, cut, 1);
        assert!(out.iter().filter(|a| matches!(a, Action::Write(_))).count() <= 2);
    }
}
