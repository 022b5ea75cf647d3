//! The console's nodes pages.

use axum::Router;

use super::ConsoleState;

/// The nodes pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
