//! Losing the server and finding it again: backoff, the exact
//! resubscription bytes, stale connections, and the final close.

use switchyard_plugin_nats::{Action, CloseReason, Config, ConnectionState, Error, RequestError};

use crate::support::*;

#[test]
fn resubscribes_everything_in_one_write_with_queue_groups_and_limits() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    conn.subscribe(2, "jobs.queue", Some("workers")).unwrap();
    conn.subscribe(1, "jobs.*.progress", None).unwrap();
    conn.subscribe(5, "cache.invalidate", None).unwrap();
    conn.subscribe(7, "gone", None).unwrap();
    conn.unsubscribe(7, None).unwrap();
    conn.unsubscribe(5, Some(3)).unwrap();
    conn.on_bytes(b"MSG cache.invalidate 5 1\r\nk\r\n", 1);
    conn.request("ctl.ping", b"", 10_000, 1).unwrap();

    let out = conn.on_closed(CloseReason::PeerClosed, 2);
    assert_eq!(
        out,
        vec![
            Action::Reply {
                request_id: switchyard_plugin_nats::RequestId(1),
                result: Err(RequestError::ConnectionLost)
            },
            Action::Reconnect { after_ms: 0 }
        ]
    );
    assert_eq!(conn.state(), ConnectionState::Disconnected);
    assert_eq!(
        conn.publish("jobs.1", None, None, b"x"),
        Err(Error::NotConnected),
        "no hidden queue"
    );

    assert_eq!(conn.on_connected(3), vec![]);
    let out = conn.on_bytes(INFO, 3);
    let expected = format!(
        "{}SUB {inbox}* 0\r\nSUB jobs.*.progress 1\r\nSUB jobs.queue workers 2\r\nSUB cache.invalidate 5\r\nUNSUB 5 2\r\nPING\r\n",
        default_connect()
    );
    assert_eq!(text(&writes(&out)), expected);
    assert_eq!(out.len(), 1);
    assert_eq!(
        conn.on_bytes(b"PONG\r\n", 4),
        vec![Action::Reconnected {
            resubscribed: vec![1, 2, 5]
        }]
    );
    assert_eq!(conn.state(), ConnectionState::Connected);
    assert!(conn.publish("jobs.1", None, None, b"x").is_ok());
}

#[test]
fn subscriptions_made_while_disconnected_go_out_with_the_handshake() {
    let mut conn = switchyard_plugin_nats::Connection::new(config()).unwrap();
    assert_eq!(
        conn.subscribe(1, "jobs.*", None).unwrap(),
        vec![],
        "nothing to write yet"
    );
    conn.on_connected(0);
    let written = writes(&conn.on_bytes(INFO, 0));
    assert_eq!(
        text(&written),
        format!("{}SUB jobs.* 1\r\nPING\r\n", default_connect())
    );
    // Between CONNECT and PONG a new SUB goes straight out.
    assert_eq!(
        conn.subscribe(2, "b", None).unwrap(),
        vec![Action::Write(b"SUB b 2\r\n".to_vec())]
    );
    assert_eq!(
        conn.unsubscribe(2, None).unwrap(),
        vec![Action::Write(b"UNSUB 2\r\n".to_vec())]
    );
    assert_eq!(
        conn.on_bytes(b"PONG\r\n", 0),
        vec![Action::Connected],
        "the first handshake is not a reconnect"
    );
}

#[test]
fn backoff_doubles_until_a_handshake_succeeds() {
    let mut conn = connected();
    let mut delays = Vec::new();
    // The server is gone: every dial fails.
    for t in 0..9 {
        let out = conn.on_closed(CloseReason::Failed("connection refused".into()), t);
        let [Action::Reconnect { after_ms }] = out.as_slice() else {
            panic!("{out:?}")
        };
        delays.push(*after_ms);
    }
    assert_eq!(delays[0], 0);
    for (delay, base) in delays[1..]
        .iter()
        .zip([250, 500, 1000, 2000, 4000, 8000, 8000, 8000])
    {
        assert!(
            *delay <= base && *delay >= base * 3 / 4,
            "{delay} vs {base}: {delays:?}"
        );
    }
    assert_eq!(
        conn.last_close_reason(),
        Some(&CloseReason::Failed("connection refused".into()))
    );
    // It comes back: the next loss starts from zero again.
    handshake(&mut conn, INFO, 100);
    assert_eq!(
        conn.on_closed(CloseReason::PeerClosed, 200),
        vec![Action::Reconnect { after_ms: 0 }]
    );
}

