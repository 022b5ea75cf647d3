//! The console's deployments pages.

use axum::Router;

use super::ConsoleState;

/// The deployments pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
}
