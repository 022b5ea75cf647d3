//! The body of a `/v1` request as the frontend reads it
//! (`host/inference/src/fields.rs`): one pass over a client's
//! JSON for the model, the token limits, `stream` and the prompt's text,
//! without building a tree.
//!
//! The module and its reference (`fields/tree.rs`) are compiled here from
//! their source files, not through `switchyard-inference`, which links
//! wasmtime; they need only serde and serde_json.
//!
//! Input: a request body.
//! Invariants: no panic; the pass accepts exactly the bodies
//! `serde_json::Value` accepts and refuses the others with the same error;
//! an accepted body's fields are those read from its `Value`.

#![no_main]

#[allow(dead_code, unreachable_pub)]
#[path = "../../host/inference/src/fields.rs"]
mod fields;

#[allow(dead_code, unreachable_pub)]
#[path = "../../host/inference/src/fields/tree.rs"]
mod tree;

use fields::{Fields, Given, read};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tree::check(data));
