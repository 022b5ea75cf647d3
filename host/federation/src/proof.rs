//! What each side of a link signs: a transcript of every fact the
//! handshake claims (both cluster ids, labels, keys and nonces, the URL a
//! side gave, the purpose and the lane), marked with the signer's role.
//! Labels and URLs are signed too because joining decides on them (a
//! known label or URL showing another key is a conflict).
//!
//! The bytes are unambiguous: a domain separator, then every field
//! prefixed with its length (4 bytes, big-endian), in a fixed order. So a
//! signature made for one role, purpose, lane, pair of clusters or pair of
//! nonces never verifies for another, and no text in one field can pass
//! for another field's. The separator keeps link signatures apart from
//! every other thing the cluster key signs (receipts have their own).
//!
//! Each side signs the other's fresh nonce, so a captured signature is
//! worthless in the next handshake. TLS 1.3 and SSH likewise sign a
//! transcript of the whole exchange rather than a nonce alone.

use rand::RngCore;
use switchyard_protocol::link::LinkPurpose;

/// The transcript's domain separator (its version follows the handshake's).
pub const DOMAIN: &str = "switchyard-federation-link/1";

/// Which side of the link signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that dialed and sent `Hello`.
    Dialer,
    /// The side that answered with `Challenge`.
    Listener,
}

impl Role {
    /// `dialer` or `listener`, as the transcript carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Dialer => "dialer",
            Role::Listener => "listener",
        }
    }
}

/// One side's part of a handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Party<'a> {
    /// Its cluster id.
    pub cluster_id: &'a str,
    /// Its label.
    pub label: &'a str,
    /// Its public key, hex.
    pub public_key: &'a str,
    /// The URL it gave (the dialer's `Hello` carries one; the listener's
    /// `Challenge` none).
    pub url: Option<&'a str>,
    /// The nonce it chose, hex.
    pub nonce: &'a str,
}

/// The facts of one handshake that both signatures cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session<'a> {
    /// Join or link.
    pub purpose: LinkPurpose,
    /// The lane the link carries.
    pub lane: &'a str,
    /// The side that dialed.
    pub dialer: Party<'a>,
    /// The side that listened.
    pub listener: Party<'a>,
}

/// The bytes `role` signs for `session`.
pub fn transcript(role: Role, session: &Session<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    for field in [
        DOMAIN,
        role.as_str(),
        session.purpose.as_str(),
        session.lane,
    ] {
        put(&mut out, field);
    }
    for party in [&session.dialer, &session.listener] {
        put(&mut out, party.cluster_id);
        put(&mut out, party.label);
        put(&mut out, party.public_key);
        // Present or not, then the text: no URL and an empty one differ.
        put(&mut out, if party.url.is_some() { "1" } else { "0" });
        put(&mut out, party.url.unwrap_or_default());
        put(&mut out, party.nonce);
    }
    out
}

/// Appends `field`, prefixed with its length.
fn put(out: &mut Vec<u8>, field: &str) {
    // Fields are bounded by the handshake's message limit, far below 4 GiB;
    // a longer one would be a bug, not an input.
    let len = u32::try_from(field.len()).expect("a transcript field under 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(field.as_bytes());
}

/// A fresh nonce: 32 random bytes, lowercase hex.
pub fn new_nonce() -> String {
    let mut bytes = [0u8; 32];
    // The thread-local generator is a CSPRNG reseeded from the OS.
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{ClusterKey, verify};

    struct Fixture {
        dialer_key: String,
        listener_key: String,
        dialer_nonce: String,
        listener_nonce: String,
    }

    impl Fixture {
        fn session(&self) -> Session<'_> {
            Session {
                purpose: LinkPurpose::Link,
                lane: "inference",
                dialer: Party {
                    cluster_id: "cl_a",
                    label: "alpha",
                    public_key: &self.dialer_key,
                    url: Some("http://a.example"),
                    nonce: &self.dialer_nonce,
                },
                listener: Party {
                    cluster_id: "cl_b",
                    label: "beta",
                    public_key: &self.listener_key,
                    url: None,
                    nonce: &self.listener_nonce,
                },
            }
        }
    }

    #[test]
    fn a_signature_fails_when_any_field_or_the_role_changes() {
        let dialer = ClusterKey::generate();
        let fixture = Fixture {
            dialer_key: dialer.public_key(),
            listener_key: ClusterKey::generate().public_key(),
            dialer_nonce: new_nonce(),
            listener_nonce: new_nonce(),
        };
        let other_key = ClusterKey::generate().public_key();
        let other_nonce = new_nonce();
        let base = fixture.session();
        let signature = dialer.sign(&transcript(Role::Dialer, &base));
        let check = |role, session: &Session<'_>| {
            verify(&dialer.public_key(), &transcript(role, session), &signature)
        };
        assert_eq!(check(Role::Dialer, &base), Ok(()));
        assert!(check(Role::Listener, &base).is_err(), "role");

        let mut changes: Vec<(&str, Session<'_>)> = Vec::new();
        let mut s = base;
        s.purpose = LinkPurpose::Join;
        changes.push(("purpose", s));
        let mut s = base;
        s.lane = "bulk";
        changes.push(("lane", s));
        let mut s = base;
        s.dialer.cluster_id = "cl_c";
        changes.push(("dialer id", s));
        let mut s = base;
        s.listener.cluster_id = "cl_c";
        changes.push(("listener id", s));
        let mut s = base;
        s.dialer.label = "gamma";
        changes.push(("dialer label", s));
        let mut s = base;
        s.listener.label = "gamma";
        changes.push(("listener label", s));
        let mut s = base;
        s.dialer.url = Some("http://evil.example");
        changes.push(("dialer url", s));
        let mut s = base;
        s.dialer.url = None;
        changes.push(("dialer url dropped", s));
        let mut s = base;
        s.listener.url = Some("");
        changes.push(("listener url added", s));
        let mut s = base;
        s.dialer.public_key = &other_key;
        changes.push(("dialer key", s));
        let mut s = base;
        s.listener.public_key = &other_key;
        changes.push(("listener key", s));
        let mut s = base;
        s.dialer.nonce = &other_nonce;
        changes.push(("dialer nonce", s));
        let mut s = base;
        s.listener.nonce = &other_nonce;
        changes.push(("listener nonce", s));
        let mut s = base;
        (s.dialer, s.listener) = (base.listener, base.dialer);
        changes.push(("sides swapped", s));
        for (what, session) in changes {
            assert!(check(Role::Dialer, &session).is_err(), "{what}");
        }
    }

    #[test]
    fn text_moved_between_fields_gives_other_bytes() {
        let party = |cluster_id| Party {
            cluster_id,
            label: "l",
            public_key: "k",
            url: None,
            nonce: "n",
        };
        let session = |lane, dialer, listener| Session {
            purpose: LinkPurpose::Link,
            lane,
            dialer: party(dialer),
            listener: party(listener),
        };
        let a = transcript(Role::Dialer, &session("inference", "ab", "c"));
        let b = transcript(Role::Dialer, &session("inference", "a", "bc"));
        let c = transcript(Role::Dialer, &session("inferencea", "", "bc"));
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert!(a.starts_with(&[0, 0, 0, DOMAIN.len() as u8]));
    }

    #[test]
    fn nonces_are_32_random_bytes_in_hex() {
        let (a, b) = (new_nonce(), new_nonce());
        assert_eq!(a.len(), 64);
        assert!(crate::identity::decode_hex::<32>(&a).is_some());
        assert_ne!(a, b);
    }
}
