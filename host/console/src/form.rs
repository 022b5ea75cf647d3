//! A console form post: the session, its CSRF token checked (the `csrf`
//! field, or the `x-csrf-token` header a script sends), then the fields.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;

use super::ConsoleState;
use super::page::{self, Flash};
use super::session::{self, CSRF_FIELD, Session};

/// The most a console form may carry (uploads have their own route).
const MAX_FORM_BYTES: usize = 256 << 10;

/// A form posted by a signed-in session with its CSRF token.
pub struct Posted<T> {
    /// Who posted it.
    pub session: Session,
    /// Its fields.
    pub fields: T,
}

impl<T: DeserializeOwned> FromRequest<ConsoleState> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, console: &ConsoleState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let session = Session::from_request_parts(&mut parts, console).await?;
        let header_token = parts
            .headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let request = Request::from_parts(parts, body);
        let bytes = Bytes::from_request(request, console)
            .await
            .map_err(|rejection| page::body_refused(Some(&session), &rejection))?;
        if bytes.len() > MAX_FORM_BYTES {
            return Err(page::bad_request(&session, "the form is too large"));
        }
        let field_token = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
            .ok()
            .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == CSRF_FIELD))
            .map(|(_, v)| v);
        let given = header_token.or(field_token).unwrap_or_default();
        if !session.csrf_matches(&given) {
            return Err(page::csrf_refused(&session));
        }
        let fields = serde_urlencoded::from_bytes::<T>(&bytes)
            .map_err(|e| page::bad_request(&session, &format!("the form's fields: {e}")))?;
        Ok(Self { session, fields })
    }
}

/// After a form: back to `to`, with a message shown there once.
pub fn redirect_with(session: &Session, to: &str, flash: Flash) -> Response {
    let mut response = Redirect::to(to).into_response();
    response.headers_mut().append(
        axum::http::header::SET_COOKIE,
        session::set_cookie(
            session::FLASH_COOKIE,
            &flash.encode(),
            Some(std::time::Duration::from_secs(60)),
            session.secure,
        ),
    );
    response
}

/// After a form whose API call answered `result`: back to `to` with "done"
/// or with the API's code and message.
pub fn redirect_after<T>(
    session: &Session,
    to: &str,
    done: impl Into<String>,
    result: Result<T, super::api::ApiFailure>,
) -> Response {
    match result {
        Ok(_) => redirect_with(session, to, Flash::done(done)),
        Err(failure) => redirect_with(session, to, Flash::failed(&failure)),
    }
}

/// A form whose whole work is one bodiless API call: the scope checked, the
/// call made as the session's key, then back to `back` with `done` or the
/// API's refusal.
pub async fn call_and_redirect(
    console: &ConsoleState,
    session: &Session,
    scope: &str,
    (method, path): (axum::http::Method, &str),
    back: &str,
    done: String,
) -> Response {
    if let Err(forbidden) = session.require(scope) {
        return forbidden;
    }
    let result = session.api(console).call(method, path, None).await;
    redirect_after(session, back, done, result)
}

/// An empty string as none (an optional form field left blank).
pub fn optional(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}
