//! Publishing, subscribing and delivery: MSG/HMSG framing, sizes, PING,
//! +OK/-ERR, and the limits.

use switchyard_plugin_nats::{
    Action, Config, Error, Headers, READ_ROOM, ServerErrorKind, SubjectError, SubjectPolicy,
};

use crate::support::*;

fn deliver(
    sid: u64,
    subject: &str,
    reply_to: Option<&str>,
    headers: Option<Headers>,
    payload: &[u8],
) -> Action {
    Action::Deliver {
        sid,
        subject: subject.into(),
        reply_to: reply_to.map(Into::into),
        headers,
        payload: payload.to_vec(),
    }
}

#[test]
fn subscribe_and_unsubscribe_bytes() {
    let mut conn = connected();
    assert_eq!(
        conn.subscribe(1, "jobs.*.progress", None).unwrap(),
        vec![Action::Write(b"SUB jobs.*.progress 1\r\n".to_vec())]
    );
    assert_eq!(
        conn.subscribe(2, "jobs.queue", Some("workers")).unwrap(),
        vec![Action::Write(b"SUB jobs.queue workers 2\r\n".to_vec())]
    );
    assert_eq!(
        conn.unsubscribe(1, None).unwrap(),
        vec![Action::Write(b"UNSUB 1\r\n".to_vec())]
    );
    assert_eq!(
        conn.unsubscribe(2, Some(5)).unwrap(),
        vec![Action::Write(b"UNSUB 2 5\r\n".to_vec())]
    );
    assert_eq!(conn.unsubscribe(1, None), Err(Error::UnknownSid(1)));
    assert_eq!(conn.subscribe(0, "a", None), Err(Error::ReservedSid));
    assert_eq!(conn.subscribe(2, "a", None), Err(Error::DuplicateSid(2)));
    assert_eq!(
        conn.subscribe(3, "a", Some("bad queue")),
        Err(Error::InvalidQueueGroup("bad queue".into()))
    );
    assert_eq!(
        conn.subscribe(3, "jobs.>", None),
        Err(Error::Subject(SubjectError::FullWildcard("jobs.>".into())))
    );
}

#[test]
fn msg_split_at_every_byte() {
    let frame = b"MSG jobs.7.progress 1 _INBOX.r.1 5\r\nhello\r\n";
    for cut in 0..=frame.len() {
        let mut conn = connected();
        conn.subscribe(1, "jobs.*.progress", None).unwrap();
        let out = feed_split(&mut conn, frame, cut, 1);
        assert_eq!(
            out,
            vec![deliver(
                1,
                "jobs.7.progress",
                Some("_INBOX.r.1"),
                None,
                b"hello"
            )],
            "cut at {cut}"
        );
    }
}

#[test]
fn hmsg_split_at_every_byte() {
    let block = b"NATS/1.0\r\nTrace: t-1\r\nTrace: t-2\r\n\r\n";
    let mut frame = format!(
        "HMSG cache.invalidate 4 {} {}\r\n",
        block.len(),
        block.len() + 3
    )
    .into_bytes();
    frame.extend_from_slice(block);
    frame.extend_from_slice(b"key\r\n");
    let headers = Headers {
        entries: vec![
            ("Trace".into(), "t-1".into()),
            ("Trace".into(), "t-2".into()),
        ],
        ..Headers::default()
    };
    for cut in 0..=frame.len() {
        let mut conn = connected();
        conn.subscribe(4, "cache.invalidate", None).unwrap();
        let out = feed_split(&mut conn, &frame, cut, 1);
        assert_eq!(
            out,
            vec![deliver(
                4,
                "cache.invalidate",
                None,
                Some(headers.clone()),
                b"key"
            )],
            "cut at {cut}"
        );
    }
}

#[test]
fn byte_by_byte_stream_of_mixed_frames() {
    let mut conn = connected();
    conn.subscribe(1, "a", None).unwrap();
    let stream =
        b"PING\r\nMSG a 1 2\r\nhi\r\n+OK\r\nHMSG a 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\nPONG\r\n";
    let mut out = Vec::new();
    for b in stream.chunks(1) {
        out.extend(conn.on_bytes(b, 1));
    }
    let status = Headers {
        status: Some(503),
        ..Headers::default()
    };
    assert_eq!(
        out,
        vec![
            Action::Write(b"PONG\r\n".to_vec()),
            deliver(1, "a", None, None, b"hi"),
            deliver(1, "a", None, Some(status), b""),
        ]
    );
}

#[test]
fn many_frames_in_one_read_give_one_write() {
    let mut conn = connected();
    conn.subscribe(1, "a.*", None).unwrap();
    conn.subscribe(2, "b", Some("q")).unwrap();
    let read = b"MSG a.1 1 1\r\nx\r\nPING\r\n+OK\r\nMSG b 2 r 0\r\n\r\nPING\r\nMSG a.2 1 3\r\nxyz\r\nMSG a.3 1 1\r\n";
    let out = conn.on_bytes(read, 1);
    assert_eq!(
        out,
        vec![
            Action::Write(b"PONG\r\nPONG\r\n".to_vec()),
            deliver(1, "a.1", None, None, b"x"),
            deliver(2, "b", Some("r"), None, b""),
            deliver(1, "a.2", None, None, b"xyz"),
        ]
    );
    // The frame cut off at the end completes with the next reads.
    assert_eq!(conn.on_bytes(b"y", 1), vec![]);
    assert_eq!(
        conn.on_bytes(b"\r\nPING\r\n", 1),
        vec![
            Action::Write(b"PONG\r\n".to_vec()),
            deliver(1, "a.3", None, None, b"y")
        ]
    );
}

