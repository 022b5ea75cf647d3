//! The reactor's side of payload bypass (`switchyard:carrier@0.3.0`):
//! payloads it holds for the plugin (handed, bound into queries, named by
//! deliveries) and the reads it hands the plugin a window at a time while
//! it gathers claimed bodies itself. A 0.1.0 plugin's rules make all of it
//! a pass-through: payloads inline, reads whole, nothing claimed.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use switchyard_runtime::CallError;
use switchyard_runtime::carrier::{
    Body, Cell, Delivery, Header, Param, Payload, Row, Span, SpannedDelivery,
};

use super::Reactor;
use super::actions::message;
use crate::intake::MAX_UNPARSED;
use crate::message::Message;
use crate::payloads::{PayloadError, Payloads};

impl Reactor {
    /// A delivery's payload: its inline bytes, or the held payload it names.
    pub(super) fn body(&mut self, delivery: &mut Delivery) -> Result<Bytes, PayloadError> {
        match std::mem::replace(&mut delivery.body, Body::Inline(Vec::new())) {
            Body::Inline(bytes) => Ok(Bytes::from(bytes)),
            Body::Held(id) => self.payloads.take(id),
        }
    }

    /// An outgoing payload as the plugin's rules want it: inline when short,
    /// held otherwise (a 0.1.0 plugin takes every payload inline).
    pub(super) fn payload(&mut self, payload: Bytes) -> Payload {
        if self.inline(&payload) {
            Payload::Inline(payload.to_vec())
        } else {
            Payload::Held(self.payloads.hand(payload))
        }
    }

    /// Adds a publish to the burst's batch, its payload as [`Reactor::payload`] decides.
    pub(super) fn gather_publish(&mut self, subject: &str, headers: Vec<Header>, payload: Bytes) {
        if self.inline(&payload) {
            self.pending_publishes
                .push_inline(subject, headers, &payload);
        } else {
            let held = self.payloads.hand(payload);
            self.pending_publishes.push_held(subject, headers, held);
        }
    }

    /// Whether the plugin takes `payload` inline (counted when it does).
    fn inline(&self, payload: &[u8]) -> bool {
        let inline_below = self
            .plugin
            .as_ref()
            .map_or(u64::MAX, |p| p.rules().inline_below);
        let inline = (payload.len() as u64) < inline_below;
        if inline {
            self.counters
                .inline_payload_bytes
                .fetch_add(payload.len() as u64, Ordering::Relaxed);
        }
        inline
    }

