//! Engines on the worker: one module of knowledge per kind ([`kind`]) behind
//! one interface, and the [`supervisor`] that keeps each process alive.

pub mod kind;
pub mod supervisor;

pub use kind::{EngineBinaries, EngineKind, EngineSpec, Launch};
pub use supervisor::{Engine, EngineState};
