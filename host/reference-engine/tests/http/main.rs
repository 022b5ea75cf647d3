//! The engine over real TCP on 127.0.0.1, driven with reqwest as a client
//! would; one module per area.

mod chat;
mod completions;
mod embeddings;
mod engine;
mod lifecycle;
mod limits;
mod models;
