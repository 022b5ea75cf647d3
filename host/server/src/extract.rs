//! The API's extractors: the caller and its scope, a JSON body, a query
//! string and path parameters, whose every rejection is an [`ApiError`] in
//! the `{"error":{"code", "message"}}` shape, never axum's `text/plain`.
//!
//! Order matters: axum runs a handler's extractors left to right and the
//! body's last, so a route takes its [`Authorized`](crate::auth::Authorized)
//! caller first. A key without the scope then learns nothing of the body's
//! schema, and an anonymous request is a 401, never a 415 or 422.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::audit::AuditActor;
use crate::auth::{ActingAs, Authenticated, Authorized, Scope};
use crate::edge::ThisConnection;
use crate::error::ApiError;
use crate::state::AppState;
use switchyard_protocol::valid;

impl FromRequestParts<Arc<AppState>> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let caller = match parts.extensions.get::<ActingAs>() {
            Some(ActingAs(caller)) => caller.clone(),
            None => {
                let caller = crate::auth::authenticate(state, &parts.headers).await?;
                ThisConnection::of(parts).prove();
                caller
            }
        };
        if let Some(actor) = parts.extensions.get::<AuditActor>() {
            actor.set(&caller);
        }
        Ok(Authenticated(caller))
    }
}

impl<S: Scope + Send + Sync> FromRequestParts<Arc<AppState>> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let Authenticated(caller) = Authenticated::from_request_parts(parts, state).await?;
        caller.require(S::NAME)?;
        Ok(Self(caller, std::marker::PhantomData))
    }
}

/// A JSON body: `Content-Type: application/json` (or `+json`), no NUL in
/// any string, deserialized into `T`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> ApiJson<T> {
    /// Parses a body already read, with its request's headers (for a route
    /// that must check a credential before it looks at the body).
    pub fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Self, ApiError> {
        if !json_content_type(headers) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the body must be JSON (Content-Type: application/json)",
            ));
        }
        if valid::json_has_nul(body) {
            return Err(ApiError::invalid_request(
                "text may not contain NUL characters (\\u0000)",
            ));
        }
        axum::Json::<T>::from_bytes(body)
            .map(|axum::Json(value)| Self(value))
            .map_err(json_rejection)
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        // Refuse a wrong media type before reading the body.
        if !json_content_type(req.headers()) {
            return Self::parse(req.headers(), &[]);
        }
        let headers = req.headers().clone();
        let body = Bytes::from_request(req, state)
            .await
            .map_err(bytes_rejection)?;
        Self::parse(&headers, &body)
    }
}

/// `application/json`, or any `application/…+json`, parameters ignored.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::JsonSyntaxError(e) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("the body is not valid JSON: {}", e.body_text()),
        ),
        JsonRejection::JsonDataError(e) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            e.body_text(),
        ),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ),
        JsonRejection::BytesRejection(e) => bytes_rejection(e),
        other => ApiError::new(other.status(), "invalid_request", other.body_text()),
    }
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if crate::edge::BodyTimeout::is(&rejection) {
        return ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            rejection.body_text(),
        );
    }
    let status = rejection.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "payload_too_large"
    } else {
        "invalid_request"
    };
    ApiError::new(status, code, rejection.body_text())
}

/// A query string deserialized into `T`; a bad one is a 400 `invalid_request`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Self(value))
            .map_err(|e| ApiError::invalid_request(e.body_text()))
    }
}

/// Path parameters deserialized into `T`, each already checked by
/// [`check_path`]; a bad one is a 400 `invalid_request`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|e| ApiError::invalid_request(e.body_text()))
    }
}

/// Middleware on every route: each path parameter, percent-decoded, is a
/// name ([`valid::path_segment`]: bounded, plain ASCII, no NUL) before any
/// handler sees it; invalid UTF-8 (`%FF`) is refused the same way.
pub async fn check_path(
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Response {
    match params {
        Ok(params) => {
            for (field, value) in &params {
                if let Err(e) = valid::path_segment(field, value) {
                    return ApiError::from(e).into_response();
                }
            }
        }
        // No parameters on this route.
        Err(axum::extract::rejection::RawPathParamsRejection::MissingPathParams(_)) => {}
        Err(e) => return ApiError::invalid_request(e.body_text()).into_response(),
    }
    next.run(request).await
}
