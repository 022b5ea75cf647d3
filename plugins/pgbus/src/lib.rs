//! A sans-IO fan-out engine over PostgreSQL `pg_notify` for the Switchyard
//! `tunnel` carrier set (the `pgbus` carrier component).
//!
//! Every frontend publishes on one channel and listens to it; subscriptions
//! are local patterns matched on every message heard. A message whose
//! notification would be `spill_threshold` (8000) bytes or more is written
//! to the spill table and the notification names its row; spill reads run on
//! several reader connections at once, and deliveries keep arrival order.
//! While a publish query is in flight, later messages wait and go out
//! together in one statement (inline notifications, or spills: rows and
//! markers), one transaction for PostgreSQL's global notify lock.
//! Spill rows expire by the database's clock.
//!
//! Payloads beside the guest (carrier world 0.3.0): a payload at least
//! [`Engine::hold_from`] long (it always spills) may be held by the host and
//! named by id ([`Payload::Held`]): the spill binds it as a parameter
//! ([`Param::Payload`]), kept ([`Action::Keep`]) while it waits in a batch.
//! A spill read with one recipient leaves its payload cell in the host
//! (`Query::hold_column`) and the delivery names it (`Delivery::held`),
//! kept while earlier arrivals are read. Work units bind a held payload into
//! their row, and a claim holds its payload column: each claimed unit goes
//! to one subscription in the same call, naming its held cell.
//!
//! Subjects under the queue roots (`work.` by default) are a work queue
//! instead, the claim queue ([`queue`]): a unit published there (with the
//! `switchyard-unit-id` header) is inserted into the queue table, once per
//! unit id, and a wake is notified on the wake channel; a subscription with
//! a queue group makes this frontend a consumer that claims units for a
//! lease and delivers each with the reply-to `_claim.<row id>`; publishing
//! to that reply-to deletes the unit. A request on a queued subject is
//! answered (an empty reply) once the table holds the unit. Units not
//! acknowledged within their lease are claimed again: at least once.
//!
//! The engine does no I/O and reads no clock: the host owns the database
//! connections and the timer, reports what happened, and performs the
//! [`Action`]s each call answers, in order.
//!
//! ```
//! use switchyard_plugin_pgbus::{Action, Config, Engine, Header};
//!
//! let (mut engine, out) = Engine::new(Config::default(), 7, 0);
//! // The publisher, the listener and eight spill readers, then the timer.
//! assert_eq!(out[0], Action::Open(1));
//! assert_eq!(out.len(), 11);
//! let out = engine.opened(1, 1);
//! let Action::Query(create_table) = &out[0] else { panic!() };
//! let out = engine.opened(2, 1);
//! assert_eq!(out[0], Action::Listen(2, "switchyard_bus".into()));
//! let Action::Query(check) = &out[1] else { panic!() };
//! engine.answered(create_table.id, Ok(vec![]), 2);
//! let out = engine.answered(check.id, Ok(vec![vec![Some(b"1".to_vec())]]), 2);
//! assert_eq!(out, vec![Action::Ready]);
//! let out = engine.publish("jobs.1.progress", None, &[], b"50%".to_vec(), 3).unwrap();
//! let Action::Query(notify) = &out[0] else { panic!() };
//! assert_eq!(notify.sql, "SELECT pg_notify($1, $2)::text");
//!
//! // A work unit: inserted and woken in one statement.
//! let unit = [Header::new("switchyard-unit-id", "u-1")];
//! let out = engine.publish("work.render", None, &unit, b"frame 7".to_vec(), 4).unwrap();
//! let Action::Query(insert) = &out[0] else { panic!() };
//! assert!(insert.sql.starts_with("WITH u AS (INSERT INTO switchyard_carrier_queue"));
//! ```
//!
//! # Layout
//!
//! - `engine.rs`: the state machine and its calls; `engine/links.rs` the
//!   connections, their setup, loss and reopening; `engine/fanout.rs`
//!   publishing, batching, spilling, hearing, spill reads and delivery;
//!   `engine/batch.rs` what waits for the publisher (inline texts or spills);
//!   `engine/queue.rs` queueing, claiming and acknowledging work units.
//! - `action.rs`: what the engine answers, and the values that cross with it.
//! - `notification.rs`: the text of a notification (the wire format).
//! - `sql.rs`: every statement.
//! - `queue.rs`: the claim queue's rules and its consumers here.
//! - `arrivals.rs`: messages heard, in arrival order, until deliverable.
//! - `subscriptions.rs`, `requests.rs`: local subscriptions; the request inbox.
//! - `subject.rs`: subject rules and roots; `config.rs`: the configuration.
//! - `backoff.rs`, `rng.rs`: reconnect delays and the inbox token from the seed.
//! - `component.rs` (wasm32 only): the carrier world's glue.

mod action;
mod arrivals;
use switchyard_carrier_kit::backoff;
// SAFETY: only wit-bindgen's generated exports use `unsafe`.
#[allow(unsafe_code)]
#[cfg(target_arch = "wasm32")]
mod component;
mod config;
mod engine;
pub mod notification;
pub mod queue;
mod requests;
use switchyard_carrier_kit::rng;
pub mod sql;
use switchyard_carrier_kit::subject;
mod subscriptions;

pub use action::{
    Action, CarrierError, Cell, CellRow, Delivery, Handle, Header, Held, LogLevel, Notification,
    Param, Payload, Query, Reply, Row,
};
pub use arrivals::{MAX_WAITING, SPILL_READ_TIMEOUT_MS};
pub use backoff::{BACKOFF_MAX_MS, BACKOFF_START_MS, Backoff};
pub use config::{
    Config, ConfigError, DEFAULT_CHANNEL, DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE_ROOTS,
    DEFAULT_QUEUE_TABLE, DEFAULT_RETENTION_SECONDS, DEFAULT_ROOTS, DEFAULT_SPILL_READERS,
    DEFAULT_SPILL_THRESHOLD, MAX_CHANNEL_LEN, MAX_LEASE_SECONDS, MAX_QUEUE_TABLE_LEN,
    MAX_RETENTION_SECONDS, MAX_SPILL_READERS, WAKE_SUFFIX,
};
pub use engine::{
    Counters, Engine, MAX_BATCH_BYTES, MAX_BATCH_NOTIFICATIONS, MAX_KEPT_READ_BYTES,
    MAX_KEPT_READS, MAX_PAYLOAD, MAX_SPILL_BATCH, MAX_SPILL_BATCH_BYTES, QUEUE_GROUPS_REFUSED,
    RETENTION_INTERVAL_MS,
};
pub use queue::{
    CLAIM_BATCH, CLAIM_INTERVAL_MS, CLAIM_PREFIX, MAX_UNACKED, MAX_UNIT_ID_LEN, UNIT_ID_HEADER,
};
pub use subject::{SubjectError, SubjectPolicy, subject_matches, validate_subject};
