//! `switchyard:carrier/carrier@0.1.0` carriers, answering in 0.3.0's types.
//! 0.1.0 has no held payloads: the host hands it every payload inline (its
//! [`RULES`]), it parses every byte it is handed and claims no body, and its
//! queries hold no column. Every other type has the same shape under another
//! Rust name, so it is copied field by field here, and nowhere else.

use wasmtime::Store;

use super::{
    Action, Body, CarrierError, Cell, Delivery, Endpoint, Header, Intake, Notification, Outgoing,
    Param, Payload, PayloadRules, Query, Reply, Row, Segment,
};
use crate::bindings::carrier_v0_1::Carrier;
use crate::bindings::carrier_v0_1::switchyard::carrier0_1_0::types as old;
use crate::sandbox::SandboxState;

/// A 0.1.0 carrier's rules: every payload inline, every read whole.
pub(super) const RULES: PayloadRules = PayloadRules {
    inline_below: u64::MAX,
    peek: u32::MAX,
};

pub(super) fn protocol(
    b: &Carrier,
) -> &crate::bindings::carrier_v0_1::exports::switchyard::carrier0_1_0::protocol::Guest {
    b.switchyard_carrier0_1_0_protocol()
}

pub(super) fn configure(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    config: &str,
    seed: u64,
    now_ms: u64,
) -> wasmtime::Result<Result<Vec<Action>, String>> {
    let answer = protocol(b).call_configure(s, config, seed, now_ms)?;
    Ok(answer.map(actions))
}

pub(super) fn endpoints(
    b: &Carrier,
    s: &mut Store<SandboxState>,
) -> wasmtime::Result<Vec<Endpoint>> {
    Ok(protocol(b)
        .call_endpoints(s)?
        .into_iter()
        .map(endpoint)
        .collect())
}

fn endpoint(old: old::Endpoint) -> Endpoint {
    match old {
        old::Endpoint::Tcp(address) => Endpoint::Tcp(address),
        old::Endpoint::Database => Endpoint::Database,
    }
}

pub(super) fn opened(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    handle: u64,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    protocol(b).call_opened(s, handle, now_ms).map(actions)
}

pub(super) fn closed(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    handle: u64,
    reason: &str,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    protocol(b)
        .call_closed(s, handle, reason, now_ms)
        .map(actions)
}

/// A 0.1.0 carrier parses (or keeps) every byte of a read.
pub(super) fn received(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    handle: u64,
    data: &[u8],
    now_ms: u64,
) -> wasmtime::Result<Intake> {
    let answer = protocol(b).call_received(s, handle, data, now_ms)?;
    Ok(Intake {
        actions: actions(answer),
        consumed: data.len() as u64,
        claim: None,
        deliveries: Vec::new(),
    })
}

pub(super) fn timer(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    protocol(b).call_timer(s, now_ms).map(actions)
}

pub(super) fn notified(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    handle: u64,
    notifications: &[Notification],
    dropped: u64,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    let notifications: Vec<old::Notification> = notifications
        .iter()
        .map(|n| old::Notification {
            channel: n.channel.clone(),
            payload: n.payload.clone(),
        })
        .collect();
    protocol(b)
        .call_notified(s, handle, &notifications, dropped, now_ms)
        .map(actions)
}

pub(super) fn answered(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    query: u64,
    outcome: Result<Vec<Row>, String>,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    let outcome = match outcome {
        Ok(rows) => Ok(rows
            .into_iter()
            .map(old_row)
            .collect::<Result<Vec<_>, _>>()?),
        Err(e) => Err(e),
    };
    let outcome = outcome.as_ref().map(Vec::as_slice).map_err(String::as_str);
    protocol(b)
        .call_answered(s, query, outcome, now_ms)
        .map(actions)
}

pub(super) fn publish(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    subject: &str,
    reply_to: Option<&str>,
    headers: &[Header],
    payload: &Payload,
    now_ms: u64,
) -> wasmtime::Result<Result<Vec<Action>, CarrierError>> {
    let headers = old_headers(headers);
    let answer =
        protocol(b).call_publish(s, subject, reply_to, &headers, inline(payload)?, now_ms)?;
    Ok(operation(answer))
}

pub(super) fn publish_batch(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    messages: Vec<Outgoing>,
    now_ms: u64,
) -> wasmtime::Result<super::BatchAnswer> {
    let messages = messages
        .into_iter()
        .map(|m| {
            Ok(old::Outgoing {
                headers: old_headers(&m.headers),
                payload: match m.payload {
                    Payload::Inline(bytes) => bytes,
                    held @ Payload::Held(_) => inline(&held)?.to_vec(),
                },
                subject: m.subject,
                reply_to: m.reply_to,
            })
        })
        .collect::<wasmtime::Result<Vec<_>>>()?;
    let (answers, done) = protocol(b).call_publish_batch(s, &messages, now_ms)?;
    let answers = answers
        .into_iter()
        .map(|a| a.map_err(carrier_error))
        .collect();
    Ok((answers, actions(done)))
}

pub(super) fn subscribe(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    id: u64,
    subject: &str,
    queue_group: Option<&str>,
    now_ms: u64,
) -> wasmtime::Result<Result<Vec<Action>, CarrierError>> {
    let answer = protocol(b).call_subscribe(s, id, subject, queue_group, now_ms)?;
    Ok(operation(answer))
}

