//! The `switchyard:carrier/carrier@0.3.0` component around the engine: maps
//! the host's calls to engine calls and the engine's actions to the host's,
//! writing the engine's log lines through the host's logger as they come.
//!
//! Payloads bypass the guest: `rules().inline-below` is the engine's
//! `hold_from` (every payload that long spills whatever its envelope), so a
//! spilled payload is bound into its row by id; spill reads hold their
//! payload column and the delivery names the held cell. pgbus opens no byte
//! stream: `received` parses nothing and claims nothing.

use std::cell::RefCell;

use crate::{Action as EngineAction, Config, Engine};

wit_bindgen::generate!({
    path: "../../wit",
    world: "switchyard:carrier/carrier@0.3.0",
    generate_all,
});

use exports::switchyard::carrier0_3_0::protocol::Guest;
use switchyard::carrier0_3_0::types::{
    Action, Body, CarrierError, Cell, Delivery, Endpoint, Header, Intake, Notification, Outgoing,
    Param, Payload, PayloadRef, PayloadRules, Query, Reply,
};
use switchyard::plugin::log::log;
use switchyard::plugin::types::LogLevel;

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Engine) -> R, fallback: R) -> R {
    ENGINE.with(|e| e.borrow_mut().as_mut().map(f).unwrap_or(fallback))
}

/// The engine's actions as the host's; log lines are written here.
fn translate(actions: Vec<EngineAction>) -> Vec<Action> {
    actions
        .into_iter()
        .filter_map(|action| {
            Some(match action {
                EngineAction::Open(h) => Action::Open((h, Endpoint::Database)),
                EngineAction::Close(h) => Action::Close(h),
                EngineAction::Listen(h, channel) => Action::Listen((h, channel)),
                EngineAction::Query(q) => Action::Query(Query {
                    id: q.id,
                    connection: q.connection,
                    sql: q.sql.into_owned(),
                    params: q.params.into_iter().map(param).collect(),
                    hold_column: q.hold_column,
                }),
                EngineAction::SetTimer(ms) => Action::SetTimer(ms),
                EngineAction::Deliver(d) => Action::Deliver(delivery(d)),
                EngineAction::Reply(r) => Action::Reply(Reply {
                    request: r.request,
                    outcome: r.outcome.map(delivery).map_err(error),
                }),
                EngineAction::Ready => Action::Ready,
                EngineAction::Lost(reason) => Action::Lost(reason),
                EngineAction::Keep(id) => Action::Keep(id),
                EngineAction::Release(id) => Action::Release(id),
                EngineAction::Log(level, message) => {
                    log(level_of(level), &message);
                    return None;
                }
            })
        })
        .collect()
}

fn param(p: crate::Param) -> Param {
    match p {
        crate::Param::Null => Param::Null,
        crate::Param::Text(t) => Param::Text(t),
        crate::Param::Bytes(b) => Param::Bytes(b),
        crate::Param::Int(i) => Param::Int(i),
        crate::Param::Payload(id) => Param::Payload(id),
    }
}

fn engine_payload(payload: Payload) -> crate::Payload {
    match payload {
        Payload::Inline(bytes) => crate::Payload::Bytes(bytes),
        Payload::Held(PayloadRef { id, len }) => crate::Payload::Held(crate::Held { id, len }),
    }
}

fn engine_cell(cell: Cell) -> crate::Cell {
    match cell {
        Cell::Bytes(bytes) => crate::Cell::Bytes(bytes),
        Cell::Held(PayloadRef { id, len }) => crate::Cell::Held(crate::Held { id, len }),
    }
}

fn delivery(d: crate::Delivery) -> Delivery {
    Delivery {
        subscription: d.subscription,
        subject: d.subject,
        reply_to: d.reply_to,
        headers: d
            .headers
            .into_iter()
            .map(|h| Header {
                name: h.name,
                value: h.value,
            })
            .collect(),
        body: match d.held {
            Some(id) => Body::Held(id),
            None => Body::Inline(d.payload),
        },
    }
}

fn engine_headers(headers: Vec<Header>) -> Vec<crate::Header> {
    headers
        .into_iter()
        .map(|h| crate::Header {
            name: h.name,
            value: h.value,
        })
        .collect()
}

fn error(e: crate::CarrierError) -> CarrierError {
    match e {
        crate::CarrierError::InvalidSubject(m) => CarrierError::InvalidSubject(m),
        crate::CarrierError::PayloadTooLarge(size, max) => {
            CarrierError::PayloadTooLarge((size, max))
        }
        crate::CarrierError::NotConnected => CarrierError::NotConnected,
        crate::CarrierError::Timeout => CarrierError::Timeout,
        crate::CarrierError::NoResponders => CarrierError::NoResponders,
        crate::CarrierError::Refused(m) => CarrierError::Refused(m),
    }
}

