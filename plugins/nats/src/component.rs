//! The `switchyard:carrier/carrier@0.4.0` component around the engine: maps
//! the host's events and operations to engine calls, and the engine's output
//! to the host's actions. It owns the reconnect timer and server rotation.
//!
//! Payloads bypass the guest: outgoing payloads of [`INLINE_BELOW`] bytes or
//! more are held by the host and written as a segment between PUB/HPUB
//! framing;
//! incoming MSG/HMSG payloads of [`CLAIM_FROM`] bytes or more are claimed
//! and taken by the host, and `received` is handed at most [`PEEK`] bytes.
//!
//! Small messages are packed: a message read whole in one `received` call
//! goes back as spans of its data (nothing of it is copied or allocated
//! here), and a burst of publishes comes as one buffer whose PUB lines go
//! out as one write.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::{
    Action as EngineAction, ClaimTarget, CloseReason, ComponentConfig, Connection, Error,
    Payload as EnginePayload, RequestError, RequestId,
};

wit_bindgen::generate!({
    path: "../../wit",
    world: "switchyard:carrier/carrier@0.4.0",
    generate_all,
});

use exports::switchyard::carrier0_4_0::protocol::Guest;
use switchyard::carrier0_3_0::types::{
    Action, Body, BodyClaim, CarrierError, Cell, Delivery, Endpoint, Header, Notification, Payload,
    PayloadRules, Reply, Segment,
};
use switchyard::carrier0_4_0::types::{
    Intake, PackedOutgoing, PackedPayload, Refusal, Span, SpannedDelivery,
};

/// The most bytes one `received` call is handed: the host's whole read
/// (64 KiB), so that a read of small messages is one call and each
/// message in it can go back as spans; claimed payloads never enter.
pub const PEEK: u32 = 64 * 1024;

/// Incoming payloads from this size on are taken by the host. Below it,
/// copying a payload through the guest costs less than the extra call a
/// claim takes (a claim ends the call; about 0.5 us against ~30 ns a KiB).
pub const CLAIM_FROM: usize = 4 * 1024;

/// Outgoing payloads shorter than this come inline: for a small payload a
/// held one costs more (a table entry and a segment of its own per
/// message) than the copy it saves.
pub const INLINE_BELOW: u64 = CLAIM_FROM as u64;
use switchyard::plugin::log::log;
use switchyard::plugin::types::LogLevel;

struct Glue {
    engine: Connection,
    servers: Vec<String>,
    next_server: usize,
    /// The connection in use; handles are never reused.
    handle: u64,
    reconnect_at: Option<u64>,
    /// Engine request ids to the host's.
    requests: HashMap<u64, u64>,
}

thread_local! {
    static GLUE: RefCell<Option<Glue>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Glue) -> R, fallback: R) -> R {
    with_else(f, || fallback)
}

/// [`with`], making the fallback only when it is needed (a batch's).
fn with_else<R>(f: impl FnOnce(&mut Glue) -> R, fallback: impl FnOnce() -> R) -> R {
    GLUE.with(|g| g.borrow_mut().as_mut().map(f).unwrap_or_else(fallback))
}

impl Glue {
    /// Opens the next server in turn.
    fn dial(&mut self) -> Action {
        self.handle += 1;
        let server = self.servers[self.next_server % self.servers.len()].clone();
        self.next_server += 1;
        Action::Open((self.handle, Endpoint::Tcp(server)))
    }

    /// The engine's output as host actions, followed by the timer.
    fn translate(&mut self, output: Vec<EngineAction>, now_ms: u64) -> Vec<Action> {
        let (actions, spans) = self.translate_read(output, now_ms);
        debug_assert!(spans.is_empty(), "only reads answer spans");
        actions
    }

