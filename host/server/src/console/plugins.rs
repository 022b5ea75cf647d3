//! The console's plugins pages.

use axum::Router;

use super::ConsoleState;

/// The plugins pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
