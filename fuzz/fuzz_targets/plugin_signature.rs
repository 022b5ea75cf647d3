//! The detached signature an upload carries in `x-switchyard-signature`
//! (`host/signing/src/signature.rs`): base64 of a signature file's JSON,
//! read before the server asks its trust set about the key.
//!
//! Input: the header's value.
//! Invariants: no panic, whatever the bytes; a value that decodes encodes
//! and decodes again to the same signature; verifying a decoded signature
//! answers (it never panics on a malformed key, id or signature), and an
//! error never quotes more than a bounded part of the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_signing::{decode_header, encode_header, verify};

fuzz_target!(|data: &[u8]| {
    let Ok(signature) = decode_header(data) else {
        return;
    };
    let again =
        decode_header(encode_header(&signature).as_bytes()).expect("an encoded signature decodes");
    assert_eq!(again, signature);
    if let Err(e) = verify(&signature) {
        assert!(e.to_string().len() < 512, "an error stays short: {e}");
    }
});
