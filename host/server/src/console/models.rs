//! The console's models pages.

use axum::Router;

use super::ConsoleState;

/// The models pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
