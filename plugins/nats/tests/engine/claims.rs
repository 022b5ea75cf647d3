//! Claimed payloads (`Config::claim_bodies_from`): the engine reads a large
//! message's line and headers, the host takes its payload beside it. Driven
//! by a small host that behaves as the real one (`host/carrier`'s reactor):
//! at most `peek` bytes a call, unparsed bytes handed again, claimed bytes
//! gathered and never handed to the engine.

use switchyard_plugin_nats::{Action, Claim, ClaimTarget, Config, Connection, Message, Payload};

use crate::support::*;

const PEEK: usize = 256;
const CLAIM_FROM: usize = 64;

/// The host's side of one connection.
#[derive(Default)]
struct Host {
    pending: Vec<u8>,
    body: Option<(Claim, Vec<u8>)>,
    /// The most bytes one call was handed.
    largest_call: usize,
}

impl Host {
    /// One read; the engine's actions, claimed payloads turned into the
    /// actions the engine would have answered for a whole message.
    fn read(&mut self, conn: &mut Connection, data: &[u8]) -> Vec<Action> {
        self.pending.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            if let Some((claim, mut body)) = self.body.take() {
                let n = (claim.len - body.len()).min(self.pending.len());
                body.extend(self.pending.drain(..n));
                if body.len() < claim.len {
                    self.body = Some((claim, body));
                    break;
                }
                out.extend(landed(claim.target, body));
            }
            if self.pending.is_empty() {
                break;
            }
            let window = self.pending.len().min(PEEK);
            self.largest_call = self.largest_call.max(window);
            let intake = conn.on_read(&self.pending[..window], 1);
            assert!(intake.consumed <= window);
            self.pending.drain(..intake.consumed);
            out.extend(intake.output);
            match intake.claim {
                Some(claim) => self.body = Some((claim, Vec::new())),
                None if intake.consumed < window => break,
                None => {}
            }
        }
        out
    }
}

/// What a claimed payload becomes once whole.
fn landed(target: ClaimTarget, payload: Vec<u8>) -> Option<Action> {
    match target {
        ClaimTarget::Deliver {
            sid,
            subject,
            reply_to,
            headers,
        } => Some(Action::Deliver {
            sid,
            subject,
            reply_to,
            headers,
            payload,
        }),
        ClaimTarget::Reply {
            request_id,
            subject,
            headers,
        } => Some(Action::Reply {
            request_id,
            result: Ok(Message {
                subject,
                headers,
                payload,
            }),
        }),
        ClaimTarget::Drop => None,
    }
}

fn claiming() -> Connection {
    let config = Config {
        claim_bodies_from: Some(CLAIM_FROM),
        ..config()
    };
    let mut conn = connected_with(config, INFO);
    conn.subscribe(1, "jobs.*.progress", None).unwrap();
    conn.subscribe(2, "cache.invalidate", None).unwrap();
    conn
}

fn reading() -> Connection {
    let mut conn = connected();
    conn.subscribe(1, "jobs.*.progress", None).unwrap();
    conn.subscribe(2, "cache.invalidate", None).unwrap();
    conn
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

/// Small and large MSG and HMSG, a message for an ended sid, and pings.
fn stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(b"PING\r\nMSG jobs.1.progress 1 4\r\n50%!\r\n");
    let big = pattern(70_000, 3);
    s.extend_from_slice(format!("MSG jobs.2.progress 1 r.1 {}\r\n", big.len()).as_bytes());
    s.extend_from_slice(&big);
    s.extend_from_slice(b"\r\n");
    let header = b"NATS/1.0\r\nK: value\r\n\r\n";
    let body = pattern(5_000, 7);
    s.extend_from_slice(
        format!(
            "HMSG cache.invalidate 2 {} {}\r\n",
            header.len(),
            header.len() + body.len()
        )
        .as_bytes(),
    );
    s.extend_from_slice(header);
    s.extend_from_slice(&body);
    s.extend_from_slice(b"\r\nMSG jobs.3.progress 9 100\r\n");
    s.extend_from_slice(&pattern(100, 1));
    s.extend_from_slice(
        b"\r\nHMSG cache.invalidate 2 22 25\r\nNATS/1.0\r\nK: value\r\n\r\nabc\r\nPING\r\n",
    );
    s
}

