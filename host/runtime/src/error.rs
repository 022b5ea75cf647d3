//! What loading or calling a plugin can fail with.

use thiserror::Error;

/// Why a component could not be loaded. Nothing is compiled before the
/// digest and the world have been checked.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The bytes are not a WebAssembly component.
    #[error("not a WebAssembly component: {0}")]
    InvalidComponent(String),
    /// The component targets a world or version this host does not serve.
    #[error("unsupported world: the component exports {found}; this host serves {served}")]
    UnsupportedWorld {
        /// What the component exports.
        found: String,
        /// What this host serves.
        served: String,
    },
    /// The component exports a served interface with other types than the
    /// world's (a function missing, a parameter or field of another type).
    #[error("unsupported world: {export} does not match the world this host serves: {detail}")]
    WorldMismatch {
        /// The interface, e.g. `switchyard:policy/admission@0.1.0`.
        export: String,
        /// The first difference found.
        detail: String,
    },
    /// The bytes do not have the SHA-256 the caller pinned.
    #[error("digest mismatch: expected sha256 {expected}, got {actual}")]
    DigestMismatch {
        /// The pinned digest.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// wasmtime refused to compile or link the component.
    #[error("compile failed: {0}")]
    Compile(String),
    /// The component was of another kind than the role needs.
    #[error("wrong kind: {0}")]
    WrongKind(String),
    /// The plugin refused its settings (its own message).
    #[error("{0}")]
    InvalidSettings(String),
    /// Instantiation, settings validation or the smoke call failed.
    #[error("instantiation failed: {0}")]
    Instantiate(#[from] CallError),
}

/// Why one call into a plugin failed. The host goes on serving in every case.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum CallError {
    /// The call ran past its wall-clock deadline and was interrupted.
    #[error("deadline of {0} ms exceeded")]
    Timeout(u64),
    /// The plugin tried to grow its memory past the cap.
    #[error("memory limit of {0} bytes exceeded")]
    MemoryLimit(usize),
    /// The call used up its fuel.
    #[error("fuel exhausted")]
    FuelExhausted,
    /// The plugin trapped (a panic, an unreachable, a bad access).
    #[error("trap: {0}")]
    Trap(String),
    /// The plugin answered with something the point does not allow.
    #[error("invalid answer: {0}")]
    InvalidAnswer(String),
}

impl CallError {
    /// A short stable label for metrics and JSON (`timeout`, `memory_limit`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Timeout(_) => "timeout",
            CallError::MemoryLimit(_) => "memory_limit",
            CallError::FuelExhausted => "fuel_exhausted",
            CallError::Trap(_) => "trap",
            CallError::InvalidAnswer(_) => "invalid_answer",
        }
    }
}
