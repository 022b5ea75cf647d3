//! The head line of a worker's `inference` stream
//! (`host/worker/src/node/head.rs`): the JSON a frontend sends before the
//! request body, whose path and headers go to an engine on the worker's
//! machine.
//!
//! The module is compiled here from its source file, not through the
//! `switchyard-worker` crate: that crate links wasmtime, which would make
//! every fuzz build instrument a compiler. The module needs only serde,
//! serde_json and `reqwest::Method`, which is `http::Method`; `http` is
//! named `reqwest` below so that the file compiles unchanged.
//!
//! Input: the bytes of a stream; the head is what comes before the first
//! newline (as `StreamReader::read_line` cuts it).
//! Invariants: no panic; a head that passes has a visible-ASCII path under
//! `/v1/` that cannot leave it, GET or POST, at most 32 headers with token
//! names none of which the worker reserves and values without control
//! characters; and written out as JSON again it passes unchanged.

#![no_main]

extern crate http as reqwest;

#[allow(dead_code, unreachable_pub)]
#[path = "../../host/worker/src/node/head.rs"]
mod head;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(valid) = head::parse(line) else {
        return;
    };
    assert!(valid.path.starts_with("/v1/"), "{}", valid.path);
    assert!(valid.path.bytes().all(|b| b.is_ascii_graphic()));
    let lower = valid.path.to_ascii_lowercase();
    for bad in ["..", "//", "@", "\\", "#", "%2e", "%2f"] {
        assert!(!lower.contains(bad), "{}", valid.path);
    }
    assert!(valid.method == http::Method::GET || valid.method == http::Method::POST);
    assert!(valid.headers.len() <= 32);
    for (name, value) in &valid.headers {
        let lower = name.to_ascii_lowercase();
        assert!(
            !name.is_empty()
                && !["host", "content-length", "transfer-encoding", "connection"]
                    .contains(&lower.as_str())
        );
        assert!(!value.bytes().any(|b| b.is_ascii_control() && b != b'\t'));
    }
    let again = serde_json::json!({
        "replica": valid.replica,
        "method": valid.method.as_str(),
        "path": valid.path,
        "headers": valid.headers,
    });
    assert_eq!(head::parse(again.to_string().as_bytes()), Ok(valid));
});
