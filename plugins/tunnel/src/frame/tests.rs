//! Frames encoded and decoded, split reads and every refusal.

use super::*;

/// Encodes `frame` into a whole message (a DATA body of `0xab`s) and
/// decodes it back, whole and split.
fn round_trip(frame: Frame<'_>) {
    let mut message = frame.encode();
    assert_eq!(message.len(), HEADER_LEN + frame.payload_len());
    let body_len = match frame {
        Frame::Data { len, .. } => len,
        _ => 0,
    };
    message.resize(message.len() + body_len, 0xab);
    assert_eq!(Frame::decode(&message).as_ref(), Ok(&frame));
    let (header, body) = BODY_RULE.split(&message);
    assert_eq!(body.len(), body_len);
    assert_eq!(Frame::decode_split(header, body.len()), Ok(frame));
}

#[test]
fn every_kind_round_trips() {
    let s = StreamId(7);
    round_trip(Frame::Hello {
        side: Side::Worker,
        lane: Lane::Bulk,
    });
    round_trip(Frame::Open {
        stream: s,
        service: "inference",
    });
    round_trip(Frame::Reply {
        stream: s,
        result: Ok(()),
    });
    for refusal in [
        Refusal::UnknownService,
        Refusal::ServiceRefused("no models loaded".into()),
        Refusal::ServiceRefused(String::new()),
        Refusal::Overloaded,
    ] {
        round_trip(Frame::Reply {
            stream: s,
            result: Err(refusal),
        });
    }
    round_trip(Frame::Data { stream: s, len: 0 });
    round_trip(Frame::Data {
        stream: s,
        len: MAX_FRAME_PAYLOAD,
    });
    round_trip(Frame::Window {
        stream: s,
        increment: u32::MAX,
    });
    round_trip(Frame::Fin { stream: s });
    for reason in [
        ResetReason::Cancelled,
        ResetReason::WindowOverrun,
        ResetReason::Protocol,
    ] {
        round_trip(Frame::Reset { stream: s, reason });
    }
    round_trip(Frame::Ping { nonce: 42 });
    round_trip(Frame::Pong { nonce: u64::MAX });
}

#[test]
fn layout_is_as_documented() {
    let open = Frame::Open {
        stream: StreamId(0x0102_0305),
        service: "ab",
    };
    assert_eq!(open.encode(), [1, 2, 3, 5, 1, b'a', b'b']);
    let hello = Frame::Hello {
        side: Side::Frontend,
        lane: Lane::Inference,
    };
    assert_eq!(hello.encode(), [0, 0, 0, 0, 0, 1, 1, 1]);
    let window = Frame::Window {
        stream: StreamId(2),
        increment: 0x10000,
    };
    assert_eq!(window.encode(), [0, 0, 0, 2, 4, 0, 1, 0, 0]);
    let data = Frame::Data {
        stream: StreamId(9),
        len: 3,
    };
    assert_eq!(data.encode(), [0, 0, 0, 9, 3], "the body is not encoded");
}