#[test]
fn payload_sizes_round_trip() {
    for size in [1usize, 7999, 8000, 65536] {
        let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let mut conn = connected();
        let out = conn
            .publish("jobs.big", Some("_INBOX.x.1"), None, &payload)
            .unwrap();
        let mut expected = format!("PUB jobs.big _INBOX.x.1 {size}\r\n").into_bytes();
        expected.extend_from_slice(&payload);
        expected.extend_from_slice(b"\r\n");
        assert_eq!(out, vec![Action::Write(expected)], "size {size}");

        conn.subscribe(1, "jobs.big", None).unwrap();
        let mut frame = format!("MSG jobs.big 1 {size}\r\n").into_bytes();
        frame.extend_from_slice(&payload);
        frame.extend_from_slice(b"\r\n");
        // Whole, and in uneven reads.
        assert_eq!(
            conn.on_bytes(&frame, 1),
            vec![deliver(1, "jobs.big", None, None, &payload)]
        );
        let mut out = Vec::new();
        for chunk in frame.chunks(1000 + size % 7) {
            out.extend(conn.on_bytes(chunk, 1));
        }
        assert_eq!(
            out,
            vec![deliver(1, "jobs.big", None, None, &payload)],
            "size {size} in chunks"
        );
    }
}

#[test]
fn hpub_bytes() {
    let mut conn = connected();
    let h = vec![("Switchyard-Epoch".to_string(), "7".to_string())];
    let out = conn
        .publish("cache.invalidate", None, Some(&h), b"k1")
        .unwrap();
    assert_eq!(
        out,
        vec![Action::Write(
            b"HPUB cache.invalidate 33 35\r\nNATS/1.0\r\nSwitchyard-Epoch: 7\r\n\r\nk1\r\n"
                .to_vec()
        )]
    );
    let bad = vec![("Bad Name".to_string(), "x".to_string())];
    assert!(matches!(
        conn.publish("a", None, Some(&bad), b""),
        Err(Error::Header(_))
    ));
}

#[test]
fn max_payload_is_refused_before_writing() {
    let info = b"INFO {\"server_id\":\"S\",\"headers\":true,\"max_payload\":1024}\r\n";
    let mut conn = connected_with(config(), info);
    assert_eq!(conn.max_payload(), 1024);
    assert!(conn.publish("a", None, None, &[0; 1024]).is_ok());
    assert_eq!(
        conn.publish("a", None, None, &[0; 1025]),
        Err(Error::PayloadTooLarge {
            size: 1025,
            max: 1024
        })
    );
    // Headers count towards the limit.
    let h = vec![("K".to_string(), "v".to_string())];
    assert_eq!(
        conn.publish("a", None, Some(&h), &[0; 1010]),
        Err(Error::PayloadTooLarge {
            size: 1028,
            max: 1024
        })
    );
    assert!(matches!(
        conn.request("a", &[0; 1025], 100, 0),
        Err(Error::PayloadTooLarge { .. })
    ));
    assert_eq!(conn.pending_requests(), 0);

    // The carrier's own cap applies below the server's.
    let mut conn = connected_with(
        Config {
            max_payload: Some(100),
            ..config()
        },
        INFO,
    );
    assert_eq!(
        conn.publish("a", None, None, &[0; 101]),
        Err(Error::PayloadTooLarge {
            size: 101,
            max: 100
        })
    );

    // A MSG larger than the server's max_payload is a protocol fault, seen
    // from its line alone.
    let mut conn = connected_with(config(), info);
    conn.subscribe(1, "a", None).unwrap();
    let out = conn.on_bytes(b"MSG a 1 1025\r\n", 1);
    assert!(
        matches!(out.as_slice(), [Action::Error(Error::Protocol(m)), Action::Close] if m.contains("max_payload")),
        "{out:?}"
    );
}

#[test]
fn unfinished_line_past_the_read_limit_is_refused() {
    let info = b"INFO {\"server_id\":\"S\",\"max_payload\":1024}\r\n";
    let mut conn = connected_with(config(), info);
    // A line with no end: the parser refuses it at its own line limit
    // before the buffer limit, which is max_payload + READ_ROOM.
    let out = conn.on_bytes(&vec![b'M'; 1024 + READ_ROOM + 1], 1);
    assert!(
        matches!(
            out.as_slice(),
            [Action::Error(Error::Protocol(_)), Action::Close]
        ),
        "{out:?}"
    );
}

