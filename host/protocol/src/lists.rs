//! The admin API's list answers: each an object with one array, named for
//! what it holds (`{"peers": [...]}`), so that a list can gain a field (a
//! cursor, a count) without breaking its readers.

use serde::{Deserialize, Serialize};

use crate::copies::CopyRecord;
use crate::federation::{AccessRequest, GrantRecord, ManagedService, Offer, Peer, RemoteService};
use crate::signing::TrustedKey;

/// One list answer: `$name { $field: Vec<$item> }`.
macro_rules! list_answer {
    ($(#[$doc:meta])* $name:ident { $field:ident: $item:ty }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
        pub struct $name {
            #[doc = concat!("Every one, as `", stringify!($item), "`.")]
            pub $field: Vec<$item>,
        }
    };
}

list_answer! {
    /// `GET /api/federation/peers`: every peer with its link.
    Peers { peers: Peer }
}

list_answer! {
    /// `GET /api/federation/offers`: every offer.
    Offers { offers: Offer }
}

list_answer! {
    /// `GET /api/federation/requests`: every request, both directions.
    AccessRequests { requests: AccessRequest }
}

list_answer! {
    /// `GET /api/federation/grants`: every grant, both directions.
    Grants { grants: GrantRecord }
}

list_answer! {
    /// `GET /api/federation/services`: the remote services a key may call.
    RemoteServices { services: RemoteService }
}

list_answer! {
    /// `GET /api/federation/peers/{peer}/services`: a peer's managed
    /// services under a grant.
    ManagedServices { services: ManagedService }
}

list_answer! {
    /// `GET /api/federation/copies`: every copy, oldest first.
    Copies { copies: CopyRecord }
}

list_answer! {
    /// `GET /api/trust/keys`: every trusted key.
    TrustedKeys { keys: TrustedKey }
}

/// `GET /api/cluster/probe`: the probes this replica heard (broadcasts)
/// and handled (units).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Probes {
    /// Ids of the broadcasts heard.
    pub heard: Vec<String>,
    /// Ids of the units handled.
    pub handled: Vec<String>,
}
