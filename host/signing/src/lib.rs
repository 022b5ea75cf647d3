//! Signed plugins: an ed25519 signing key kept in a private file, the
//! detached signature it makes over a component's statement
//! ([`switchyard_protocol::signing::PluginSignature`]), and the check an
//! upload runs on one. The CLI signs; the server verifies; both use this
//! crate, so the statement and the encodings are written once.
//!
//! # Layout
//! - [`key`]: making, writing and reading a signing key and its public half.
//! - [`signature`]: signing a component, verifying a signature, the upload header.

#![deny(missing_docs)]

pub mod key;
pub mod signature;

pub use key::{KeyFileError, SigningKey, key_id, parse_public_key};
pub use signature::{SignatureError, decode_header, encode_header, sign, verify};
