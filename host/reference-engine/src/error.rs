//! Why an engine could not start or stopped serving.

use std::net::SocketAddr;
use std::path::PathBuf;

/// An error of the engine as a whole (request errors are
/// [`ApiError`](crate::openai::ApiError)s).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model file could not be opened.
    #[error("cannot open the model file {}: {source}", path.display())]
    OpenModel {
        /// The configured model path.
        path: PathBuf,
        /// Why opening failed.
        source: std::io::Error,
    },
    /// The model path names something other than a file.
    #[error("the model path {} is not a file", path.display())]
    NotAFile {
        /// The configured model path.
        path: PathBuf,
    },
    /// Reading the model file failed while it was hashed.
    #[error("cannot read the model file {}: {source}", path.display())]
    ReadModel {
        /// The configured model path.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// No model name was configured and none can be taken from the path.
    #[error("the model path {} has no file name to serve it as; set a served model name", path.display())]
    NoModelName {
        /// The configured model path.
        path: PathBuf,
    },
    /// The listening address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The HTTP server failed.
    #[error("the HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
}