fn level_of(level: crate::LogLevel) -> LogLevel {
    match level {
        crate::LogLevel::Debug => LogLevel::Debug,
        crate::LogLevel::Info => LogLevel::Info,
        crate::LogLevel::Warn => LogLevel::Warn,
        crate::LogLevel::Error => LogLevel::Error,
    }
}

struct PgbusCarrier;

impl Guest for PgbusCarrier {
    fn configure(config: String, seed: u64, now_ms: u64) -> Result<Vec<Action>, String> {
        let config = Config::parse(&config).map_err(|e| e.to_string())?;
        let actions = ENGINE.with(|e| {
            let mut slot = e.borrow_mut();
            let (engine, actions) = match slot.take() {
                Some(old) => old.replace(config, seed, now_ms),
                None => Engine::new(config, seed, now_ms),
            };
            *slot = Some(engine);
            actions
        });
        Ok(translate(actions))
    }

    fn rules() -> PayloadRules {
        PayloadRules {
            inline_below: with(|e| e.hold_from(), u64::MAX),
            // No byte stream: the window never matters.
            peek: u32::MAX,
        }
    }

    fn endpoints() -> Vec<Endpoint> {
        with(|_| vec![Endpoint::Database], Vec::new())
    }

    fn max_payload() -> u64 {
        crate::MAX_PAYLOAD
    }

    fn opened(connection: u64, now_ms: u64) -> Vec<Action> {
        translate(with(|e| e.opened(connection, now_ms), Vec::new()))
    }

    fn closed(connection: u64, reason: String, now_ms: u64) -> Vec<Action> {
        translate(with(|e| e.closed(connection, &reason, now_ms), Vec::new()))
    }

    fn received(_connection: u64, data: Vec<u8>, _now_ms: u64) -> Intake {
        // pgbus opens no byte stream: whatever comes is parsed as nothing.
        Intake {
            actions: Vec::new(),
            consumed: data.len() as u64,
            claim: None,
        }
    }

    fn timer(now_ms: u64) -> Vec<Action> {
        translate(with(|e| e.timer(now_ms), Vec::new()))
    }

    fn notified(
        connection: u64,
        notifications: Vec<Notification>,
        dropped: u64,
        now_ms: u64,
    ) -> Vec<Action> {
        let notifications = notifications
            .into_iter()
            .map(|n| crate::Notification {
                channel: n.channel,
                payload: n.payload,
            })
            .collect();
        translate(with(
            |e| e.notified(connection, notifications, dropped, now_ms),
            Vec::new(),
        ))
    }

    fn answered(
        query: u64,
        outcome: Result<Vec<Vec<Option<Cell>>>, String>,
        now_ms: u64,
    ) -> Vec<Action> {
        let outcome = outcome.map(|rows| {
            rows.into_iter()
                .map(|row| row.into_iter().map(|c| c.map(engine_cell)).collect())
                .collect()
        });
        translate(with(
            |e| e.answered_cells(query, outcome, now_ms),
            Vec::new(),
        ))
    }

    fn publish(
        subject: String,
        reply_to: Option<String>,
        headers: Vec<Header>,
        payload: Payload,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        with(
            |e| {
                e.publish_payload(
                    &subject,
                    reply_to.as_deref(),
                    &engine_headers(headers),
                    engine_payload(payload),
                    now_ms,
                )
            },
            Err(crate::CarrierError::NotConnected),
        )
        .map(translate)
        .map_err(error)
    }

    fn publish_batch(
        messages: Vec<Outgoing>,
        now_ms: u64,
    ) -> (Vec<Result<(), CarrierError>>, Vec<Action>) {
        let count = messages.len();
        with(
            |e| {
                let mut actions = Vec::new();
                let answers = messages
                    .into_iter()
                    .map(|m| {
                        let headers = engine_headers(m.headers);
                        let more = e
                            .publish_payload(
                                &m.subject,
                                m.reply_to.as_deref(),
                                &headers,
                                engine_payload(m.payload),
                                now_ms,
                            )
                            .map_err(error)?;
                        actions.extend(more);
                        Ok(())
                    })
                    .collect();
                (answers, translate(actions))
            },
            (vec![Err(CarrierError::NotConnected); count], Vec::new()),
        )
    }

    fn subscribe(
        id: u64,
        subject: String,
        queue_group: Option<String>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        with(
            |e| e.subscribe(id, &subject, queue_group.as_deref(), now_ms),
            Err(crate::CarrierError::NotConnected),
        )
        .map(translate)
        .map_err(error)
    }

    fn unsubscribe(id: u64, now_ms: u64) -> Vec<Action> {
        translate(with(|e| e.unsubscribe(id, now_ms), Vec::new()))
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
            |e| {
                e.request_payload(
                    id,
                    &subject,
                    &engine_headers(headers),
                    engine_payload(payload),
                    timeout_ms,
                    now_ms,
                )
            },
            Err(crate::CarrierError::NotConnected),
        )
        .map(translate)
        .map_err(error)
    }
}

export!(PgbusCarrier);
