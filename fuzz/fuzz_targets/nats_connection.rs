//! The NATS client engine reading whatever a server sends: the protocol
//! parser (`plugins/nats/src/parser.rs`), INFO, `-ERR`, HMSG header blocks
//! and delivery, through the public `Connection::on_bytes`.
//!
//! Input: one control byte (configuration and how to cut the stream), then
//! the bytes from the server. Invariants checked:
//! - no panic;
//! - cutting the same bytes into reads of any sizes gives the same writes,
//!   the same actions and the same end state as one read (TCP may split a
//!   stream anywhere);
//! - deliveries go only to subscribed sids, within max_payload;
//! - the heap held stays within a bound of the input's size, whatever sizes
//!   the input claims;
//! - an engine that claims payloads (`claim_bodies_from`, the carrier world
//!   0.3.0's payload bypass), fed as the host's reactor feeds it (at most
//!   `peek` bytes a call, unparsed bytes handed again, a claimed payload
//!   gathered beside the engine, spanned deliveries read out of the data
//!   each call was handed), is never handed more than `peek` bytes, and
//!   gives the same writes and deliveries as one read of a stream the
//!   plain engine read without error.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::peak_during;
use switchyard_plugin_nats::{
    Action, Auth, Claim, ClaimTarget, Config, Connection, MAX_PAYLOAD_CEILING, Message,
};

/// What one run leaves behind, with every write joined: where the reads are
/// cut changes how writes batch, never what is written.
#[derive(Debug, PartialEq)]
struct Outcome {
    written: Vec<u8>,
    actions: Vec<String>,
    state: String,
    dropped: u64,
    info: Option<String>,
}

fn config(control: u8) -> Config {
    Config {
        seed: 7,
        tls: control & 1 != 0,
        max_payload: (control & 2 != 0).then_some(64),
        auth: if control & 4 != 0 {
            Auth::Token("s3cret".into())
        } else {
            Auth::None
        },
        ..Config::default()
    }
}

/// How the bytes reach the engine.
enum Feed {
    /// `on_bytes`, in reads of this many bytes.
    Plain(usize),
    /// As the reactor feeds a claiming engine, in reads of this many bytes.
    Claiming(usize),
}

/// Payloads from this size on are claimed; small, so that short inputs
/// claim too.
const CLAIM_FROM: usize = 8;

/// The reactor's side of a claiming engine (`host/carrier/src/intake.rs`).
struct Host {
    pending: Vec<u8>,
    body: Option<(Claim, Vec<u8>)>,
    peek: usize,
}

impl Host {
    /// One read; a claimed payload, once whole, becomes the action the
    /// engine would have answered for the whole message.
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
            let window = self.pending.len().min(self.peek);
            let data = &self.pending[..window];
            let intake = conn.on_read(data, 1);
            assert!(intake.consumed <= window, "parsed more than it was handed");
            // Spans read out of this call's data, as the host reads them.
            out.extend(intake.output.into_iter().map(|a| a.owned(data)));
            self.pending.drain(..intake.consumed);
            match intake.claim {
                Some(claim) => {
                    assert!(
                        claim.len >= CLAIM_FROM,
                        "claimed a {}-byte payload",
                        claim.len
                    );
                    self.body = Some((claim, Vec::new()));
                }
                None if intake.consumed < window => break,
                None => {}
            }
        }
        out
    }
}

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

fn run(control: u8, input: &[u8], feed: Feed) -> Outcome {
    let mut config = config(control);
    if let Feed::Claiming(_) = feed {
        // As the component configures it: claims, and spans for messages
        // read whole.
        config.claim_bodies_from = Some(CLAIM_FROM);
        config.deliver_spans = true;
    }
    let mut conn = Connection::new(config).expect("valid config");
    let mut written = Vec::new();
    let mut actions = Vec::new();
    let mut take = |out: Vec<Action>| {
        for action in out {
            match action {
                Action::Write(bytes) => written.extend_from_slice(&bytes),
                Action::Deliver {
                    sid, ref payload, ..
                } => {
                    assert!((1..=3).contains(&sid), "delivered to unknown sid {sid}");
                    assert!(payload.len() <= MAX_PAYLOAD_CEILING);
                    actions.push(format!("{action:?}"));
                }
                other => actions.push(format!("{other:?}")),
            }
        }
    };
    for (sid, subject, queue) in [(1, "a.*", None), (2, "*", None), (3, "q.*", Some("g"))] {
        let out = conn.subscribe(sid, subject, queue).expect("valid sub");
        take(out);
    }
    let out = conn.unsubscribe(3, Some(2)).expect("known sid");
    take(out);
    let out = conn.on_connected(0);
    take(out);
    match feed {
        Feed::Plain(cut) => {
            for piece in input.chunks(cut.max(1)) {
                let out = conn.on_bytes(piece, 1);
                take(out);
            }
        }
        Feed::Claiming(cut) => {
            // Small windows (the component's is 64 KiB): the engine keeps
            // an unfinished line itself, so any window works.
            let mut host = Host {
                pending: Vec::new(),
                body: None,
                peek: 16 + 8 * cut,
            };
            for piece in input.chunks(cut.max(1)) {
                let out = host.read(&mut conn, piece);
                take(out);
            }
        }
    }
    Outcome {
        written,
        actions,
        state: format!("{:?}", conn.state()),
        dropped: conn.dropped_messages(),
        info: conn.server_info().map(|i| format!("{i:?}")),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let (whole, peak) = peak_during(|| run(control, input, Feed::Plain(input.len())));
    // Copies of the input (the held read, the parsed INFO, deliveries and
    // their Debug text) and a fixed allowance; never a claimed size.
    assert!(
        peak <= 64 * 1024 + 32 * input.len(),
        "held {peak} bytes for a {}-byte input",
        input.len()
    );
    let cut = usize::from(control >> 3) + 1;
    if cut < input.len() {
        let pieces = run(control, input, Feed::Plain(cut));
        assert_eq!(whole, pieces, "reads of {cut} bytes differ from one read");
    }
    let claiming = run(control, input, Feed::Claiming(cut));
    let failed = |o: &Outcome| {
        o.actions
            .iter()
            .any(|a| a.starts_with("Close") || a.starts_with("Error"))
    };
    // A claiming engine judges a message by its line, so it may fail on a
    // frame whose payload never came, which the plain engine still waits
    // for: compare only streams neither refused. And the host delivers a
    // claimed payload once its bytes are in, before the CRLF after it (which
    // the engine checks on the next read: a wrong one fails the connection):
    // so the claiming engine may have delivered one message more, last.
    if !failed(&whole) && !failed(&claiming) {
        assert_eq!(
            whole.written, claiming.written,
            "writes differ ({cut}-byte reads)"
        );
        let (plain, claimed) = (&whole.actions, &claiming.actions);
        let extra = claimed.len().checked_sub(plain.len());
        assert!(
            claimed.starts_with(plain)
                && extra.is_some_and(|n| n <= 1)
                && claimed[plain.len()..]
                    .iter()
                    .all(|a| a.starts_with("Deliver") || a.starts_with("Reply")),
            "a claiming engine fed {cut}-byte reads differs from one read:\n{plain:?}\n{claimed:?}"
        );
    }
});
