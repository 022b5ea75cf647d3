//! Why a grant evaluator binding was not stored, or a rollback not made.

use switchyard_store::StoreError;

use super::SHIPPED;
use crate::bound::BindError;

/// Why a binding was not stored, or a rollback not made.
#[derive(Debug, thiserror::Error)]
pub enum EvaluatorError {
    /// Generation 0 runs the shipped evaluator, which the registry lacks.
    #[error(
        "no evaluator is bound and the plugin registry holds no {SHIPPED} grant evaluator (the binary seeds it at start)"
    )]
    NoShipped,
    /// A rollback with nothing to leave, or past generation 0.
    #[error("{0}")]
    NothingToRollback(&'static str),
    /// What every bound kind can refuse.
    #[error(transparent)]
    Bind(#[from] BindError),
}

impl From<StoreError> for EvaluatorError {
    fn from(e: StoreError) -> Self {
        Self::Bind(e.into())
    }
}