    /// [`Glue::translate`] of a read's output: its spanned deliveries apart.
    fn translate_read(
        &mut self,
        output: Vec<EngineAction>,
        now_ms: u64,
    ) -> (Vec<Action>, Vec<SpannedDelivery>) {
        let mut actions = Vec::with_capacity(output.len() + 1);
        let mut spans = Vec::new();
        let mut queue: std::collections::VecDeque<EngineAction> = output.into();
        while let Some(action) = queue.pop_front() {
            match action {
                EngineAction::Write(bytes) => self.write(&mut actions, Segment::Bytes(bytes)),
                EngineAction::WritePayload(id) => self.write(&mut actions, Segment::Payload(id)),
                EngineAction::Deliver {
                    sid,
                    subject,
                    reply_to,
                    headers,
                    payload,
                } => actions.push(Action::Deliver(Delivery {
                    subscription: sid,
                    subject,
                    reply_to,
                    headers: headers.map(|h| wit_headers(h.entries)).unwrap_or_default(),
                    body: Body::Inline(payload),
                })),
                EngineAction::DeliverSpans {
                    sid,
                    subject,
                    reply_to,
                    headers,
                    payload,
                } => spans.push(SpannedDelivery {
                    subscription: sid,
                    subject: span(subject),
                    reply_to: reply_to.map(span),
                    headers: headers.map(|h| wit_headers(h.entries)).unwrap_or_default(),
                    body: span(payload),
                }),
                EngineAction::Reply {
                    request_id: RequestId(id),
                    result,
                } => {
                    let Some(request) = self.requests.remove(&id) else {
                        continue;
                    };
                    let outcome = result
                        .map(|m| Delivery {
                            subscription: 0,
                            subject: m.subject,
                            reply_to: None,
                            headers: m
                                .headers
                                .map(|h| wit_headers(h.entries))
                                .unwrap_or_default(),
                            body: Body::Inline(m.payload),
                        })
                        .map_err(|e| match e {
                            RequestError::TimedOut => CarrierError::Timeout,
                            RequestError::NoResponders => CarrierError::NoResponders,
                            _ => CarrierError::NotConnected,
                        });
                    actions.push(Action::Reply(Reply { request, outcome }));
                }
                EngineAction::Connected | EngineAction::Reconnected { .. } => {
                    actions.push(Action::Ready)
                }
                EngineAction::Reconnect { after_ms } => {
                    self.reconnect_at = Some(now_ms + after_ms);
                    actions.push(Action::Lost(format!("reconnecting in {after_ms} ms")));
                }
                EngineAction::Error(e) => log(LogLevel::Warn, &format!("nats: {e}")),
                EngineAction::Close => {
                    // The engine dropped the connection: close it, and tell the
                    // engine it is closed so that it schedules the reconnect.
                    actions.push(Action::Close(self.handle));
                    queue.extend(
                        self.engine
                            .on_closed(CloseReason::Failed("closed by the client".into()), now_ms),
                    );
                }
            }
        }
        let deadline = [self.reconnect_at, self.engine.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        if let Some(at) = deadline {
            actions.push(Action::SetTimer(at.saturating_sub(now_ms)));
        }
        (actions, spans)
    }

    /// Adds to the write the last action is, or starts one: a call's bytes
    /// go out as one write; adjacent bytes are joined into one segment.
    fn write(&self, actions: &mut Vec<Action>, segment: Segment) {
        if let Some(Action::Write((handle, segments))) = actions.last_mut()
            && *handle == self.handle
        {
            match (segments.last_mut(), segment) {
                (Some(Segment::Bytes(last)), Segment::Bytes(bytes)) => {
                    last.extend_from_slice(&bytes)
                }
                (_, segment) => segments.push(segment),
            }
            return;
        }
        actions.push(Action::Write((self.handle, vec![segment])));
    }

    /// Where a claimed payload goes, as the host's claim.
    fn claim(&mut self, len: usize, target: ClaimTarget) -> BodyClaim {
        let delivery =
            |subscription, subject, reply_to, headers: Option<crate::Headers>| Delivery {
                subscription,
                subject,
                reply_to,
                headers: headers.map(|h| wit_headers(h.entries)).unwrap_or_default(),
                body: Body::Inline(Vec::new()),
            };
        let (delivery, request) = match target {
            ClaimTarget::Deliver {
                sid,
                subject,
                reply_to,
                headers,
            } => (delivery(sid, subject, reply_to, headers), None),
            ClaimTarget::Reply {
                request_id: RequestId(id),
                subject,
                headers,
            } => match self.requests.remove(&id) {
                Some(request) => (delivery(0, subject, None, headers), Some(request)),
                None => (delivery(0, subject, None, None), None),
            },
            // Subscription 0 is the engine's inbox, never one of the host's:
            // the host reads past the payload and drops it.
            ClaimTarget::Drop => (delivery(0, String::new(), None, None), None),
        };
        BodyClaim {
            len: len as u64,
            delivery,
            request,
        }
    }
}

/// A range of `received`'s data as a span; the data is at most [`PEEK`]
/// bytes, so it fits.
fn span(range: std::ops::Range<usize>) -> Span {
    Span {
        offset: range.start as u32,
        len: range.len() as u32,
    }
}

/// The bytes of a batch's buffer a span names; the host's spans lie in
/// it, so one outside is refused as the host's mistake.
fn spanned(data: &[u8], span: Span) -> Result<&[u8], CarrierError> {
    let start = span.offset as usize;
    start
        .checked_add(span.len as usize)
        .and_then(|end| data.get(start..end))
        .ok_or_else(|| CarrierError::Refused("a span outside the batch's buffer".into()))
}

/// A subject out of a batch's buffer.
fn spanned_text(data: &[u8], span: Span) -> Result<&str, CarrierError> {
    std::str::from_utf8(spanned(data, span)?)
        .map_err(|_| CarrierError::InvalidSubject("a subject that is not UTF-8".into()))
}

/// An outgoing payload as the engine takes it.
fn engine_payload(payload: &Payload) -> EnginePayload<'_> {
    match payload {
        Payload::Inline(bytes) => EnginePayload::Bytes(bytes),
        Payload::Held(held) => EnginePayload::Held {
            id: held.id,
            len: usize::try_from(held.len).unwrap_or(usize::MAX),
        },
    }
}

