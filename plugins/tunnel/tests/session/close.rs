//! Half-close, reset and the end of a session.

use switchyard_plugin_tunnel::{
    Event, Frame, Lane, Refusal, ResetReason, SessionError, StreamError,
};

use crate::{decoded, frames, open_accepted, pair, pump, read_all};

#[test]
fn half_close_leaves_the_other_direction_open() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    frontend.send(stream, b"request").unwrap();
    frontend.finish(stream).unwrap();
    assert_eq!(
        frontend.send(stream, b"more"),
        Err(StreamError::AlreadyFinished(stream))
    );
    pump(&mut frontend, &mut worker, 0);
    let events = worker.drain_events();
    assert_eq!(
        events,
        [
            Event::Data {
                stream,
                bytes: b"request".to_vec()
            },
            Event::Finished { stream }
        ]
    );
    worker.consumed(stream, 7).unwrap();

    for part in [&b"token "[..], b"token ", b"done"] {
        worker.send(stream, part).unwrap();
    }
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(read_all(&mut frontend, stream), b"token token done");
    worker.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(frontend.drain_events(), [Event::Finished { stream }]);
    assert_eq!(frontend.stream_count(), 0);
    assert_eq!(worker.stream_count(), 0);
}

#[test]
fn data_after_fin_resets_the_stream() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    frontend.finish(stream).unwrap();
    pump(&mut frontend, &mut worker, 0);
    worker.drain_events();
    let late = Frame::Data {
        stream,
        bytes: b"late",
    };
    worker.on_frame(&late.encode(), 0).unwrap();
    assert_eq!(
        worker.drain_events(),
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
    let in_flight = frames(&mut worker);
    frontend.reset(stream, ResetReason::Cancelled).unwrap();
    assert_eq!(
        frontend.reset(stream, ResetReason::Cancelled),
        Err(StreamError::UnknownStream(stream))
    );
    frontend.on_frame(&in_flight[0], 0).unwrap();
    assert!(frontend.drain_events().is_empty());
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(
        worker.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::Cancelled
        }]
    );
    assert_eq!(worker.stream_count(), 0);
    assert_eq!(
        frontend.reset(stream, ResetReason::SessionEnded),
        Err(StreamError::LocalOnlyReason)
    );
}

#[test]
fn unanswered_opens_end_as_not_delivered() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let open = open_accepted(&mut frontend, &mut worker);
    let read = frontend.open_stream("svc").unwrap();
    let unread = frontend.open_stream("svc").unwrap();
    let sent = frames(&mut frontend);
    worker.on_frame(&sent[0], 0).unwrap();
    // The websocket drops before the second OPEN is read and any reply.
    frontend.close();
    let mut events = frontend.drain_events();
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
    assert!(frontend.is_closed());
    assert_eq!(frontend.open_stream("svc"), Err(StreamError::SessionClosed));
    assert_eq!(frontend.on_frame(&sent[1], 0), Err(SessionError::Closed));
    assert!(frontend.drain_output().is_empty());

    // The worker's own view: the opened stream it never answered is reset.
    worker.drain_events();
    worker.close();
    assert_eq!(
        worker.drain_events(),
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
    let stream = frontend.open_stream("svc").unwrap();
    pump(&mut frontend, &mut worker, 0);
    assert!(frontend.on_frame(&[0, 0, 0, 1, 42], 0).is_err());
    assert_eq!(
        frontend.drain_events(),
        [Event::Replied {
            stream,
            result: Err(Refusal::NotDelivered)
        }]
    );
    assert_eq!(decoded(&frames(&mut frontend)), []);
}