pub(super) fn unsubscribe(
    b: &Carrier,
    s: &mut Store<SandboxState>,
    id: u64,
    now_ms: u64,
) -> wasmtime::Result<Vec<Action>> {
    protocol(b).call_unsubscribe(s, id, now_ms).map(actions)
}

/// The host hands a 0.1.0 carrier every payload inline ([`RULES`]); a held
/// one here is the host's bug, failed like a trap.
pub(super) fn inline(payload: &Payload) -> wasmtime::Result<&[u8]> {
    match payload {
        Payload::Inline(bytes) => Ok(bytes),
        Payload::Held(_) => Err(wasmtime::format_err!(
            "a held payload cannot be handed to a switchyard:carrier@0.1.0 carrier"
        )),
    }
}

fn old_row(row: Row) -> wasmtime::Result<Vec<Option<Vec<u8>>>> {
    row.into_iter()
        .map(|cell| match cell {
            None => Ok(None),
            Some(Cell::Bytes(bytes)) => Ok(Some(bytes)),
            Some(Cell::Held(_)) => Err(wasmtime::format_err!(
                "a held cell cannot be handed to a switchyard:carrier@0.1.0 carrier"
            )),
        })
        .collect()
}

pub(super) fn old_headers(headers: &[Header]) -> Vec<old::Header> {
    headers
        .iter()
        .map(|h| old::Header {
            name: h.name.clone(),
            value: h.value.clone(),
        })
        .collect()
}

pub(super) fn operation(
    answer: Result<Vec<old::Action>, old::CarrierError>,
) -> Result<Vec<Action>, CarrierError> {
    answer.map(actions).map_err(carrier_error)
}

fn actions(old: Vec<old::Action>) -> Vec<Action> {
    old.into_iter().map(action).collect()
}

fn action(old: old::Action) -> Action {
    match old {
        old::Action::Open((handle, to)) => Action::Open((handle, endpoint(to))),
        old::Action::Write((handle, bytes)) => Action::Write((handle, vec![Segment::Bytes(bytes)])),
        old::Action::Close(handle) => Action::Close(handle),
        old::Action::Listen(listen) => Action::Listen(listen),
        old::Action::Query(q) => Action::Query(Query {
            id: q.id,
            connection: q.connection,
            sql: q.sql,
            params: q.params.into_iter().map(param).collect(),
            hold_column: None,
        }),
        old::Action::SetTimer(ms) => Action::SetTimer(ms),
        old::Action::Deliver(d) => Action::Deliver(delivery(d)),
        old::Action::Reply(r) => Action::Reply(Reply {
            request: r.request,
            outcome: r.outcome.map(delivery).map_err(carrier_error),
        }),
        old::Action::Ready => Action::Ready,
        old::Action::Lost(reason) => Action::Lost(reason),
    }
}

fn param(old: old::Param) -> Param {
    match old {
        old::Param::Null => Param::Null,
        old::Param::Text(text) => Param::Text(text),
        old::Param::Bytes(bytes) => Param::Bytes(bytes),
        old::Param::Int(int) => Param::Int(int),
    }
}

fn delivery(old: old::Delivery) -> Delivery {
    Delivery {
        subscription: old.subscription,
        subject: old.subject,
        reply_to: old.reply_to,
        headers: old
            .headers
            .into_iter()
            .map(|h| Header {
                name: h.name,
                value: h.value,
            })
            .collect(),
        body: Body::Inline(old.payload),
    }
}

fn carrier_error(old: old::CarrierError) -> CarrierError {
    match old {
        old::CarrierError::InvalidSubject(s) => CarrierError::InvalidSubject(s),
        old::CarrierError::PayloadTooLarge(sizes) => CarrierError::PayloadTooLarge(sizes),
        old::CarrierError::NotConnected => CarrierError::NotConnected,
        old::CarrierError::Timeout => CarrierError::Timeout,
        old::CarrierError::NoResponders => CarrierError::NoResponders,
        old::CarrierError::Refused(s) => CarrierError::Refused(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_becomes_one_segment_and_a_payload_an_inline_body() {
        assert_eq!(
            action(old::Action::Write((3, b"PUB a 0\r\n\r\n".to_vec()))),
            Action::Write((3, vec![Segment::Bytes(b"PUB a 0\r\n\r\n".to_vec())]))
        );
        let delivered = action(old::Action::Deliver(old::Delivery {
            subscription: 1,
            subject: "a".into(),
            reply_to: None,
            headers: Vec::new(),
            payload: b"hi".to_vec(),
        }));
        assert!(
            matches!(&delivered, Action::Deliver(d) if d.body == Body::Inline(b"hi".to_vec())),
            "{delivered:?}"
        );
    }

    #[test]
    fn a_held_payload_or_cell_is_never_handed_to_an_old_carrier() {
        let held = Payload::Held(super::super::PayloadRef { id: 1, len: 5 });
        assert!(inline(&held).is_err());
        let row: Row = vec![Some(Cell::Held(super::super::PayloadRef { id: 1, len: 5 }))];
        assert!(old_row(row).is_err());
    }
}