    /// A query's rows as cells; the `hold` column's cells stay in the host.
    pub(super) fn cells(&mut self, rows: Vec<Vec<Option<Vec<u8>>>>, hold: Option<u32>) -> Vec<Row> {
        let hold = hold.map(|c| c as usize);
        rows.into_iter()
            .map(|row| {
                row.into_iter()
                    .enumerate()
                    .map(|(column, cell)| {
                        cell.map(|bytes| match hold == Some(column) {
                            true => Cell::Held(self.payloads.hand(Bytes::from(bytes))),
                            false => {
                                self.counters
                                    .cell_bytes
                                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                                Cell::Bytes(bytes)
                            }
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// A read's bytes: handed to the plugin at most `peek` at a time, a
    /// claimed body gathered here and delivered without entering the guest.
    pub(super) fn receive(&mut self, h: u64, data: Vec<u8>, now: u64) {
        let mut state = self.reads.remove(&h).unwrap_or_default();
        state.push(data);
        loop {
            if let Some((claimed, payload)) = state.gather() {
                self.counters
                    .claimed_bytes
                    .fetch_add(payload.len() as u64, Ordering::Relaxed);
                let subscription = claimed.delivery.subscription;
                let message = message(claimed.delivery, payload);
                match claimed.request {
                    Some(request) => self.answer(request, Ok(message)),
                    None => self.deliver(subscription, message),
                }
            }
            if state.gathering() || state.unparsed() == 0 {
                break;
            }
            let Some(plugin) = self.plugin.as_mut() else {
                return;
            };
            let peek = plugin.rules().peek;
            let window = state.window(peek);
            let failures = self.failures;
            let offered = window.len();
            self.counters
                .received_bytes
                .fetch_add(offered as u64, Ordering::Relaxed);
            self.counters
                .largest_received
                .fetch_max(offered as u64, Ordering::Relaxed);
            let intake = match plugin.received(h, &window, now) {
                Ok(intake) => intake,
                Err(failed) => return self.rebuild(failed),
            };
            let consumed = (intake.consumed as usize).min(offered);
            state.consume(consumed);
            self.perform(intake.actions);
            if self.failures != failures {
                return;
            }
            // Messages that came before a fault in the same read (a close
            // among the actions) are still delivered.
            if let Err(e) = self.deliver_spans(&window, intake.deliveries) {
                return self.rebuild(CallError::InvalidAnswer(e));
            }
            if self.plugin.is_none() || !self.connections.contains_key(&h) {
                return;
            }
            match intake.claim {
                Some(claim) if consumed == 0 && claim.len == 0 => {
                    // Nothing parsed, nothing claimed: it would be asked again forever.
                    let e = "an empty body claimed before any byte was parsed".to_string();
                    return self.rebuild(CallError::InvalidAnswer(e));
                }
                Some(claim) => {
                    if let Err(e) = state.claim(claim) {
                        return self.rebuild(CallError::InvalidAnswer(e));
                    }
                }
                // The plugin waits for more bytes than it was handed.
                None if consumed < offered => break,
                None => {}
            }
        }
        if state.unparsed() > MAX_UNPARSED {
            tracing::warn!(carrier = %self.component.name, unparsed = state.unparsed(), "the plugin left too many bytes unparsed; closing the connection");
            if let Some(connection) = self.connections.remove(&h) {
                connection.close();
            }
            let more = self.refuse(h, "the plugin left too many bytes unparsed");
            self.perform(more);
            return;
        }
        self.reads.insert(h, state);
    }
}

impl Reactor {
    /// Delivers messages answered as spans of `window`: subjects read as
    /// UTF-8 (what is not is replaced), bodies sliced out of the read
    /// without a copy. A span outside the window refuses the whole answer
    /// before anything is delivered.
    fn deliver_spans(
        &mut self,
        window: &Bytes,
        deliveries: Vec<SpannedDelivery>,
    ) -> Result<(), String> {
        let inside = |s: &Span| inside(window.len(), s);
        if let Some(bad) = deliveries.iter().find(|d| {
            !inside(&d.subject)
                || !inside(&d.body)
                || d.reply_to.as_ref().is_some_and(|r| !inside(r))
        }) {
            return Err(format!(
                "a delivery names bytes outside the {} handed to `received` (subject {:?}, body {:?})",
                window.len(),
                bad.subject,
                bad.body
            ));
        }
        self.counters
            .delivered_in_place
            .fetch_add(deliveries.len() as u64, Ordering::Relaxed);
        let range = |s: Span| s.offset as usize..(s.offset + s.len) as usize;
        let text = |s: Span| String::from_utf8_lossy(&window[range(s)]).into_owned();
        for d in deliveries {
            let message = Message {
                subject: text(d.subject),
                reply_to: d.reply_to.map(text),
                headers: d.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                payload: window.slice(range(d.body)),
            };
            self.deliver(d.subscription, message);
        }
        Ok(())
    }
}

/// Whether `span` lies within `len` bytes (an end past `u32` included).
fn inside(len: usize, span: &Span) -> bool {
    (span.offset as usize)
        .checked_add(span.len as usize)
        .is_some_and(|end| end <= len)
}

/// Puts each held payload a query names in its place, as bytes (bytea).
pub(super) fn bind_payloads(
    payloads: &mut Payloads,
    params: &mut [Param],
) -> Result<(), PayloadError> {
    for param in params {
        if let Param::Payload(id) = *param {
            *param = Param::Bytes(payloads.take(id)?.to_vec());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_must_end_within_the_window() {
        let span = |offset, len| Span { offset, len };
        assert!(inside(10, &span(0, 10)));
        assert!(inside(10, &span(10, 0)));
        assert!(!inside(10, &span(5, 6)));
        assert!(!inside(10, &span(11, 0)));
        assert!(!inside(10, &span(u32::MAX, u32::MAX)));
    }
}