fn wit_headers(entries: Vec<(String, String)>) -> Vec<Header> {
    entries
        .into_iter()
        .map(|(name, value)| Header { name, value })
        .collect()
}

fn engine_headers(headers: &[Header]) -> Option<Vec<(String, String)>> {
    (!headers.is_empty()).then(|| {
        headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect()
    })
}

fn refusal(e: Error) -> CarrierError {
    match e {
        Error::NotConnected | Error::Closed => CarrierError::NotConnected,
        Error::PayloadTooLarge { size, max } => {
            CarrierError::PayloadTooLarge((size as u64, max as u64))
        }
        Error::Subject(e) => CarrierError::InvalidSubject(e.to_string()),
        other => CarrierError::Refused(other.to_string()),
    }
}

struct NatsCarrier;

impl Guest for NatsCarrier {
    fn configure(config: String, seed: u64, _now_ms: u64) -> Result<Vec<Action>, String> {
        let config = ComponentConfig::parse(&config)?;
        let mut engine_config = config.engine_config(seed).map_err(|e| e.to_string())?;
        engine_config.claim_bodies_from = Some(CLAIM_FROM);
        // Messages read whole go back as spans of `received`'s data.
        engine_config.deliver_spans = true;
        let engine = Connection::new(engine_config).map_err(|e| e.to_string())?;
        let mut glue = Glue {
            engine,
            servers: config.servers,
            next_server: 0,
            handle: 0,
            reconnect_at: None,
            requests: HashMap::new(),
        };
        let open = glue.dial();
        GLUE.with(|g| *g.borrow_mut() = Some(glue));
        Ok(vec![open])
    }

    fn rules() -> PayloadRules {
        PayloadRules {
            inline_below: INLINE_BELOW,
            peek: PEEK,
        }
    }

    fn endpoints() -> Vec<Endpoint> {
        with(
            |g| g.servers.iter().cloned().map(Endpoint::Tcp).collect(),
            Vec::new(),
        )
    }

    fn max_payload() -> u64 {
        with(|g| g.engine.max_payload() as u64, 0)
    }

    fn opened(connection: u64, now_ms: u64) -> Vec<Action> {
        with(
            |g| match connection == g.handle {
                true => {
                    let output = g.engine.on_connected(now_ms);
                    g.translate(output, now_ms)
                }
                false => vec![Action::Close(connection)],
            },
            Vec::new(),
        )
    }

    fn closed(connection: u64, reason: String, now_ms: u64) -> Vec<Action> {
        with(
            |g| match connection == g.handle {
                true => {
                    let output = g.engine.on_closed(CloseReason::Failed(reason), now_ms);
                    g.translate(output, now_ms)
                }
                false => Vec::new(),
            },
            Vec::new(),
        )
    }

    fn received(connection: u64, data: Vec<u8>, now_ms: u64) -> Intake {
        let all = Intake {
            actions: Vec::new(),
            consumed: data.len() as u64,
            claim: None,
            deliveries: Vec::new(),
        };
        with(
            |g| match connection == g.handle {
                true => {
                    let read = g.engine.on_read(&data, now_ms);
                    let claim = read.claim.map(|c| g.claim(c.len, c.target));
                    let (actions, deliveries) = g.translate_read(read.output, now_ms);
                    Intake {
                        actions,
                        consumed: read.consumed as u64,
                        claim,
                        deliveries,
                    }
                }
                false => all.clone(),
            },
            all.clone(),
        )
    }

