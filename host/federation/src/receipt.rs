//! A grant's acceptance receipt: both clusters' keys sign the grant's
//! terms, and both keep the signatures.
//!
//! What is signed is the terms' canonical JSON (object keys sorted by
//! their UTF-8 bytes at every depth, no whitespace, serde_json's escaping
//! and number forms), so two clusters that hold the same terms in
//! differently ordered maps or structs sign the same bytes. The keys are
//! sorted here rather than trusted to serde_json's map, whose order
//! becomes insertion order if any crate in the build enables its
//! `preserve_order` feature. RFC 8785 (JCS) is the same idea; terms hold
//! integers and text, where the two agree except in the order of keys
//! outside the Basic Multilingual Plane.
//!
//! A prefix (`switchyard-federation-receipt/1\n`) separates receipt
//! signatures from link transcripts: neither can pass for the other.

use serde::Serialize;
use serde_json::Value;

use crate::identity::{self, ClusterKey, VerifyError};

/// Signed before the canonical JSON.
pub const DOMAIN: &[u8] = b"switchyard-federation-receipt/1\n";

/// The canonical JSON of `value`.
///
/// # Panics
/// If `value` does not serialize to JSON (a map with keys that are not
/// strings): terms are plain structs, so that is a bug, not an input.
pub fn canonical_json(value: &impl Serialize) -> Vec<u8> {
    let value = serde_json::to_value(value).expect("terms serialize to JSON");
    let mut out = Vec::new();
    write(&value, &mut out);
    out
}

/// This cluster's signature of `terms`, hex.
pub fn sign(key: &ClusterKey, terms: &impl Serialize) -> String {
    key.sign(&message(terms))
}

/// Checks that `signature` is `public_key`'s signature of `terms`.
pub fn verify(
    public_key: &str,
    terms: &impl Serialize,
    signature: &str,
) -> Result<(), VerifyError> {
    identity::verify(public_key, &message(terms), signature)
}

/// The bytes signed: the domain, then the canonical JSON.
fn message(terms: &impl Serialize) -> Vec<u8> {
    let mut out = DOMAIN.to_vec();
    out.extend(canonical_json(terms));
    out
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("a JSON scalar writes to memory");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    #[derive(Serialize)]
    struct Terms {
        services: Vec<String>,
        max_requests: u64,
        limits: BTreeMap<String, u64>,
    }

    #[derive(Serialize)]
    struct Reordered {
        limits: BTreeMap<String, u64>,
        max_requests: u64,
        services: Vec<String>,
    }

    #[test]
    fn key_order_does_not_change_the_bytes() {
        let limits: BTreeMap<_, _> = [("z".to_string(), 1), ("a".to_string(), 2)].into();
        let a = canonical_json(&Terms {
            services: vec!["chat".into()],
            max_requests: 10,
            limits: limits.clone(),
        });
        let b = canonical_json(&Reordered {
            limits,
            max_requests: 10,
            services: vec!["chat".into()],
        });
        assert_eq!(a, b);
        assert_eq!(
            String::from_utf8(a).unwrap(),
            r#"{"limits":{"a":2,"z":1},"max_requests":10,"services":["chat"]}"#
        );
    }

    #[test]
    fn nested_objects_are_sorted_and_text_escaped() {
        let bytes = canonical_json(&json!({"b": [{"y": 1, "x": null}], "a": "q\"\n é"}));
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"a\":\"q\\\"\\n é\",\"b\":[{\"x\":null,\"y\":1}]}"
        );
    }

    #[test]
    fn a_receipt_verifies_for_its_terms_only() {
        let key = ClusterKey::generate();
        let terms = json!({"grant": "gr_1", "max_requests": 10, "operations": ["inference"]});
        let signature = sign(&key, &terms);
        assert_eq!(verify(&key.public_key(), &terms, &signature), Ok(()));
        let reordered = json!({"operations": ["inference"], "max_requests": 10, "grant": "gr_1"});
        assert_eq!(verify(&key.public_key(), &reordered, &signature), Ok(()));
        let changed = json!({"grant": "gr_1", "max_requests": 11, "operations": ["inference"]});
        assert_eq!(
            verify(&key.public_key(), &changed, &signature),
            Err(VerifyError::BadSignature)
        );
        // The same bytes signed without the receipt domain are not a receipt.
        let bare = key.sign(&canonical_json(&terms));
        assert_eq!(
            verify(&key.public_key(), &terms, &bare),
            Err(VerifyError::BadSignature)
        );
    }
}