fn split(
    conn: &mut Connection,
    host: &mut Host,
    bytes: &[u8],
    sizes: &mut impl FnMut() -> usize,
) -> Vec<Action> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = sizes().clamp(1, bytes.len() - at);
        out.extend(host.read(conn, &bytes[at..at + len]));
        at += len;
    }
    out
}

#[test]
fn claimed_payloads_arrive_byte_exact_however_the_reads_are_cut() {
    let stream = stream();
    let whole = normalise(reading().on_bytes(&stream, 1));
    assert_eq!(whole.1.len(), 4, "{:?}", whole.1);
    let mut rng = XorShift::seeded(0x5EED_CA11);
    for round in 0..200 {
        let mut conn = claiming();
        let mut host = Host::default();
        let max = [1, 7, 300, 70_000][round % 4];
        let out = split(&mut conn, &mut host, &stream, &mut || 1 + rng.below(max));
        assert_eq!(normalise(out), whole, "round {round}, reads up to {max}");
        assert!(host.largest_call <= PEEK);
        assert_eq!(conn.dropped_messages(), 1);
    }
}

#[test]
fn a_claimed_reply_completes_its_request() {
    let mut conn = claiming();
    let (id, out) = conn.request("svc.echo", b"ping", 1_000, 1).unwrap();
    let written = text(&writes(&out));
    let inbox = written
        .lines()
        .find_map(|l| l.strip_prefix("PUB svc.echo "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_string();
    let payload = pattern(1_000, 9);
    let mut frame = format!("MSG {inbox} 0 {}\r\n", payload.len()).into_bytes();
    frame.extend_from_slice(&payload);
    frame.extend_from_slice(b"\r\n");
    let mut host = Host::default();
    let out = host.read(&mut conn, &frame);
    assert_eq!(
        out,
        vec![Action::Reply {
            request_id: id,
            result: Ok(Message {
                subject: inbox,
                headers: None,
                payload,
            }),
        }]
    );
    assert_eq!(conn.pending_requests(), 0);
}

#[test]
fn a_claimed_payload_not_followed_by_crlf_fails_the_connection() {
    let mut conn = claiming();
    let mut host = Host::default();
    let mut frame = b"MSG jobs.1.progress 1 100\r\n".to_vec();
    frame.extend_from_slice(&pattern(100, 0));
    frame.extend_from_slice(b"XX");
    let out = host.read(&mut conn, &frame);
    assert!(out.contains(&Action::Close), "{out:?}");
}

#[test]
fn a_held_payload_is_written_between_its_framing() {
    let mut conn = claiming();
    let out = conn
        .publish_payload(
            "jobs.1.progress",
            None,
            None,
            Payload::Held { id: 7, len: 5 },
        )
        .unwrap();
    assert_eq!(
        out,
        vec![
            Action::Write(b"PUB jobs.1.progress 5\r\n".to_vec()),
            Action::WritePayload(7),
            Action::Write(b"\r\n".to_vec()),
        ]
    );
    let headers = vec![("K".to_string(), "v".to_string())];
    let out = conn
        .publish_payload(
            "jobs.1.progress",
            Some("r.1"),
            Some(&headers),
            Payload::Held { id: 8, len: 2 },
        )
        .unwrap();
    assert_eq!(
        out,
        vec![
            Action::Write(b"HPUB jobs.1.progress r.1 18 20\r\nNATS/1.0\r\nK: v\r\n\r\n".to_vec()),
            Action::WritePayload(8),
            Action::Write(b"\r\n".to_vec()),
        ]
    );
    let too_large = conn.publish_payload(
        "jobs.1.progress",
        None,
        None,
        Payload::Held {
            id: 9,
            len: 2 << 20,
        },
    );
    assert!(too_large.is_err());
}

#[test]
fn random_bytes_through_a_claiming_engine_never_panic() {
    let mut rng = XorShift::seeded(0xC1A1_4ED0);
    let alphabet: &[u8] = b"MSGHPINOKERF+-\r\n 0123456789.*>_{}\"abc\t";
    let stream = stream();
    for _ in 0..2000 {
        let mut conn = claiming();
        let mut host = Host::default();
        let mut bytes: Vec<u8> = (0..rng.below(400))
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        if rng.below(2) == 0 {
            let at = rng.below(stream.len());
            bytes.extend_from_slice(&stream[at..(at + 300).min(stream.len())]);
        }
        let _ = split(&mut conn, &mut host, &bytes, &mut || 1 + rng.below(64));
        assert!(host.largest_call <= PEEK);
    }
}
