//! Request/reply over the one wildcard inbox: correlation, no responders,
//! timeouts, and loss of the connection.

use switchyard_plugin_nats::{Action, CloseReason, Error, Message, RequestError};

use crate::support::*;

#[test]
fn first_request_subscribes_the_inbox_once() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    assert!(inbox.starts_with("_INBOX.") && inbox.ends_with('.'));
    let (id1, out) = conn.request("ctl.node1.ping", b"?", 1000, 10).unwrap();
    assert_eq!(
        writes(&out),
        format!(
            "SUB {inbox}* 0\r\nPUB ctl.node1.ping {inbox}{} 1\r\n?\r\n",
            id1.0
        )
        .into_bytes()
    );
    let (id2, out) = conn.request("ctl.node2.ping", b"", 1000, 10).unwrap();
    assert_ne!(id1, id2);
    assert_eq!(
        writes(&out),
        format!("PUB ctl.node2.ping {inbox}{} 0\r\n\r\n", id2.0).into_bytes()
    );
    assert_eq!(conn.pending_requests(), 2);
}

#[test]
fn a_request_with_headers_is_an_hpub_to_the_inbox() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    let headers = vec![("switchyard-unit-id".to_string(), "u1".to_string())];
    let (id, out) = conn
        .request_with_headers("work.probe", Some(&headers), b"x", 1000, 10)
        .unwrap();
    let written = String::from_utf8(writes(&out)).unwrap();
    let hpub = format!("HPUB work.probe {inbox}{} ", id.0);
    assert!(written.contains(&hpub), "{written}");
    assert!(written.contains("switchyard-unit-id: u1\r\n"), "{written}");
}

#[test]
fn replies_are_correlated_in_any_order() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    let (a, _) = conn.request("ctl.a", b"", 1000, 0).unwrap();
    let (b, _) = conn.request("ctl.b", b"", 1000, 0).unwrap();
    let read = format!(
        "MSG {inbox}{b} 0 6\r\nfrom-b\r\nHMSG {inbox}{a} 0 18 24\r\nNATS/1.0\r\nX: 1\r\n\r\nfrom-a\r\n",
        a = a.0,
        b = b.0
    );
    let out = conn.on_bytes(read.as_bytes(), 5);
    let [
        Action::Reply {
            request_id: rb,
            result: Ok(mb),
        },
        Action::Reply {
            request_id: ra,
            result: Ok(ma),
        },
    ] = out.as_slice()
    else {
        panic!("{out:?}")
    };
    assert_eq!((*rb, *ra), (b, a));
    assert_eq!(
        mb,
        &Message {
            subject: format!("{inbox}{}", b.0),
            headers: None,
            payload: b"from-b".to_vec()
        }
    );
    assert_eq!(ma.payload, b"from-a");
    assert_eq!(ma.headers.as_ref().unwrap().get("X"), Some("1"));
    assert_eq!(conn.pending_requests(), 0);
    // A second reply to the same request is late and only counted.
    let again = format!("MSG {inbox}{} 0 1\r\nx\r\n", a.0);
    assert_eq!(conn.on_bytes(again.as_bytes(), 6), vec![]);
    assert_eq!(conn.dropped_messages(), 1);
}

#[test]
fn no_responders_status() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    let (id, _) = conn.request("ctl.nobody", b"x", 1000, 0).unwrap();
    let read = format!("HMSG {inbox}{} 0 16 16\r\nNATS/1.0 503\r\n\r\n\r\n", id.0);
    assert_eq!(
        conn.on_bytes(read.as_bytes(), 1),
        vec![Action::Reply {
            request_id: id,
            result: Err(RequestError::NoResponders)
        }]
    );
}

#[test]
fn timeouts_are_reported_on_tick() {
    let mut conn = connected();
    let inbox = conn.inbox_prefix().to_owned();
    let (slow, _) = conn.request("ctl.slow", b"", 100, 1000).unwrap();
    let (fast, _) = conn.request("ctl.fast", b"", 50, 1000).unwrap();
    assert_eq!(conn.next_deadline(), Some(1050));
    assert_eq!(conn.on_tick(1049), vec![]);
    assert_eq!(
        conn.on_tick(1050),
        vec![Action::Reply {
            request_id: fast,
            result: Err(RequestError::TimedOut)
        }]
    );
    assert_eq!(conn.next_deadline(), Some(1100));
    assert_eq!(
        conn.on_tick(5000),
        vec![Action::Reply {
            request_id: slow,
            result: Err(RequestError::TimedOut)
        }]
    );
    // The late reply is dropped.
    let late = format!("MSG {inbox}{} 0 1\r\nx\r\n", slow.0);
    assert_eq!(conn.on_bytes(late.as_bytes(), 5001), vec![]);
    assert_eq!(conn.dropped_messages(), 1);
}

#[test]
fn losing_the_connection_fails_waiting_requests() {
    let mut conn = connected();
    let (id, _) = conn.request("ctl.x", b"", 1000, 0).unwrap();
    assert_eq!(
        conn.on_closed(CloseReason::PeerClosed, 5),
        vec![
            Action::Reply {
                request_id: id,
                result: Err(RequestError::ConnectionLost)
            },
            Action::Reconnect { after_ms: 0 }
        ]
    );
    assert_eq!(
        conn.request("ctl.x", b"", 1000, 6),
        Err(Error::NotConnected)
    );
    assert_eq!(conn.pending_requests(), 0);
}

#[test]
fn closing_fails_waiting_requests() {
    let mut conn = connected();
    let (id, _) = conn.request("ctl.x", b"", 1000, 0).unwrap();
    assert_eq!(
        conn.close(),
        vec![
            Action::Reply {
                request_id: id,
                result: Err(RequestError::ConnectionLost)
            },
            Action::Close
        ]
    );
    assert_eq!(conn.request("ctl.x", b"", 1000, 6), Err(Error::Closed));
}
