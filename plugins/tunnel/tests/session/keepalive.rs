//! PING after idleness, PONG in answer, loss on silence.

use switchyard_plugin_tunnel::{Event, Frame, Lane, PING_IDLE_MS, PONG_TIMEOUT_MS, Refusal};

use crate::{decoded, pair};

#[test]
fn idle_session_pings_and_the_peer_pongs() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    assert_eq!(frontend.session.next_tick_ms(), Some(PING_IDLE_MS));
    frontend.session.on_tick(PING_IDLE_MS - 1);
    assert!(frontend.output().is_empty());
    frontend.session.on_tick(PING_IDLE_MS);
    let ping = frontend.output();
    let [Frame::Ping { nonce }] = decoded(&ping)[..] else {
        panic!()
    };
    // Still waiting: no second PING.
    frontend.session.on_tick(PING_IDLE_MS + 1);
    assert!(frontend.output().is_empty());
    assert_eq!(
        frontend.session.next_tick_ms(),
        Some(PING_IDLE_MS + PONG_TIMEOUT_MS)
    );

    worker.receive(&ping[0], PING_IDLE_MS).unwrap();
    let pong = worker.output();
    assert_eq!(decoded(&pong), [Frame::Pong { nonce }]);
    frontend.receive(&pong[0], PING_IDLE_MS + 5).unwrap();
    frontend.session.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS + 1);
    assert!(!frontend.session.is_closed());
    assert!(frontend.events().is_empty());
    assert_eq!(frontend.session.next_tick_ms(), Some(2 * PING_IDLE_MS + 5));
}

#[test]
fn silence_after_a_ping_loses_the_session() {
    let (mut frontend, _worker) = pair(Lane::Bulk);
    let stream = frontend.session.open_stream("files").unwrap();
    frontend.session.on_tick(PING_IDLE_MS);
    frontend.session.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS - 1);
    assert!(!frontend.session.is_closed());
    frontend.session.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS);
    assert!(frontend.session.is_closed());
    assert_eq!(
        frontend.events(),
        [
            Event::Replied {
                stream,
                result: Err(Refusal::NotDelivered)
            },
            Event::SessionLost
        ]
    );
    assert_eq!(frontend.session.next_tick_ms(), None);
    frontend.session.on_tick(u64::MAX);
    assert!(frontend.events().is_empty());
}

#[test]
fn any_frame_proves_the_peer_alive() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    frontend.session.on_tick(PING_IDLE_MS);
    frontend.output();
    worker.session.open_stream("x").unwrap();
    for message in worker.output() {
        frontend.receive(&message, PING_IDLE_MS + 1).unwrap();
    }
    frontend.session.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS);
    assert!(!frontend.session.is_closed());
}
