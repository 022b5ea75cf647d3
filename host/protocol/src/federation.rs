//! Federation's messages: the admin API's bodies and answers under
//! `/api/federation/` (the CLI sends and reads them, the server builds
//! them), a grant's signed terms, and what crosses the link between two
//! clusters (the heads of its streams and its calls).
//!
//! Names: a *peer* is another cluster this one is paired with; a grant's
//! *owner* is the cluster whose resources it shares, its *grantee* the peer
//! that uses them. `outgoing` grants are this cluster's (it owns the
//! resources), `incoming` ones a peer gave this cluster.

/// The most peers a cluster keeps.
pub const MAX_PEERS: i64 = 128;
/// The most offers a cluster publishes.
pub const MAX_OFFERS: i64 = 256;
/// The most grants a cluster keeps, both directions together.
pub const MAX_GRANTS: i64 = 256;
/// The most operation receipts a cluster keeps.
pub const MAX_OPERATIONS: i64 = 2048;
/// The longest a grant may live: a year.
pub const MAX_GRANT_LIFETIME_S: i64 = 365 * 24 * 3600;
/// The longest label, service id or operation id.
pub const MAX_NAME: usize = 64;

/// The stream service of a remote inference call: an [`InferenceCall`]
/// line, then the body; the owner answers as a worker does (an answer head
/// line, then the engine's body).
pub const INFERENCE_SERVICE: &str = "federation.inference";
/// The stream service of every other call: one [`LinkCall`] as JSON, one
/// [`LinkAnswer`] back.
pub const CALL_SERVICE: &str = "federation.call";
/// The stream service of one range of a granted model file (bulk lane).
pub use crate::copies::RANGE_SERVICE;

mod grants;
mod link;
mod offers;
mod peers;
mod services;
mod status;

pub use grants::*;
pub use link::*;
pub use offers::*;
pub use peers::*;
pub use services::*;
pub use status::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manage_call_is_flat_json() {
        let call = ManageCall {
            grant: "g".into(),
            operation_id: "op".into(),
            action: ManageAction::Start {
                service: "chat".into(),
                revision: 2,
            },
        };
        let json = serde_json::to_value(&call).unwrap();
        assert_eq!(json["action"], "start");
        assert_eq!(json["service"], "chat");
        let back: ManageCall = serde_json::from_value(json).unwrap();
        assert_eq!(back, call);
    }

    #[test]
    fn link_calls_round_trip() {
        let call = LinkCall::RequestAccess {
            id: "req".into(),
            operations: vec![Operation::Inference, Operation::InferenceManage],
            note: "n".into(),
        };
        let json = serde_json::to_string(&call).unwrap();
        assert!(json.contains("\"inference:manage\""));
        assert_eq!(serde_json::from_str::<LinkCall>(&json).unwrap(), call);
    }

    #[test]
    fn resources_are_tagged_by_kind() {
        let r: Resource =
            serde_json::from_str(r#"{"kind":"model","model":"m","revision":"r1"}"#).unwrap();
        assert_eq!(r.kind(), OfferKind::Model);
        assert_eq!(r.default_id(), "m@r1");
    }
}
