//! Data in both directions under flow-control windows.

use switchyard_plugin_tunnel::{
    BULK_WINDOW, Event, Frame, INFERENCE_WINDOW, Lane, MAX_FRAME_PAYLOAD, MAX_QUEUED_OUTPUT_BYTES,
    ResetReason,
};

use crate::{decoded, frames, open_accepted, pair, pump, read_all};

#[test]
fn data_flows_both_ways_in_bounded_frames() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let request: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    assert_eq!(frontend.send(stream, &request).unwrap(), request.len());
    let sent = frames(&mut frontend);
    assert_eq!(sent.len(), request.len().div_ceil(MAX_FRAME_PAYLOAD));
    assert!(sent.iter().all(|m| m.len() <= 64 * 1024));
    for message in &sent {
        worker.on_frame(message, 0).unwrap();
    }
    assert_eq!(read_all(&mut worker, stream), request);

    assert_eq!(worker.send(stream, b"response").unwrap(), 8);
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(read_all(&mut frontend, stream), b"response");
}

#[test]
fn sender_blocks_at_the_window_and_window_unblocks_it() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let window = INFERENCE_WINDOW as usize;
    let body = vec![7u8; window + 1000];

    // The output queue caps one call; keep sending while the host drains.
    let mut taken = 0;
    loop {
        let n = frontend.send(stream, &body[taken..]).unwrap();
        taken += n;
        for message in frontend.drain_output() {
            worker.on_frame(&message, 0).unwrap();
        }
        if frontend.drain_events() != [Event::Writable { stream }] {
            break;
        }
    }
    assert_eq!(taken, window, "the window stops the sender");
    assert_eq!(frontend.send_window(stream), Some(0));
    assert_eq!(frontend.send(stream, &body[taken..]).unwrap(), 0);

    // Draining less than half the window returns no credit yet.
    let events = worker.drain_events();
    let mut delivered = 0;
    for event in &events {
        let Event::Data { bytes, .. } = event else {
            panic!("{event:?}")
        };
        delivered += bytes.len();
    }
    assert_eq!(delivered, window);
    worker.consumed(stream, (window / 2 - 1) as u64).unwrap();
    assert!(worker.drain_output().is_empty(), "updates are batched");
    worker.consumed(stream, 1).unwrap();
    let update = worker.drain_output();
    assert_eq!(
        decoded(&update),
        [Frame::Window {
            stream,
            increment: INFERENCE_WINDOW / 2
        }]
    );
    frontend.on_frame(&update[0], 0).unwrap();
    assert_eq!(frontend.drain_events(), [Event::Writable { stream }]);
    assert_eq!(frontend.send(stream, &body[taken..]).unwrap(), 1000);
}

#[test]
fn window_overrun_resets_the_stream_not_the_session() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let other = open_accepted(&mut frontend, &mut worker);
    let chunk = vec![0u8; MAX_FRAME_PAYLOAD];
    let full = INFERENCE_WINDOW as usize / MAX_FRAME_PAYLOAD;
    for _ in 0..full {
        let data = Frame::Data {
            stream,
            bytes: &chunk,
        };
        worker.on_frame(&data.encode(), 0).unwrap();
    }
    // What is left of the window, plus one byte.
    let left = INFERENCE_WINDOW as usize - full * MAX_FRAME_PAYLOAD;
    let over = Frame::Data {
        stream,
        bytes: &chunk[..left + 1],
    };
    worker.on_frame(&over.encode(), 0).unwrap();
    let events = worker.drain_events();
    assert_eq!(
        events.last(),
        Some(&Event::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        })
    );
    let sent = frames(&mut worker);
    assert_eq!(
        decoded(&sent),
        [Frame::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    frontend.on_frame(&sent[0], 0).unwrap();
    assert_eq!(
        frontend.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    // The session and the other stream live on.
    assert!(!worker.is_closed());
    assert_eq!(frontend.send(other, b"still here").unwrap(), 10);
    pump(&mut frontend, &mut worker, 0);
    assert_eq!(read_all(&mut worker, other), b"still here");
}

#[test]
fn credit_past_the_lane_window_resets_the_stream() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let window = Frame::Window {
        stream,
        increment: 1,
    };
    frontend.on_frame(&window.encode(), 0).unwrap();
    assert_eq!(
        frontend.drain_events(),
        [Event::Reset {
            stream,
            reason: ResetReason::Protocol
        }]
    );
}

#[test]
fn bulk_lane_moves_32_mib_whole_and_in_order() {
    let (mut frontend, mut worker) = pair(Lane::Bulk);
    let stream = open_accepted(&mut frontend, &mut worker);
    let total = 32 * 1024 * 1024;
    let body: Vec<u8> = (0..total as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut sent = 0;
    let mut received = Vec::with_capacity(total);
    let mut rounds = 0;
    while received.len() < total {
        rounds += 1;
        assert!(rounds < 10_000, "transfer stalled at {}", received.len());
        if sent < total {
            sent += frontend.send(stream, &body[sent..]).unwrap();
        }
        if sent == total {
            frontend.finish(stream).ok();
        }
        // One pass of frames each way, as a host would per read.
        for message in frontend.drain_output() {
            assert!(message.len() <= 64 * 1024);
            worker.on_frame(&message, 0).unwrap();
        }
        for event in worker.drain_events() {
            match event {
                Event::Data { bytes, .. } => {
                    worker.consumed(stream, bytes.len() as u64).unwrap();
                    received.extend(bytes);
                }
                Event::Finished { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        for message in worker.drain_output() {
            frontend.on_frame(&message, 0).unwrap();
        }
        frontend.drain_events();
    }
    assert!(received == body, "the body arrived changed");
    assert!(BULK_WINDOW as usize > MAX_QUEUED_OUTPUT_BYTES);
}
