//! The console's carrier pages.

use axum::Router;

use super::ConsoleState;

/// The carrier pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
