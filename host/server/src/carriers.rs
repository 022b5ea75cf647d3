//! The HTTP side of this replica's carriers (the carrier set itself is
//! `switchyard-carrier-set`'s).
//!
//! - [`report`]: the carrier status and a change's preflight.
//! - [`session`]: a worker's websocket on this replica, held while it lasts;
//!   [`upgrade`]: its upgrade into the carrier crate's own framing.
//! - [`axum_codec`]: axum's websocket messages, for the relay's and the
//!   federation links' endpoints.

pub mod axum_codec;
pub mod report;
pub mod session;
pub mod upgrade;
