//! The worker (`switchyard worker`): registers with a frontend using the
//! deployment's registration token, keeps the per-node credential it is
//! given (the registration token is never used again), and heartbeats over
//! HTTP, which exists whatever the carrier.
//!
//! # Layout
//! - [`engines`]: engine kinds and the supervisor that keeps them alive.
//! - [`config`]: what the worker is configured with.
//! - [`identity`]: the node id and credential kept under the data directory.
//! - [`node`]: the worker's control verbs and stream services over its cache and engines.
//! - [`placement`]: the verified placement cache of model files.
//! - [`inventory`]: what the machine reports (CPUs, memory).
//! - [`client`]: the frontend's node API.
//! - [`carrier`]: the worker's side of the cluster's carrier sets (several side
//!   by side during a change: attach with jitter and backoff, drain, close).
//! - [`components`]: the carrier components it runs, fetched from a frontend and verified.
//! - [`run`]: registration and the heartbeat loop.
//! - [`services`]: control verbs and stream services, and the count of what runs per set.

pub mod carrier;
pub mod client;
pub mod components;
pub mod config;
pub mod engines;
pub mod identity;
pub mod inventory;
pub mod node;
pub mod placement;
mod run;
pub mod services;

pub use config::WorkerConfig;
pub use run::run;

/// What can stop a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The frontend could not be reached or answered something unusable.
    #[error("frontend {0}")]
    Frontend(String),
    /// The registration token was refused.
    #[error("the frontend refused the registration token")]
    RegistrationRefused,
    /// The identity file could not be read or written.
    #[error("identity file {path}: {message}")]
    Identity {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}
