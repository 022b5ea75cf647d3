//! Data in both directions under flow-control windows.

use switchyard_plugin_tunnel::{
    Event, Frame, INFERENCE_WINDOW, Lane, MAX_FRAME_LEN, MAX_FRAME_PAYLOAD, ResetReason,
};

use crate::{data, decoded, open_accepted, pair, pump, read_all};

#[test]
fn data_flows_both_ways_in_bounded_frames() {
    let (mut frontend, mut worker) = pair(Lane::Inference);
    let stream = open_accepted(&mut frontend, &mut worker);
    let request: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    assert_eq!(frontend.send(stream, &request).unwrap(), request.len());
    let sent = frontend.output();
    assert_eq!(sent.len(), request.len().div_ceil(MAX_FRAME_PAYLOAD));
    assert!(sent.iter().all(|m| m.len() <= MAX_FRAME_LEN));
    for message in &sent {
        worker.receive(message, 0).unwrap();
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

    let taken = frontend.send(stream, &body).unwrap();
    assert_eq!(taken, window, "the window stops the sender");
    assert_eq!(frontend.session.send_window(stream), Some(0));
    assert_eq!(frontend.send(stream, &body[taken..]).unwrap(), 0);
    for message in frontend.output() {
        worker.receive(&message, 0).unwrap();
    }

    // Draining less than half the window returns no credit yet.
    let mut delivered = 0;
    for event in worker.events() {
        let Event::Data { len, .. } = event else {
            panic!("{event:?}")
        };
        delivered += len;
    }
    assert_eq!(delivered, window);
    worker
        .session
        .consumed(stream, (window / 2 - 1) as u64)
        .unwrap();
    assert!(worker.output().is_empty(), "updates are batched");
    worker.session.consumed(stream, 1).unwrap();
    let update = worker.output();
    assert_eq!(
        decoded(&update),
        [Frame::Window {
            stream,
            increment: INFERENCE_WINDOW / 2
        }]
    );
    frontend.receive(&update[0], 0).unwrap();
    assert_eq!(frontend.events(), [Event::Writable { stream }]);
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
        worker.receive(&data(stream, &chunk), 0).unwrap();
    }
    // What is left of the window, plus one byte.
    let left = INFERENCE_WINDOW as usize - full * MAX_FRAME_PAYLOAD;
    worker
        .receive(&data(stream, &chunk[..left + 1]), 0)
        .unwrap();
    let events = worker.events();
    assert_eq!(
        events.last(),
        Some(&Event::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        })
    );
    let sent = worker.output();
    assert_eq!(
        decoded(&sent),
        [Frame::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    frontend.receive(&sent[0], 0).unwrap();
    assert_eq!(
        frontend.events(),
        [Event::Reset {
            stream,
            reason: ResetReason::WindowOverrun
        }]
    );
    // The session and the other stream live on.
    assert!(!worker.session.is_closed());
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
    frontend.receive(&window.encode(), 0).unwrap();
    assert_eq!(
        frontend.events(),
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
            // A host writes a bounded batch per turn, not the whole window.
            let batch = (total - sent).min(1024 * 1024);
            sent += frontend.send(stream, &body[sent..sent + batch]).unwrap();
        }
        if sent == total {
            frontend.session.finish(stream).ok();
        }
        // One pass of messages each way, as a host would per read.
        for message in frontend.output() {
            assert!(message.len() <= MAX_FRAME_LEN);
            worker.receive(&message, 0).unwrap();
        }
        for event in worker.events() {
            match event {
                Event::Data { .. } | Event::Finished { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        received.extend(worker.read(stream));
        for message in worker.output() {
            frontend.receive(&message, 0).unwrap();
        }
        frontend.events();
    }
    assert!(received == body, "the body arrived changed");
}
