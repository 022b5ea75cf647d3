//! What GPUs a worker has.
//!
//! A worker reports its GPUs (model, memory total and used) at registration
//! and in every heartbeat. [`detect`] finds them, in this order:
//!
//! 1. a declared inventory (`--gpu "name=H200,memory=141GiB"` or a file), for
//!    machines without GPUs and for tests; when one is given it wins;
//! 2. NVML, loaded at run time from the driver's `libnvidia-ml.so.1`;
//! 3. `nvidia-smi`, where NVML cannot be loaded but the tool runs;
//! 4. nothing: an empty inventory with source [`Source::None`].
//!
//! A missing or broken GPU stack never stops a worker from starting: each
//! skipped step is logged and detection moves on.
//!
//! # Layout
//! - [`inventory`]: [`Gpu`], [`Inventory`] and [`Source`], what is reported.
//! - `detect.rs`: [`detect`], the order above.
//! - [`nvml`]: NVML through its shared library (the crate's only unsafe code,
//!   in `nvml/ffi.rs`), its return codes and string buffers.
//! - [`smi`]: the `nvidia-smi` fallback, its runner and its CSV parser.
//! - [`declared`]: `--gpu` specs and the JSON file form.
//! - [`size`]: sizes with units (`141GiB`, `79.6GB`).

#![deny(missing_docs)]

pub mod declared;
mod detect;
pub mod inventory;
pub mod nvml;
pub mod size;
pub mod smi;
#[cfg(test)]
mod test_support;

pub use declared::{DeclaredError, GpuSpec};
pub use detect::detect;
pub use inventory::{Gpu, Inventory, Source};