#[test]
fn jitter_follows_the_seed() {
    let delays = |seed| {
        let mut conn = connected_with(Config { seed, ..config() }, INFO);
        (0..6)
            .map(
                |t| match conn.on_closed(CloseReason::PeerClosed, t).as_slice() {
                    [Action::Reconnect { after_ms }] => *after_ms,
                    other => panic!("{other:?}"),
                },
            )
            .collect::<Vec<_>>()
    };
    assert_eq!(delays(1), delays(1));
    assert_ne!(delays(1), delays(2));
}

#[test]
fn stale_connection_after_unanswered_pings() {
    let config = Config {
        ping_interval_ms: 1000,
        max_pings_outstanding: 2,
        ..config()
    };
    let mut conn = connected_with(config, INFO);
    assert_eq!(conn.next_deadline(), Some(1000));
    assert_eq!(conn.on_tick(999), vec![]);
    assert_eq!(
        conn.on_tick(1000),
        vec![Action::Write(b"PING\r\n".to_vec())]
    );
    // A PONG clears the count.
    assert_eq!(conn.on_bytes(b"PONG\r\n", 1500), vec![]);
    assert_eq!(
        conn.on_tick(2000),
        vec![Action::Write(b"PING\r\n".to_vec())]
    );
    assert_eq!(
        conn.on_tick(3000),
        vec![Action::Write(b"PING\r\n".to_vec())]
    );
    assert_eq!(
        conn.on_tick(4000),
        vec![Action::Error(Error::StaleConnection(2)), Action::Close]
    );
    assert_eq!(conn.state(), ConnectionState::Closing);
    assert_eq!(conn.on_tick(9000), vec![], "no PINGs while closing");
    assert_eq!(
        conn.on_closed(CloseReason::Requested, 4001),
        vec![Action::Reconnect { after_ms: 0 }]
    );
}

#[test]
fn a_new_transport_without_on_closed_starts_over() {
    let mut conn = connected();
    conn.subscribe(1, "a", None).unwrap();
    let (id, _) = conn.request("ctl.x", b"", 1000, 0).unwrap();
    let out = conn.on_connected(10);
    assert_eq!(
        out,
        vec![Action::Reply {
            request_id: id,
            result: Err(RequestError::ConnectionLost)
        }]
    );
    conn.on_bytes(INFO, 10);
    assert_eq!(
        conn.on_bytes(b"PONG\r\n", 10),
        vec![Action::Reconnected {
            resubscribed: vec![1]
        }]
    );
}

#[test]
fn close_is_final() {
    let mut conn = connected();
    conn.subscribe(1, "a", None).unwrap();
    assert_eq!(conn.close(), vec![Action::Close]);
    assert_eq!(conn.state(), ConnectionState::Closed);
    assert_eq!(conn.close(), vec![]);
    assert_eq!(
        conn.on_closed(CloseReason::Requested, 1),
        vec![],
        "no reconnect after close"
    );
    assert_eq!(conn.on_connected(2), vec![]);
    assert_eq!(conn.on_bytes(INFO, 2), vec![]);
    assert_eq!(conn.publish("a", None, None, b""), Err(Error::Closed));
    assert_eq!(conn.subscribe(2, "a", None), Err(Error::Closed));
    assert_eq!(conn.unsubscribe(1, None), Err(Error::Closed));
    assert_eq!(conn.next_deadline(), None);

    // Closing with no transport has nothing to close.
    let mut conn = switchyard_plugin_nats::Connection::new(config()).unwrap();
    assert_eq!(conn.close(), vec![]);
}
