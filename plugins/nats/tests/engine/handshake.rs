//! INFO → CONNECT → PING/PONG, credentials, and what ends a handshake.

use data_encoding::BASE64URL_NOPAD;
use nkeys::{KeyPair, KeyPairType};
use serde_json::Value;
use switchyard_plugin_nats::{
    Action, Auth, CloseReason, Config, Connection, ConnectionState, Error, ServerErrorKind,
};

use crate::support::*;

/// The JSON of the CONNECT in a handshake write.
fn connect_json(written: &[u8]) -> Value {
    let line = written.split(|&b| b == b'\n').next().unwrap();
    let json = line
        .strip_prefix(b"CONNECT ")
        .unwrap()
        .strip_suffix(b"\r")
        .unwrap();
    serde_json::from_slice(json).unwrap()
}

fn info_with_nonce(nonce: &str) -> Vec<u8> {
    format!("INFO {{\"server_id\":\"S\",\"headers\":true,\"auth_required\":true,\"nonce\":\"{nonce}\"}}\r\n").into_bytes()
}

fn user_seed(byte: u8) -> String {
    KeyPair::new_from_raw(KeyPairType::User, [byte; 32])
        .unwrap()
        .seed()
        .unwrap()
}

#[test]
fn connect_and_ping_in_one_write_then_connected_on_pong() {
    let mut conn = Connection::new(config()).unwrap();
    assert_eq!(conn.state(), ConnectionState::Idle);
    assert_eq!(conn.on_connected(0), vec![]);
    assert_eq!(conn.state(), ConnectionState::Handshaking);
    let out = conn.on_bytes(INFO, 1);
    assert_eq!(
        out,
        vec![Action::Write(
            format!("{}PING\r\n", default_connect()).into_bytes()
        )]
    );
    assert_eq!(
        conn.publish("a", None, None, b"x"),
        Err(Error::NotConnected),
        "not before PONG"
    );
    assert_eq!(conn.on_bytes(b"PONG\r\n", 2), vec![Action::Connected]);
    assert_eq!(conn.state(), ConnectionState::Connected);
    let info = conn.server_info().unwrap();
    assert_eq!(
        (info.server_id.as_str(), info.max_payload, info.headers),
        ("NSERVER1", 1_048_576, true)
    );
}

#[test]
fn info_split_at_every_byte() {
    let expected = format!("{}PING\r\n", default_connect()).into_bytes();
    for cut in 0..=INFO.len() {
        let mut conn = Connection::new(config()).unwrap();
        conn.on_connected(0);
        let out = feed_split(&mut conn, INFO, cut, 0);
        assert_eq!(out, vec![Action::Write(expected.clone())], "cut at {cut}");
    }
}

#[test]
fn info_pong_and_more_in_one_read() {
    let mut conn = Connection::new(config()).unwrap();
    conn.on_connected(0);
    // A server that answers the PING before we even wrote it is impossible,
    // but INFO followed by PING in one read is common.
    let mut read = INFO.to_vec();
    read.extend_from_slice(b"PING\r\n");
    let out = conn.on_bytes(&read, 0);
    assert_eq!(
        out,
        vec![Action::Write(
            format!("{}PING\r\nPONG\r\n", default_connect()).into_bytes()
        )]
    );
}

#[test]
fn connect_fields_for_name_and_no_headers_server() {
    let config = Config {
        name: Some("replica-1".into()),
        echo: false,
        ..config()
    };
    let mut conn = Connection::new(config).unwrap();
    conn.on_connected(0);
    let out = conn.on_bytes(b"INFO {\"server_id\":\"old\"}\r\n", 0);
    let json = connect_json(&writes(&out));
    assert_eq!(json["name"], "replica-1");
    assert_eq!(json["echo"], false);
    assert_eq!(json["headers"], true);
    assert_eq!(
        json["no_responders"], false,
        "an old server refuses no_responders"
    );
    assert_eq!(json["protocol"], 1);
    assert_eq!(json["verbose"], false);
    assert_eq!(json["pedantic"], false);
    conn.on_bytes(b"PONG\r\n", 0);
    let h = vec![("a".to_string(), "b".to_string())];
    assert_eq!(
        conn.publish("x", None, Some(&h), b""),
        Err(Error::HeadersNotSupported)
    );
}

#[test]
fn user_password_and_token() {
    let cases = [
        (
            Auth::UserPassword {
                user: "svc".into(),
                password: "pw".into(),
            },
            "user",
            "svc",
        ),
        (Auth::Token("t0k".into()), "auth_token", "t0k"),
    ];
    for (auth, field, value) in cases {
        let mut conn = Connection::new(Config { auth, ..config() }).unwrap();
        conn.on_connected(0);
        let json = connect_json(&writes(&conn.on_bytes(INFO, 0)));
        assert_eq!(json[field], value);
        if field == "user" {
            assert_eq!(json["pass"], "pw");
        }
        assert!(json.get("sig").is_none());
    }
}

