//! Opening streams: replies, each refusal kind, limits and id rules.

use switchyard_plugin_tunnel::{
    Event, Frame, FrameError, INFERENCE_WINDOW, Lane, MAX_STREAMS, Refusal, SessionError, Side,
    StreamError, StreamId,
};

use crate::{Peer, data, decoded, pair, pump};

#[test]
fn ids_are_odd_from_the_frontend_and_even_from_the_worker() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    assert_eq!(frontend.session.open_stream("a").unwrap(), StreamId(1));
    assert_eq!(frontend.session.open_stream("a").unwrap(), StreamId(3));
    assert_eq!(worker.session.open_stream("a").unwrap(), StreamId(2));
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(worker.events().len(), 2);
    assert!(matches!(
        frontend.events()[..],
        [Event::Opened {
            stream: StreamId(2),
            ..
        }]
    ));
}

#[test]
fn accepted_stream_gets_an_accepting_reply() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("inference").unwrap();
    let sent = frontend.output();
    assert_eq!(
        decoded(&sent),
        [Frame::Open {
            stream,
            service: "inference"
        }]
    );
    worker.receive(&sent[0], 0).unwrap();
    worker.session.accept(stream).unwrap();
    let reply = worker.output();
    assert_eq!(reply, [vec![0, 0, 0, 1, 2, 0]]);
    frontend.receive(&reply[0], 0).unwrap();
    assert_eq!(
        frontend.events(),
        [Event::Replied {
            stream,
            result: Ok(())
        }]
    );
    assert_eq!(
        worker.session.accept(stream),
        Err(StreamError::NotPending(stream))
    );
}

#[test]
fn each_refusal_kind_reaches_the_frontend_intact() {
    for refusal in [
        Refusal::UnknownService,
        Refusal::ServiceRefused("model not loaded".into()),
        Refusal::Overloaded,
    ] {
        let (mut frontend, mut worker) = pair(Lane::Inference);
        let stream = frontend.session.open_stream("inference").unwrap();
        pump(&mut frontend, &mut worker, 0);
        worker.events();
        worker.session.refuse(stream, refusal.clone()).unwrap();
        pump(&mut frontend, &mut worker, 0);
        assert_eq!(
            frontend.events(),
            [Event::Replied {
                stream,
                result: Err(refusal)
            }]
        );
        assert_eq!(frontend.session.stream_count(), 0);
        assert_eq!(worker.session.stream_count(), 0);
        assert_eq!(
            frontend.send(stream, b"x"),
            Err(StreamError::UnknownStream(stream))
        );
    }
}

#[test]
fn not_delivered_is_never_sent() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        worker.session.refuse(stream, Refusal::NotDelivered),
        Err(StreamError::LocalOnlyReason)
    );
    // A peer that sends status 4 anyway is broken.
    let forged = [0, 0, 0, 1, 2, 4];
    assert!(matches!(
        frontend.receive(&forged, 0),
        Err(SessionError::Frame(_))
    ));
}

#[test]
fn long_refusal_messages_are_cut() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    worker
        .session
        .refuse(stream, Refusal::ServiceRefused("x".repeat(5000)))
        .unwrap();
    pump(&mut frontend, &mut worker, 0);
    let events = frontend.events();
    let [
        Event::Replied {
            result: Err(Refusal::ServiceRefused(message)),
            ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(message.len(), 1024);
}

#[test]
fn a_request_rides_with_its_open() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    assert_eq!(frontend.send(stream, b"request"), Ok(7));
    frontend.session.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        worker.events(),
        [
            Event::Opened {
                stream,
                service: "svc".into()
            },
            Event::Data { stream, len: 7 },
            Event::Finished { stream },
        ]
    );
    assert_eq!(worker.read(stream), b"request");
    worker.session.accept(stream).unwrap();
    assert_eq!(worker.send(stream, b"answer"), Ok(6));
    worker.session.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        frontend.events(),
        [
            Event::Replied {
                stream,
                result: Ok(())
            },
            Event::Data { stream, len: 6 },
            Event::Finished { stream },
        ]
    );
    assert_eq!(frontend.read(stream), b"answer");
    assert_eq!(frontend.session.stream_count(), 0);
    assert_eq!(worker.session.stream_count(), 0);
}

#[test]
fn early_data_of_a_refused_stream_is_dropped() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    frontend.send(stream, b"request").unwrap();
    frontend.session.finish(stream).unwrap();
    let [open, data, fin] = &frontend.output()[..] else {
        panic!("OPEN, DATA and FIN")
    };
    worker.receive(open, 0).unwrap();
    worker.events();
    worker
        .session
        .refuse(stream, Refusal::UnknownService)
        .unwrap();
    worker.receive(data, 0).unwrap();
    worker.receive(fin, 0).unwrap();
    assert!(worker.events().is_empty(), "no reset for data in flight");
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        frontend.events(),
        [Event::Replied {
            stream,
            result: Err(Refusal::UnknownService)
        }]
    );
    assert_eq!(frontend.session.stream_count(), 0);
    assert_eq!(worker.session.stream_count(), 0);
    assert!(!worker.session.is_closed());
}

