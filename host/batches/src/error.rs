//! Every way a file or batch call is refused, each with its stable code.
//! The server maps each to its HTTP status once, at its edge; a federated
//! job's owner answers them to the peer the same way.

use switchyard_store::StoreError;

use crate::valid::MAX_FILE_BYTES;

/// Why a file or batch call did not go ahead.
#[derive(Debug, thiserror::Error)]
pub enum BatchesError {
    /// A request or an input file that breaks a rule (400, with `code`:
    /// `invalid_request`, `invalid_purpose`, `empty_file`, ...).
    #[error("{message}")]
    Invalid {
        /// The stable code.
        code: &'static str,
        /// What is wrong, for the client.
        message: String,
    },
    /// No such file, or another key's (404 `file_not_found`).
    #[error("no file {0:.64}")]
    FileNotFound(String),
    /// No such batch, or another key's (404 `batch_not_found`).
    #[error("no batch {0:.64}")]
    BatchNotFound(String),
    /// The batch has ended already (409 `batch_not_cancellable`).
    #[error("batch {0:.64} has already ended")]
    NotCancellable(String),
    /// An upload over [`MAX_FILE_BYTES`] (413 `file_too_large`).
    #[error("a batch file is at most {MAX_FILE_BYTES} bytes")]
    FileTooLarge,
    /// The key's files would outgrow its quota (413 `quota_exceeded`).
    #[error(
        "this key's files hold {used} bytes and may hold at most {quota}: delete some (DELETE /v1/files/{{id}}) or let them expire"
    )]
    QuotaExceeded {
        /// The bytes the key's files hold.
        used: i64,
        /// The most they may hold.
        quota: u64,
    },
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bug or a broken stream here (500 `internal`; the detail is logged).
    #[error("{0}")]
    Internal(String),
}

impl BatchesError {
    /// A rule broken, with its code (400).
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            message: message.into(),
        }
    }

    /// An `invalid_request` (400).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::invalid("invalid_request", message)
    }

    /// An internal error from anything displayable.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self::Internal(error.to_string())
    }

    /// Whether the thing asked about does not exist (for this caller).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::FileNotFound(_) | Self::BatchNotFound(_))
    }
}