#[test]
fn nkey_signature_verifies_with_the_public_key() {
    let seed = user_seed(9);
    let mut conn = Connection::new(Config {
        auth: Auth::NKey { seed: seed.clone() },
        ..config()
    })
    .unwrap();
    conn.on_connected(0);
    let json = connect_json(&writes(
        &conn.on_bytes(&info_with_nonce("WyMfZ0rlR9Tq5Xw"), 0),
    ));
    let public = json["nkey"].as_str().unwrap();
    assert_eq!(public, KeyPair::from_seed(&seed).unwrap().public_key());
    let sig = json["sig"].as_str().unwrap();
    assert!(
        !sig.contains('=') && !sig.contains('+') && !sig.contains('/'),
        "base64url without padding: {sig}"
    );
    let sig = BASE64URL_NOPAD.decode(sig.as_bytes()).unwrap();
    let verifier = KeyPair::from_public_key(public).unwrap();
    verifier
        .verify(b"WyMfZ0rlR9Tq5Xw", &sig)
        .expect("valid signature over the nonce");
    assert!(verifier.verify(b"another nonce", &sig).is_err());
}

#[test]
fn jwt_credentials_send_the_jwt_and_sign_with_the_seed() {
    let seed = user_seed(3);
    let creds = format!(
        "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.c2ln\n------END NATS USER JWT------\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
    );
    let auth = Auth::from_creds(&creds).unwrap();
    let mut conn = Connection::new(Config { auth, ..config() }).unwrap();
    conn.on_connected(0);
    let json = connect_json(&writes(&conn.on_bytes(&info_with_nonce("abc"), 0)));
    assert_eq!(json["jwt"], "eyJ0eXAiOiJKV1QifQ.e30.c2ln");
    assert!(json.get("nkey").is_none(), "the JWT names the key");
    let sig = BASE64URL_NOPAD
        .decode(json["sig"].as_str().unwrap().as_bytes())
        .unwrap();
    KeyPair::from_seed(&seed)
        .unwrap()
        .verify(b"abc", &sig)
        .unwrap();
}

#[test]
fn bad_seed_is_refused_at_construction() {
    let err = Connection::new(Config {
        auth: Auth::NKey {
            seed: "SUXXXX".into(),
        },
        ..config()
    })
    .unwrap_err();
    assert!(matches!(err, Error::InvalidAuth(_)), "{err}");
}

#[test]
fn authorization_violation_closes_and_then_backs_off() {
    let mut conn = Connection::new(config()).unwrap();
    conn.on_connected(0);
    conn.on_bytes(INFO, 0);
    let out = conn.on_bytes(b"-ERR 'Authorization Violation'\r\n", 1);
    let [Action::Error(Error::Server(e)), Action::Close] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(e.kind, ServerErrorKind::AuthorizationViolation);
    assert_eq!(e.message, "Authorization Violation");
    assert_eq!(conn.state(), ConnectionState::Closing);
    assert_eq!(
        conn.on_bytes(b"PONG\r\n", 1),
        vec![],
        "nothing is read while closing"
    );
    assert_eq!(
        conn.on_closed(CloseReason::Requested, 2),
        vec![Action::Reconnect { after_ms: 0 }]
    );
    // The handshake never completed, so the backoff grows.
    conn.on_connected(3);
    conn.on_bytes(INFO, 3);
    conn.on_bytes(b"-ERR 'Authorization Violation'\r\n", 3);
    let out = conn.on_closed(CloseReason::PeerClosed, 4);
    let [Action::Reconnect { after_ms }] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert!((188..=250).contains(after_ms), "{after_ms}");
}

#[test]
fn tls_required_is_refused_on_plain_transport() {
    let mut conn = Connection::new(config()).unwrap();
    conn.on_connected(0);
    let out = conn.on_bytes(b"INFO {\"tls_required\":true}\r\n", 0);
    assert_eq!(out, vec![Action::Error(Error::TlsRequired), Action::Close]);

    let mut conn = Connection::new(Config {
        tls: true,
        ..config()
    })
    .unwrap();
    conn.on_connected(0);
    let json = connect_json(&writes(
        &conn.on_bytes(b"INFO {\"tls_required\":true}\r\n", 0),
    ));
    assert_eq!(json["tls_required"], true);
}

#[test]
fn handshake_timeout() {
    let mut conn = Connection::new(Config {
        handshake_timeout_ms: 1000,
        ..config()
    })
    .unwrap();
    conn.on_connected(100);
    assert_eq!(conn.next_deadline(), Some(1100));
    assert_eq!(conn.on_tick(1099), vec![]);
    conn.on_bytes(INFO, 500);
    assert_eq!(
        conn.on_tick(1100),
        vec![Action::Error(Error::HandshakeTimeout(1000)), Action::Close]
    );
}

#[test]
fn messages_before_info_are_a_protocol_error() {
    let mut conn = Connection::new(config()).unwrap();
    conn.on_connected(0);
    let out = conn.on_bytes(b"MSG a 1 1\r\nx\r\n", 0);
    assert!(
        matches!(
            out.as_slice(),
            [Action::Error(Error::Protocol(_)), Action::Close]
        ),
        "{out:?}"
    );
}
