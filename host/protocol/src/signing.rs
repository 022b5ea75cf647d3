//! Signed plugins: the detached signature `switchyard plugin sign` writes
//! and an upload carries, the statement it signs, the trusted keys the
//! trust API keeps, what the registry says of a version's signer, and the
//! per-kind requirement (`require_signed`, a cluster setting).
//!
//! The statement binds everything an upload claims, so a signature for one
//! component cannot be replayed for another name, version, kind or digest:
//!
//! ```text
//! switchyard-plugin-signature/v1\n<kind>\n<name>\n<version>\n<sha256>\n
//! ```
//!
//! Keys and signatures are lowercase hex (ed25519: 64 and 128 characters),
//! as the federation's keys are; a key's id is the first 16 hex characters
//! of the SHA-256 of its 32 bytes.

use serde::{Deserialize, Serialize};

use crate::plugin::PluginKind;

/// The format word of a signature file and the first line of the
/// statement: a later format is told apart by it.
pub const SIGNATURE_FORMAT: &str = "switchyard-plugin-signature/v1";

/// The header an upload carries its detached signature in: the base64
/// (standard alphabet, padded) of the signature file's JSON.
pub const SIGNATURE_HEADER: &str = "x-switchyard-signature";

/// The longest signature header read: a signature file is about 500
/// bytes of JSON (names and versions are at most 64 characters each), so
/// 4 KiB of base64 bounds it with room and refuses anything else unparsed.
pub const MAX_SIGNATURE_HEADER: usize = 4096;

/// The longest name of a trusted key: it is shown in every listing.
pub const MAX_KEY_NAME: usize = 64;

/// The longest comment on a trusted key.
pub const MAX_KEY_COMMENT: usize = 256;

/// The most trusted keys a cluster keeps: a trust set is a handful of
/// release keys, and every upload and listing reads it.
pub const MAX_TRUSTED_KEYS: usize = 64;

/// A detached signature over a component: what `switchyard plugin sign`
/// writes and what an upload carries (base64 in [`SIGNATURE_HEADER`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PluginSignature {
    /// [`SIGNATURE_FORMAT`].
    pub format: String,
    /// The signing key's id (16 hex of the SHA-256 of the public key).
    pub key_id: String,
    /// The ed25519 public key, 64 lowercase hex.
    pub public_key: String,
    /// The ed25519 signature of [`PluginSignature::statement`], 128 lowercase hex.
    pub signature: String,
    /// The plugin name it was signed for.
    pub name: String,
    /// The version it was signed for.
    pub version: String,
    /// The kind of component it was signed for.
    pub kind: PluginKind,
    /// The component's SHA-256, lowercase hex.
    pub sha256: String,
}

impl PluginSignature {
    /// The bytes signed for a component: format, kind, name, version and
    /// digest, one per line.
    pub fn statement(kind: PluginKind, name: &str, version: &str, sha256: &str) -> Vec<u8> {
        format!("{SIGNATURE_FORMAT}\n{kind}\n{name}\n{version}\n{sha256}\n").into_bytes()
    }

    /// The statement this signature claims to sign.
    pub fn signed_statement(&self) -> Vec<u8> {
        Self::statement(self.kind, &self.name, &self.version, &self.sha256)
    }

    /// Whether this signature speaks of exactly this upload.
    pub fn covers(&self, kind: PluginKind, name: &str, version: &str, sha256: &str) -> bool {
        self.kind == kind
            && self.name == name
            && self.version == version
            && self.sha256.eq_ignore_ascii_case(sha256)
    }
}

/// `POST /api/trust/keys`: a public key to trust.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewTrustedKey {
    /// The ed25519 public key, 64 lowercase hex (a `.pub` file's content).
    #[cfg_attr(
        feature = "utoipa",
        schema(example = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
    )]
    pub public_key: String,
    /// What the key is called in listings [default: its id].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "utoipa", schema(example = "release-2026"))]
    pub name: Option<String>,
    /// A note for other admins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A key the cluster trusts to sign plugins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct TrustedKey {
    /// Its id: 16 hex of the SHA-256 of the public key.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The ed25519 public key, 64 lowercase hex.
    pub public_key: String,
    /// The admin's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The API key that added it.
    pub added_by: String,
    /// When, RFC 3339 by the database clock.
    pub added_at: String,
}

