//! The federation link's handshake: the text messages two clusters'
//! frontends exchange on `GET /api/federation/link` before any stream opens.
//!
//! ```text
//! dialer                                   listener
//!   Hello { key, nonce, purpose, lane } ->
//!                                       <- Challenge { key, nonce, signature }
//!   Proof { signature }                 ->
//!                                       <- Accepted {}
//! ```
//!
//! Either side may answer [`LinkMessage::Refused`] instead and close. Each
//! signature covers everything `Hello` and `Challenge` claim (cluster ids,
//! labels, keys, nonces, the dialer's URL, the purpose and the lane) and
//! the signer's role (the transcript lives in `switchyard-federation`'s
//! `proof` module), so neither a replayed proof, nor one side's signature
//! passed off as the other's, nor a message altered in transit verifies.
//!
//! Keys, signatures and nonces are lowercase hex: an ed25519 public key
//! ([`PUBLIC_KEY_HEX_LEN`]), an ed25519 signature ([`SIGNATURE_HEX_LEN`]),
//! 32 random bytes ([`NONCE_HEX_LEN`]).

use serde::{Deserialize, Serialize};

/// The handshake's version; a `Hello` naming another is refused
/// [`code::BAD_HANDSHAKE`].
pub const LINK_VERSION: u32 = 1;

/// Hex characters of an ed25519 public key (32 bytes).
pub const PUBLIC_KEY_HEX_LEN: usize = 64;
/// Hex characters of an ed25519 signature (64 bytes).
pub const SIGNATURE_HEX_LEN: usize = 128;
/// Hex characters of a handshake nonce (32 random bytes: never repeats).
pub const NONCE_HEX_LEN: usize = 64;

/// The largest handshake message read, in bytes: a `Hello` with the longest
/// label, URL and token is far below it; anything larger is refused before
/// it is parsed, since the peer is not yet authenticated.
pub const MAX_LINK_MESSAGE: usize = 16 * 1024;

text_enum! {
    /// Why the dialer opens the link.
    pub enum LinkPurpose {
        /// The first link to a cluster, carrying its join token: the
        /// listener registers the dialer as a new peer.
        Join => "join",
        /// A link between clusters already paired: both keys must be the
        /// ones each side stored.
        Link => "link",
    }
}

/// One message of the handshake, JSON tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LinkMessage {
    /// Dialer → listener: who dials, why, and a fresh nonce for the
    /// listener to sign.
    Hello {
        /// [`LINK_VERSION`].
        version: u32,
        /// Join or link.
        purpose: LinkPurpose,
        /// The tunnel lane the link carries (`inference` or `bulk`).
        lane: String,
        /// The dialer's cluster id.
        cluster_id: String,
        /// The dialer's label.
        label: String,
        /// The dialer's public key, hex.
        public_key: String,
        /// Where the listener can reach the dialer, if it can.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// The dialer's nonce, hex.
        nonce: String,
        /// The listener's join token; only with [`LinkPurpose::Join`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        join_token: Option<String>,
    },
    /// Listener → dialer: the listener's identity, its nonce for the dialer
    /// to sign, and its signature over the listener's transcript.
    Challenge {
        /// The listener's cluster id.
        cluster_id: String,
        /// The listener's label.
        label: String,
        /// The listener's public key, hex.
        public_key: String,
        /// The listener's nonce, hex.
        nonce: String,
        /// The listener's signature, hex.
        signature: String,
    },
    /// Dialer → listener: the dialer's signature over the dialer's
    /// transcript.
    Proof {
        /// The dialer's signature, hex.
        signature: String,
    },
    /// Listener → dialer: the link is up; streams may open.
    Accepted {},
    /// Either side: the handshake is refused; the sender closes.
    Refused {
        /// A stable code (see [`code`], or the caller's own such as
        /// `invalid_join_token`).
        code: String,
        /// For the operator; never a secret.
        message: String,
    },
}

/// The refusal codes the handshake itself gives.
pub mod code {
    /// A message that is not JSON, not the one expected, too large, of
    /// another version, or with a malformed key or nonce.
    pub const BAD_HANDSHAKE: &str = "bad_handshake";
    /// A signature that does not verify against the claimed key.
    pub const BAD_SIGNATURE: &str = "bad_signature";
    /// The peer did not answer in time.
    pub const HANDSHAKE_TIMEOUT: &str = "handshake_timeout";
    /// The connection closed before the handshake finished.
    pub const LINK_CLOSED: &str = "link_closed";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn the_handshake_messages_round_trip() {
        let hello = LinkMessage::Hello {
            version: LINK_VERSION,
            purpose: LinkPurpose::Join,
            lane: "inference".into(),
            cluster_id: "cl_a".into(),
            label: "alpha".into(),
            public_key: "ab".repeat(32),
            url: Some("http://127.0.0.1:8080".into()),
            nonce: "cd".repeat(32),
            join_token: Some("jt_x".into()),
        };
        let json = round_trip(&hello);
        assert_eq!(json["type"], "hello");
        assert_eq!(json["purpose"], "join");
        round_trip(&LinkMessage::Challenge {
            cluster_id: "cl_b".into(),
            label: "beta".into(),
            public_key: "ef".repeat(32),
            nonce: "01".repeat(32),
            signature: "23".repeat(64),
        });
        round_trip(&LinkMessage::Proof {
            signature: "45".repeat(64),
        });
        assert_eq!(
            round_trip(&LinkMessage::Accepted {}),
            json!({"type": "accepted"})
        );
        assert_eq!(
            round_trip(&LinkMessage::Refused {
                code: code::BAD_SIGNATURE.into(),
                message: "no".into(),
            }),
            json!({"type": "refused", "code": "bad_signature", "message": "no"})
        );
    }

    #[test]
    fn a_hello_without_url_or_token_omits_them() {
        let json = round_trip(&LinkMessage::Hello {
            version: LINK_VERSION,
            purpose: LinkPurpose::Link,
            lane: "bulk".into(),
            cluster_id: "cl_a".into(),
            label: "alpha".into(),
            public_key: "ab".repeat(32),
            url: None,
            nonce: "cd".repeat(32),
            join_token: None,
        });
        assert_eq!(json["purpose"], "link");
        assert!(json.get("url").is_none() && json.get("join_token").is_none());
    }
}