    fn timer(now_ms: u64) -> Vec<Action> {
        with(
            |g| {
                let mut actions = Vec::new();
                if g.reconnect_at.is_some_and(|at| at <= now_ms) {
                    g.reconnect_at = None;
                    actions.push(g.dial());
                }
                let output = g.engine.on_tick(now_ms);
                actions.extend(g.translate(output, now_ms));
                actions
            },
            Vec::new(),
        )
    }

    fn notified(_: u64, _: Vec<Notification>, _: u64, _: u64) -> Vec<Action> {
        // NATS opens no database connection.
        Vec::new()
    }

    fn answered(_: u64, _: Result<Vec<Vec<Option<Cell>>>, String>, _: u64) -> Vec<Action> {
        Vec::new()
    }

    fn publish(
        subject: String,
        reply_to: Option<String>,
        headers: Vec<Header>,
        payload: Payload,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        with(
            |g| {
                let headers = engine_headers(&headers);
                let output = g
                    .engine
                    .publish_payload(
                        &subject,
                        reply_to.as_deref(),
                        headers.as_deref(),
                        engine_payload(&payload),
                    )
                    .map_err(refusal)?;
                Ok(g.translate(output, now_ms))
            },
            Err(CarrierError::NotConnected),
        )
    }

    fn publish_batch(
        data: Vec<u8>,
        messages: Vec<PackedOutgoing>,
        now_ms: u64,
    ) -> (Vec<Refusal>, Vec<Action>) {
        with_else(
            |g| {
                // Inline payloads' PUB lines go into one write; a held
                // payload's framing goes around its segment, in order.
                let mut write = Vec::with_capacity(data.len() + messages.len() * 24);
                let mut output = Vec::new();
                let mut publish = |m: &PackedOutgoing| -> Result<(), CarrierError> {
                    let subject = spanned_text(&data, m.subject)?;
                    let reply_to = m.reply_to.map(|r| spanned_text(&data, r)).transpose()?;
                    let headers = engine_headers(&m.headers);
                    match m.payload {
                        PackedPayload::Inline(payload) => g
                            .engine
                            .publish_to(
                                &mut write,
                                subject,
                                reply_to,
                                headers.as_deref(),
                                spanned(&data, payload)?,
                            )
                            .map_err(refusal),
                        PackedPayload::Held(held) => {
                            let payload = EnginePayload::Held {
                                id: held.id,
                                len: usize::try_from(held.len).unwrap_or(usize::MAX),
                            };
                            let more = g
                                .engine
                                .publish_payload(subject, reply_to, headers.as_deref(), payload)
                                .map_err(refusal)?;
                            if !write.is_empty() {
                                output.push(EngineAction::Write(std::mem::take(&mut write)));
                            }
                            output.extend(more);
                            Ok(())
                        }
                    }
                };
                let refused = (0u32..)
                    .zip(&messages)
                    .filter_map(|(index, m)| publish(m).err().map(|error| Refusal { index, error }))
                    .collect();
                if !write.is_empty() {
                    output.push(EngineAction::Write(write));
                }
                (refused, g.translate(output, now_ms))
            },
            || {
                let refused = (0u32..)
                    .zip(&messages)
                    .map(|(index, _)| Refusal {
                        index,
                        error: CarrierError::NotConnected,
                    })
                    .collect();
                (refused, Vec::new())
            },
        )
    }

    fn subscribe(
        id: u64,
        subject: String,
        queue_group: Option<String>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        with(
            |g| {
                let output = g
                    .engine
                    .subscribe(id, &subject, queue_group.as_deref())
                    .map_err(refusal)?;
                Ok(g.translate(output, now_ms))
            },
            Err(CarrierError::NotConnected),
        )
    }

    fn unsubscribe(id: u64, now_ms: u64) -> Vec<Action> {
        with(
            |g| match g.engine.unsubscribe(id, None) {
                Ok(output) => g.translate(output, now_ms),
                Err(_) => Vec::new(),
            },
            Vec::new(),
        )
    }

    fn request(
        id: u64,
        subject: String,
        headers: Vec<Header>,
        payload: Payload,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        with(
            |g| {
                let headers = engine_headers(&headers);
                let (RequestId(engine_id), output) = g
                    .engine
                    .request_payload(
                        &subject,
                        headers.as_deref(),
                        engine_payload(&payload),
                        timeout_ms,
                        now_ms,
                    )
                    .map_err(refusal)?;
                g.requests.insert(engine_id, id);
                Ok(g.translate(output, now_ms))
            },
            Err(CarrierError::NotConnected),
        )
    }
}

export!(NatsCarrier);