#[test]
fn malformed_frames_are_refused() {
    use FrameError::*;
    let cases: &[(&[u8], FrameError)] = &[
        (&[], Truncated(0)),
        (&[0, 0, 0, 1], Truncated(4)),
        (&[0, 0, 0, 1, 9], UnknownKind(9)),
        (&[0, 0, 0, 1, 255, 1], UnknownKind(255)),
        (&[0, 0, 0, 0, 0, 2, 1, 1], UnsupportedVersion(2)),
        (&[0, 0, 0, 0, 0], bad(Kind::Hello, "missing version")),
        (
            &[0, 0, 0, 0, 0, 1, 1],
            bad(Kind::Hello, "expected version, side and lane"),
        ),
        (&[0, 0, 0, 0, 0, 1, 3, 1], bad(Kind::Hello, "unknown side")),
        (&[0, 0, 0, 0, 0, 1, 1, 0], bad(Kind::Hello, "unknown lane")),
        (
            &[0, 0, 0, 1, 0, 1, 1, 1],
            BadStreamId {
                kind: Kind::Hello,
                stream: 1,
            },
        ),
        (
            &[0, 0, 0, 0, 3, 1],
            BadStreamId {
                kind: Kind::Data,
                stream: 0,
            },
        ),
        (
            &[0, 0, 0, 1, 1],
            bad(Kind::Open, "service name must be 1 to 255 bytes"),
        ),
        (
            &[0, 0, 0, 1, 1, 0xff, 0xfe],
            bad(Kind::Open, "service is not UTF-8"),
        ),
        (&[0, 0, 0, 1, 2], bad(Kind::Reply, "missing status")),
        (&[0, 0, 0, 1, 2, 4], bad(Kind::Reply, "unknown status")),
        (
            &[0, 0, 0, 1, 2, 0, b'x'],
            bad(Kind::Reply, "only a service refusal carries a message"),
        ),
        (
            &[0, 0, 0, 1, 2, 2, 0xc3],
            bad(Kind::Reply, "refusal message is not UTF-8"),
        ),
        (
            &[0, 0, 0, 1, 4, 0, 0, 1],
            bad(Kind::Window, "expected 4 bytes"),
        ),
        (
            &[0, 0, 0, 1, 4, 0, 0, 0, 0],
            bad(Kind::Window, "increment must not be 0"),
        ),
        (&[0, 0, 0, 1, 5, 0], bad(Kind::Fin, "expected no payload")),
        (
            &[0, 0, 0, 1, 6, 4],
            bad(Kind::Reset, "expected one known reason byte"),
        ),
        (
            &[0, 0, 0, 1, 6],
            bad(Kind::Reset, "expected one known reason byte"),
        ),
        (
            &[0, 0, 0, 0, 7, 1, 2, 3],
            bad(Kind::Ping, "expected 8 bytes"),
        ),
        (&[0, 0, 0, 0, 8], bad(Kind::Pong, "expected 8 bytes")),
    ];
    for (bytes, error) in cases {
        assert_eq!(Frame::decode(bytes).as_ref(), Err(error), "{bytes:?}");
    }
    let too_long = vec![0u8; MAX_FRAME_LEN + 1];
    assert_eq!(Frame::decode(&too_long), Err(TooLong(MAX_FRAME_LEN + 1)));
    let data_header = [0, 0, 0, 1, 3];
    assert_eq!(
        Frame::decode_split(&data_header, MAX_FRAME_PAYLOAD + 1),
        Err(TooLong(MAX_FRAME_LEN + 1))
    );
    assert_eq!(
        Frame::decode_split(&data_header, usize::MAX),
        Err(TooLong(usize::MAX))
    );
    let mut long_service = vec![0, 0, 0, 1, 1];
    long_service.extend(std::iter::repeat_n(b'a', MAX_SERVICE_LEN + 1));
    assert!(Frame::decode(&long_service).is_err());
}

#[test]
fn the_body_rule_splits_data_only() {
    let data = [0, 0, 0, 1, 3, b'h', b'i'];
    assert_eq!(BODY_RULE.split(&data), (&data[..5], &data[5..]));
    let empty_data = [0, 0, 0, 1, 3];
    assert_eq!(BODY_RULE.split(&empty_data), (&empty_data[..], &[][..]));
    let window = [0, 0, 0, 1, 4, 0, 0, 0, 1];
    assert_eq!(BODY_RULE.split(&window), (&window[..], &[][..]));
    let short = [0, 0, 0, 3];
    assert_eq!(BODY_RULE.split(&short), (&short[..], &[][..]));
}

#[test]
fn a_split_the_rule_would_not_make_is_refused() {
    let cases: &[(&[u8], usize)] = &[
        // A DATA message handed over whole.
        (&[0, 0, 0, 1, 3, b'x'], 0),
        // A DATA header that kept a byte of its body.
        (&[0, 0, 0, 1, 3, b'x'], 4),
        // A body on a kind without one.
        (&[0, 0, 0, 1, 5], 1),
        (&[0, 0, 0, 1, 4, 0, 0, 0, 1], 2),
        // A body behind less than a header.
        (&[0, 0, 0], 2),
    ];
    for &(header, body_len) in cases {
        assert_eq!(
            Frame::decode_split(header, body_len),
            Err(FrameError::BadSplit {
                header_len: header.len(),
                body_len
            }),
            "{header:?} + {body_len}"
        );
    }
    assert_eq!(
        Frame::decode_split(&[0, 0, 0, 1, 3], 4),
        Ok(Frame::Data {
            stream: StreamId(1),
            len: 4
        })
    );
}

#[test]
fn reset_reason_names_are_stable() {
    let names = [
        ResetReason::Cancelled,
        ResetReason::WindowOverrun,
        ResetReason::Protocol,
        ResetReason::SessionEnded,
    ]
    .map(ResetReason::name);
    assert_eq!(
        names,
        ["cancelled", "window overrun", "protocol", "session ended"]
    );
}

#[test]
fn local_only_codes_do_not_decode() {
    let reply = Frame::Reply {
        stream: StreamId(1),
        result: Err(Refusal::NotDelivered),
    };
    assert!(Frame::decode(&reply.encode()).is_err());
    let reset = Frame::Reset {
        stream: StreamId(1),
        reason: ResetReason::SessionEnded,
    };
    assert!(Frame::decode(&reset.encode()).is_err());
}

#[test]
fn refusal_messages_are_cut_at_a_character_boundary() {
    let long = "é".repeat(MAX_REFUSAL_MESSAGE);
    let cut = truncate_message(long);
    assert!(cut.len() <= MAX_REFUSAL_MESSAGE);
    assert!(cut.len() >= MAX_REFUSAL_MESSAGE - 1);
    assert_eq!(truncate_message("short".into()), "short");
}