#[test]
fn early_data_spends_the_window_it_was_given() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    let big = vec![7u8; INFERENCE_WINDOW as usize + 1];
    assert_eq!(
        frontend.send(stream, &big),
        Ok(INFERENCE_WINDOW as usize),
        "no more than the lane's window before any credit"
    );
    pump(&mut frontend, &mut worker, 0);
    // Credit goes back only after the reply, never ahead of it.
    worker.events();
    assert_eq!(worker.read(stream).len(), INFERENCE_WINDOW as usize);
    assert!(worker.output().is_empty());
    worker.session.accept(stream).unwrap();
    assert_eq!(
        decoded(&worker.output()),
        [
            Frame::Reply {
                stream,
                result: Ok(())
            },
            Frame::Window {
                stream,
                increment: INFERENCE_WINDOW
            }
        ]
    );
}

#[test]
fn no_data_from_the_replying_side_before_its_reply() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    worker.events();
    // A worker that sends data on a stream it has not answered gets it reset.
    frontend.receive(&data(stream, b"early"), 0).unwrap();
    assert!(matches!(frontend.events()[..], [Event::Reset { .. }]));
    assert!(!frontend.session.is_closed());
}

#[test]
fn worker_refuses_past_the_stream_limit_with_overloaded() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    for _ in 0..MAX_STREAMS {
        frontend.session.open_stream("svc").unwrap();
    }
    assert_eq!(
        frontend.session.open_stream("svc"),
        Err(StreamError::TooManyStreams)
    );
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(worker.events().len(), MAX_STREAMS);
    // A frontend that ignores its own limit is answered by the worker.
    let extra = StreamId(2 * MAX_STREAMS as u32 + 1);
    let open = Frame::Open {
        stream: extra,
        service: "svc",
    };
    worker.receive(&open.encode(), 0).unwrap();
    assert!(worker.events().is_empty());
    let reply = worker.output();
    assert_eq!(
        decoded(&reply),
        [Frame::Reply {
            stream: extra,
            result: Err(Refusal::Overloaded)
        }]
    );
}

#[test]
fn bad_service_names_are_refused_locally() {
    let (mut frontend, _) = pair(Lane::Inference);
    assert_eq!(
        frontend.session.open_stream(""),
        Err(StreamError::BadService(0))
    );
    assert_eq!(
        frontend.session.open_stream(&"s".repeat(256)),
        Err(StreamError::BadService(256))
    );
    assert_eq!(
        frontend.session.open_stream(&"s".repeat(255)),
        Ok(StreamId(1))
    );
}

#[test]
fn reused_or_wrong_parity_ids_end_the_session() {
    let (_, mut worker) = pair(Lane::Inference);
    let open = |id| {
        Frame::Open {
            stream: StreamId(id),
            service: "svc",
        }
        .encode()
    };
    worker.receive(&open(3), 0).unwrap();
    assert_eq!(
        worker.receive(&open(1), 0),
        Err(SessionError::StreamIdReused(StreamId(1)))
    );
    assert!(worker.session.is_closed());

    let (_, mut worker) = pair(Lane::Inference);
    assert_eq!(
        worker.receive(&open(2), 0),
        Err(SessionError::WrongParity(StreamId(2)))
    );
}

#[test]
fn hello_rules() {
    let hello = |side, lane| Frame::Hello { side, lane }.encode();
    let mut worker = Peer::new(Side::Worker, Lane::Bulk, 0);
    let open = Frame::Open {
        stream: StreamId(1),
        service: "svc",
    };
    assert_eq!(
        worker.receive(&open.encode(), 0),
        Err(SessionError::HelloExpected)
    );

    let mut worker = Peer::new(Side::Worker, Lane::Bulk, 0);
    assert_eq!(
        worker.receive(&hello(Side::Worker, Lane::Bulk), 0),
        Err(SessionError::SameSide(Side::Worker))
    );

    let mut worker = Peer::new(Side::Worker, Lane::Bulk, 0);
    assert_eq!(
        worker.receive(&hello(Side::Frontend, Lane::Inference), 0),
        Err(SessionError::LaneMismatch {
            local: Lane::Bulk,
            peer: Lane::Inference
        })
    );

    let mut worker = Peer::new(Side::Worker, Lane::Bulk, 0);
    assert!(matches!(
        worker.receive(&[0, 0, 0, 0, 0, 2, 1, 2, 9], 0),
        Err(SessionError::Frame(FrameError::UnsupportedVersion(2)))
    ));

    let mut worker = Peer::new(Side::Worker, Lane::Bulk, 0);
    worker
        .receive(&hello(Side::Frontend, Lane::Bulk), 0)
        .unwrap();
    assert_eq!(
        worker.receive(&hello(Side::Frontend, Lane::Bulk), 0),
        Err(SessionError::HelloRepeated)
    );
    assert_eq!(
        worker.receive(&hello(Side::Frontend, Lane::Bulk), 0),
        Err(SessionError::Closed)
    );
}

#[test]
fn first_output_is_hello() {
    let mut frontend = Peer::new(Side::Frontend, Lane::Bulk, 0);
    assert_eq!(frontend.output(), [vec![0, 0, 0, 0, 0, 1, 1, 2]]);
}
