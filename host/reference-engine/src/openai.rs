//! The OpenAI wire format: what clients send, what the engine answers, and
//! the error body.
//!
//! Raw requests ([`request`]) are parsed once into valid ones ([`valid`]);
//! handlers only see the latter.

pub mod error;
pub mod request;
pub mod response;
pub mod valid;

pub use error::ApiError;
