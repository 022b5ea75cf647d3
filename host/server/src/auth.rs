//! API keys and scopes: `Authorization: Bearer <token>`; anonymous is 401,
//! a key without the scope is 403. The `admin` scope implies every other.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;
use switchyard_store::keys::token_digest;

use crate::error::ApiError;
use crate::state::AppState;

/// Every scope a key can hold.
pub const SCOPES: [&str; 6] = [
    "admin",
    "inference",
    "models:manage",
    "nodes:manage",
    "federation:manage",
    "federation:invoke",
];

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's id (safe to log).
    pub key_id: String,
    /// Its scopes.
    pub scopes: Vec<String>,
}

impl Caller {
    /// 403 unless the caller holds `scope` (or `admin`).
    pub fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.scopes.iter().any(|s| s == scope || s == "admin") {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("this key lacks the '{scope}' scope"),
            ))
        }
    }
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let token = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                unauthorized("an API key is required (Authorization: Bearer <token>)")
            })?;
        let digest = token_digest(token);
        let principal = state.store.principal(&digest).await?;
        match principal {
            Some(p) if bool::from(p.token_sha256.as_slice().ct_eq(&digest)) => Ok(Caller {
                key_id: p.key_id,
                scopes: p.scopes,
            }),
            _ => Err(unauthorized("unknown or revoked API key")),
        }
    }
}
