//! Federation's state: this cluster's identity (public half), peers,
//! offers, requests for access, grants with the owner's counters and the
//! slots calls hold, operation receipts, managed services, model copies,
//! and batch jobs across clusters (projections, owner eligibility).
//!
//! Every kind of record is bounded ([`switchyard_protocol::federation`]'s
//! `MAX_*`): an insert counts under one advisory lock so that two replicas
//! adding at once never pass a bound.

mod copies;
mod grants;
mod identity;
mod jobs;
mod offers;
mod operations;
mod peers;
mod requests;
mod services;

pub use copies::{CopyInsert, CopyRun, NewCopyRow};
pub use grants::{Charged, Cost, Refused as ChargeRefused};
pub use jobs::{MAX_PROJECTIONS, Projection};
pub use operations::Begun;
pub use peers::{DiallerLock, NewPeer};

use switchyard_protocol::federation::{Bounds, MAX_GRANTS, MAX_OFFERS, MAX_OPERATIONS, MAX_PEERS};

use crate::{Store, StoreError};

/// The channel a replica announces, at commit, what every replica must act
/// on at once: a grant revoked, a peer forgotten.
pub const CHANGES_CHANNEL: &str = "federation_changes";

/// One announcement on [`CHANGES_CHANNEL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A grant was revoked or went with its peer: its operations end.
    Grant(String),
    /// A peer was forgotten: its links close.
    Peer(String),
}

impl Change {
    /// As the notification's payload.
    pub fn to_payload(&self) -> String {
        match self {
            Change::Grant(id) => format!("grant:{id}"),
            Change::Peer(id) => format!("peer:{id}"),
        }
    }

    /// From a notification's payload.
    pub fn from_payload(payload: &str) -> Option<Self> {
        match payload.split_once(':')? {
            ("grant", id) => Some(Change::Grant(id.to_string())),
            ("peer", id) => Some(Change::Peer(id.to_string())),
            _ => None,
        }
    }
}

/// The advisory lock every bounded insert takes.
const BOUNDS_LOCK: i64 = 7377796465646572;

/// A time column as RFC 3339 (UTC, seconds).
const fn time_format() -> &'static str {
    "YYYY-MM-DD\"T\"HH24:MI:SS\"Z\""
}

/// `to_char(<column> AT TIME ZONE 'UTC', ...)` for a SELECT list.
fn time(column: &str) -> String {
    format!("to_char({column} AT TIME ZONE 'UTC', '{}')", time_format())
}

/// A bounded kind of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounded {
    /// `federation_peers`.
    Peers,
    /// `federation_offers`.
    Offers,
    /// `federation_grants`.
    Grants,
    /// `federation_operations`.
    Operations,
}

impl Bounded {
    /// Its name in a `limit_reached` message.
    pub fn name(self) -> &'static str {
        match self {
            Bounded::Peers => "peers",
            Bounded::Offers => "offers",
            Bounded::Grants => "grants",
            Bounded::Operations => "operation receipts",
        }
    }

    /// How many may be kept.
    pub fn max(self) -> i64 {
        match self {
            Bounded::Peers => MAX_PEERS,
            Bounded::Offers => MAX_OFFERS,
            Bounded::Grants => MAX_GRANTS,
            Bounded::Operations => MAX_OPERATIONS,
        }
    }

    fn table(self) -> &'static str {
        match self {
            Bounded::Peers => "federation_peers",
            Bounded::Offers => "federation_offers",
            Bounded::Grants => "federation_grants",
            Bounded::Operations => "federation_operations",
        }
    }
}

/// An insert into a bounded table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Insert<T> {
    /// Made.
    Done(T),
    /// The bound is reached.
    Full(Bounded),
    /// A record with the same id or unique name exists.
    Exists,
}

/// Takes the bounds lock in `tx` and answers whether `bounded` has room.
async fn has_room(
    tx: &tokio_postgres::Transaction<'_>,
    bounded: Bounded,
) -> Result<bool, StoreError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&BOUNDS_LOCK])
        .await?;
    let row = tx
        .query_one(&format!("SELECT count(*) FROM {}", bounded.table()), &[])
        .await?;
    Ok(row.get::<_, i64>(0) < bounded.max())
}

impl Store {
    /// How many of each bounded record are kept.
    pub async fn federation_bounds(&self) -> Result<Bounds, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "SELECT (SELECT count(*) FROM federation_peers), \
                        (SELECT count(*) FROM federation_offers), \
                        (SELECT count(*) FROM federation_grants), \
                        (SELECT count(*) FROM federation_operations)",
                &[],
            )
            .await?;
        Ok(Bounds {
            peers: row.get(0),
            offers: row.get(1),
            grants: row.get(2),
            operations: row.get(3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Change;

    #[test]
    fn changes_round_trip_through_their_payload() {
        for change in [Change::Grant("g_1".into()), Change::Peer("p:x".into())] {
            assert_eq!(Change::from_payload(&change.to_payload()), Some(change));
        }
        assert_eq!(Change::from_payload("grant"), None);
        assert_eq!(Change::from_payload("other:x"), None);
    }
}
