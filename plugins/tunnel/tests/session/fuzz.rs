//! Random and garbled frames, and headers split wrongly, never panic a
//! session.

use switchyard_plugin_tunnel::{BODY_RULE, Frame, Lane, Session, Side, StreamId};

/// xorshift64*: a fixed seed gives the same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A frame that is usually well formed, so the fuzzing reaches stream state.
fn plausible(rng: &mut Rng, buf: &mut Vec<u8>) {
    let stream = StreamId(rng.below(12) as u32);
    let len = rng.below(300) as usize;
    let frame = match rng.below(9) {
        0 => Frame::Open {
            stream,
            service: "svc",
        },
        1 => Frame::Reply {
            stream,
            result: Ok(()),
        },
        2 | 3 => Frame::Data { stream, len },
        4 => Frame::Window {
            stream,
            increment: rng.next() as u32 | 1,
        },
        5 => Frame::Fin { stream },
        6 => Frame::Reset {
            stream,
            reason: switchyard_plugin_tunnel::ResetReason::Cancelled,
        },
        7 => Frame::Ping { nonce: rng.next() },
        _ => Frame::Pong { nonce: rng.next() },
    };
    *buf = frame.encode();
    if let Frame::Data { len, .. } = frame {
        buf.resize(buf.len() + len, rng.next() as u8);
    }
}

/// Reserves credit and checks the header is the DATA header for the grant.
fn reserve(session: &mut Session, stream: StreamId, len: usize) {
    if let Ok((header, granted)) = session.reserve_send(stream, len) {
        assert!(granted <= len);
        if granted > 0 {
            assert_eq!(
                Frame::decode_split(&header, granted),
                Ok(Frame::Data {
                    stream,
                    len: granted
                })
            );
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for round in 0..400 {
        let side = if round % 2 == 0 {
            Side::Worker
        } else {
            Side::Frontend
        };
        let lane = if round % 3 == 0 {
            Lane::Bulk
        } else {
            Lane::Inference
        };
        let mut session = Session::new(side, lane, 0);
        let hello = Frame::Hello {
            side: side.peer(),
            lane,
        };
        if rng.below(8) != 0 {
            session.on_header(&hello.encode(), 0, 0).unwrap();
        }
        let mut now = 0;
        for _ in 0..200 {
            let mut message = Vec::new();
            match rng.below(4) {
                0 => {
                    let len = rng.below(40) as usize;
                    message = (0..len).map(|_| rng.next() as u8).collect();
                }
                1 => {
                    plausible(&mut rng, &mut message);
                    let at = rng.below(message.len() as u64) as usize;
                    message[at] ^= 1 << rng.below(8);
                }
                _ => plausible(&mut rng, &mut message),
            }
            now += rng.below(3000);
            let (header, body) = BODY_RULE.split(&message);
            // Now and then a host that splits wrongly.
            let body_len = match rng.below(20) {
                0 => rng.below(70_000) as usize,
                _ => body.len(),
            };
            let _ = session.on_header(header, body_len, now);
            session.on_tick(now);
            // The application does something with whatever arrived.
            for event in session.drain_events() {
                use switchyard_plugin_tunnel::Event::*;
                match event {
                    Opened { stream, .. } => {
                        let _ = session.accept(stream);
                        reserve(&mut session, stream, 2);
                    }
                    Data { stream, len } => {
                        let _ = session.consumed(stream, len as u64);
                    }
                    Writable { stream } => {
                        reserve(&mut session, stream, rng.below(70_000) as usize);
                    }
                    Finished { stream } => {
                        let _ = session.finish(stream);
                    }
                    _ => {}
                }
            }
            if rng.below(10) == 0 {
                let _ = session.open_stream("svc");
            }
            for message in session.drain_output() {
                // Whatever the session writes must itself be a valid frame.
                Frame::decode(&message).unwrap();
            }
            if session.is_closed() {
                break;
            }
        }
    }
}
