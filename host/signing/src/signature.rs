//! Signing a component and verifying a detached signature. A signature
//! proves only that its key signed the statement; whether that key is
//! trusted is the cluster's trust set's business, asked by the server.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer};
use switchyard_protocol::plugin::PluginKind;
use switchyard_protocol::signing::{MAX_SIGNATURE_HEADER, PluginSignature, SIGNATURE_FORMAT};

use crate::key::{SigningKey, decode_hex, key_id, parse_public_key};

/// Why a signature does not verify, or could not be read. Never quotes
/// the signature's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is not base64 of a signature file's JSON, or too long.
    #[error(
        "the signature header is not base64 of a signature file (at most {MAX_SIGNATURE_HEADER} bytes): {0}"
    )]
    Malformed(String),
    /// A format this host does not read.
    #[error("the signature's format is not {SIGNATURE_FORMAT}")]
    Format,
    /// The public key is not 64 lowercase hex of a strong ed25519 key.
    #[error("the signature's public key is not 64 lowercase hex of an ed25519 key")]
    MalformedKey,
    /// The key id is not the public key's.
    #[error("the signature's key_id {claimed} is not its public key's id {actual}")]
    KeyIdMismatch {
        /// The id the file names.
        claimed: String,
        /// The public key's id.
        actual: String,
    },
    /// The signature is not the key's over the statement.
    #[error("the signature does not verify with key {key_id}")]
    BadSignature {
        /// The key.
        key_id: String,
    },
}

/// Signs a component: the statement binding its kind, name, version and
/// digest.
pub fn sign(
    key: &SigningKey,
    kind: PluginKind,
    name: &str,
    version: &str,
    sha256: &str,
) -> PluginSignature {
    let sha256 = sha256.to_ascii_lowercase();
    let statement = PluginSignature::statement(kind, name, version, &sha256);
    PluginSignature {
        format: SIGNATURE_FORMAT.into(),
        key_id: key.key_id(),
        public_key: key.public_key(),
        signature: hex::encode(key.inner.sign(&statement).to_bytes()),
        name: name.into(),
        version: version.into(),
        kind,
        sha256,
    }
}

/// Checks that `signature` is its key's over its own statement (strict
/// verification: no malleable signatures). Whether it covers a given
/// upload is [`PluginSignature::covers`].
pub fn verify(signature: &PluginSignature) -> Result<(), SignatureError> {
    if signature.format != SIGNATURE_FORMAT {
        return Err(SignatureError::Format);
    }
    let key = parse_public_key(&signature.public_key).ok_or(SignatureError::MalformedKey)?;
    let actual = key_id(&key);
    if signature.key_id != actual {
        return Err(SignatureError::KeyIdMismatch {
            claimed: printable(&signature.key_id),
            actual,
        });
    }
    let bad = || SignatureError::BadSignature {
        key_id: actual.clone(),
    };
    let bytes = decode_hex::<64>(&signature.signature).ok_or_else(bad)?;
    key.verify_strict(
        &signature.signed_statement(),
        &Signature::from_bytes(&bytes),
    )
    .map_err(|_| bad())
}

/// The header value an upload carries: base64 of the signature's JSON.
pub fn encode_header(signature: &PluginSignature) -> String {
    STANDARD.encode(serde_json::to_vec(signature).expect("a signature serializes"))
}

/// Reads the header value back; bounded before it is decoded.
pub fn decode_header(value: &[u8]) -> Result<PluginSignature, SignatureError> {
    if value.len() > MAX_SIGNATURE_HEADER {
        return Err(SignatureError::Malformed(format!("{} bytes", value.len())));
    }
    let json = STANDARD
        .decode(value.trim_ascii())
        .map_err(|_| SignatureError::Malformed("not base64".into()))?;
    // Where it broke, not serde's message: that may quote the client's text.
    serde_json::from_slice(&json).map_err(|e| {
        SignatureError::Malformed(format!(
            "not a signature file's JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

/// A claimed key id as shown in a message: the client's own text, so at
/// most 16 characters and only hex.
fn printable(text: &str) -> String {
    match text.len() <= 16 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => text.to_string(),
        false => "(not a key id)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed() -> (SigningKey, PluginSignature) {
        let key = SigningKey::generate();
        let signature = sign(
            &key,
            PluginKind::Policy,
            "max-tokens",
            "1.0.0",
            &"AB".repeat(32),
        );
        (key, signature)
    }

    #[test]
    fn a_signature_verifies_and_travels_through_its_header() {
        let (key, signature) = signed();
        assert_eq!(
            signature.sha256,
            "ab".repeat(32),
            "the digest is kept lowercase"
        );
        assert_eq!(signature.key_id, key.key_id());
        verify(&signature).unwrap();
        let header = encode_header(&signature);
        assert_eq!(decode_header(header.as_bytes()).unwrap(), signature);
    }

    #[test]
    fn changing_any_bound_field_breaks_the_signature() {
        let (_, signature) = signed();
        let tampered: [fn(&mut PluginSignature); 4] = [
            |s| s.name = "other".into(),
            |s| s.version = "1.0.1".into(),
            |s| s.kind = PluginKind::Grant,
            |s| s.sha256 = "cd".repeat(32),
        ];
        for tamper in tampered {
            let mut changed = signature.clone();
            tamper(&mut changed);
            assert!(
                matches!(verify(&changed), Err(SignatureError::BadSignature { .. })),
                "{changed:?}"
            );
        }
    }

    #[test]
    fn another_key_or_a_wrong_id_or_format_is_refused() {
        let (_, signature) = signed();
        let other = SigningKey::generate();
        let mut swapped = signature.clone();
        swapped.public_key = other.public_key();
        swapped.key_id = other.key_id();
        assert!(matches!(
            verify(&swapped),
            Err(SignatureError::BadSignature { .. })
        ));
        let mut wrong_id = signature.clone();
        wrong_id.key_id = "0000000000000000".into();
        assert!(matches!(
            verify(&wrong_id),
            Err(SignatureError::KeyIdMismatch { .. })
        ));
        let mut format = signature.clone();
        format.format = "v0".into();
        assert_eq!(verify(&format), Err(SignatureError::Format));
        let mut truncated = signature;
        truncated.signature.truncate(100);
        assert!(verify(&truncated).is_err());
    }

    #[test]
    fn a_header_that_is_not_a_signature_is_malformed_before_parsing_much() {
        for bad in [
            &b"not base64!"[..],
            STANDARD.encode(b"{\"format\": 1}").as_bytes(),
            &vec![b'A'; MAX_SIGNATURE_HEADER + 1],
        ] {
            assert!(matches!(
                decode_header(bad),
                Err(SignatureError::Malformed(_))
            ));
        }
    }
}
