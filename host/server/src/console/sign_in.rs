//! Signing in (the admin token or an API key, checked as the API checks a
//! bearer token) and out.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::ConsoleState;
use super::page;
use super::session;
use crate::auth::Caller;

/// The longest token the form takes (ours are 67 characters).
const MAX_TOKEN: usize = 512;

/// `/console` → the overview.
pub async fn to_overview() -> Redirect {
    Redirect::to("/console/")
}

#[derive(Debug, Default, Deserialize)]
pub struct Next {
    #[serde(default)]
    next: String,
}

/// The sign-in form.
pub async fn form(Query(next): Query<Next>) -> Response {
    sign_in_page(StatusCode::OK, &next.next, None)
}

fn sign_in_page(status: StatusCode, next: &str, refused: Option<(&str, &str)>) -> Response {
    page::render_bare(
        status,
        "Sign in",
        html! {
            @if let Some((code, message)) = refused {
                p.flash.error role="alert" { code { (code) } " " (message) }
            }
            form.stack method="post" action="/console/sign-in" {
                input type="hidden" name="next" value=(safe_next(next));
                label for="token" { "Admin token or API key" }
                input #token type="password" name="token" autocomplete="current-password"
                    required autofocus spellcheck="false" maxlength=(MAX_TOKEN);
                p.hint { "The session lasts 8 hours and acts with the key's scopes; pages the key may not use are not shown." }
                button type="submit" { "Sign in" }
            }
        },
    )
}

#[derive(Debug, Deserialize)]
pub struct SignIn {
    token: String,
    #[serde(default)]
    next: String,
}

/// Checks the token and opens a session.
pub async fn submit(
    State(console): State<ConsoleState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    // No session yet, so no CSRF token: a form posted from another site is
    // refused by its Origin (browsers send it on every POST).
    if !same_origin(&headers) {
        return sign_in_page(
            StatusCode::FORBIDDEN,
            "",
            Some(("csrf_mismatch", "the form was posted from another site")),
        );
    }
    let Ok(form) = serde_urlencoded::from_bytes::<SignIn>(&body) else {
        return sign_in_page(
            StatusCode::BAD_REQUEST,
            "",
            Some(("invalid_request", "the form needs a token")),
        );
    };
    let token = form.token.trim();
    if token.is_empty() || token.len() > MAX_TOKEN || token.chars().any(char::is_control) {
        return sign_in_page(
            StatusCode::UNAUTHORIZED,
            &form.next,
            Some(("unauthorized", "unknown or revoked API key")),
        );
    }
    let mut bearer = HeaderMap::new();
    let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) else {
        return sign_in_page(
            StatusCode::UNAUTHORIZED,
            &form.next,
            Some(("unauthorized", "unknown or revoked API key")),
        );
    };
    bearer.insert(header::AUTHORIZATION, value);
    let caller = match Caller::authenticate(&console.app, &bearer).await {
        Ok(caller) => caller,
        Err(error) => {
            let failure = crate::error::ApiError::from(error);
            return sign_in_page(
                failure.status,
                &form.next,
                Some((failure.code, &failure.message)),
            );
        }
    };
    let cookie = match session::open(&console, &caller, session::is_https(&headers)).await {
        Ok(cookie) => cookie,
        Err(e) => return page::server_error(&e.to_string()),
    };
    tracing::info!(key = %caller.key_id, "console session opened");
    let mut response = Redirect::to(safe_next(&form.next)).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// Ends the session (its CSRF token checked) and forgets the cookie.
pub async fn sign_out(
    State(console): State<ConsoleState>,
    headers: HeaderMap,
    posted: super::form::Posted<std::collections::HashMap<String, String>>,
) -> Response {
    let clear = session::close(&console, &headers).await;
    tracing::info!(key = %posted.session.caller.key_id, "console session closed");
    let mut response = Redirect::to("/console/sign-in").into_response();
    response.headers_mut().append(header::SET_COOKIE, clear);
    response
}

/// A `next` that stays inside the console (never another site).
fn safe_next(next: &str) -> &str {
    let inside = next.starts_with("/console/")
        && !next.starts_with("//")
        && !next.contains("\\")
        && !next.chars().any(char::is_control);
    if inside { next } else { "/console/" }
}

/// Whether the request's `Origin` (when the browser sent one) is this host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_never_leaves_the_console() {
        assert_eq!(safe_next("/console/nodes"), "/console/nodes");
        for bad in [
            "https://evil.example/",
            "//evil.example/console/",
            "/api/keys",
            "/console/\\x",
            "",
        ] {
            assert_eq!(safe_next(bad), "/console/", "{bad}");
        }
    }

    #[test]
    fn a_form_from_another_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&headers));
    }
}
