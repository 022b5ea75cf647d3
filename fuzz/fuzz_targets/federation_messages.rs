//! What crosses a federation link from a peer (`host/protocol`'s `link`
//! and `federation` modules): the handshake's messages (read before the
//! peer proved anything), the calls on the link's call stream, and the
//! heads of a remote inference stream, of a job call and of a model
//! range (both ways).
//!
//! Input: the bytes of one message.
//! Invariants: no panic; a handshake message over `MAX_LINK_MESSAGE` is
//! never parsed; whatever parses, written out as JSON again, parses to the
//! same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_protocol::copies::{RangeHead, RangeRequest};
use switchyard_protocol::federation::{InferenceCall, LinkAnswer, LinkCall};
use switchyard_protocol::jobs::JobCall;
use switchyard_protocol::link::{LinkMessage, MAX_LINK_MESSAGE};

/// Parses `data` as `T`; what parses round-trips unchanged.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let Ok(parsed) = serde_json::from_slice::<T>(data) else {
        return;
    };
    let written = serde_json::to_vec(&parsed).expect("a parsed message writes out");
    let again: T = serde_json::from_slice(&written).expect("what was written parses");
    assert_eq!(again, parsed);
}

fuzz_target!(|data: &[u8]| {
    if data.len() <= MAX_LINK_MESSAGE {
        round_trip::<LinkMessage>(data);
    }
    round_trip::<LinkCall>(data);
    round_trip::<LinkAnswer>(data);
    let head = data.split(|&b| b == b'\n').next().unwrap_or_default();
    round_trip::<InferenceCall>(head);
    round_trip::<JobCall>(head);
    round_trip::<RangeRequest>(head);
    round_trip::<RangeHead>(head);
});