#[test]
fn server_ping_gets_pong_and_ok_is_ignored() {
    let mut conn = connected();
    assert_eq!(
        conn.on_bytes(b"PING\r\n", 1),
        vec![Action::Write(b"PONG\r\n".to_vec())]
    );
    assert_eq!(conn.on_bytes(b"+OK\r\n", 1), vec![]);
    assert_eq!(conn.on_bytes(b"PONG\r\n", 1), vec![]);
}

#[test]
fn permissions_violation_is_not_fatal() {
    let mut conn = connected();
    let out = conn.on_bytes(
        b"-ERR 'Permissions Violation for Publish to \"jobs.1\"'\r\nPING\r\n",
        1,
    );
    let [Action::Write(w), Action::Error(Error::Server(e))] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(w, b"PONG\r\n");
    assert_eq!(e.kind, ServerErrorKind::PermissionsViolation);
    assert!(!e.is_fatal());
    assert!(
        conn.publish("jobs.2", None, None, b"").is_ok(),
        "still connected"
    );

    let out = conn.on_bytes(b"-ERR 'Maximum Payload Violation'\r\n", 1);
    assert!(
        matches!(out.as_slice(), [Action::Error(Error::Server(e)), Action::Close] if e.is_fatal()),
        "{out:?}"
    );
    assert_eq!(
        conn.publish("jobs.2", None, None, b""),
        Err(Error::NotConnected)
    );
}

#[test]
fn messages_for_ended_subscriptions_are_counted_not_delivered() {
    let mut conn = connected();
    conn.subscribe(1, "a", None).unwrap();
    conn.unsubscribe(1, None).unwrap();
    assert_eq!(
        conn.on_bytes(b"MSG a 1 1\r\nx\r\nMSG a 9 1\r\nx\r\n", 1),
        vec![]
    );
    assert_eq!(conn.dropped_messages(), 2);

    // Auto-unsubscribe after two messages in total.
    conn.subscribe(2, "b", None).unwrap();
    conn.unsubscribe(2, Some(2)).unwrap();
    let out = conn.on_bytes(b"MSG b 2 1\r\n1\r\nMSG b 2 1\r\n2\r\nMSG b 2 1\r\n3\r\n", 1);
    assert_eq!(
        out,
        vec![
            deliver(2, "b", None, None, b"1"),
            deliver(2, "b", None, None, b"2")
        ]
    );
    assert_eq!(conn.subscription_count(), 0);
}

#[test]
fn malformed_headers_skip_the_message_but_keep_the_connection() {
    let mut conn = connected();
    conn.subscribe(1, "a", None).unwrap();
    let out = conn.on_bytes(b"HMSG a 1 7 8\r\nBAD\r\n\r\nx\r\nMSG a 1 1\r\ny\r\n", 1);
    assert!(
        matches!(
            out.as_slice(),
            [Action::Error(Error::Header(_)), Action::Deliver { .. }]
        ),
        "{out:?}"
    );
}

#[test]
fn garbage_is_a_protocol_error() {
    let mut conn = connected();
    let out = conn.on_bytes(b"PING\r\nHELLO world\r\nPING\r\n", 1);
    assert!(
        matches!(out.as_slice(), [Action::Write(w), Action::Error(Error::Protocol(m)), Action::Close] if w == b"PONG\r\n" && m.contains("HELLO")),
        "{out:?}"
    );
}

#[test]
fn subject_policy_and_rules_refuse_before_writing() {
    let policy = SubjectPolicy::with_roots(["jobs.", "cache.", "_INBOX."]).unwrap();
    let mut conn = connected_with(
        Config {
            subject_policy: policy,
            ..config()
        },
        INFO,
    );
    assert!(conn.publish("jobs.1", None, None, b"").is_ok());
    assert!(matches!(
        conn.publish("other.1", None, None, b""),
        Err(Error::Subject(SubjectError::NotAllowed { .. }))
    ));
    assert!(matches!(
        conn.publish("jobs.1", Some("other.r"), None, b""),
        Err(Error::Subject(SubjectError::NotAllowed { .. }))
    ));
    assert!(matches!(
        conn.publish("jobs.*", None, None, b""),
        Err(Error::Subject(SubjectError::WildcardNotAllowed(_)))
    ));
    assert!(matches!(
        conn.publish("jobs. 1", None, None, b""),
        Err(Error::Subject(SubjectError::Whitespace(_)))
    ));
    assert!(matches!(
        conn.subscribe(1, "*.progress", None),
        Err(Error::Subject(SubjectError::NotAllowed { .. }))
    ));
    assert!(conn.subscribe(1, "jobs.*.progress", None).is_ok());
    // The request inbox is the engine's own and needs no root.
    let mut conn = connected_with(
        Config {
            subject_policy: SubjectPolicy::with_roots(["jobs."]).unwrap(),
            ..config()
        },
        INFO,
    );
    assert!(conn.request("jobs.ctl", b"", 100, 0).is_ok());
    let long = format!("jobs.{}", "x".repeat(5000));
    assert!(matches!(
        conn.publish(&long, None, None, b""),
        Err(Error::ControlLineTooLong { .. })
    ));
    assert!(matches!(
        conn.subscribe(9, &long, None),
        Err(Error::ControlLineTooLong { .. })
    ));
}
