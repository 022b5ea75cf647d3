//! The console's admission pages.

use axum::Router;

use super::ConsoleState;

/// The admission pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
