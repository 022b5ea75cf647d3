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
//!   the input claims.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::peak_during;
use switchyard_plugin_nats::{Action, Auth, Config, Connection, MAX_PAYLOAD_CEILING};

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

fn run(control: u8, input: &[u8], cut: usize) -> Outcome {
    let mut conn = Connection::new(config(control)).expect("valid config");
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
    for piece in input.chunks(cut.max(1)) {
        let out = conn.on_bytes(piece, 1);
        take(out);
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
    let (whole, peak) = peak_during(|| run(control, input, input.len()));
    // Copies of the input (the held read, the parsed INFO, deliveries and
    // their Debug text) and a fixed allowance; never a claimed size.
    assert!(
        peak <= 64 * 1024 + 32 * input.len(),
        "held {peak} bytes for a {}-byte input",
        input.len()
    );
    let cut = usize::from(control >> 3) + 1;
    if cut < input.len() {
        let pieces = run(control, input, cut);
        assert_eq!(whole, pieces, "reads of {cut} bytes differ from one read");
    }
});
