//! The tunnel's frame decoder (`plugins/tunnel/src/frame.rs`): one
//! websocket message, whole (`Frame::decode`) or as the host splits it
//! (`Frame::decode_split`).
//!
//! Input: two bytes of a body length for the split call, then the message.
//! Invariants: no panic; decoding a whole message and decoding its split
//! agree; a frame that decodes encodes back to exactly the message (the
//! decoder accepts one spelling of each frame) and decodes again to itself;
//! no frame is longer than MAX_FRAME_LEN.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::Input;
use switchyard_plugin_tunnel::{BODY_RULE, Frame, MAX_FRAME_LEN};

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let claimed_body = usize::from(input.u16()) * 2;
    let message = input.bytes(usize::MAX);

    let whole = Frame::decode(message);
    let (header, body) = BODY_RULE.split(message);
    assert_eq!(whole, Frame::decode_split(header, body.len()));
    if let Ok(frame) = &whole {
        assert!(message.len() <= MAX_FRAME_LEN);
        let encoded = frame.encode();
        match frame {
            Frame::Data { len, .. } => {
                assert_eq!(encoded, header);
                assert_eq!(*len, body.len());
            }
            _ => {
                assert_eq!(encoded, message);
                assert!(body.is_empty());
            }
        }
        assert_eq!(
            Frame::decode(&[&encoded[..], body].concat()).as_ref(),
            Ok(frame)
        );
        let session_frame = matches!(
            frame,
            Frame::Hello { .. } | Frame::Ping { .. } | Frame::Pong { .. }
        );
        assert_eq!(session_frame, frame.stream().0 == 0);
    }

    // A header with a body length the host claims: accepted only as a split
    // the rule would make, and then a DATA frame of that length.
    if let Ok(frame) = Frame::decode_split(message, claimed_body) {
        if claimed_body > 0 {
            assert_eq!(
                frame,
                Frame::Data {
                    stream: frame.stream(),
                    len: claimed_body
                }
            );
        }
        assert!(message.len() + claimed_body <= MAX_FRAME_LEN);
    }
});