text_enum! {
    /// Where a signer stands with the cluster's trust set now.
    pub enum SignerTrust {
        /// The key is trusted.
        Trusted => "trusted",
        /// The key was not trusted when the version was uploaded, and is not now.
        Untrusted => "untrusted",
        /// The key was trusted at upload and has since been removed: what
        /// runs from it keeps running, but no new binding takes it while
        /// its kind requires signatures.
        NoLongerTrusted => "no_longer_trusted",
    }
}

/// Who signed a registered version, as the registry shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Signer {
    /// The signing key's id.
    pub key_id: String,
    /// The trusted key's name (now, or when it was last trusted); `None`
    /// for a key never trusted.
    pub key_name: Option<String>,
    /// Whether the key is in the trust set now.
    pub trusted: bool,
    /// The same in a word, telling "no longer trusted" from "never".
    pub trust: SignerTrust,
}

/// Which kinds of component must be signed by a trusted key before they
/// are uploaded or bound (a cluster setting, `require_signed`). `carrier`
/// covers carrier and tunnel components: both carry the cluster's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct RequireSigned {
    /// Admission policies.
    pub policy: bool,
    /// Grant evaluators.
    pub grant: bool,
    /// Carrier and tunnel components.
    pub carrier: bool,
}

impl RequireSigned {
    /// The names of its fields, for messages.
    pub const NAMES: [&'static str; 3] = ["policy", "grant", "carrier"];

    /// Whether `kind` must be signed by a trusted key.
    pub fn requires(&self, kind: PluginKind) -> bool {
        match kind {
            PluginKind::Policy => self.policy,
            PluginKind::Grant => self.grant,
            PluginKind::Carrier | PluginKind::Tunnel => self.carrier,
        }
    }

    /// Whether no kind requires a signature.
    pub fn is_off(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn the_statement_binds_kind_name_version_and_digest_one_per_line() {
        let statement = PluginSignature::statement(PluginKind::Policy, "max-tokens", "1.0.0", "ab");
        assert_eq!(
            statement,
            b"switchyard-plugin-signature/v1\npolicy\nmax-tokens\n1.0.0\nab\n"
        );
        // Another kind with the same name and version is another statement.
        assert_ne!(
            statement,
            PluginSignature::statement(PluginKind::Grant, "max-tokens", "1.0.0", "ab")
        );
    }

    #[test]
    fn a_signature_file_has_fixed_fields_and_covers_only_its_upload() {
        let signature = PluginSignature {
            format: SIGNATURE_FORMAT.into(),
            key_id: "0011223344556677".into(),
            public_key: "aa".repeat(32),
            signature: "bb".repeat(64),
            name: "p".into(),
            version: "1".into(),
            kind: PluginKind::Carrier,
            sha256: "cd".repeat(32),
        };
        let json = round_trip(&signature);
        assert_eq!(json["kind"], "carrier");
        assert!(signature.covers(PluginKind::Carrier, "p", "1", &"CD".repeat(32)));
        assert!(!signature.covers(PluginKind::Carrier, "p", "2", &"cd".repeat(32)));
        assert!(!signature.covers(PluginKind::Tunnel, "p", "1", &"cd".repeat(32)));
        let mut extra = json.clone();
        extra["note"] = json!("x");
        assert!(serde_json::from_value::<PluginSignature>(extra).is_err());
    }

    #[test]
    fn carrier_requirement_covers_tunnels_and_absent_kinds_are_off() {
        let required: RequireSigned = serde_json::from_value(json!({"carrier": true})).unwrap();
        assert!(required.requires(PluginKind::Carrier) && required.requires(PluginKind::Tunnel));
        assert!(!required.requires(PluginKind::Policy) && !required.requires(PluginKind::Grant));
        assert!(RequireSigned::default().is_off());
        assert!(serde_json::from_value::<RequireSigned>(json!({"policies": true})).is_err());
        assert_eq!(
            round_trip(&Signer {
                key_id: "k".into(),
                key_name: None,
                trusted: false,
                trust: SignerTrust::NoLongerTrusted,
            })["trust"],
            "no_longer_trusted"
        );
    }
}
