//! Shared helpers: a connected engine, and the bytes and actions it produced.

use switchyard_plugin_nats::{Action, Config, Connection, VERSION};

/// A typical INFO from a nats-server 2.10 without auth.
pub const INFO: &[u8] = b"INFO {\"server_id\":\"NSERVER1\",\"server_name\":\"n1\",\"version\":\"2.10.7\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"client_id\":3}\r\n";

/// The CONNECT this engine writes with the default configuration.
pub fn default_connect() -> String {
    format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"lang\":\"rust\",\"version\":\"{VERSION}\",\"protocol\":1,\"echo\":true,\"headers\":true,\"no_responders\":true}}\r\n"
    )
}

pub fn config() -> Config {
    Config {
        seed: 42,
        ..Config::default()
    }
}

/// A connection through a complete first handshake at t=0.
pub fn connected() -> Connection {
    connected_with(config(), INFO)
}

pub fn connected_with(config: Config, info: &[u8]) -> Connection {
    let mut conn = Connection::new(config).expect("valid config");
    handshake(&mut conn, info, 0);
    conn
}

/// Runs one handshake and asserts it ends with Connected or Reconnected.
pub fn handshake(conn: &mut Connection, info: &[u8], now: u64) -> Vec<u8> {
    assert_eq!(conn.on_connected(now), vec![]);
    let out = conn.on_bytes(info, now);
    let written = writes(&out);
    assert!(written.starts_with(b"CONNECT {"), "{}", text(&written));
    let out = conn.on_bytes(b"PONG\r\n", now);
    assert!(
        matches!(
            out.as_slice(),
            [Action::Connected] | [Action::Reconnected { .. }]
        ),
        "{out:?}"
    );
    written
}

/// The bytes of the batch's Write, asserting there is at most one and that
/// it comes first.
pub fn writes(out: &[Action]) -> Vec<u8> {
    let count = out.iter().filter(|a| matches!(a, Action::Write(_))).count();
    assert!(count <= 1, "one write per call: {out:?}");
    match out.first() {
        Some(Action::Write(bytes)) => bytes.clone(),
        _ => {
            assert_eq!(count, 0, "the write comes first: {out:?}");
            Vec::new()
        }
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Feeds `bytes` cut at `cut` (two reads), collecting every action.
pub fn feed_split(conn: &mut Connection, bytes: &[u8], cut: usize, now: u64) -> Vec<Action> {
    let mut out = conn.on_bytes(&bytes[..cut], now);
    out.extend(conn.on_bytes(&bytes[cut..], now));
    out
}

/// Actions with the writes merged, so batches from different splits compare.
pub fn normalise(out: Vec<Action>) -> (Vec<u8>, Vec<Action>) {
    let mut written = Vec::new();
    let mut rest = Vec::new();
    for action in out {
        match action {
            Action::Write(bytes) => written.extend(bytes),
            other => rest.push(other),
        }
    }
    (written, rest)
}

/// The engine's own generator, with the `usize` helpers the tests want.
pub struct XorShift(switchyard_carrier_kit::rng::XorShift);

impl XorShift {
    pub fn seeded(seed: u64) -> Self {
        Self(switchyard_carrier_kit::rng::XorShift::new(seed))
    }

    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
}
