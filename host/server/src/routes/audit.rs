//! `GET /api/audit` and `GET /api/audit/verify`: the admin audit trail
//! (written by [`crate::audit`]) read back, and its chain checked.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use switchyard_protocol::audit::{AuditLog, AuditVerification};
use switchyard_store::audit::AuditQuery;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::routes::admission_decisions::{Since, bounded, parse_limit, parse_since};
use crate::state::AppState;

/// The query string as sent.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// A record's `seq` (the records after it, oldest first: a cursor, see
    /// `next_after`) or an RFC 3339 time (the records at or after it).
    /// Without it: the newest `limit` records.
    since: Option<String>,
    /// Only changes by this key id.
    actor: Option<String>,
    /// Only changes to this object (a route's path parameters joined by
    /// `/`, or the id a create answered).
    object: Option<String>,
    /// Records on the page, 1 to 1000 [default: 100].
    limit: Option<String>,
}

impl AuditParams {
    /// The store's query; the error names the parameter that is wrong.
    fn query(self) -> Result<AuditQuery, String> {
        let (after, since) = match parse_since(self.since.as_deref())? {
            Since::Newest => (None, None),
            Since::After(seq) => (Some(seq), None),
            Since::Time(time) => (None, Some(time)),
        };
        Ok(AuditQuery {
            after,
            since,
            actor: self.actor.map(|a| bounded("actor", a)).transpose()?,
            object: self.object.map(|o| bounded("object", o)).transpose()?,
            limit: parse_limit(self.limit.as_deref())?,
        })
    }
}

/// The admin changes recorded, filtered.
#[utoipa::path(get, path = "/api/audit", tag = "audit", params(AuditParams), responses(
    (status = 200, body = AuditLog, description = "The records, oldest first"),
    (status = 400, description = "`invalid_request`: a `since` that is neither a seq nor an RFC 3339 time, a `limit` outside 1 to 1000, an empty or over-long `actor` or `object`, or an unknown parameter"),
    (status = 401, description = "`unauthorized`"),
    (status = 403, description = "`forbidden`: the key lacks `admin`"),
))]
pub async fn list(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> ApiResult<Json<AuditLog>> {
    let query = params.query().map_err(ApiError::invalid_request)?;
    Ok(Json(state.store.audit(&query).await?))
}

/// Walks the chain from its oldest kept record and names the first record
/// whose fields, link or position do not hold.
#[utoipa::path(get, path = "/api/audit/verify", tag = "audit", responses(
    (status = 200, body = AuditVerification, description = "How far the chain holds (`broken` absent: all of it)"),
    (status = 401, description = "`unauthorized`"),
    (status = 403, description = "`forbidden`: the key lacks `admin`"),
))]
pub async fn verify(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<AuditVerification>> {
    Ok(Json(state.store.verify_audit().await?))
}
