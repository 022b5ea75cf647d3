//! Half-close, reset and the end of a session.

use switchyard_plugin_tunnel::{Event, Lane, Refusal, ResetReason, SessionError, StreamError};

use crate::{data, decoded, open_accepted, pair, pump, read_all};

#[test]
fn half_close_leaves_the_other_direction_open() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    frontend.send(stream, b"request").unwrap();
    frontend.session.finish(stream).unwrap();
    assert_eq!(
        frontend.send(stream, b"more"),
        Err(StreamError::AlreadyFinished(stream))
    );
    pump(&mut frontend, &mut worker, 0);
    let events = worker.events();
    assert_eq!(
        events,
        [Event::Data { stream, len: 7 }, Event::Finished { stream }]
    );
    assert_eq!(worker.read(stream), b"request");

    for part in [&b"token "[..], b"token ", b"done"] {
        worker.send(stream, part).unwrap();
    }
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(read_all(&mut frontend, stream), b"token token done");
    worker.session.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(frontend.events(), [Event::Finished { stream }]);
    assert_eq!(frontend.session.stream_count(), 0);
    assert_eq!(worker.session.stream_count(), 0);
}

#[test]
fn data_after_fin_resets_the_stream() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    frontend.session.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    worker.events();
    worker.receive(&data(stream, b"late"), 0).unwrap();
    assert_eq!(
        worker.events(),
        [Event::Reset {
            stream,
            reason: ResetReason::Protocol
        }]
    );
}

#[test]
fn reset_reaches_the_peer_and_late_frames_are_ignored() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    worker.send(stream, b"in flight").unwrap();
    let in_flight = worker.output();
    frontend
        .session
        .reset(stream, ResetReason::Cancelled)
        .unwrap();
    assert_eq!(
        frontend.session.reset(stream, ResetReason::Cancelled),
        Err(StreamError::UnknownStream(stream))
    );
    frontend.receive(&in_flight[0], 0).unwrap();
    assert!(frontend.events().is_empty());
    assert!(frontend.read(stream).is_empty(), "the late body is dropped");
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        worker.events(),
        [Event::Reset {
            stream,
            reason: ResetReason::Cancelled
        }]
    );
    assert_eq!(worker.session.stream_count(), 0);
    assert_eq!(
        frontend.session.reset(stream, ResetReason::SessionEnded),
        Err(StreamError::LocalOnlyReason)
    );
}

#[test]
fn unanswered_opens_end_as_not_delivered() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let open = open_accepted(&mut frontend, &mut worker);
    let read = frontend.session.open_stream("svc").unwrap();
    let unread = frontend.session.open_stream("svc").unwrap();
    let sent = frontend.output();
    worker.receive(&sent[0], 0).unwrap();
    // The websocket drops before the second OPEN is read and any reply.
    frontend.session.close();
    let mut events = frontend.events();
    events.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        events,
        [
            Event::Replied {
                stream: read,
                result: Err(Refusal::NotDelivered)
            },
            Event::Replied {
                stream: unread,
                result: Err(Refusal::NotDelivered)
            },
            Event::Reset {
                stream: open,
                reason: ResetReason::SessionEnded
            },
        ]
    );
    assert!(frontend.session.is_closed());
    assert_eq!(
        frontend.session.open_stream("svc"),
        Err(StreamError::SessionClosed)
    );
    assert_eq!(frontend.receive(&sent[1], 0), Err(SessionError::Closed));
    assert!(frontend.output().is_empty());

    // The worker's own view: the opened stream it never answered is reset.
    worker.events();
    worker.session.close();
    assert_eq!(
        worker.events(),
        [
            Event::Reset {
                stream: open,
                reason: ResetReason::SessionEnded
            },
            Event::Reset {
                stream: read,
                reason: ResetReason::SessionEnded
            },
        ]
    );
}

#[test]
fn a_malformed_frame_ends_the_session_with_not_delivered() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = frontend.session.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert!(frontend.receive(&[0, 0, 0, 1, 42], 0).is_err());
    assert_eq!(
        frontend.events(),
        [Event::Replied {
            stream,
            result: Err(Refusal::NotDelivered)
        }]
    );
    assert_eq!(decoded(&frontend.output()), []);
}
