//! The console's federation pages.

use axum::Router;

use super::ConsoleState;

/// The federation pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
