//! The plugin runtime: everything Switchyard does with WebAssembly components.
//!
//! One crate holds wasmtime so that changes elsewhere never rebuild it.
//!
//! # Layout
//! - [`bindings`]: the host-side `bindgen!` of every world; nothing else generates bindings.
//! - [`inspect`]: what a component is (kind, world, version) without compiling it.
//! - [`engine`]: the wasmtime engine, its configuration and the epoch ticker
//!   (`ticker.rs`: it sleeps while no call runs).
//! - [`cache`]: compiled components cached on disk per (SHA-256, engine configuration).
//! - [`loader`]: the one way every kind is loaded: digest, world, compile through the
//!   cache, `InstancePre`; `instance.rs` holds one instance and its traced, timed calls,
//!   `pool.rs` the warm instances of policies and grant evaluators.
//! - [`sandbox`]: per-store state: the memory limiter, WASI with an empty context, host imports.
//! - [`policy`]: an admission policy ready to call, with its pool of warm instances
//!   (`policy@0.2.0`, and 0.1.0 adapted to it in `policy/v0_1.rs`).
//! - [`usage`]: the host's usage counters as policies read them.
//! - [`grant`]: a grant evaluator ready to call, pooled like a policy.
//! - [`carrier`]: a carrier plugin, one stateful protocol engine driven by the host's reactor
//!   (`carrier@0.4.0`, with 0.3.0 and 0.1.0 adapted to it).
//! - [`tunnel`]: a tunnel session plugin (`tunnel@0.2.0`, and 0.1.0 turned into it).
//! - [`admission`]: admission points, requests, decisions and the ordered chain.
//! - [`inline`]: when a chain's calls run on the caller's async task, and when on a thread.
//! - [`metrics`]: per-plugin counters and latency histograms.
//! - [`error`]: what a load or a call can fail with.

pub mod admission;
pub mod bindings;
pub mod cache;
pub mod carrier;
pub mod engine;
pub mod error;
pub mod grant;
pub mod inline;
pub mod inspect;
mod instance;
pub mod loader;
pub mod metrics;
pub mod policy;
mod pool;
pub mod sandbox;
mod ticker;
pub mod tunnel;
pub mod usage;
mod world_types;

pub use engine::{Runtime, RuntimeConfig};
pub use error::{CallError, LoadError};
pub use inspect::{ComponentInfo, PluginKind};
pub use loader::verify;
