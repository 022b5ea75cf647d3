//! PING after idleness, PONG in answer, loss on silence.

use switchyard_plugin_tunnel::{Event, Frame, Lane, PING_IDLE_MS, PONG_TIMEOUT_MS, Refusal};

use crate::{decoded, frames, pair};

#[test]
fn idle_session_pings_and_the_peer_pongs() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    assert_eq!(frontend.next_tick_ms(), Some(PING_IDLE_MS));
    frontend.on_tick(PING_IDLE_MS - 1);
    assert!(frames(&mut frontend).is_empty());
    frontend.on_tick(PING_IDLE_MS);
    let ping = frames(&mut frontend);
    let [Frame::Ping { nonce }] = decoded(&ping)[..] else {
        panic!()
    };
    // Still waiting: no second PING.
    frontend.on_tick(PING_IDLE_MS + 1);
    assert!(frames(&mut frontend).is_empty());
    assert_eq!(
        frontend.next_tick_ms(),
        Some(PING_IDLE_MS + PONG_TIMEOUT_MS)
    );

    worker.on_frame(&ping[0], PING_IDLE_MS).unwrap();
    let pong = frames(&mut worker);
    assert_eq!(decoded(&pong), [Frame::Pong { nonce }]);
    frontend.on_frame(&pong[0], PING_IDLE_MS + 5).unwrap();
    frontend.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS + 1);
    assert!(!frontend.is_closed());
    assert!(frontend.drain_events().is_empty());
    assert_eq!(frontend.next_tick_ms(), Some(2 * PING_IDLE_MS + 5));
}

#[test]
fn silence_after_a_ping_loses_the_session() {
    let (mut frontend, _worker) = pair(Lane::Bulk);
    let stream = frontend.open_stream("files").unwrap();
    frontend.on_tick(PING_IDLE_MS);
    frontend.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS - 1);
    assert!(!frontend.is_closed());
    frontend.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS);
    assert!(frontend.is_closed());
    assert_eq!(
        frontend.drain_events(),
        [
            Event::Replied {
                stream,
                result: Err(Refusal::NotDelivered)
            },
            Event::SessionLost
        ]
    );
    assert_eq!(frontend.next_tick_ms(), None);
    frontend.on_tick(u64::MAX);
    assert!(frontend.drain_events().is_empty());
}

#[test]
fn any_frame_proves_the_peer_alive() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    frontend.on_tick(PING_IDLE_MS);
    frames(&mut frontend);
    worker.open_stream("x").unwrap();
    for message in frames(&mut worker) {
        frontend.on_frame(&message, PING_IDLE_MS + 1).unwrap();
    }
    frontend.on_tick(PING_IDLE_MS + PONG_TIMEOUT_MS);
    assert!(!frontend.is_closed());
}
