//! `switchyard:carrier/tunnel@0.1.0` sessions, answering in 0.2.0's types.
//! The two versions differ only where 0.1.0's `open` answers a string and
//! its `not-delivered` carries no reason; every other type has the same
//! shape under another Rust name, so it is copied field by field here, and
//! nowhere else.

use wasmtime::Store;

use super::{BodySplit, Event, Lane, Refusal, Side, Step};
use crate::bindings::tunnel_v0_1::Tunnel;
use crate::bindings::tunnel_v0_1::exports::switchyard::carrier0_1_0::session as old;
use crate::sandbox::SandboxState;

/// What a 0.1.0 `replied` with `not-delivered` meant: its session ended
/// before the peer answered (the only way that refusal is produced).
const SESSION_ENDED: &str = "the session ended before the worker answered";

/// The 0.1.0 plugin's only way to say it is at its stream limit (its
/// `TooManyStreams` reads "at most N streams may be open on one session").
const STREAM_LIMIT_MARK: &str = "at most";

pub(super) fn start(
    b: &Tunnel,
    s: &mut Store<SandboxState>,
    side: Side,
    lane: Lane,
    now_ms: u64,
) -> wasmtime::Result<Step> {
    let side = match side {
        Side::Frontend => old::Side::Frontend,
        Side::Worker => old::Side::Worker,
    };
    let lane = match lane {
        Lane::Inference => old::Lane::Inference,
        Lane::Bulk => old::Lane::Bulk,
    };
    let session = b.switchyard_carrier0_1_0_session();
    session.call_start(s, side, lane, now_ms).map(step)
}

pub(super) fn body_rule(b: &Tunnel, s: &mut Store<SandboxState>) -> wasmtime::Result<BodySplit> {
    let rule = b.switchyard_carrier0_1_0_session().call_body_rule(s)?;
    Ok(BodySplit {
        kind_offset: rule.kind_offset,
        kind: rule.kind,
        header_len: rule.header_len,
    })
}

pub(super) fn frame(
    b: &Tunnel,
    s: &mut Store<SandboxState>,
    header: &[u8],
    body_len: u32,
    now_ms: u64,
) -> wasmtime::Result<Result<Step, String>> {
    steps(
        b.switchyard_carrier0_1_0_session()
            .call_frame(s, header, body_len, now_ms),
    )
}

pub(super) fn tick(b: &Tunnel, s: &mut Store<SandboxState>, now_ms: u64) -> wasmtime::Result<Step> {
    b.switchyard_carrier0_1_0_session()
        .call_tick(s, now_ms)
        .map(step)
}

/// 0.1.0's `open` refused with a message; this is the one place that
/// reads meaning out of it.
pub(super) fn open(
    b: &Tunnel,
    s: &mut Store<SandboxState>,
    service: &str,
) -> wasmtime::Result<Result<(u32, Step), Refusal>> {
    let answer = b.switchyard_carrier0_1_0_session().call_open(s, service)?;
    Ok(answer
        .map(|(id, opened)| (id, step(opened)))
        .map_err(open_refusal))
}

fn open_refusal(message: String) -> Refusal {
    if message.contains(STREAM_LIMIT_MARK) {
        Refusal::Overloaded
    } else {
        Refusal::NotDelivered(message)
    }
}

pub(super) fn refuse(
    b: &Tunnel,
    s: &mut Store<SandboxState>,
    stream: u32,
    refusal: &Refusal,
) -> wasmtime::Result<Result<Step, String>> {
    let refusal = match refusal {
        Refusal::UnknownService => old::Refusal::UnknownService,
        Refusal::ServiceRefused(message) => old::Refusal::ServiceRefused(message.clone()),
        Refusal::Overloaded => old::Refusal::Overloaded,
        // The plugin refuses to send it, as 0.2.0's does.
        Refusal::NotDelivered(_) => old::Refusal::NotDelivered,
    };
    steps(
        b.switchyard_carrier0_1_0_session()
            .call_refuse(s, stream, &refusal),
    )
}

/// A stream call's answer.
pub(super) fn steps(
    answer: wasmtime::Result<Result<old::Step, String>>,
) -> wasmtime::Result<Result<Step, String>> {
    answer.map(|answer| answer.map(step))
}

fn step(old: old::Step) -> Step {
    Step {
        events: old.events.into_iter().map(event).collect(),
        frames: old.frames,
    }
}

fn event(event: old::Event) -> Event {
    match event {
        old::Event::Opened(opened) => Event::Opened(opened),
        old::Event::Replied((id, outcome)) => Event::Replied((id, outcome.map_err(refusal))),
        old::Event::Data(id) => Event::Data(id),
        old::Event::Writable(id) => Event::Writable(id),
        old::Event::Finished(id) => Event::Finished(id),
        old::Event::Reset(reset) => Event::Reset(reset),
        old::Event::Lost(reason) => Event::Lost(reason),
    }
}

fn refusal(refusal: old::Refusal) -> Refusal {
    match refusal {
        old::Refusal::UnknownService => Refusal::UnknownService,
        old::Refusal::ServiceRefused(message) => Refusal::ServiceRefused(message),
        old::Refusal::Overloaded => Refusal::Overloaded,
        old::Refusal::NotDelivered => Refusal::NotDelivered(SESSION_ENDED.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stream_limit_message_means_overloaded() {
        assert_eq!(
            open_refusal("at most 1024 streams may be open on one session".into()),
            Refusal::Overloaded
        );
        assert_eq!(
            open_refusal("the session has not started".into()),
            Refusal::NotDelivered("the session has not started".into())
        );
    }

    #[test]
    fn a_session_that_ended_says_so() {
        assert_eq!(
            refusal(old::Refusal::NotDelivered),
            Refusal::NotDelivered(SESSION_ENDED.into())
        );
    }
}
