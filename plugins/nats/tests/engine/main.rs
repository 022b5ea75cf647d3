//! The engine driven with raw protocol bytes, as a host would drive it.

mod claims;
mod fuzz;
mod handshake;
mod messages;
mod reconnect;
mod requests;
mod support;
