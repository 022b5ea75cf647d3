//! The header-only path: headers and body lengths in, stream ids and DATA
//! headers out, no body ever given to the session.

use switchyard_plugin_tunnel::{
    Event, Frame, FrameError, INFERENCE_WINDOW, Lane, MAX_FRAME_PAYLOAD, ResetReason, SessionError,
    StreamError, StreamId,
};

use crate::{decoded, open_accepted, pair, pump};

/// The header of a DATA message with a `len`-byte body.
fn header(stream: StreamId, len: usize) -> Vec<u8> {
    Frame::Data { stream, len }.encode()
}

#[test]
fn data_is_routed_by_stream() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let a = open_accepted(&mut frontend, &mut worker);
    let b = open_accepted(&mut frontend, &mut worker);
    let session = &mut worker.session;
    for (stream, len) in [(a, 1000), (b, 2000), (a, 10)] {
        session.on_header(&header(stream, len), len, 0).unwrap();
    }
    assert_eq!(
        session.drain_events(),
        [
            Event::Data {
                stream: a,
                len: 1000
            },
            Event::Data {
                stream: b,
                len: 2000
            },
            Event::Data { stream: a, len: 10 },
        ]
    );
    // What was counted per stream is what may be consumed.
    session.consumed(a, 1010).unwrap();
    assert_eq!(
        session.consumed(a, 1),
        Err(StreamError::OverConsumed {
            stream: a,
            consumed: 1,
            delivered: 0
        })
    );
    session.consumed(b, 2000).unwrap();
}

#[test]
fn an_empty_body_delivers_nothing() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    worker.session.on_header(&header(stream, 0), 0, 0).unwrap();
    assert!(worker.session.drain_events().is_empty());
    assert!(worker.session.drain_output().is_empty());
}

#[test]
fn window_overrun_resets_and_names_no_stream_for_the_body() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let session = &mut worker.session;
    let full = INFERENCE_WINDOW as usize / MAX_FRAME_PAYLOAD;
    for _ in 0..full {
        let len = MAX_FRAME_PAYLOAD;
        session.on_header(&header(stream, len), len, 0).unwrap();
    }
    assert_eq!(session.drain_events().len(), full);
    let over = INFERENCE_WINDOW as usize - full * MAX_FRAME_PAYLOAD + 1;
    session.on_header(&header(stream, over), over, 0).unwrap();
    assert_eq!(
        session.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    assert_eq!(
        decoded(&session.drain_output()),
        [Frame::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    // DATA still in flight for the stream now gone: its body goes nowhere.
    session.on_header(&header(stream, 5), 5, 0).unwrap();
    assert!(session.drain_events().is_empty());
    assert!(!session.is_closed());
}

#[test]
fn data_after_fin_resets_and_names_no_stream_for_the_body() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    frontend.session.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(worker.events(), [Event::Finished { stream }]);
    worker.session.on_header(&header(stream, 4), 4, 0).unwrap();
    assert_eq!(
        worker.session.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::Protocol
        }]
    );
    assert_eq!(
        decoded(&worker.session.drain_output()),
        [Frame::Reset {
            stream,
            reason: ResetReason::Protocol
        }]
    );
}

#[test]
fn reserve_send_grants_nothing_when_the_window_is_spent_until_window() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let window = INFERENCE_WINDOW as usize;
    let mut granted_total = 0;
    loop {
        let (header, granted) = frontend.session.reserve_send(stream, window).unwrap();
        if granted == 0 {
            assert!(header.is_empty());
            break;
        }
        assert!(granted <= MAX_FRAME_PAYLOAD);
        assert_eq!(
            Frame::decode_split(&header, granted),
            Ok(Frame::Data {
                stream,
                len: granted
            })
        );
        // The worker's host receives the header and keeps the body.
        worker.session.on_header(&header, granted, 0).unwrap();
        granted_total += granted;
    }
    assert_eq!(granted_total, window);
    assert_eq!(
        frontend.session.reserve_send(stream, 1),
        Ok((Vec::new(), 0))
    );
    // The session holds no DATA: the host wrote it.
    assert!(frontend.session.drain_output().is_empty());
    assert!(frontend.session.drain_events().is_empty());

    let delivered: usize = worker
        .session
        .drain_events()
        .iter()
        .map(|event| match event {
            Event::Data { len, .. } => *len,
            other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(delivered, window);
    worker.session.consumed(stream, window as u64 / 2).unwrap();
    for message in worker.session.drain_output() {
        frontend.session.on_header(&message, 0, 0).unwrap();
    }
    assert_eq!(
        frontend.session.drain_events(),
        [Event::Writable { stream }]
    );
    let (header, granted) = frontend.session.reserve_send(stream, 3).unwrap();
    assert_eq!((header, granted), (vec![0, 0, 0, 1, 3], 3));
}

#[test]
fn a_grant_cut_by_the_frame_size_is_not_blocked() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let (_, granted) = frontend.session.reserve_send(stream, 100_000).unwrap();
    assert_eq!(granted, MAX_FRAME_PAYLOAD);
    let (_, granted) = frontend.session.reserve_send(stream, 0).unwrap();
    assert_eq!(granted, 0, "asking for nothing grants nothing");
    assert_eq!(
        frontend.session.send_window(stream),
        Some(u64::from(INFERENCE_WINDOW) - MAX_FRAME_PAYLOAD as u64)
    );
}

#[test]
fn reserve_send_needs_an_open_stream_of_this_side() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    // The side that received an OPEN sends nothing before its reply.
    let pending = frontend.session.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        worker.session.reserve_send(pending, 1),
        Err(StreamError::NotOpen(pending))
    );
    frontend.session.finish(stream).unwrap();
    assert_eq!(
        frontend.session.reserve_send(stream, 1),
        Err(StreamError::AlreadyFinished(stream))
    );
    assert_eq!(
        frontend.session.reserve_send(StreamId(99), 1),
        Err(StreamError::UnknownStream(StreamId(99)))
    );
    frontend.session.close();
    assert_eq!(
        frontend.session.reserve_send(stream, 1),
        Err(StreamError::SessionClosed)
    );
}

#[test]
fn a_message_split_wrongly_ends_the_session() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let whole = [0, 0, 0, 1, 3, b'h', b'i'];
    assert_eq!(
        worker.session.on_header(&whole, 0, 0),
        Err(SessionError::Frame(FrameError::BadSplit {
            header_len: 7,
            body_len: 0
        }))
    );
    assert!(worker.session.is_closed());
    assert_eq!(
        worker.session.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::SessionEnded
        }]
    );

    let (_, mut worker) = pair(Lane::Inference);
    let window = [0, 0, 0, 1, 4, 0, 0, 0, 1];
    assert!(matches!(
        worker.session.on_header(&window, 3, 0),
        Err(SessionError::Frame(FrameError::BadSplit { .. }))
    ));
}
